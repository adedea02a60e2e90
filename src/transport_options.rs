//! Guzzle's transport options (`verify`, `cert`, `ssl_key`, `proxy`, `allow_redirects`,
//! `decode_content`) and the request-only `multipart` and `sink`, read from PHP values into
//! `resilient_http`'s types. Shapes and types are checked here (PHP's words for a wrong type);
//! files and values by `resilient_http::TransportOptions`' setters.

use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ext_php_rs::convert::IntoZvalDyn;
use ext_php_rs::prelude::*;
use ext_php_rs::types::{ZendCallable, Zval};
use resilient_http::{
    Bytes, ConfigError, Part, PartContents, Proxy, Redirects, TransportOptions, Url,
};

use crate::exceptions;
use crate::options::{
    config_error, counted, entries, header_entries, header_value, mismatch, off, table, text,
    unknown, values,
};

/// Transport options being read: `cert` and `ssl_key` are applied together at the end.
pub struct Reader<'a> {
    base: &'a TransportOptions,
    /// A copy of `base`, made when the first transport option is read.
    own: Option<TransportOptions>,
    cert: Option<(PathBuf, Option<String>)>,
    key: Option<(PathBuf, Option<String>)>,
    /// `decode_content` given as a string: the `Accept-Encoding` to send (Guzzle's meaning).
    pub accept_encoding: Option<String>,
}

impl<'a> Reader<'a> {
    pub fn new(base: &'a TransportOptions) -> Self {
        Self {
            base,
            own: None,
            cert: None,
            key: None,
            accept_encoding: None,
        }
    }

    fn options(&mut self) -> &mut TransportOptions {
        self.own.get_or_insert_with(|| self.base.clone())
    }

    /// Reads `key` if it is a transport option; `false` when it is not one.
    pub fn read(&mut self, key: &str, value: &Zval) -> PhpResult<bool> {
        if !TransportOptions::KEYS.contains(&key) {
            return Ok(false);
        }
        match key {
            "verify" => {
                let v = value.dereference();
                if let Some(b) = v.bool() {
                    self.options().verify = match b {
                        true => resilient_http::Verify::System,
                        false => resilient_http::Verify::Off,
                    };
                } else if v.is_string() {
                    let path = text(v, key)?;
                    self.options()
                        .set_ca_bundle(Path::new(&path))
                        .map_err(config_error)?;
                } else {
                    return Err(mismatch("string|bool", value, key));
                }
            }
            "cert" => self.cert = off_or(value, |v| path_and_password(v, key))?,
            "ssl_key" => self.key = off_or(value, |v| path_and_password(v, key))?,
            "proxy" => {
                let proxy = off_or(value, proxy)?;
                self.options().set_proxy(proxy).map_err(config_error)?;
            }
            "allow_redirects" => {
                let v = value.dereference();
                let rules = match v.bool() {
                    Some(false) => None,
                    Some(true) => Some(Redirects::default()),
                    None if v.is_null() => None,
                    None => Some(redirects(table(value, key)?)?),
                };
                self.options().set_redirects(rules).map_err(config_error)?;
            }
            "decode_content" => {
                let v = value.dereference();
                if let Some(b) = v.bool() {
                    self.options().decode_content = b;
                } else if v.is_string() {
                    self.options().decode_content = true;
                    self.accept_encoding = Some(header_value(v, key)?);
                } else {
                    return Err(mismatch("string|bool", value, key));
                }
            }
            _ => {}
        }
        if self.own.is_none() {
            self.options();
        }
        Ok(true)
    }

    /// The options read (`None`: none given, the base applies unchanged).
    pub fn finish(mut self) -> PhpResult<Option<TransportOptions>> {
        match (self.cert.take(), self.key.take()) {
            (Some((cert, cert_password)), key) => {
                // `cert => [path, password]` without `ssl_key`: the encrypted key is in the
                // certificate's file.
                let (key, key_option) = match (key, cert_password) {
                    (None, Some(password)) => (Some((cert.clone(), Some(password))), "cert"),
                    (key, _) => (key, "ssl_key"),
                };
                let key = key.as_ref().map(|(p, pw)| (p.as_path(), pw.as_deref()));
                self.options()
                    .set_identity(&cert, key, key_option)
                    .map_err(config_error)?;
            }
            (None, Some(_)) => {
                return Err(exceptions::value_error(
                    "option 'ssl_key': needs 'cert' (the client certificate the key belongs to)",
                ))
            }
            (None, None) => {}
        }
        Ok(self.own)
    }
}

/// `null` or `false` turns an option off; anything else is read.
fn off_or<T>(value: &Zval, read: impl FnOnce(&Zval) -> PhpResult<T>) -> PhpResult<Option<T>> {
    match off(value) {
        true => Ok(None),
        false => read(value).map(Some),
    }
}

/// `'/path'` or `['/path', 'password']`.
fn path_and_password(value: &Zval, key: &str) -> PhpResult<(PathBuf, Option<String>)> {
    let v = value.dereference();
    if v.is_string() {
        return Ok((PathBuf::from(text(v, key)?), None));
    }
    let list = table(value, key)?;
    let items = values(list);
    match items.as_slice() {
        [path, password] => {
            let (path, password) = (text(path, key)?, text(password, &format!("{key}.1"))?);
            // The error about a "path" that is no file would show it, and it may be the
            // password (the pair given the other way round).
            if !Path::new(&path).is_file() {
                return Err(exceptions::value_error(format!(
                    "option '{key}': must be [path, password]: the first element is no readable \
                     file (not shown: the pair may be given the other way round)"
                )));
            }
            Ok((PathBuf::from(path), Some(password)))
        }
        _ => Err(exceptions::value_error(format!(
            "option '{key}': must be a path or [path, password]"
        ))),
    }
}

/// `'http://proxy:3128'` for every scheme, or `['http' => .., 'https' => .., 'no' => [..]]`.
fn proxy(value: &Zval) -> PhpResult<Proxy> {
    let v = value.dereference();
    if v.is_string() {
        let url = proxy_url(v, "proxy")?;
        return Ok(Proxy {
            http: Some(url.clone()),
            https: Some(url),
            no: Vec::new(),
        });
    }
    let Some(by_scheme) = v.array() else {
        return Err(mismatch("string|array", value, "proxy"));
    };
    let mut proxy = Proxy::default();
    for (key, v) in entries(by_scheme, "proxy")? {
        let path = format!("proxy.{key}");
        match key.as_str() {
            "http" => proxy.http = off_or(v, |v| proxy_url(v, &path))?,
            "https" => proxy.https = off_or(v, |v| proxy_url(v, &path))?,
            "no" => {
                proxy.no = match v.dereference().array() {
                    Some(list) => values(list)
                        .into_iter()
                        .map(|h| text(h, &path))
                        .collect::<PhpResult<_>>()?,
                    None => text(v, &path)?
                        .split(',')
                        .map(|h| h.trim().to_owned())
                        .filter(|h| !h.is_empty())
                        .collect(),
                }
            }
            _ => return Err(unknown(&path, &["http", "https", "no"])),
        }
    }
    Ok(proxy)
}

/// A proxy URL (never echoed: it may hold credentials).
fn proxy_url(value: &Zval, path: &str) -> PhpResult<Url> {
    let text = text(value, path)?;
    let text = text.trim();
    resilient_http::no_control_characters(text)
        .map_err(|problem| exceptions::value_error(format!("option '{path}': {problem}")))?;
    Url::parse(text)
        .map_err(|e| exceptions::value_error(format!("option '{path}': is not a valid URL ({e})")))
}

/// `['max' => 5, 'strict' => false, 'referer' => false, 'protocols' => ['http', 'https']]`.
fn redirects(table: &ext_php_rs::types::ZendHashTable) -> PhpResult<Redirects> {
    let mut rules = Redirects::default();
    for (key, v) in entries(table, "allow_redirects")? {
        let path = format!("allow_redirects.{key}");
        match key.as_str() {
            "max" => {
                let max = crate::coerce::int(v).map_err(|e| e.for_option(&path))?;
                rules.max = u32::try_from(max).map_err(|_| {
                    exceptions::value_error(format!(
                        "option '{path}': must be between 1 and 30, got {max}"
                    ))
                })?;
            }
            "strict" => rules.strict = flag(v, &path)?,
            "referer" => rules.referer = flag(v, &path)?,
            "protocols" => {
                rules.http = false;
                rules.https = false;
                for p in entries(crate::options::table(v, &path)?, &path)? {
                    match text(p.1, &path)?.to_ascii_lowercase().as_str() {
                        "http" => rules.http = true,
                        "https" => rules.https = true,
                        other => {
                            return Err(exceptions::value_error(format!(
                                "option '{path}': only 'http' and 'https' are supported, got '{}'",
                                resilient_http::shown_name(other).escape_debug()
                            )))
                        }
                    }
                }
            }
            "track_redirects" if !flag(v, &path)? => {}
            "track_redirects" | "on_redirect" => {
                return Err(exceptions::value_error(format!(
                    "option '{path}': is not supported (redirects are followed inside one attempt, in Rust)"
                )))
            }
            _ => {
                return Err(unknown(
                    &path,
                    &["max", "strict", "referer", "protocols", "track_redirects"],
                ))
            }
        }
    }
    Ok(rules)
}

fn flag(value: &Zval, path: &str) -> PhpResult<bool> {
    value
        .dereference()
        .bool()
        .ok_or_else(|| mismatch("bool", value, path))
}

/// `multipart`: a list of `['name' => .., 'contents' => string|resource, 'filename' => ..,
/// 'headers' => [..]]`. A plain-file stream is sent from its file (read while sending, on
/// every attempt); any other stream is read now.
///
/// Reading a stream runs PHP code (a stream wrapper's), which may change or free the arrays
/// being read when they are reached by reference (`'multipart' => &$parts`, or `[&$part]`
/// as `foreach ($parts as &$part)` leaves it). So the list, each part and each stream are
/// held by a counted copy while in use: PHP then copies an array before writing to it and
/// frees nothing held. The list and each part go as they were when the call reached them (a
/// part given by reference and changed by an earlier part's stream goes as changed).
pub fn multipart(value: &Zval, until: Option<Instant>) -> PhpResult<Vec<Part>> {
    let mut parts = Vec::new();
    // What the parts read from streams hold so far, outside `memory_limit`.
    let mut held = 0;
    let list = counted(value);
    for (i, item) in entries(table(&list, "multipart")?, "multipart")? {
        let at = format!("multipart.{i}");
        let (mut name, mut contents, mut filename, mut headers) = (None, None, None, Vec::new());
        let item = counted(item);
        for (key, v) in entries(table(&item, &at)?, &at)? {
            let path = format!("{at}.{key}");
            match key.as_str() {
                "name" => name = Some(text(v, &path)?),
                "contents" => contents = Some(part_contents(v, &path, until, &mut held)?),
                "filename" => filename = Some(text(v, &path)?),
                "headers" => {
                    for (h, hv) in header_entries(table(v, &path)?, &path)? {
                        let value = header_value(hv, &format!("{path}.{h}"))?;
                        // Named as the part's (`multipart.0.headers.X`), not the request's.
                        resilient_http::RequestOptions::new()
                            .header(&h, value.as_bytes())
                            .map_err(|e| {
                                config_error(ConfigError::new(
                                    format!("{at}.{}", e.option()),
                                    e.problem(),
                                ))
                            })?;
                        headers.push((h, value));
                    }
                }
                _ => return Err(unknown(&path, &["name", "contents", "filename", "headers"])),
            }
        }
        let name = name
            .ok_or_else(|| exceptions::value_error(format!("option '{at}.name': is required")))?;
        let (contents, file_name) = contents.ok_or_else(|| {
            exceptions::value_error(format!("option '{at}.contents': is required"))
        })?;
        parts.push(Part {
            name,
            filename: filename.or(file_name),
            headers,
            contents,
        });
    }
    Ok(parts)
}

/// A part's contents, and the file name a plain-file stream suggests. `until`: the call's
/// deadline, which bounds the read of a stream that may stall (a socket, a pipe); `held`: the
/// bytes the request's parts read from streams so far, which this one's adds to.
fn part_contents(
    value: &Zval,
    path: &str,
    until: Option<Instant>,
    held: &mut u64,
) -> PhpResult<(PartContents, Option<String>)> {
    // Held while read: the read runs PHP code (multipart()).
    let v = &counted(value);
    if let Some(s) = v.zend_str() {
        return Ok((
            PartContents::Bytes(Bytes::copy_from_slice(s.as_bytes())),
            None,
        ));
    }
    if v.long().is_some() || v.double().is_some() {
        return Ok((
            PartContents::Bytes(Bytes::from(header_value(v, path)?)),
            None,
        ));
    }
    if v.is_resource() {
        let mut name = None;
        if let Some(file) = plain_file(v, path)? {
            if !readable(&file.mode) {
                return Err(exceptions::value_error(format!(
                    "option '{path}': the stream was opened write-only (mode '{}'); open it for reading",
                    file.mode
                )));
            }
            name = file.name;
            if let Some(device) = file.path.as_deref().filter(|p| endless_device(p)) {
                return Err(exceptions::value_error(format!(
                    "option '{path}': the stream reads {}, which never ends; nothing was sent",
                    device.display()
                )));
            }
            // Sent from the file (re-opened for each attempt) only when its path still names
            // it and its size is its contents: /proc and /sys files say 0 bytes, devices and
            // pipes have no size. Else read from the stream itself, which is that file.
            if let Some(file) = file.path {
                if std::fs::metadata(&file).is_ok_and(|m| m.is_file() && m.len() > 0) {
                    return Ok((PartContents::File(file), name));
                }
            }
        }
        let read = read_stream(v, path, until, *held)?;
        *held += read.len() as u64;
        return Ok((PartContents::Bytes(Bytes::from(read)), name));
    }
    Err(mismatch("string|resource", value, path))
}

/// A device that gives bytes for ever (`/dev/zero`, `/dev/full`, `/dev/random`,
/// `/dev/urandom`: the kernel's memory devices, major 1), by its device number, whatever its
/// path. `/dev/null` (1, 3) ends at once, a terminal when its user ends it: read as streams.
fn endless_device(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| {
        let rdev = m.rdev();
        m.file_type().is_char_device()
            && libc::major(rdev) == 1
            && [5, 7, 8, 9].contains(&libc::minor(rdev))
    })
}

/// How often a stream that may stall is looked at again while its data has not all come.
const STREAM_POLL: Duration = Duration::from_millis(2);

/// The most read from a part's stream at once (a PHP string, freed when copied).
const STREAM_CHUNK: i64 = 1 << 20;

/// A part's stream read to its end, as Guzzle sends it: a seekable one (`php://temp`,
/// `php://memory`) from its start, wherever it was left. One that may stall (a socket, a pipe)
/// is read without blocking, at most until `until` (the call's deadline), and left in the mode
/// it was in; a socket whose own timeout (`default_socket_timeout`) ran out is an error too,
/// never a part cut short. Read in chunks, and never past what `memory_limit` leaves: the
/// contents are held outside it until sent, and a stream that never ends (an endless pipe)
/// would otherwise be read until the process dies, a fatal error or the system's OOM killer.
fn read_stream(v: &Zval, path: &str, until: Option<Instant>, held: u64) -> PhpResult<Vec<u8>> {
    let meta = call("stream_get_meta_data", v)?;
    let cannot_read =
        || exceptions::value_error(format!("option '{path}': the stream cannot be read"));
    let blocking = |on: bool| -> PhpResult<bool> {
        Ok(call_with("stream_set_blocking", &[v, &on])?
            .bool()
            .unwrap_or(false))
    };
    let seekable = meta_flag(&meta, "seekable");
    // A stream the caller made non-blocking is polled too (read once, it gave what had come).
    let was_blocking = meta_flag(&meta, "blocked");
    let polled = !seekable && (!was_blocking || (until.is_some() && blocking(false)?));
    let cap = crate::context::memory_headroom().map(|room| room.saturating_sub(held));
    let read = || -> PhpResult<Vec<u8>> {
        let mut out = Vec::new();
        // From offset 0 when seekable (stream_get_contents' offset), then on from there.
        let mut offset: i64 = if seekable { 0 } else { -1 };
        loop {
            let chunk = call_with("stream_get_contents", &[v, &STREAM_CHUNK, &offset])?;
            offset = -1;
            let chunk = chunk.zend_str().ok_or_else(cannot_read)?.as_bytes();
            if let Some(cap) = cap.filter(|&cap| (out.len() + chunk.len()) as u64 > cap) {
                return Err(stalled(
                    path,
                    &format!("it holds more than memory_limit leaves, {cap} bytes"),
                ));
            }
            out.extend_from_slice(chunk);
            if call("feof", v)?.bool().unwrap_or(true) {
                return Ok(out);
            }
            if !polled {
                // (Read again: the flag is set by the read.)
                if meta_flag(&call("stream_get_meta_data", v)?, "timed_out") {
                    return Err(stalled(
                        path,
                        "its socket's timeout (default_socket_timeout) ran out",
                    ));
                }
                // A read that waits gave nothing: the end, even from a stream wrapper whose
                // `stream_eof` never says so (read once, as before, such a stream was sent).
                if chunk.is_empty() {
                    return Ok(out);
                }
            }
            let left = until.map_or(Duration::MAX, |u| {
                u.saturating_duration_since(Instant::now())
            });
            if left.is_zero() {
                return Err(stalled(path, "the call's deadline came first"));
            }
            // A full chunk: more may be there already.
            if polled && (chunk.len() as i64) < STREAM_CHUNK {
                std::thread::sleep(left.min(STREAM_POLL));
            }
        }
    };
    let result = read();
    // Left as the caller had it, whatever happened.
    if polled && was_blocking {
        blocking(true)?;
    }
    result
}

/// A true/false entry of `stream_get_meta_data()`'s array (false when it is missing).
fn meta_flag(meta: &Zval, key: &str) -> bool {
    meta.array()
        .and_then(|m| m.get(key))
        .and_then(Zval::bool)
        .unwrap_or(false)
}

/// A part's stream that did not reach its end: nothing is sent (a part cut short would reach
/// the upstream as if whole).
fn stalled(path: &str, why: &str) -> PhpException {
    exceptions::runtime_error(format!(
        "option '{path}': the stream did not reach its end ({why}); nothing was sent"
    ))
}

/// `sink`: a file path, or a plain-file stream (its file is written).
pub fn sink(value: &Zval) -> PhpResult<PathBuf> {
    let v = value.dereference();
    if v.is_string() {
        return Ok(PathBuf::from(text(v, "sink")?));
    }
    if v.is_resource() {
        let file = plain_file(v, "sink")?.ok_or_else(|| {
            exceptions::value_error(
                "option 'sink': must be a file path or a stream opened on a plain file (fopen('/path', 'w'))",
            )
        })?;
        if !writable(&file.mode) {
            return Err(exceptions::value_error(format!(
                "option 'sink': the stream was opened read-only (mode '{}'); open it for writing",
                file.mode
            )));
        }
        // Written by its path from the start, each attempt's answer replacing the last: a
        // stream meant to append would lose what the file held.
        if file.mode.starts_with('a') {
            return Err(exceptions::value_error(format!(
                "option 'sink': the stream was opened to append (mode '{}'); the answer's body replaces the file's content: open it with 'w', or give its path",
                file.mode
            )));
        }
        // Written by its path: one that names another file now must not be truncated.
        return file.path.ok_or_else(|| {
            exceptions::value_error(format!(
                "option 'sink': the stream's file is no longer at '{}' (the working directory \
                 changed, or the file was renamed, replaced or deleted, since fopen()); give \
                 the file's absolute path",
                file.uri.display()
            ))
        });
    }
    Err(mismatch("string|resource", value, "sink"))
}

/// fopen modes: `r` reads; `w`, `a`, `x`, `c` write; `+` both.
fn readable(mode: &str) -> bool {
    mode.starts_with('r') || mode.contains('+')
}

fn writable(mode: &str) -> bool {
    !mode.starts_with('r') || mode.contains('+')
}

/// A stream opened on a plain file.
struct PlainFile {
    /// The path it was opened with (`stream_get_meta_data()['uri']`, a `file://` prefix
    /// removed).
    uri: PathBuf,
    /// That path made absolute, when it still names the file the stream has open (device and
    /// inode as `fstat()` reports them); `None` when it does not: a relative `fopen()` before a
    /// `chdir()`, a file renamed, replaced or deleted since. The file is sent or written by its
    /// path, which must then not be used. Absolute, so a later `chdir()` changes nothing.
    path: Option<PathBuf>,
    /// The file name it was opened with (a multipart part's default `filename`).
    name: Option<String>,
    mode: String,
}

/// The plain file a stream was opened on, or `None` for another kind of stream. A resource
/// that is not an open stream (closed, a stream context), or a directory's, is refused naming
/// `option`.
fn plain_file(stream: &Zval, option: &str) -> PhpResult<Option<PlainFile>> {
    let kind = call("get_resource_type", stream)?;
    if kind.str() != Some("stream") {
        return Err(exceptions::value_error(format!(
            "option '{option}': the resource is not an open stream ({})",
            kind.str().unwrap_or("unknown")
        )));
    }
    let meta = call("stream_get_meta_data", stream)?;
    let Some(meta) = meta.array() else {
        return Ok(None);
    };
    if meta.get("stream_type").and_then(Zval::str) == Some("dir") {
        return Err(exceptions::value_error(format!(
            "option '{option}': the stream is a directory (opendir); give a stream opened on a file"
        )));
    }
    let plain = meta
        .get("wrapper_type")
        .and_then(Zval::str)
        .is_some_and(|w| w == "plainfile");
    let Some(uri) = meta.get("uri").and_then(Zval::str).filter(|_| plain) else {
        return Ok(None);
    };
    let uri = PathBuf::from(uri.strip_prefix("file://").unwrap_or(uri));
    let mode = meta
        .get("mode")
        .and_then(Zval::str)
        .unwrap_or("r")
        .to_owned();
    let path = still_there(stream, &uri)?
        .then(|| std::path::absolute(&uri).unwrap_or_else(|_| uri.clone()));
    Ok(Some(PlainFile {
        name: uri.file_name().map(|n| n.to_string_lossy().into_owned()),
        uri,
        path,
        mode,
    }))
}

/// Whether `uri` names the file `stream` has open (device and inode as `fstat()` reports
/// them; a stream without them is taken at its word).
fn still_there(stream: &Zval, uri: &std::path::Path) -> PhpResult<bool> {
    use std::os::unix::fs::MetadataExt;
    let stat = call("fstat", stream)?;
    let opened = stat.array().and_then(|a| {
        let field = |k: &str| a.get(k).and_then(Zval::long);
        Some((field("dev")?, field("ino")?))
    });
    Ok(match (opened, std::fs::metadata(uri)) {
        (Some((dev, ino)), Ok(m)) => m.dev() == dev as u64 && m.ino() == ino as u64,
        (None, _) => true,
        (_, Err(_)) => false,
    })
}

fn call(function: &str, argument: &Zval) -> PhpResult<Zval> {
    call_with(function, &[argument])
}

/// PHP's `function(...arguments)`.
fn call_with(function: &str, arguments: &[&dyn IntoZvalDyn]) -> PhpResult<Zval> {
    let f = ZendCallable::try_from_name(function)
        .map_err(|_| PhpException::from(format!("{function} is not available")))?;
    exceptions::outside_item(|| f.try_call(arguments.to_vec())).map_err(PhpException::from)
}
