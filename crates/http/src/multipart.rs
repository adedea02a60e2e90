//! `multipart/form-data` bodies whose files are streamed from disk on every attempt.
//!
//! The boundary and each part's head are fixed when the request is prepared (every attempt
//! sends the same bytes); a file part is opened and read in 64 KiB pieces while sending, so a
//! 50 MB upload never sits in memory. The length is known in advance (file sizes are read at
//! send time), so the body goes with a `Content-Length`, not chunked: some servers refuse
//! chunked uploads.

use std::fs::File;
use std::io::{self, Read};
use std::path::PathBuf;

use bytes::Bytes;
use futures_util::stream::{self, Stream};

const CHUNK: usize = 64 * 1024;

/// One part's contents.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum PartContents {
    Bytes(Bytes),
    /// Read from this file while sending.
    File(PathBuf),
}

/// One part: its name, optional file name and headers, and contents.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Part {
    pub name: String,
    pub filename: Option<String>,
    /// Extra part headers (`Content-Type`...), already checked as header names and values.
    pub headers: Vec<(String, String)>,
    pub contents: PartContents,
}

/// A multipart body: parts and the boundary between them.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Multipart {
    boundary: String,
    parts: Vec<Part>,
}

impl Multipart {
    /// A random boundary (never found in text parts by chance).
    pub fn new(parts: Vec<Part>) -> Self {
        let boundary = format!("resilient-{:032x}", rand::random::<u128>());
        Self { boundary, parts }
    }

    /// `multipart/form-data; boundary=...`.
    pub fn content_type(&self) -> String {
        format!("multipart/form-data; boundary={}", self.boundary)
    }

    fn head(&self, part: &Part) -> Bytes {
        let mut head = format!("--{}\r\n", self.boundary);
        // A part that names its own Content-Disposition is sent with that one, as Guzzle does.
        let named = |h: &str| part.headers.iter().any(|(n, _)| n.eq_ignore_ascii_case(h));
        if !named("content-disposition") {
            head.push_str(&format!(
                "Content-Disposition: form-data; name=\"{}\"",
                escape(&part.name)
            ));
            if let Some(filename) = &part.filename {
                head.push_str(&format!("; filename=\"{}\"", escape(filename)));
            }
            head.push_str("\r\n");
        }
        let mut has_type = false;
        for (name, value) in &part.headers {
            has_type |= name.eq_ignore_ascii_case("content-type");
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        if let (false, Some(filename)) = (has_type, &part.filename) {
            // As Guzzle's MultipartStream: the type the name's extension says (servers check
            // an upload's type), else bytes.
            let type_ = mime_guess::from_path(filename).first_raw();
            head.push_str(&format!(
                "Content-Type: {}\r\n",
                type_.unwrap_or("application/octet-stream")
            ));
        }
        head.push_str("\r\n");
        Bytes::from(head)
    }

    fn tail(&self) -> Bytes {
        Bytes::from(format!("--{}--\r\n", self.boundary))
    }

    /// Opens the files and gives the total length and the byte stream for one attempt.
    pub fn open(
        &self,
    ) -> Result<(u64, impl Stream<Item = io::Result<Bytes>> + Send + 'static), io::Error> {
        let mut pieces = Vec::with_capacity(self.parts.len() * 3 + 1);
        let mut length = 0u64;
        for part in &self.parts {
            let head = self.head(part);
            length += head.len() as u64;
            pieces.push(Piece::Bytes(head));
            match &part.contents {
                PartContents::Bytes(b) => {
                    length += b.len() as u64;
                    pieces.push(Piece::Bytes(b.clone()));
                }
                PartContents::File(path) => {
                    let file = File::open(path).map_err(|e| file_error(path, e))?;
                    let size = file.metadata().map_err(|e| file_error(path, e))?.len();
                    length += size;
                    pieces.push(Piece::File(file, size));
                }
            }
            length += 2;
            pieces.push(Piece::Bytes(Bytes::from_static(b"\r\n")));
        }
        let tail = self.tail();
        length += tail.len() as u64;
        pieces.push(Piece::Bytes(tail));
        pieces.reverse();
        let stream = stream::unfold(pieces, |mut pieces| async move {
            let item = loop {
                match pieces.pop()? {
                    Piece::Bytes(b) => break Ok(b),
                    Piece::File(_, 0) => continue,
                    Piece::File(mut file, left) => {
                        let mut buf = vec![0u8; CHUNK.min(left as usize)];
                        match file.read(&mut buf) {
                            Ok(0) => {
                                break Err(io::Error::new(
                                    io::ErrorKind::UnexpectedEof,
                                    "a multipart file got shorter while it was sent",
                                ))
                            }
                            Ok(n) => {
                                buf.truncate(n);
                                pieces.push(Piece::File(file, left - n as u64));
                                break Ok(Bytes::from(buf));
                            }
                            Err(e) => {
                                break Err(io::Error::new(
                                    e.kind(),
                                    format!("cannot read a multipart file: {e}"),
                                ))
                            }
                        }
                    }
                }
            };
            Some((item, pieces))
        });
        Ok((length, stream))
    }
}

enum Piece {
    Bytes(Bytes),
    /// An open file and the bytes still to send (its size when opened).
    File(File, u64),
}

fn file_error(path: &std::path::Path, e: io::Error) -> io::Error {
    io::Error::new(
        e.kind(),
        format!("cannot open the multipart file {}: {e}", path.display()),
    )
}

/// A quoted-string value: quotes, backslashes and line breaks escaped (no header injection).
fn escape(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
        .replace('\0', "%00")
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::StreamExt;

    #[test]
    fn header_parameters_never_carry_a_line_break_or_a_nul() {
        assert_eq!(escape("a\0b\r\nc\"d"), "a%00b%0D%0Ac\\\"d");
    }

    /// As Guzzle's `MultipartStream`: a file part without a Content-Type gets the one its
    /// name's extension says (a server may check it); unknown, `application/octet-stream`.
    #[test]
    fn a_file_parts_type_is_guessed_from_its_name() {
        let m = Multipart::new(Vec::new());
        let head = |filename: &str, headers: Vec<(String, String)>| {
            let part = Part {
                name: "f".into(),
                filename: Some(filename.into()),
                headers,
                contents: PartContents::Bytes(Bytes::from_static(b"x")),
            };
            String::from_utf8(m.head(&part).to_vec()).unwrap()
        };
        for (filename, type_) in [
            ("a.json", "application/json"),
            ("p.PNG", "image/png"),
            ("notes.txt", "text/plain"),
            ("r.pdf", "application/pdf"),
            ("blob.zzunknown", "application/octet-stream"),
            ("no-extension", "application/octet-stream"),
        ] {
            let head = head(filename, Vec::new());
            assert!(
                head.contains(&format!("\r\nContent-Type: {type_}\r\n")),
                "{head}"
            );
        }
        let given = head(
            "a.json",
            vec![("content-type".into(), "text/x-mine".into())],
        );
        assert_eq!(
            given.to_ascii_lowercase().matches("content-type").count(),
            1,
            "{given}"
        );
        assert!(given.contains("content-type: text/x-mine"), "{given}");
    }

    #[test]
    fn a_parts_own_content_disposition_replaces_the_made_one() {
        // As Guzzle: a part that names its Content-Disposition is sent with that one only.
        let m = Multipart::new(Vec::new());
        let part = Part {
            name: "doc".into(),
            filename: Some("a.pdf".into()),
            headers: vec![
                ("Content-Type".into(), "application/pdf".into()),
                (
                    "content-disposition".into(),
                    "form-data; name=\"doc\"; filename=\"b.pdf\"".into(),
                ),
            ],
            contents: PartContents::Bytes(Bytes::from_static(b"PDF")),
        };
        let head = String::from_utf8(m.head(&part).to_vec()).unwrap();
        assert_eq!(
            head.to_ascii_lowercase()
                .matches("content-disposition")
                .count(),
            1,
            "{head}"
        );
        assert!(head.contains("filename=\"b.pdf\""), "{head}");
        assert_eq!(head.to_ascii_lowercase().matches("content-type").count(), 1);
    }

    #[test]
    fn the_stream_is_as_long_as_announced_and_holds_every_part() {
        let path = std::env::temp_dir().join(format!("resilient-mp-{}", std::process::id()));
        std::fs::write(&path, vec![7u8; 200_000]).unwrap();
        let m = Multipart::new(vec![
            Part {
                name: "note".into(),
                filename: None,
                headers: vec![],
                contents: PartContents::Bytes(Bytes::from_static(b"hi")),
            },
            Part {
                name: "file".into(),
                filename: Some("a\"b.bin".into()),
                headers: vec![],
                contents: PartContents::File(path.clone()),
            },
        ]);
        let (length, stream) = m.open().unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let body: Vec<u8> = rt.block_on(stream.map(|c| c.unwrap().to_vec()).concat());
        assert_eq!(body.len() as u64, length);
        let text = String::from_utf8_lossy(&body);
        assert!(text.contains("name=\"note\"\r\n\r\nhi\r\n"));
        assert!(text.contains("filename=\"a\\\"b.bin\""));
        assert!(text.ends_with(&format!("--{}--\r\n", m.boundary)));
        assert_eq!(body.iter().filter(|b| **b == 7).count(), 200_000);
        std::fs::remove_file(path).unwrap();
    }
}
