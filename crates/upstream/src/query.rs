//! A tiny `application/x-www-form-urlencoded` query parser for the control API.

/// Decodes `a=1&b=x%20y` into pairs; `+` means space. Invalid escapes are kept verbatim.
pub fn parse(query: Option<&str>) -> Vec<(String, String)> {
    let Some(q) = query else { return Vec::new() };
    q.split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| match pair.split_once('=') {
            Some((k, v)) => (decode(k), decode(v)),
            None => (decode(pair), String::new()),
        })
        .collect()
}

/// The first value of `name`, if present.
pub fn get<'a>(pairs: &'a [(String, String)], name: &str) -> Option<&'a str> {
    pairs
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

/// Percent-decoding (lossy UTF-8).
pub fn decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => match (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                (Some(h), Some(l)) => {
                    out.push(h * 16 + l);
                    i += 3;
                    continue;
                }
                _ => out.push(b'%'),
            },
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_pairs_and_escapes() {
        let p = parse(Some("key=a%2Fb&x=1+2&flag&bad=%zz&tail=%4"));
        assert_eq!(get(&p, "key"), Some("a/b"));
        assert_eq!(get(&p, "x"), Some("1 2"));
        assert_eq!(get(&p, "flag"), Some(""));
        assert_eq!(get(&p, "bad"), Some("%zz"));
        assert_eq!(get(&p, "tail"), Some("%4"));
        assert_eq!(get(&p, "missing"), None);
    }
}
