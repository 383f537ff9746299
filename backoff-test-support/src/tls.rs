//! The TLS node of `scripts/tls.sh up`: TLS on 127.0.0.1:5671 (and
//! 127.0.0.2:5671, a name its certificate does not carry), plain AMQP on
//! 127.0.0.1:5676, its certificates in `RABBIT_BACKOFF_TLS_DIR` (by default
//! /tmp/rabbit-backoff-tls).

use std::path::PathBuf;

/// The TLS node's plain AMQP listener, to set up and check what a test does
/// over TLS.
pub const PLAIN: &str = "amqp://guest:guest@127.0.0.1:5676/%2f";

/// A file of the TLS node's certificates; fails the test, with the way out,
/// when it is missing.
pub fn cert(name: &str) -> PathBuf {
    let dir = std::env::var("RABBIT_BACKOFF_TLS_DIR")
        .unwrap_or_else(|_| "/tmp/rabbit-backoff-tls".to_owned());
    let path = PathBuf::from(dir).join(name);
    assert!(
        path.exists(),
        "{} is missing: these tests need the TLS node; start it with scripts/tls.sh up (scripts/test.sh does)",
        path.display()
    );
    path
}

/// The TLS node at `host` (`localhost`, or `127.0.0.2` for a name the
/// certificate does not carry), trusting the CA certificates in the file
/// `ca` of [`cert`].
pub fn amqps(host: &str, ca: &str) -> String {
    format!(
        "amqps://guest:guest@{host}:5671/%2f?heartbeat=30&cacertfile={}",
        cert(ca).display()
    )
}
