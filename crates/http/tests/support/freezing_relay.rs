//! A TCP relay on loopback whose established connections can die silently, as a path through a
//! load balancer node or a NAT entry that went away does: no FIN, no RST, nothing passes any
//! more. Connections accepted after the freeze pass normally. Counts the connections it
//! accepted, so a test sees whether a client opened a new one.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

pub struct FreezingRelay {
    pub port: u16,
    accepted: Arc<AtomicUsize>,
    freezes: Arc<AtomicUsize>,
}

impl FreezingRelay {
    /// Relays every connection to `127.0.0.1:target`.
    pub fn start(target: u16) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let accepted = Arc::new(AtomicUsize::new(0));
        let freezes = Arc::new(AtomicUsize::new(0));
        let (count, frozen) = (accepted.clone(), freezes.clone());
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                count.fetch_add(1, Ordering::SeqCst);
                let Ok(upstream) = TcpStream::connect(("127.0.0.1", target)) else {
                    continue;
                };
                // A connection dies at the first freeze after it was accepted.
                let born = frozen.load(Ordering::SeqCst);
                for (from, to) in [
                    (client.try_clone().unwrap(), upstream.try_clone().unwrap()),
                    (upstream, client),
                ] {
                    let frozen = frozen.clone();
                    std::thread::spawn(move || pump(from, to, &frozen, born));
                }
            }
        });
        Self {
            port,
            accepted,
            freezes,
        }
    }

    /// The connections accepted so far stop passing anything, both ways, and stay open.
    pub fn freeze(&self) {
        self.freezes.fetch_add(1, Ordering::SeqCst);
    }

    /// Connections accepted so far.
    pub fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }
}

fn pump(mut from: TcpStream, mut to: TcpStream, freezes: &AtomicUsize, born: usize) {
    let mut buf = [0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => {
                let _ = to.shutdown(Shutdown::Write);
                return;
            }
            Ok(n) => n,
        };
        if freezes.load(Ordering::SeqCst) > born {
            // Dead path: what arrives is dropped, both sockets stay open.
            loop {
                std::thread::park();
            }
        }
        if to.write_all(&buf[..n]).is_err() {
            return;
        }
    }
}
