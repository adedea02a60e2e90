//! How a request travels, beyond its bytes: TLS verification and client certificate, proxy,
//! redirects, content decoding. Set per client and overridable per request (Guzzle's request
//! options of the same names).
//!
//! Files (CA bundle, certificate, key) are read and parsed when the option is set, so a wrong
//! path or a malformed PEM is an option error at once, never a failure on the first call. The
//! reqwest client a request needs is chosen by [`TransportOptions::fingerprint`] (clients are
//! built per process and reused: see `reqwest_transport`).

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use reqwest::Url;

use crate::config_error::ConfigError;

/// What to do with a response body: decode it, write it to a file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct BodyTarget {
    pub decode: bool,
    /// `sink`: the body is written here instead of being kept in memory.
    pub sink: Option<PathBuf>,
    /// Set by the transport for each attempt, its end: no body write (to memory or a sink,
    /// decoded or not) is made after it, and a sink write waits for a reader that is slow to
    /// take the body (a FIFO's) until then at most; the attempt then ends as timed out.
    pub write_until: Option<Instant>,
}

impl BodyTarget {
    /// This target for an attempt that may last `timeout` from now (`write_until`).
    pub fn for_attempt(&self, timeout: Duration) -> BodyTarget {
        BodyTarget {
            write_until: Some(Instant::now() + timeout),
            ..self.clone()
        }
    }
}

/// Server certificate verification.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub enum Verify {
    /// The system's roots (webpki roots bundled with rustls).
    #[default]
    System,
    /// No verification at all (`verify => false`): for tests and known-broken internal hosts.
    Off,
    /// Only the CAs of this PEM bundle (`verify => '/path/ca.pem'`), as Guzzle and curl do.
    Bundle(Arc<[u8]>),
}

/// Redirect following inside one attempt (`allow_redirects`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Redirects {
    /// Redirects followed at most; one more fails the attempt.
    pub max: u32,
    /// RFC-strict: a 301/302 keeps the method and body (otherwise a POST becomes a GET, as
    /// browsers and Guzzle's default do). A 303 always becomes a GET.
    pub strict: bool,
    /// Send a `Referer` header naming the previous URL (never its user-info or fragment).
    pub referer: bool,
    /// Redirects to `https://` allowed.
    pub https: bool,
    /// Redirects to `http://` allowed.
    pub http: bool,
}

impl Default for Redirects {
    /// Guzzle's `allow_redirects => true`: 5, not strict, no referer, http and https.
    fn default() -> Self {
        Self {
            max: 5,
            strict: false,
            referer: false,
            https: true,
            http: true,
        }
    }
}

/// An explicit proxy (`proxy`); without one the environment's `HTTP(S)_PROXY` is honoured.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Proxy {
    /// For `http://` URLs.
    pub http: Option<Url>,
    /// For `https://` URLs (tunnelled with CONNECT).
    pub https: Option<Url>,
    /// Hosts reached directly (`localhost`, `.internal.example` for a domain and its
    /// subdomains, an IP or a CIDR block), as in `NO_PROXY`.
    pub no: Vec<String>,
}

/// A client certificate with its private key, as one PEM (what rustls takes).
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Identity(Arc<[u8]>);

impl std::fmt::Debug for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Identity(..)") // the key stays out of logs
    }
}

impl Identity {
    pub fn pem(&self) -> &[u8] {
        &self.0
    }
}

/// TLS, proxy, redirect and decoding options of a request.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TransportOptions {
    pub verify: Verify,
    pub identity: Option<Identity>,
    pub proxy: Option<Proxy>,
    /// `None`: a 3xx is the caller's answer (the default for API calls).
    pub redirects: Option<Redirects>,
    /// Decode a gzip, deflate or br `Content-Encoding` (on by default, as in Guzzle).
    pub decode_content: bool,
}

impl Default for TransportOptions {
    fn default() -> Self {
        Self {
            verify: Verify::System,
            identity: None,
            proxy: None,
            redirects: None,
            decode_content: true,
        }
    }
}

impl TransportOptions {
    /// The option keys these options are set from (Guzzle's names), per client or per request.
    pub const KEYS: &'static [&'static str] = &[
        "verify",
        "cert",
        "ssl_key",
        "proxy",
        "allow_redirects",
        "decode_content",
    ];

    /// Identifies the connection settings (verify, identity, proxy): requests with equal
    /// fingerprints share a reqwest client and its connections.
    pub fn fingerprint(&self) -> u64 {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        self.verify.hash(&mut h);
        self.identity.hash(&mut h);
        self.proxy.hash(&mut h);
        h.finish()
    }

    /// The default: plain connections suit the lean HTTP/1.1 transport.
    pub fn needs_only_defaults(&self) -> bool {
        self.verify == Verify::System && self.identity.is_none() && self.proxy.is_none()
    }

    /// `verify => '/path/ca.pem'`: the bundle is read and parsed now.
    pub fn set_ca_bundle(&mut self, path: &Path) -> Result<(), ConfigError> {
        let pem = read("verify", path)?;
        let certs = reqwest::Certificate::from_pem_bundle(&pem).map_err(|e| {
            ConfigError::new(
                "verify",
                format!("cannot read the CA bundle {}: {e}", path.display()),
            )
        })?;
        if certs.is_empty() {
            return Err(ConfigError::new(
                "verify",
                format!("{} holds no PEM certificate", path.display()),
            ));
        }
        self.verify = Verify::Bundle(pem.into());
        Ok(())
    }

    /// `cert` and `ssl_key`: a client certificate (PEM) and its key (PEM, in the same file when
    /// `key` is `None`). `key_option`: the option that gave the key and its password, which its
    /// errors name (`cert` for `cert => [path, password]`, the key in the certificate's file). A
    /// key protected by a password must be encrypted PKCS#8
    /// (`-----BEGIN ENCRYPTED PRIVATE KEY-----`); it is decrypted here, in memory.
    pub fn set_identity(
        &mut self,
        cert: &Path,
        key: Option<(&Path, Option<&str>)>,
        key_option: &'static str,
    ) -> Result<(), ConfigError> {
        let mut pem = read("cert", cert)?;
        if let Some((key_path, password)) = key {
            let key_pem = read(key_option, key_path)?;
            let key_pem = match password {
                Some(password) => crate::private_key::decrypt(&key_pem, password)
                    .map_err(|problem| ConfigError::new(key_option, problem))?,
                None if crate::private_key::is_encrypted(&key_pem) => {
                    return Err(ConfigError::new(
                        key_option,
                        format!(
                            "is encrypted: give its password as '{key_option}' => [path, password]"
                        ),
                    ))
                }
                None => key_pem,
            };
            pem.push(b'\n');
            pem.extend_from_slice(&key_pem);
        }
        if key.is_none() && crate::private_key::is_encrypted(&pem) {
            return Err(ConfigError::new(
                "cert",
                "holds an encrypted key: give its password as 'cert' => [path, password]",
            ));
        }
        let identity = reqwest::Identity::from_pem(&pem).map_err(|e| {
            ConfigError::new(
                "cert",
                format!("is not a PEM certificate with its private key ({e}); give the key with 'ssl_key'"),
            )
        })?;
        // rustls checks that the key belongs to the certificate only when a client is built:
        // build one now, so a mismatch is this option's error, not every request's.
        reqwest::Client::builder()
            .identity(identity)
            .build()
            .map_err(|_| {
                ConfigError::new(
                    "ssl_key",
                    "does not belong to the certificate in 'cert' (or one of them is not usable for TLS)",
                )
            })?;
        self.identity = Some(Identity(pem.into()));
        Ok(())
    }

    /// `proxy`: the URLs must be absolute http(s) URLs (not echoed: they may hold credentials).
    pub fn set_proxy(&mut self, proxy: Option<Proxy>) -> Result<(), ConfigError> {
        if let Some(p) = &proxy {
            for url in [&p.http, &p.https].into_iter().flatten() {
                if !matches!(url.scheme(), "http" | "https")
                    || url.host_str().is_none_or(str::is_empty)
                {
                    return Err(ConfigError::new(
                        "proxy",
                        format!(
                            "must be an http:// or https:// proxy URL, got scheme '{}'",
                            url.scheme()
                        ),
                    ));
                }
            }
        }
        self.proxy = proxy;
        Ok(())
    }

    /// `allow_redirects`: `max` 1 to 30 when on.
    pub fn set_redirects(&mut self, redirects: Option<Redirects>) -> Result<(), ConfigError> {
        if let Some(r) = redirects {
            if !(1..=30).contains(&r.max) {
                return Err(ConfigError::new(
                    "allow_redirects.max",
                    format!("must be between 1 and 30, got {}", r.max),
                ));
            }
            if !r.http && !r.https {
                return Err(ConfigError::new(
                    "allow_redirects.protocols",
                    "must allow 'http', 'https' or both",
                ));
            }
        }
        self.redirects = redirects;
        Ok(())
    }
}

/// Reads an option's PEM file ([`crate::option_file::read_pem`]).
fn read(option: &str, path: &Path) -> Result<Vec<u8>, ConfigError> {
    crate::option_file::read_pem(option, path)
}
