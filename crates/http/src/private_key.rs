//! `ssl_key` with a password: an encrypted PKCS#8 key (`openssl pkcs8 -topk8 -v2 aes-256-cbc`,
//! or `openssl genpkey ... -aes256`) decrypted in memory into the plain PEM rustls reads.

use pkcs8::der::pem::{self, LineEnding};
use pkcs8::EncryptedPrivateKeyInfo;

const ENCRYPTED: &str = "-----BEGIN ENCRYPTED PRIVATE KEY-----";
const END: &str = "-----END ENCRYPTED PRIVATE KEY-----";

/// Whether a PEM holds an encrypted key (PKCS#8, or OpenSSL's legacy `Proc-Type` form).
pub fn is_encrypted(pem_text: &[u8]) -> bool {
    let text = String::from_utf8_lossy(pem_text);
    text.contains(ENCRYPTED) || text.contains("Proc-Type: 4,ENCRYPTED")
}

/// The decrypted key as PEM (`-----BEGIN PRIVATE KEY-----`), or why not (never echoing the
/// password or the key).
pub fn decrypt(pem_text: &[u8], password: &str) -> Result<Vec<u8>, String> {
    let text = std::str::from_utf8(pem_text).map_err(|_| "is not a PEM file".to_string())?;
    let Some(start) = text.find(ENCRYPTED) else {
        return Err(if text.contains("Proc-Type: 4,ENCRYPTED") {
            "holds a legacy OpenSSL-encrypted key; convert it to encrypted PKCS#8 (openssl pkcs8 -topk8 -v2 aes-256-cbc) or give it unencrypted".into()
        } else {
            "a password was given but the key is not an encrypted PKCS#8 key (-----BEGIN ENCRYPTED PRIVATE KEY-----)".into()
        });
    };
    let end = text[start..]
        .find(END)
        .map(|i| start + i + END.len())
        .ok_or("holds an incomplete PEM block")?;
    let (_, der) = pem::decode_vec(&text.as_bytes()[start..end])
        .map_err(|e| format!("is not valid PEM ({e})"))?;
    let info = EncryptedPrivateKeyInfo::try_from(der.as_slice())
        .map_err(|e| format!("is not an encrypted PKCS#8 key ({e})"))?;
    let plain = info
        .decrypt(password)
        .map_err(|_| "cannot be decrypted: wrong password or unsupported cipher".to_string())?;
    let pem = plain
        .to_pem("PRIVATE KEY", LineEnding::LF)
        .map_err(|e| format!("cannot be re-encoded ({e})"))?;
    Ok(pem.as_bytes().to_vec())
}
