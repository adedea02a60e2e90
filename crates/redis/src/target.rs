//! One Redis server as this crate reaches it: where (the URL, parsed by the `redis` crate),
//! under which key prefix, with which longest wait per command.
//!
//! The URL may hold a password: nothing here ever formats it. Our own query parameters are
//! taken out before the rest goes to the `redis` crate:
//! - `prefix` (default `resilient:`): put before every key;
//! - `timeout` (seconds, default 0.25): the longest connect or command wait, further capped by
//!   half of what is left of the calling request's deadline (see `connection/mod.rs`);
//! - `ca` (`rediss://` only): a PEM file of the certificate authorities to trust instead of the
//!   webpki roots (a private CA).

use std::time::Duration;

use redis::IntoConnectionInfo;
use resilient_http::ConfigError;

/// The default key prefix.
pub const DEFAULT_PREFIX: &str = "resilient:";
/// The query parameters a Redis URL may have: a `unix://` URL all of them, a TCP URL the first
/// four (its database is the path; its user and password come before the host).
pub const QUERY_PARAMETERS: [&str; 7] =
    ["prefix", "timeout", "ca", "protocol", "db", "user", "pass"];
/// How many of [`QUERY_PARAMETERS`] a TCP URL may have.
const TCP_QUERY_PARAMETERS: usize = 4;

/// The default longest connect or command wait.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(250);

/// A parsed Redis URL.
#[derive(Clone)]
pub struct Target {
    /// Where and how to connect; its database is always 0, see `db`.
    pub(crate) info: redis::ConnectionInfo,
    /// The URL's database, selected after the handshake (`Server::connect`).
    pub(crate) db: i64,
    pub(crate) prefix: String,
    pub(crate) timeout: Duration,
    /// `ca`: the PEM of the authorities to trust (read when parsed).
    pub(crate) ca: Option<Vec<u8>>,
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Target")
            .field("prefix", &self.prefix)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

/// `a` is `b` with at most two characters changed, added or removed (`prefx`, `tiemout`,
/// `DB`): a typo, safe to quote back.
fn near_miss(a: &str, b: &str) -> bool {
    let (a, b): (Vec<char>, Vec<char>) = (a.to_lowercase().chars().collect(), b.chars().collect());
    // Edit distance, one row at a time.
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitute = diagonal + usize::from(ca != cb);
            diagonal = row[j + 1];
            row[j + 1] = substitute.min(row[j] + 1).min(diagonal + 1);
        }
    }
    row[b.len()] <= 2
}

impl Target {
    /// Parses `redis://[user:password@]host[:port][/db][?prefix=..&timeout=..]`, `rediss://…`
    /// (TLS, rustls with the webpki roots) or `unix:///path/redis.sock`, reading the `ca` file
    /// if one is named. Errors name the option `backend` and never quote the URL.
    pub fn parse(text: &str) -> Result<Target, ConfigError> {
        Self::read(text, true)
    }

    /// What [`parse`](Self::parse) checks except the `ca` file, which may come later (a secret
    /// mounted after the server started, a file inside an FPM pool's chroot): for a setting
    /// checked once, when PHP starts.
    pub fn check_url(text: &str) -> Result<(), ConfigError> {
        Self::read(text, false).map(drop)
    }

    fn read(text: &str, read_files: bool) -> Result<Target, ConfigError> {
        let bad = |problem: String| ConfigError::new("backend", problem);
        // Its shape (an unencoded '?' or '#' in the password, a fragment), said without
        // quoting it.
        let mut url = resilient_http::parse_redis_url(text).map_err(bad)?;
        if !matches!(url.scheme(), "redis" | "rediss" | "unix") {
            return Err(bad("must be a redis://, rediss:// or unix:// URL".into()));
        }
        let mut prefix = DEFAULT_PREFIX.to_owned();
        let mut timeout = DEFAULT_TIMEOUT;
        let mut ca = None;
        let mut ca_given = false;
        let mut rest = Vec::new();
        let mut seen: Vec<String> = Vec::new();
        for (k, v) in url.query_pairs() {
            // Given twice, one of the two would be dropped without a word (the last one won).
            // (Only a known name gets here twice: an unknown one is refused at once, below.)
            if seen.iter().any(|s| *s == k) {
                return Err(bad(format!(
                    "query parameter '{}' is given twice",
                    k.escape_debug()
                )));
            }
            seen.push(k.clone().into_owned());
            match k.as_ref() {
                "prefix" => prefix = v.into_owned(),
                "timeout" => {
                    let secs: f64 = v
                        .parse()
                        .ok()
                        .filter(|s: &f64| s.is_finite() && *s >= 0.001 && *s <= 60.0)
                        .ok_or_else(|| {
                            bad("query parameter 'timeout' must be a number of seconds between 0.001 and 60".into())
                        })?;
                    timeout = Duration::from_secs_f64(secs);
                }
                "ca" if !read_files => ca_given = true,
                "ca" => {
                    ca_given = true;
                    // A regular file of PEM size only: a FIFO or /dev/zero must not hang
                    // nor fill memory.
                    let pem = resilient_http::read_pem("ca", std::path::Path::new(v.as_ref()))
                        .map_err(|e| bad(format!("query parameter 'ca': {}", e.problem())))?;
                    ca = Some(pem);
                }
                // What redis-rs reads itself: the protocol, and for a unix socket the
                // database and credentials. Anything else is a typo (`prefx`, `tiemout`,
                // `db=` on a redis:// URL, where the database is the path) that would
                // otherwise be dropped without a word.
                // (Their values checked here: the redis crate would only say "invalid client
                // configuration".)
                "protocol" if !matches!(v.as_ref(), "2" | "resp2" | "3" | "resp3") => {
                    return Err(bad(
                        "query parameter 'protocol' must be resp2 or resp3".into()
                    ));
                }
                "db" if url.scheme() == "unix" && v.parse::<i64>().is_err() => {
                    return Err(bad("query parameter 'db' must be a database number".into()));
                }
                "protocol" => rest.push((k.into_owned(), v.into_owned())),
                "db" | "user" | "pass" if url.scheme() == "unix" => {
                    rest.push((k.into_owned(), v.into_owned()))
                }
                other => {
                    let known = if url.scheme() == "unix" {
                        &QUERY_PARAMETERS[..]
                    } else {
                        &QUERY_PARAMETERS[..TCP_QUERY_PARAMETERS]
                    };
                    // Quoted only when it is a typo of a known name: anything else may be a
                    // password typed in the wrong place.
                    let what = if known.iter().any(|k| near_miss(other, k)) {
                        format!("query parameter '{}' is not known", other.escape_debug())
                    } else {
                        "an unknown query parameter (not shown: it may hold a password) is \
                         not known"
                            .to_owned()
                    };
                    return Err(bad(format!("{what} (known: {})", known.join(", "))));
                }
            }
        }
        if rest.is_empty() {
            url.set_query(None);
        } else {
            url.query_pairs_mut().clear().extend_pairs(rest);
        }
        if ca.as_ref().is_some_and(|pem: &Vec<u8>| {
            !pem.windows(27).any(|w| w == b"-----BEGIN CERTIFICATE-----")
        }) {
            return Err(bad(
                "query parameter 'ca': the file holds no PEM certificate (-----BEGIN CERTIFICATE-----)".into(),
            ));
        }
        if ca_given && url.scheme() != "rediss" {
            return Err(bad("query parameter 'ca' is for rediss:// URLs only".into()));
        }
        if prefix.contains(['{', '}']) {
            return Err(bad(
                "query parameter 'prefix' must not contain '{' or '}' (they mark the hash tag)"
                    .into(),
            ));
        }
        shape(&url).map_err(bad)?;
        let info = url
            .as_str()
            .into_connection_info()
            .map_err(|e| bad(format!("is not a valid Redis URL ({})", e.kind_name())))?;
        if info.redis.db < 0 {
            return Err(bad(format!(
                "names database {}; a database index is 0 or more",
                info.redis.db
            )));
        }
        // The `redis` crate authenticates only with a password: a user alone (most often a
        // password typed before the '@' without its ':') would be dropped without a word.
        if info.redis.username.is_some() && info.redis.password.is_none() {
            return Err(bad(
                "names a user but no password, and a user alone is never sent: \
                 redis://:PASSWORD@host for a password alone, redis://USER:PASSWORD@host for an ACL user"
                    .into(),
            ));
        }
        if matches!(
            &info.addr,
            redis::ConnectionAddr::Tcp(_, 0) | redis::ConnectionAddr::TcpTls { port: 0, .. }
        ) {
            return Err(bad("names port 0".into()));
        }
        // redis-rs sends SELECT in the handshake's pipeline and reads each of its replies with
        // the whole timeout: the database is selected apart.
        let mut info = info;
        let db = std::mem::take(&mut info.redis.db);
        Ok(Target {
            info,
            db,
            prefix,
            timeout,
            ca,
        })
    }

    /// The key of `name`'s `what` (`funnel`, `budget:60000ms`, `breaker`): one hash tag per
    /// name, so a name's keys share a Redis Cluster slot (every script touches one slot).
    ///
    /// The tag is the name with `%` and `}` written `%25` and `%7D`: a cluster's tag ends at
    /// the first `}`, so a name starting with one gave an empty tag (each key hashed whole,
    /// a shared funnel's script refused as CROSSSLOT). Other names keep their keys.
    pub fn key(&self, name: &str, what: &str) -> String {
        let mut key = String::with_capacity(self.prefix.len() + name.len() + what.len() + 3);
        key.push_str(&self.prefix);
        key.push('{');
        for c in name.chars() {
            match c {
                '%' => key.push_str("%25"),
                '}' => key.push_str("%7D"),
                c => key.push(c),
            }
        }
        key.push_str("}:");
        key.push_str(what);
        key
    }
}

/// What the `redis` crate would refuse as "invalid client configuration", said in words
/// (without quoting the URL: a password may sit where a database or a path was meant).
/// (The query's values are checked where it is read.)
fn shape(url: &resilient_http::Url) -> Result<(), String> {
    if url.scheme() == "unix" {
        if url.host_str().is_some_and(|h| !h.is_empty()) {
            return Err(
                "a unix:// URL names no host: unix:///path/to/redis.sock (three slashes)".into(),
            );
        }
        if url.path().is_empty() || url.path() == "/" {
            return Err("a unix:// URL must name the socket's path".into());
        }
        return Ok(());
    }
    // (A negative database is refused after, in its own words.)
    match url.path().trim_matches('/') {
        "" => {}
        db if db.parse::<i64>().is_ok() => {}
        _ => return Err("its path must be the database number (/0, /1, …) or nothing".into()),
    }
    let utf8 = |text: &str| {
        percent_encoding::percent_decode_str(text)
            .decode_utf8()
            .is_ok()
    };
    if !utf8(url.username()) || !url.password().is_none_or(utf8) {
        return Err("the user name or password is not valid UTF-8 once percent-decoded".into());
    }
    Ok(())
}

trait KindName {
    fn kind_name(&self) -> &'static str;
}

impl KindName for redis::RedisError {
    /// The error's category only: its text may quote the URL.
    fn kind_name(&self) -> &'static str {
        match self.kind() {
            redis::ErrorKind::InvalidClientConfig => "invalid client configuration",
            _ => "unsupported",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn our_parameters_are_taken_out_and_the_password_never_shows() {
        let t =
            Target::parse("redis://:s3cret@127.0.0.1:6390/2?prefix=app1:&timeout=0.05").unwrap();
        assert_eq!(t.prefix, "app1:");
        assert_eq!(t.timeout, Duration::from_millis(50));
        assert_eq!(t.key("sap", "funnel"), "app1:{sap}:funnel");
        assert_eq!(t.key("}a{%", "funnel"), "app1:{%7Da{%25}:funnel");
        assert!(!format!("{t:?}").contains("s3cret"));
        for bad in [
            "redis://:s3cret@127.0.0.1:6390/x",
            "redis://:s3cret@127.0.0.1:6390/0?timeout=0",
            "http://:s3cret@127.0.0.1/",
            "redis://:s3cret@127.0.0.1:6390/0?prefix={x}",
            "redis://:s3cret@[::1",
        ] {
            let e = Target::parse(bad).unwrap_err().to_string();
            assert!(
                e.starts_with("option 'backend'") && !e.contains("s3cret"),
                "{e}"
            );
        }
        assert!(
            Target::parse("rediss://127.0.0.1:6390").is_ok(),
            "TLS is built in"
        );
        assert!(Target::parse("unix:///run/redis.sock").is_ok());
    }

    /// A password with a '?' and then a '#': the URL's query is what lies between them, and
    /// its fragment holds the rest, host included. Neither may be quoted.
    #[test]
    fn a_password_split_by_a_question_mark_and_a_hash_never_shows() {
        for url in [
            "redis://default:8734?QwE#rT@10.0.0.5:6379/0",
            "redis://:s3?cr#et@10.0.0.5:6379/0",
            "redis://default:ab?prefix=x#yz@10.0.0.5:6379/0",
            "rediss://u:p?q=1&ca=2#zz@10.0.0.5",
        ] {
            let e = Target::parse(url).unwrap_err().to_string();
            assert!(e.starts_with("option 'backend': "), "{url}: {e}");
            let shown = e.trim_start_matches("option 'backend': ");
            let secret = &url[url.find("://").unwrap() + 3..url.rfind('@').unwrap()];
            for part in secret
                .split(['?', '#', ':', '&', '='])
                .filter(|p| p.len() > 1)
            {
                assert!(!shown.contains(part), "{url}: '{part}' shown in: {e}");
            }
        }
    }

    /// A password typed where a query parameter goes (`unix:///run/redis.sock?s3cret`): an
    /// unknown name is quoted only when it is a near miss of a known one (a typo).
    #[test]
    fn an_unknown_parameter_that_is_no_typo_is_not_quoted() {
        for url in [
            "unix:///run/redis.sock?Xk29sLq7",
            "redis://127.0.0.1:6390/0?Xk29sLq7=1",
        ] {
            let e = Target::parse(url).unwrap_err().to_string();
            assert!(
                e.contains("an unknown query parameter (not shown: it may hold a password)")
                    && !e.contains("Xk29sLq7"),
                "{url}: {e}"
            );
        }
    }

    #[test]
    fn a_typo_or_an_impossible_value_is_named_not_dropped() {
        let ca = std::env::temp_dir().join(format!("resilient-target-ca-{}", std::process::id()));
        std::fs::write(&ca, "not a certificate").unwrap();
        let bad_ca = format!("rediss://127.0.0.1:6390/0?ca={}", ca.display());
        for (url, expected) in [
            (
                "redis://:s3cret@127.0.0.1:6390/0?prefx=app1:",
                "query parameter 'prefx' is not known (known: prefix, timeout, ca, protocol)",
            ),
            (
                "redis://127.0.0.1:6390/?db=5",
                "query parameter 'db' is not known",
            ),
            // A '?' in the password: what follows it reads as a query. Nothing of it is shown.
            (
                "redis://:p@ss?s3cret@127.0.0.1:6390/0",
                "has a '?' in its user or password",
            ),
            (
                "redis://default:1234?s3cret@127.0.0.1:6390",
                "has a '?' in its user or password",
            ),
            (
                "redis://default:1234?s3cret=tail@127.0.0.1:6390/0",
                "has a '?' in its user or password",
            ),
            (
                "redis://default:1234?s3cret&x@127.0.0.1:6390/0",
                "has a '?' in its user or password",
            ),
            (
                "redis://127.0.0.1:6390/0?tiemout=0.01",
                "query parameter 'tiemout' is not known",
            ),
            (
                "redis://:s3cret@127.0.0.1:6390/-1",
                "names database -1; a database index is 0 or more",
            ),
            ("redis://127.0.0.1:0/0", "names port 0"),
            (
                "redis://default:1234?s3cret#tail@127.0.0.1:6390/0",
                "has a '#' in its user or password",
            ),
            // The same mistakes where the text before the '?' or '#' does not read as a port:
            // the URL does not parse at all, and the hint is still given.
            (
                "redis://default:s3cr?et@10.0.0.5:6379/0",
                "has a '?' or '#' in its user or password",
            ),
            (
                "redis://:s3cr?et@10.0.0.5:6379/0",
                "has a '?' or '#' in its user or password",
            ),
            (
                "redis://default:s3cr#et@10.0.0.5:6379/0",
                "has a '?' or '#' in its user or password",
            ),
            (
                "rediss://127.0.0.1:6390/0#insecure",
                "must not have a fragment",
            ),
            (
                bad_ca.as_str(),
                "query parameter 'ca': the file holds no PEM certificate",
            ),
            // One of the two would be dropped without a word.
            (
                "redis://127.0.0.1:6390/0?prefix=a:&prefix=b:",
                "query parameter 'prefix' is given twice",
            ),
            (
                "redis://127.0.0.1:6390/0?timeout=0.25&timeout=1",
                "query parameter 'timeout' is given twice",
            ),
            (
                "unix:///run/redis.sock?db=1&db=2",
                "query parameter 'db' is given twice",
            ),
            // What the redis crate calls "invalid client configuration", in words.
            (
                "redis://127.0.0.1:6390/s3cret",
                "its path must be the database number (/0, /1, …) or nothing",
            ),
            (
                "redis://127.0.0.1:6390/0/1",
                "its path must be the database number",
            ),
            (
                "redis://127.0.0.1:6390/99999999999999999999",
                "its path must be the database number",
            ),
            (
                "redis://127.0.0.1:6390/0?protocol=resp9",
                "query parameter 'protocol' must be resp2 or resp3",
            ),
            (
                "unix://host/run/redis.sock",
                "a unix:// URL names no host: unix:///path/to/redis.sock",
            ),
            (
                "unix:///run/redis.sock?db=abc",
                "query parameter 'db' must be a database number",
            ),
            (
                "redis://u:%FFs3cret@127.0.0.1:6390/0",
                "the user name or password is not valid UTF-8 once percent-decoded",
            ),
            // A password typed where the user name goes: never sent (no AUTH without one).
            (
                "redis://s3cret@127.0.0.1:6390/0",
                "names a user but no password",
            ),
            (
                "rediss://s3cret:@127.0.0.1:6390/0",
                "names a user but no password",
            ),
            (
                "unix:///run/redis.sock?user=s3cret",
                "names a user but no password",
            ),
        ] {
            let e = Target::parse(url).unwrap_err().to_string();
            assert!(
                e.starts_with(&format!("option 'backend': {expected}")) && !e.contains("s3cret"),
                "{url}: {e}"
            );
        }
        std::fs::remove_file(ca).unwrap();
        assert!(Target::parse("redis://127.0.0.1:6390/0?protocol=resp3").is_ok());
        assert!(Target::parse("unix:///run/redis.sock?db=2&pass=x").is_ok());
    }
}
