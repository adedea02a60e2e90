//! A deliberately plain HTTP/1.1 client on `std::net::TcpStream`, so tests control exactly
//! when a connection is opened, kept alive or dropped.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

pub struct Resp {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Resp {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.text()))
    }
}

/// One keep-alive connection.
pub struct Conn {
    reader: BufReader<TcpStream>,
}

impl Conn {
    pub fn open(addr: SocketAddr) -> Conn {
        let s = TcpStream::connect(addr).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.set_nodelay(true).unwrap();
        Conn {
            reader: BufReader::new(s),
        }
    }

    pub fn stream(&self) -> &TcpStream {
        self.reader.get_ref()
    }

    pub fn send(&mut self, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) {
        let mut head = format!(
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {}\r\n",
            body.len()
        );
        for (k, v) in headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        head.push_str("\r\n");
        let s = self.reader.get_mut();
        s.write_all(head.as_bytes()).unwrap();
        s.write_all(body).unwrap();
    }

    /// Reads one response (bodies sized by Content-Length, as this server sends them).
    pub fn read(&mut self) -> std::io::Result<Resp> {
        let mut line = String::new();
        if self.reader.read_line(&mut line)? == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "closed before a response",
            ));
        }
        let status: u16 = line
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .expect("status line");
        let mut headers = Vec::new();
        loop {
            let mut h = String::new();
            self.reader.read_line(&mut h)?;
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            let (k, v) = h.split_once(':').expect("header line");
            headers.push((k.trim().to_string(), v.trim().to_string()));
        }
        let len: usize = headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
            .map(|(_, v)| v.parse().unwrap())
            .unwrap_or(0);
        let mut body = vec![0; len];
        self.reader.read_exact(&mut body)?;
        Ok(Resp {
            status,
            headers,
            body,
        })
    }

    pub fn call(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> Resp {
        self.send(method, path, headers, body);
        self.read().expect("response")
    }
}

pub fn get(addr: SocketAddr, path: &str) -> Resp {
    Conn::open(addr).call("GET", path, &[], b"")
}

pub fn post_json(addr: SocketAddr, path: &str, body: serde_json::Value) -> Resp {
    Conn::open(addr).call(
        "POST",
        path,
        &[("Content-Type", "application/json")],
        body.to_string().as_bytes(),
    )
}

/// `POST /__control/script`, asserting it was accepted.
pub fn script(addr: SocketAddr, body: serde_json::Value) {
    let r = post_json(addr, "/__control/script", body);
    assert_eq!(r.status, 200, "script rejected: {}", r.text());
}

/// `GET /__control/attempts?key=..&{extra}` as a list of rows.
pub fn attempts(addr: SocketAddr, key: &str, extra: &str) -> Vec<serde_json::Value> {
    let r = get(addr, &format!("/__control/attempts?key={key}&{extra}"));
    assert_eq!(r.status, 200, "{}", r.text());
    r.json().as_array().expect("a list").clone()
}
