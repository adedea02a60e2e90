//! One call driven on the process's runtime, as a PHP script's call is (`io.drive`), for the
//! tests that run real servers in a binary of their own.
#![allow(dead_code)]

use resilient_http::{HttpClient, ProcessIo, Response, Unavailable};
use serde_json::Value;

/// `method path` through `client`, with the request options `options` (a `json!` tree, as
/// `json::request` reads it).
pub fn call(
    io: &ProcessIo,
    client: &HttpClient,
    method: &str,
    path: &str,
    options: &Value,
) -> Result<Response, Unavailable> {
    let request = client
        .prepare(method, path, crate::json::request(options))
        .unwrap();
    io.drive(
        client.call(client.env().clone(), request, None),
        None,
        None,
        |_| true,
    )
    .done()
    .expect("not forked")
}
