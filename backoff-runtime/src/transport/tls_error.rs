//! Why an `amqps://` connection could not be set up, in words that say what to do.

use std::fmt;
use std::path::PathBuf;

/// A TLS connection to the broker could not be set up: a TLS parameter of
/// the URI is wrong, a file it names cannot be used, or the handshake failed.
///
/// Its `Display` says what happened and what to do:
///
/// ```
/// use rabbit_backoff::transport::TlsError;
///
/// let error = TlsError::WrongHost {
///     host: "10.0.0.5".into(),
///     names: vec!["rabbit.internal".into()],
/// };
/// assert_eq!(
///     error.to_string(),
///     "the server's certificate is not valid for 10.0.0.5: it is for rabbit.internal; \
///      connect with a name the certificate holds, or pass server_name_indication=<a name it holds>"
/// );
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TlsError {
    /// This build has no TLS: the URI says `amqps://`.
    #[error(
        "amqps:// needs TLS, which this build leaves out: enable the feature `tls` of rabbit-backoff"
    )]
    NotBuilt,
    /// A TLS parameter of the URI is invalid or misplaced.
    #[error("{parameter}: {problem}")]
    Parameter {
        /// The parameter as written, such as `verify=maybe`.
        parameter: String,
        /// What is wrong and what is expected.
        problem: String,
    },
    /// A certificate or key file named by the URI cannot be used.
    #[error("{parameter}={}: {problem}", path.display())]
    File {
        /// `cacertfile`, `certfile` or `keyfile`.
        parameter: &'static str,
        /// The file.
        path: PathBuf,
        /// Why: unreadable, no PEM section of the expected kind, invalid.
        problem: String,
    },
    /// The system's certificate store holds no usable CA certificate.
    #[error(
        "the system's certificate store holds no CA certificate ({detail}); install the CA certificates (ca-certificates), set SSL_CERT_FILE, or pass cacertfile=<the CA certificate that signed the broker's>"
    )]
    NoSystemRoots {
        /// What loading the store reported.
        detail: String,
    },
    /// The server's certificate is signed by no CA this client trusts.
    #[error(
        "the server's certificate is not signed by a CA this client trusts ({trusted}); pass cacertfile=<the CA certificate (PEM) that signed the broker's certificate>"
    )]
    UnknownCa {
        /// The host connected to.
        host: String,
        /// What the client trusted.
        trusted: Trusted,
    },
    /// The server's certificate does not hold the host name connected to.
    #[error(
        "the server's certificate is not valid for {host}{}; connect with a name the certificate holds, or pass server_name_indication=<a name it holds>",
        if names.is_empty() { String::new() } else { format!(": it is for {}", names.join(", ")) }
    )]
    WrongHost {
        /// The name the certificate was checked against.
        host: String,
        /// The names the certificate holds, when the TLS library reports them.
        names: Vec<String>,
    },
    /// The server's certificate is refused for another reason (expired,
    /// not yet valid, revoked, not for a server, badly signed).
    #[error("the server's certificate for {host} is refused: {problem}")]
    Certificate {
        /// The host connected to.
        host: String,
        /// The TLS library's reason.
        problem: String,
    },
    /// The server ended the handshake with an alert, usually about the
    /// client's certificate.
    #[error("the server at {host} ended the TLS handshake ({alert}): {hint}")]
    Refused {
        /// The host connected to.
        host: String,
        /// The alert the server sent.
        alert: String,
        /// What it most likely means.
        hint: String,
    },
    /// The handshake failed otherwise: the port does not speak TLS, the
    /// connection closed, no common protocol version.
    #[error("the TLS handshake with {host} failed: {problem}")]
    Handshake {
        /// The host connected to.
        host: String,
        /// What happened and what to do.
        problem: String,
    },
}

/// The certificates a client trusted when the server's was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Trusted {
    /// The system's root certificates (no `cacertfile`).
    System,
    /// Only the CA certificates of `cacertfile`.
    File(PathBuf),
}

impl fmt::Display for Trusted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Trusted::System => f.write_str("it trusts the system's root certificates"),
            Trusted::File(path) => write!(f, "it trusts only cacertfile={}", path.display()),
        }
    }
}
