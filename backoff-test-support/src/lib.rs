//! What the tests of rabbit-backoff's crates share, in one place: the test
//! broker ([`broker`]), the TLS node of `scripts/tls.sh` ([`tls`]) and
//! headers nested deeper than lapin can hold ([`deep_headers`]).
//!
//! Not published: only the workspace's own tests depend on it, as a
//! dev-dependency. What users' tests get is `rabbit-backoff-testing`, the
//! in-memory broker.

pub mod broker;
pub mod deep_headers;
pub mod tls;
