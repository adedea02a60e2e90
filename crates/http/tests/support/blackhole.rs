//! A TCP address that drops SYNs, as a host that is down behind a firewall does: a listener on
//! loopback whose accept queue is full, so a connect to it neither succeeds nor fails.
#![allow(dead_code)]

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::time::Duration;

/// Keep it alive as long as the address must stay a blackhole.
pub struct Blackhole {
    pub addr: SocketAddr,
    _listener: TcpListener,
    _queued: Vec<TcpStream>,
}

impl Blackhole {
    pub fn new() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        // SAFETY: a listening socket this function owns; listen() again only lowers its backlog.
        assert_eq!(unsafe { libc::listen(listener.as_raw_fd(), 0) }, 0);
        let addr = listener.local_addr().unwrap();
        let mut queued = Vec::new();
        for _ in 0..16 {
            match TcpStream::connect_timeout(&addr, Duration::from_millis(200)) {
                Ok(s) => queued.push(s),
                Err(_) => {
                    return Self {
                        addr,
                        _listener: listener,
                        _queued: queued,
                    }
                }
            }
        }
        panic!("the accept queue of {addr} never filled");
    }
}
