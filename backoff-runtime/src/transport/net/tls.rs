//! `amqps://`: the TLS settings a URI carries, and the TLS handshake on the
//! runtime's own socket (tokio-rustls with ring).
//!
//! The settings are RabbitMQ's own URI query parameters, as its Erlang client
//! reads them:
//!
//! | parameter | meaning | default |
//! |---|---|---|
//! | `cacertfile` | PEM file of the CA certificates to trust, instead of the system's | the system's root certificates |
//! | `certfile`, `keyfile` | the client's certificate chain and its (unencrypted) private key, both PEM | no client certificate |
//! | `verify` | `verify_peer`: check the server's certificate; `verify_none`: do not | `verify_peer` |
//! | `server_name_indication` | the name sent in SNI and checked against the certificate; `disable`: send none, check the URI's host | the URI's host |
//!
//! The connector splits each node's URI with [`split_uri`], lets lapin parse
//! what is left, connects its own TCP socket and calls [`handshake`] on it.
//! Files are read at every handshake, so a reconnect picks up renewed
//! certificates.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use percent_encoding::percent_decode_str;
use rustls_pki_types::pem::{self, PemObject};
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;
use tokio_rustls::rustls::client::danger::{
    HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier,
};
use tokio_rustls::rustls::crypto::{
    CryptoProvider, ring, verify_tls12_signature, verify_tls13_signature,
};
use tokio_rustls::rustls::{
    self, AlertDescription, CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore,
    SignatureScheme,
};

use crate::transport::tls_error::{TlsError, Trusted};
use crate::transport::transport_error::TransportError;

/// RabbitMQ's TLS query parameters: removed from the URI lapin parses.
const CA_FILE: &str = "cacertfile";
const CERT_FILE: &str = "certfile";
const KEY_FILE: &str = "keyfile";
const VERIFY: &str = "verify";
const SERVER_NAME: &str = "server_name_indication";
const PARAMETERS: [&str; 5] = [CA_FILE, CERT_FILE, KEY_FILE, VERIFY, SERVER_NAME];

/// The TLS settings of one `amqps://` URI.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct TlsSettings {
    /// `cacertfile`: trust only these CA certificates.
    ca_file: Option<PathBuf>,
    /// `certfile` and `keyfile`.
    client: Option<ClientCertificate>,
    /// `verify`.
    verify: Verify,
    /// `server_name_indication`.
    server_name: ServerNameChoice,
}

/// The client's certificate chain and key files.
#[derive(Clone, Debug, PartialEq, Eq)]
struct ClientCertificate {
    cert_file: PathBuf,
    key_file: PathBuf,
}

/// Whether the server's certificate is checked.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Verify {
    /// `verify_peer`: against the trusted CAs and the host name.
    #[default]
    Peer,
    /// `verify_none`: not at all.
    None,
}

/// The name sent in SNI and checked against the server's certificate.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
enum ServerNameChoice {
    /// The host the connection goes to.
    #[default]
    Host,
    /// `server_name_indication=<name>`.
    Name(String),
    /// `server_name_indication=disable`: no SNI; the host is still checked.
    Disable,
}

/// The URI lapin should parse (our TLS query parameters removed) and, for
/// amqps://, the TLS settings.
///
/// Other query parameters (`heartbeat`, `frame_max`, …) stay, as written.
/// Values are percent-decoded as in a form (`%2F` is `/`, `+` a space). TLS
/// parameters on an `amqp://` URI are an error rather than ignored: the
/// connection would not be encrypted.
pub(crate) fn split_uri(uri: &str) -> Result<(String, Option<TlsSettings>), TransportError> {
    split(uri).map_err(TransportError::Tls)
}

fn split(uri: &str) -> Result<(String, Option<TlsSettings>), TlsError> {
    let is_tls = uri
        .split_once("://")
        .is_some_and(|(scheme, _)| scheme.eq_ignore_ascii_case("amqps"));
    let Some((base, query)) = uri.split_once('?') else {
        return Ok((uri.to_owned(), is_tls.then(TlsSettings::default)));
    };
    let mut kept = Vec::new();
    let mut found: Vec<(&'static str, String, &str)> = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (raw_name, raw_value) = pair.split_once('=').unwrap_or((pair, ""));
        let name = decode(raw_name).unwrap_or_default();
        let Some(&parameter) = PARAMETERS.iter().find(|p| **p == name) else {
            kept.push(pair);
            continue;
        };
        if found.iter().any(|(p, _, _)| *p == parameter) {
            return Err(TlsError::Parameter {
                parameter: pair.to_owned(),
                problem: format!("{parameter} is given twice; give it once"),
            });
        }
        let value = decode(raw_value).ok_or_else(|| TlsError::Parameter {
            parameter: pair.to_owned(),
            problem: "its value is not percent-encoded UTF-8".into(),
        })?;
        if value.is_empty() {
            return Err(TlsError::Parameter {
                parameter: pair.to_owned(),
                problem: format!("{parameter} needs a value"),
            });
        }
        found.push((parameter, value, pair));
    }
    if let (false, Some((_, _, pair))) = (is_tls, found.first()) {
        return Err(TlsError::Parameter {
            parameter: (*pair).to_owned(),
            problem: "a TLS parameter on an amqp:// URI, which is not encrypted; use amqps:// (RabbitMQ's TLS port is usually 5671), or remove it".into(),
        });
    }
    let rest = if kept.is_empty() {
        base.to_owned()
    } else {
        format!("{base}?{}", kept.join("&"))
    };
    if !is_tls {
        return Ok((rest, None));
    }
    Ok((rest, Some(TlsSettings::from_parameters(found)?)))
}

/// A query component decoded as in a form: `+` is a space, `%XX` a byte;
/// `None` when the bytes are not UTF-8.
fn decode(component: &str) -> Option<String> {
    let spaced = component.replace('+', " ");
    percent_decode_str(&spaced)
        .decode_utf8()
        .ok()
        .map(|s| s.into_owned())
}

impl TlsSettings {
    fn from_parameters(found: Vec<(&'static str, String, &str)>) -> Result<Self, TlsError> {
        let mut settings = TlsSettings::default();
        let (mut cert_file, mut key_file) = (None, None);
        for (parameter, value, pair) in found {
            match parameter {
                CA_FILE => settings.ca_file = Some(PathBuf::from(value)),
                CERT_FILE => cert_file = Some(PathBuf::from(value)),
                KEY_FILE => key_file = Some(PathBuf::from(value)),
                VERIFY => {
                    settings.verify = match value.as_str() {
                        "verify_peer" => Verify::Peer,
                        "verify_none" => Verify::None,
                        _ => {
                            return Err(TlsError::Parameter {
                                parameter: pair.to_owned(),
                                problem: "expected verify_peer (check the server's certificate, the default) or verify_none (do not)".into(),
                            });
                        }
                    }
                }
                _ => {
                    settings.server_name = if value == "disable" {
                        ServerNameChoice::Disable
                    } else {
                        server_name(&value).map_err(|_| TlsError::Parameter {
                            parameter: pair.to_owned(),
                            problem: "expected a host name, an IP address, or disable".into(),
                        })?;
                        ServerNameChoice::Name(value)
                    }
                }
            }
        }
        settings.client = match (cert_file, key_file) {
            (Some(cert_file), Some(key_file)) => Some(ClientCertificate {
                cert_file,
                key_file,
            }),
            (None, None) => None,
            (Some(_), None) => {
                return Err(TlsError::Parameter {
                    parameter: CERT_FILE.into(),
                    problem: "a client certificate needs its private key too: add keyfile=<its key (PEM)>".into(),
                });
            }
            (None, Some(_)) => {
                return Err(TlsError::Parameter {
                    parameter: KEY_FILE.into(),
                    problem: "a private key needs its certificate too: add certfile=<the client certificate (PEM)>".into(),
                });
            }
        };
        Ok(settings)
    }

    /// The rustls configuration: trusted roots or no verification, the
    /// client certificate, SNI. Reads the files now.
    fn client_config(&self, host: &str) -> Result<ClientConfig, TlsError> {
        let provider = Arc::new(ring::default_provider());
        let builder = ClientConfig::builder_with_provider(Arc::clone(&provider))
            .with_safe_default_protocol_versions()
            .map_err(|e| TlsError::Handshake {
                host: host.to_owned(),
                problem: format!("the TLS library cannot be set up: {e}"),
            })?;
        let builder = match self.verify {
            Verify::Peer => builder.with_root_certificates(self.roots()?),
            Verify::None => builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider))),
        };
        let mut config = match &self.client {
            None => builder.with_no_client_auth(),
            Some(client) => {
                let chain = read_certificates(CERT_FILE, &client.cert_file)?;
                let key = read_key(&client.key_file)?;
                builder
                    .with_client_auth_cert(chain, key)
                    .map_err(|e| TlsError::File {
                        parameter: KEY_FILE,
                        path: client.key_file.clone(),
                        problem: format!(
                            "cannot be used with certfile={}: {e}; give the key of that certificate",
                            client.cert_file.display()
                        ),
                    })?
            }
        };
        config.enable_sni = self.server_name != ServerNameChoice::Disable;
        Ok(config)
    }

    /// The CA certificates of `cacertfile`, or the system's.
    fn roots(&self) -> Result<RootCertStore, TlsError> {
        let mut roots = RootCertStore::empty();
        if let Some(path) = &self.ca_file {
            for certificate in read_certificates(CA_FILE, path)? {
                roots.add(certificate).map_err(|e| TlsError::File {
                    parameter: CA_FILE,
                    path: path.clone(),
                    problem: format!("holds a certificate that cannot be a trusted CA: {e}"),
                })?;
            }
            return Ok(roots);
        }
        let loaded = rustls_native_certs::load_native_certs();
        for error in &loaded.errors {
            tracing::warn!("reading the system's root certificates: {error}");
        }
        let (added, _unusable) = roots.add_parsable_certificates(loaded.certs);
        if added == 0 {
            let detail = match loaded.errors.first() {
                Some(error) => error.to_string(),
                None => "none found".to_owned(),
            };
            return Err(TlsError::NoSystemRoots { detail });
        }
        Ok(roots)
    }

    /// What the server's certificate is checked against.
    fn trusted(&self) -> Trusted {
        match &self.ca_file {
            Some(path) => Trusted::File(path.clone()),
            None => Trusted::System,
        }
    }

    /// The name sent in SNI and checked against the certificate.
    fn name_for<'a>(&'a self, host: &'a str) -> &'a str {
        match &self.server_name {
            ServerNameChoice::Name(name) => name,
            ServerNameChoice::Host | ServerNameChoice::Disable => host,
        }
    }

    /// What a failed handshake (or a TLS alert read right after it) means.
    fn explain(&self, host: &str, error: &io::Error) -> TlsError {
        let host = host.to_owned();
        let Some(tls) = error
            .get_ref()
            .and_then(|inner| inner.downcast_ref::<rustls::Error>())
        else {
            let problem = match error.kind() {
                io::ErrorKind::UnexpectedEof
                | io::ErrorKind::ConnectionReset
                | io::ErrorKind::BrokenPipe => format!(
                    "the server closed the connection ({error}); is this port a TLS listener? (RabbitMQ's is usually 5671)"
                ),
                _ => error.to_string(),
            };
            return TlsError::Handshake { host, problem };
        };
        match tls {
            rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer) => {
                TlsError::UnknownCa {
                    host,
                    trusted: self.trusted(),
                }
            }
            rustls::Error::InvalidCertificate(CertificateError::NotValidForNameContext {
                expected,
                presented,
            }) => TlsError::WrongHost {
                host: expected.to_str().into_owned(),
                names: presented.iter().map(|name| plain_name(name)).collect(),
            },
            rustls::Error::InvalidCertificate(CertificateError::NotValidForName) => {
                TlsError::WrongHost {
                    host: self.name_for(&host).to_owned(),
                    names: Vec::new(),
                }
            }
            rustls::Error::InvalidCertificate(_) => TlsError::Certificate {
                host,
                problem: tls.to_string(),
            },
            rustls::Error::AlertReceived(alert) => TlsError::Refused {
                host,
                alert: format!("{alert:?}"),
                hint: self.alert_hint(*alert),
            },
            rustls::Error::InvalidMessage(_) => TlsError::Handshake {
                host,
                problem: format!(
                    "the server did not answer in TLS ({tls}); is this port a TLS listener? (RabbitMQ's is usually 5671; 5672 is plain AMQP)"
                ),
            },
            _ => TlsError::Handshake {
                host,
                problem: tls.to_string(),
            },
        }
    }

    /// What a TLS alert from the server most likely means.
    fn alert_hint(&self, alert: AlertDescription) -> String {
        use AlertDescription as A;
        match (alert, &self.client) {
            (
                A::UnknownCA
                | A::BadCertificate
                | A::CertificateUnknown
                | A::UnsupportedCertificate
                | A::CertificateExpired
                | A::CertificateRevoked
                | A::AccessDenied,
                Some(client),
            ) => format!(
                "the server refused this client's certificate (certfile={}); give one signed by a CA the broker trusts (its ssl_options.cacertfile), valid now and for client authentication",
                client.cert_file.display()
            ),
            (A::CertificateRequired | A::HandshakeFailure, None) => "the server requires a client certificate, or shares no TLS version or cipher suite with this client (TLS 1.2 and 1.3); for the former pass certfile=<client certificate (PEM)>&keyfile=<its key (PEM)>".into(),
            (A::ProtocolVersion | A::InsufficientSecurity | A::HandshakeFailure, _) => {
                "the server shares no TLS version or cipher suite with this client (TLS 1.2 and 1.3); check the broker's ssl_options.versions and ciphers".into()
            }
            _ => "see the broker's log for the reason".into(),
        }
    }

    /// What an I/O error on the TLS stream during the AMQP handshake (the
    /// first reads and writes after [`handshake`]) means, when TLS explains
    /// it: the server's TLS alert, or, with a client certificate, the
    /// connection closed under it.
    ///
    /// With TLS 1.3 the server checks the client's certificate after the
    /// client has finished its side of the handshake, so a refused client
    /// certificate shows up there, not in [`handshake`]: as the server's
    /// alert when it is read first, or as a reset connection when the client
    /// wrote first (the server closed with the client's bytes unread).
    pub(crate) fn explain_io_error(&self, host: &str, error: &io::Error) -> Option<TransportError> {
        let is_tls = error
            .get_ref()
            .is_some_and(|inner| inner.is::<rustls::Error>());
        if is_tls {
            return Some(TransportError::Tls(self.explain(host, error)));
        }
        let closed = matches!(
            error.kind(),
            io::ErrorKind::ConnectionReset
                | io::ErrorKind::UnexpectedEof
                | io::ErrorKind::BrokenPipe
                | io::ErrorKind::ConnectionAborted
        );
        let client = self.client.as_ref().filter(|_| closed)?;
        Some(TransportError::Tls(TlsError::Refused {
            host: host.to_owned(),
            alert: format!("connection closed: {error}"),
            hint: format!(
                "the server closed the connection right after the TLS handshake, most likely refusing this client's certificate (certfile={}); give one signed by a CA the broker trusts (its ssl_options.cacertfile), valid now and for client authentication, and see the broker's log",
                client.cert_file.display()
            ),
        }))
    }
}

/// Connects TLS over `tcp`, checking the server's certificate against the
/// settings' CAs and `host` (or `server_name_indication`).
///
/// `host` is the host as the URI writes it: an IP address stays an IP
/// address (lapin's `AMQPUri` turns one into `localhost`).
pub(crate) async fn handshake(
    settings: &TlsSettings,
    host: &str,
    tcp: TcpStream,
) -> Result<TlsStream<TcpStream>, TransportError> {
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    let config = settings.client_config(host).map_err(TransportError::Tls)?;
    let checked = settings.name_for(host);
    let name = server_name(checked).map_err(|_| {
        TransportError::Tls(TlsError::Parameter {
            parameter: format!("host {checked}"),
            problem: "not a host name or IP address a certificate can be checked against; pass server_name_indication=<the name in the broker's certificate>".into(),
        })
    })?;
    if settings.verify == Verify::None {
        tracing::warn!(
            "amqps://{host} with verify=verify_none: the server's certificate is not checked, so whoever is on the path can read and change the traffic"
        );
    }
    TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
        .map_err(|e| TransportError::Tls(settings.explain(host, &e)))
}

/// A name rustls can check a certificate against.
fn server_name(name: &str) -> Result<ServerName<'static>, rustls_pki_types::InvalidDnsNameError> {
    ServerName::try_from(name.to_owned())
}

/// The certificates of a PEM file, in order (a chain: the client's first).
fn read_certificates(
    parameter: &'static str,
    path: &Path,
) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let file_error = |problem: String| TlsError::File {
        parameter,
        path: path.to_owned(),
        problem,
    };
    let bytes = std::fs::read(path).map_err(|e| file_error(format!("cannot be read: {e}")))?;
    let certificates = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| file_error(format!("is not a valid PEM file: {e}")))?;
    if certificates.is_empty() {
        return Err(file_error(
            "holds no certificate: a PEM file with -----BEGIN CERTIFICATE----- sections is expected".into(),
        ));
    }
    Ok(certificates)
}

/// The private key of a PEM file.
fn read_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    let file_error = |problem: String| TlsError::File {
        parameter: KEY_FILE,
        path: path.to_owned(),
        problem,
    };
    let bytes = std::fs::read(path).map_err(|e| file_error(format!("cannot be read: {e}")))?;
    PrivateKeyDer::from_pem_slice(&bytes).map_err(|e| match e {
        pem::Error::NoItemsFound if contains(&bytes, b"ENCRYPTED PRIVATE KEY") => file_error(format!(
            "holds an encrypted private key, which this client cannot read; write it unencrypted (openssl pkey -in {0} -out {0}.plain) and keep that file private",
            path.display()
        )),
        pem::Error::NoItemsFound => file_error(
            "holds no private key: a PEM file with a PRIVATE KEY, RSA PRIVATE KEY or EC PRIVATE KEY section is expected".into(),
        ),
        other => file_error(format!("is not a valid PEM file: {other}")),
    })
}

/// A name of a certificate as rustls presents it (`DnsName("localhost")`,
/// `IpAddress(127.0.0.1)`), as a person writes it.
fn plain_name(presented: &str) -> String {
    presented
        .strip_prefix("DnsName(\"")
        .and_then(|rest| rest.strip_suffix("\")"))
        .or_else(|| {
            presented
                .strip_prefix("IpAddress(")
                .and_then(|rest| rest.strip_suffix(')'))
        })
        .unwrap_or(presented)
        .to_owned()
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// `verify=verify_none`: any certificate is accepted; the handshake's
/// signatures are still checked, so the session is at least with the holder
/// of the certificate's key.
#[derive(Debug)]
struct AnyCertificate(Arc<CryptoProvider>);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        certificate: &CertificateDer<'_>,
        signature: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            certificate,
            signature,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        certificate: &CertificateDer<'_>,
        signature: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            certificate,
            signature,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests;
