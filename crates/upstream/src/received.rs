//! What the mock keeps of a request body, read as a stream so an upload of any size costs no
//! memory: its exact length, its first 64 KiB, an FNV-1a 64 digest of every byte and, for a
//! `multipart/form-data` body, the same for each part (name, filename, headers, length, digest).
//!
//! The digest is FNV-1a 64 because PHP computes the same one without any extension
//! (`hash('fnv1a64', ...)`, `hash_file('fnv1a64', ...)`), so a test compares a 50 MB file with
//! what arrived byte for byte without either side holding it.

use std::collections::BTreeMap;

use serde::Serialize;

/// Request body bytes kept in a row (the length and digest always cover every byte).
pub const MAX_BODY_KEPT: usize = 64 * 1024;
/// Bytes of a part's content kept as `value`.
pub const MAX_PART_KEPT: usize = 1024;
/// Largest block of part headers accepted; beyond it the body is not parsed as multipart.
const MAX_PART_HEADERS: usize = 16 * 1024;
/// Parts reported per body.
const MAX_PARTS: usize = 100;

/// FNV-1a, 64 bits: the same value as PHP's `hash('fnv1a64', $bytes)`.
#[derive(Debug, Clone, Copy)]
pub struct Fnv1a64(u64);

impl Default for Fnv1a64 {
    fn default() -> Self {
        Fnv1a64(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv1a64 {
    pub fn update(&mut self, data: &[u8]) {
        let mut h = self.0;
        for &b in data {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
        self.0 = h;
    }

    /// 16 lower-case hex digits, as PHP prints it.
    pub fn hex(&self) -> String {
        format!("{:016x}", self.0)
    }
}

/// One part of a multipart/form-data body as received.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct PartRow {
    /// `name` of the part's `Content-Disposition`.
    pub name: Option<String>,
    /// `filename` of the part's `Content-Disposition`.
    pub filename: Option<String>,
    /// The part's headers, names lower-case.
    pub headers: BTreeMap<String, String>,
    /// Content bytes (between the headers and the next boundary).
    pub len: u64,
    /// FNV-1a 64 of the content.
    pub fnv1a64: String,
    /// The first 1 KiB of the content when it is text (valid UTF-8), else `null`.
    pub value: Option<String>,
}

/// What a row keeps of a request body.
#[derive(Debug, Clone, Default)]
pub struct BodySummary {
    pub len: u64,
    pub kept: Vec<u8>,
    pub fnv1a64: String,
    /// `Some` for a `multipart/form-data` body with a boundary that parsed to its end.
    pub parts: Option<Vec<PartRow>>,
    /// Why a multipart body did not parse (then `parts` is `None`).
    pub multipart_error: Option<String>,
}

/// Accumulates a body chunk by chunk.
pub struct BodyReader {
    len: u64,
    kept: Vec<u8>,
    digest: Fnv1a64,
    multipart: Option<Multipart>,
}

impl BodyReader {
    /// `content_type` is the request's header, if any: a multipart one is parsed into parts.
    pub fn new(content_type: Option<&str>) -> Self {
        BodyReader {
            len: 0,
            kept: Vec::new(),
            digest: Fnv1a64::default(),
            multipart: content_type
                .and_then(multipart_boundary)
                .map(|b| Multipart::new(&b)),
        }
    }

    pub fn push(&mut self, data: &[u8]) {
        self.len += data.len() as u64;
        let room = MAX_BODY_KEPT.saturating_sub(self.kept.len());
        self.kept.extend_from_slice(&data[..data.len().min(room)]);
        self.digest.update(data);
        if let Some(m) = &mut self.multipart {
            m.push(data);
        }
    }

    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn finish(self) -> BodySummary {
        let (parts, multipart_error) = match self.multipart.map(Multipart::finish) {
            None => (None, None),
            Some(Ok(parts)) => (Some(parts), None),
            Some(Err(e)) => (None, Some(e)),
        };
        BodySummary {
            len: self.len,
            kept: self.kept,
            fnv1a64: self.digest.hex(),
            parts,
            multipart_error,
        }
    }
}

/// The boundary of a `multipart/form-data; boundary=...` content type.
fn multipart_boundary(content_type: &str) -> Option<String> {
    let mut params = content_type.split(';');
    let kind = params.next()?.trim();
    if !kind.eq_ignore_ascii_case("multipart/form-data") {
        return None;
    }
    params
        .filter_map(|p| p.split_once('='))
        .find(|(k, _)| k.trim().eq_ignore_ascii_case("boundary"))
        .map(|(_, v)| v.trim().trim_matches('"').to_string())
        .filter(|b| !b.is_empty() && b.len() <= 200)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Before the first boundary.
    Preamble,
    /// Just after a boundary: `--` ends the body, CRLF starts a part.
    AfterBoundary,
    Headers,
    Content,
    Done,
}

/// A streaming multipart/form-data parser that keeps only digests.
struct Multipart {
    /// `\r\n--boundary`; the body is read as if it started with `\r\n`, so the first boundary
    /// (which has no CRLF before it) is found like every other.
    delimiter: Vec<u8>,
    buf: Vec<u8>,
    state: State,
    parts: Vec<PartRow>,
    /// The part being read: its row, digest and first bytes.
    current: Option<(PartRow, Fnv1a64, Vec<u8>)>,
    error: Option<String>,
}

impl Multipart {
    fn new(boundary: &str) -> Self {
        Multipart {
            delimiter: format!("\r\n--{boundary}").into_bytes(),
            buf: b"\r\n".to_vec(),
            state: State::Preamble,
            parts: Vec::new(),
            current: None,
            error: None,
        }
    }

    fn push(&mut self, data: &[u8]) {
        if self.error.is_some() || self.state == State::Done {
            return;
        }
        self.buf.extend_from_slice(data);
        while let Some(used) = self.step() {
            self.buf.drain(..used);
        }
    }

    /// Advances through the buffer; `Some(n)` consumed `n` bytes (maybe 0 after a state
    /// change), `None` needs more input.
    fn step(&mut self) -> Option<usize> {
        let d = self.delimiter.len();
        match self.state {
            State::Preamble => match find(&self.buf, &self.delimiter) {
                Some(i) => {
                    self.state = State::AfterBoundary;
                    Some(i + d)
                }
                None => (self.buf.len() >= d).then(|| self.buf.len() + 1 - d),
            },
            State::AfterBoundary => {
                if self.buf.len() < 2 {
                    return None;
                }
                match &self.buf[..2] {
                    b"--" => {
                        self.state = State::Done;
                        None
                    }
                    b"\r\n" => {
                        self.state = State::Headers;
                        Some(2)
                    }
                    _ => self.fail("a boundary is followed by neither CRLF nor --"),
                }
            }
            State::Headers => {
                let (head_len, used) = if self.buf.starts_with(b"\r\n") {
                    (0, 2)
                } else {
                    match find(&self.buf, b"\r\n\r\n") {
                        Some(i) => (i, i + 4),
                        None if self.buf.len() > MAX_PART_HEADERS => {
                            return self.fail("part headers longer than 16 KiB")
                        }
                        None => return None,
                    }
                };
                let part = part_from_headers(&self.buf[..head_len]);
                self.current = Some((part, Fnv1a64::default(), Vec::new()));
                self.state = State::Content;
                Some(used)
            }
            State::Content => {
                let (content, used, ended) = match find(&self.buf, &self.delimiter) {
                    Some(i) => (i, i + d, true),
                    None if self.buf.len() >= d => {
                        let n = self.buf.len() + 1 - d;
                        (n, n, false)
                    }
                    None => return None,
                };
                let (part, digest, head) = self.current.as_mut()?;
                let bytes = &self.buf[..content];
                part.len += bytes.len() as u64;
                digest.update(bytes);
                let room = MAX_PART_KEPT.saturating_sub(head.len());
                head.extend_from_slice(&bytes[..bytes.len().min(room)]);
                if ended {
                    let (mut part, digest, head) = self.current.take()?;
                    part.fnv1a64 = digest.hex();
                    part.value = text_prefix(&head);
                    if self.parts.len() < MAX_PARTS {
                        self.parts.push(part);
                    }
                    self.state = State::AfterBoundary;
                }
                Some(used)
            }
            State::Done => None,
        }
    }

    fn fail(&mut self, why: &str) -> Option<usize> {
        self.error = Some(why.to_string());
        self.buf.clear();
        None
    }

    fn finish(self) -> Result<Vec<PartRow>, String> {
        if let Some(e) = self.error {
            return Err(e);
        }
        match self.state {
            State::Done => Ok(self.parts),
            _ => Err("the body ended before the closing boundary".into()),
        }
    }
}

fn part_from_headers(head: &[u8]) -> PartRow {
    let text = String::from_utf8_lossy(head);
    let mut headers = BTreeMap::new();
    for line in text.split("\r\n") {
        if let Some((k, v)) = line.split_once(':') {
            headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
        }
    }
    let param = |key: &str| -> Option<String> {
        headers.get("content-disposition").and_then(|cd| {
            cd.split(';')
                .skip(1)
                .filter_map(|p| p.split_once('='))
                .find(|(k, _)| k.trim().eq_ignore_ascii_case(key))
                .map(|(_, v)| v.trim().trim_matches('"').to_string())
        })
    };
    PartRow {
        name: param("name"),
        filename: param("filename"),
        headers: headers.clone(),
        len: 0,
        fnv1a64: String::new(),
        value: None,
    }
}

/// `bytes` as text if they are UTF-8 (a character cut at the end of the kept prefix is dropped).
fn text_prefix(bytes: &[u8]) -> Option<String> {
    match std::str::from_utf8(bytes) {
        Ok(s) => Some(s.to_string()),
        Err(e) if e.error_len().is_none() => {
            Some(String::from_utf8_lossy(&bytes[..e.valid_up_to()]).into_owned())
        }
        Err(_) => None,
    }
}

/// First index of `needle` in `hay`.
fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    let first = *needle.first()?;
    let last_start = hay.len().checked_sub(needle.len())?;
    let mut from = 0;
    while from <= last_start {
        let i = from + hay[from..=last_start].iter().position(|&b| b == first)?;
        if &hay[i..i + needle.len()] == needle {
            return Some(i);
        }
        from = i + 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv1a64_matches_php() {
        // php -r 'echo hash("fnv1a64", ""), " ", hash("fnv1a64", "hello");'
        let mut h = Fnv1a64::default();
        assert_eq!(h.hex(), "cbf29ce484222325");
        h.update(b"hello");
        assert_eq!(h.hex(), "a430d84680aabd0b");
    }

    fn body() -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(
            b"--XyZ\r\nContent-Disposition: form-data; name=\"field\"\r\n\r\ntext value",
        );
        b.extend_from_slice(
            b"\r\n--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.bin\"\r\n",
        );
        b.extend_from_slice(b"Content-Type: application/octet-stream\r\n\r\n");
        b.extend_from_slice(b"\x00\r\n--Xy\r\n-XyZ--XyZ\xff");
        b.extend_from_slice(b"\r\n--XyZ--\r\n");
        b
    }

    fn read(chunk: usize) -> BodySummary {
        let mut r = BodyReader::new(Some("multipart/form-data; boundary=\"XyZ\""));
        for c in body().chunks(chunk) {
            r.push(c);
        }
        r.finish()
    }

    #[test]
    fn parts_are_the_same_whatever_the_chunk_size() {
        let whole = read(usize::MAX);
        let parts = whole.parts.clone().expect("parsed");
        assert_eq!(parts.len(), 2);
        assert_eq!(parts[0].name.as_deref(), Some("field"));
        assert_eq!(parts[0].filename, None);
        assert_eq!(parts[0].value.as_deref(), Some("text value"));
        assert_eq!(parts[1].value, None, "binary content is not shown as text");
        assert_eq!(parts[0].len, 10);
        assert_eq!(parts[1].name.as_deref(), Some("file"));
        assert_eq!(parts[1].filename.as_deref(), Some("a.bin"));
        assert_eq!(parts[1].headers["content-type"], "application/octet-stream");
        let content = b"\x00\r\n--Xy\r\n-XyZ--XyZ\xff";
        assert_eq!(parts[1].len, content.len() as u64);
        let mut d = Fnv1a64::default();
        d.update(content);
        assert_eq!(parts[1].fnv1a64, d.hex());
        for chunk in [1, 2, 3, 5, 7, 64] {
            let s = read(chunk);
            assert_eq!(s.parts.as_ref(), Some(&parts), "chunk {chunk}");
            assert_eq!(s.fnv1a64, whole.fnv1a64);
            assert_eq!(s.len, body().len() as u64);
        }
    }

    #[test]
    fn a_truncated_or_plain_body_has_no_parts() {
        let b = body();
        let mut r = BodyReader::new(Some("multipart/form-data; boundary=XyZ"));
        r.push(&b[..b.len() - 10]);
        let s = r.finish();
        assert!(s.parts.is_none());
        assert!(s.multipart_error.unwrap().contains("closing boundary"));
        let mut r = BodyReader::new(Some("application/json"));
        r.push(b"{}");
        let s = r.finish();
        assert!(s.parts.is_none() && s.multipart_error.is_none());
        assert_eq!(s.kept, b"{}");
    }
}
