//! HTTP/1.1 requests written by hand, as a client that sets its own `Host`
//! header (a rebound name, say) sends them to a server on the loopback
//! address.

use std::io::{Read, Write};
use std::net::TcpStream;

/// The whole response (status line, headers and body) of the server at
/// `address` to a GET of `path` with the `Host` header `host` and the
/// further header lines `headers` (each ending in `\r\n`), read until the
/// server closes the connection; fails the test when it cannot connect.
pub fn get(address: &str, path: &str, host: &str, headers: &str) -> String {
    let mut stream =
        TcpStream::connect(address).unwrap_or_else(|e| panic!("a connection to {address}: {e}"));
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {host}\r\n{headers}Connection: close\r\n\r\n"
    )
    .unwrap_or_else(|e| panic!("a request to {address}: {e}"));
    let mut response = String::new();
    stream
        .read_to_string(&mut response)
        .unwrap_or_else(|e| panic!("the response of {address}: {e}"));
    response
}
