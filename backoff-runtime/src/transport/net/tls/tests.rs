//! `split_uri` and the certificate files without a broker; the handshake
//! against the TLS node of `scripts/tls.sh up` (127.0.0.1:5671 and
//! 127.0.0.2:5671, certificates in `RABBIT_BACKOFF_TLS_DIR`, by default
//! /tmp/rabbit-backoff-tls).

use std::path::PathBuf;

use lapin::uri::AMQPUri;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::*;

fn settings(uri: &str) -> TlsSettings {
    match split_uri(uri) {
        Ok((_, Some(settings))) => settings,
        other => panic!("{uri}: expected TLS settings, got {other:?}"),
    }
}

fn refused(uri: &str) -> String {
    match split_uri(uri) {
        Err(e) => e.to_string(),
        Ok(split) => panic!("{uri} was accepted: {split:?}"),
    }
}

#[test]
fn tls_parameters_are_removed_and_the_others_kept_as_written() {
    let (rest, tls) = split_uri(
        "amqps://app:s%3Dcret@rabbit.internal:5671/orders%2Fprod?heartbeat=5&cacertfile=%2Fetc%2Frabbit%2Fca.pem&frame_max=8192&verify=verify_peer&certfile=/etc/rabbit/client.pem&keyfile=/etc/rabbit/client.key&server_name_indication=rabbit.example.com&channel_max=64",
    )
    .expect("split");
    assert_eq!(
        rest,
        "amqps://app:s%3Dcret@rabbit.internal:5671/orders%2Fprod?heartbeat=5&frame_max=8192&channel_max=64"
    );
    let tls = tls.expect("amqps:// has TLS settings");
    assert_eq!(tls.ca_file, Some(PathBuf::from("/etc/rabbit/ca.pem")));
    assert_eq!(
        tls.client,
        Some(ClientCertificate {
            cert_file: PathBuf::from("/etc/rabbit/client.pem"),
            key_file: PathBuf::from("/etc/rabbit/client.key"),
        })
    );
    assert_eq!(tls.verify, Verify::Peer);
    assert_eq!(
        tls.server_name,
        ServerNameChoice::Name("rabbit.example.com".into())
    );

    // What is left is what lapin reads, its own parameters intact.
    let parsed: AMQPUri = rest.parse().expect("lapin parses the rest");
    assert_eq!(parsed.query.heartbeat, Some(5));
    assert_eq!(parsed.query.frame_max, Some(8192));
    assert_eq!(parsed.query.channel_max, Some(64));
    assert_eq!(parsed.vhost, "orders/prod");
    assert_eq!(parsed.authority.userinfo.password, "s=cret");
}

#[test]
fn paths_are_percent_decoded_like_a_form() {
    let tls = settings(
        "amqps://h/?cacertfile=%2Fsrv%2Frabbit%20certs%2Fca%2Bbundle.pem&certfile=/srv/my+client.pem&keyfile=%2Fsrv%2F%C3%A9t%C3%A9.key",
    );
    assert_eq!(
        tls.ca_file,
        Some(PathBuf::from("/srv/rabbit certs/ca+bundle.pem"))
    );
    let client = tls.client.expect("client certificate");
    assert_eq!(client.cert_file, PathBuf::from("/srv/my client.pem"));
    assert_eq!(client.key_file, PathBuf::from("/srv/été.key"));
    assert!(refused("amqps://h/?cacertfile=%FF%FE").contains("not percent-encoded UTF-8"));
}

#[test]
fn amqps_without_parameters_verifies_against_the_system_roots() {
    let (rest, tls) = split_uri("AMQPS://guest:guest@rabbit:5671/%2f").expect("split");
    assert_eq!(rest, "AMQPS://guest:guest@rabbit:5671/%2f");
    assert_eq!(tls, Some(TlsSettings::default()));
    assert_eq!(TlsSettings::default().trusted(), Trusted::System);

    // Only TLS parameters: no `?` left behind.
    let (rest, _) = split_uri("amqps://rabbit/%2f?verify=verify_none").expect("split");
    assert_eq!(rest, "amqps://rabbit/%2f");
}

#[test]
fn amqp_uris_pass_through_and_refuse_tls_parameters() {
    let plain = "amqp://guest:guest@127.0.0.1:5672/%2f?heartbeat=10";
    assert_eq!(split_uri(plain).expect("split"), (plain.to_owned(), None));
    let error = refused("amqp://guest:guest@127.0.0.1:5672/%2f?cacertfile=/tmp/ca.pem");
    assert_eq!(
        error,
        "cacertfile=/tmp/ca.pem: a TLS parameter on an amqp:// URI, which is not encrypted; use amqps:// (RabbitMQ's TLS port is usually 5671), or remove it"
    );
}

#[test]
fn invalid_parameters_say_what_is_expected() {
    assert_eq!(
        refused("amqps://h/?verify=maybe"),
        "verify=maybe: expected verify_peer (check the server's certificate, the default) or verify_none (do not)"
    );
    assert!(refused("amqps://h/?cacertfile=/a&cacertfile=/b").contains("given twice"));
    assert!(refused("amqps://h/?cacertfile=").contains("cacertfile needs a value"));
    assert!(refused("amqps://h/?certfile=/c.pem").contains("add keyfile="));
    assert!(refused("amqps://h/?keyfile=/c.key").contains("add certfile="));
    assert!(
        refused("amqps://h/?server_name_indication=not%20a%20name")
            .contains("expected a host name, an IP address, or disable")
    );
    assert_eq!(
        settings("amqps://h/?server_name_indication=disable").server_name,
        ServerNameChoice::Disable
    );
    assert_eq!(
        settings("amqps://h/?verify=verify_none").verify,
        Verify::None
    );
}

/// A file in a fresh temporary directory.
fn temp_file(name: &str, contents: &[u8]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rbt-tls-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join(name);
    std::fs::write(&path, contents).expect("write temp file");
    path
}

fn config_error(settings: &TlsSettings) -> String {
    match settings.client_config("rabbit") {
        Err(e) => e.to_string(),
        Ok(_) => panic!("{settings:?} was accepted"),
    }
}

#[test]
fn unreadable_or_invalid_files_are_named() {
    let missing = TlsSettings {
        ca_file: Some(PathBuf::from("/nonexistent/ca.pem")),
        ..TlsSettings::default()
    };
    let error = config_error(&missing);
    assert!(
        error.starts_with("cacertfile=/nonexistent/ca.pem: cannot be read: "),
        "{error}"
    );

    let not_pem = temp_file("ca.pem", b"this is not a certificate\n");
    let error = config_error(&TlsSettings {
        ca_file: Some(not_pem.clone()),
        ..TlsSettings::default()
    });
    assert_eq!(
        error,
        format!(
            "cacertfile={}: holds no certificate: a PEM file with -----BEGIN CERTIFICATE----- sections is expected",
            not_pem.display()
        )
    );

    let broken = temp_file(
        "ca.pem",
        b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END PRIVATE KEY-----\n",
    );
    let error = config_error(&TlsSettings {
        ca_file: Some(broken.clone()),
        ..TlsSettings::default()
    });
    assert!(
        error.starts_with(&format!(
            "cacertfile={}: is not a valid PEM file",
            broken.display()
        )),
        "{error}"
    );

    let bad_ca = temp_file(
        "ca.pem",
        b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
    );
    let error = config_error(&TlsSettings {
        ca_file: Some(bad_ca.clone()),
        ..TlsSettings::default()
    });
    assert!(
        error.starts_with(&format!(
            "cacertfile={}: holds a certificate that cannot be a trusted CA",
            bad_ca.display()
        )),
        "{error}"
    );
}

#[test]
fn a_client_key_that_cannot_be_used_is_named() {
    let cert = temp_file(
        "client.pem",
        b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
    );
    let client = |key: PathBuf| TlsSettings {
        client: Some(ClientCertificate {
            cert_file: cert.clone(),
            key_file: key,
        }),
        verify: Verify::None,
        ..TlsSettings::default()
    };

    let no_key = temp_file("client.key", b"nothing here\n");
    assert_eq!(
        config_error(&client(no_key.clone())),
        format!(
            "keyfile={}: holds no private key: a PEM file with a PRIVATE KEY, RSA PRIVATE KEY or EC PRIVATE KEY section is expected",
            no_key.display()
        )
    );

    let encrypted = temp_file(
        "client.key",
        b"-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED PRIVATE KEY-----\n",
    );
    let error = config_error(&client(encrypted.clone()));
    assert!(
        error.starts_with(&format!(
            "keyfile={}: holds an encrypted private key, which this client cannot read; write it unencrypted (openssl pkey",
            encrypted.display()
        )),
        "{error}"
    );

    let missing = client(PathBuf::from("/nonexistent/client.key"));
    assert!(
        config_error(&missing).starts_with("keyfile=/nonexistent/client.key: cannot be read"),
        "{}",
        config_error(&missing)
    );
}

#[test]
fn a_connection_closed_after_the_handshake_is_explained_only_with_a_client_certificate() {
    let reset = std::io::Error::from(std::io::ErrorKind::ConnectionReset);
    assert!(
        TlsSettings::default()
            .explain_io_error("rabbit", &reset)
            .is_none(),
        "without a client certificate a reset says nothing about TLS"
    );
    let with_client = TlsSettings {
        client: Some(ClientCertificate {
            cert_file: PathBuf::from("/etc/rabbit/client.pem"),
            key_file: PathBuf::from("/etc/rabbit/client.key"),
        }),
        ..TlsSettings::default()
    };
    let explained = with_client
        .explain_io_error("rabbit", &reset)
        .expect("explained")
        .to_string();
    assert!(
        explained.starts_with("the server at rabbit ended the TLS handshake (connection closed: ")
            && explained.contains(
                "most likely refusing this client's certificate (certfile=/etc/rabbit/client.pem)"
            ),
        "{explained}"
    );
    let timeout = std::io::Error::from(std::io::ErrorKind::TimedOut);
    assert!(with_client.explain_io_error("rabbit", &timeout).is_none());
}

#[test]
fn names_of_a_certificate_read_as_written() {
    assert_eq!(plain_name("DnsName(\"localhost\")"), "localhost");
    assert_eq!(plain_name("IpAddress(127.0.0.1)"), "127.0.0.1");
    assert_eq!(plain_name("DirectoryName"), "DirectoryName");
}

// ---- against the TLS node of scripts/tls.sh ----

use rabbit_backoff_test_support::tls::cert;

async fn tcp(address: &str) -> TcpStream {
    TcpStream::connect(address).await.unwrap_or_else(|e| {
        panic!("nothing answers on {address} ({e}); start the TLS node with scripts/tls.sh up")
    })
}

fn trusting(ca: &str) -> TlsSettings {
    TlsSettings {
        ca_file: Some(cert(ca)),
        ..TlsSettings::default()
    }
}

/// Sends the AMQP 0-9-1 protocol header and reads the broker's first frame:
/// `connection.start` (class 10, method 10) on channel 0.
async fn amqp_greeting(stream: &mut TlsStream<TcpStream>) -> std::io::Result<(u16, u16)> {
    stream.write_all(b"AMQP\x00\x00\x09\x01").await?;
    stream.flush().await?;
    let mut header = [0u8; 7];
    stream.read_exact(&mut header).await?;
    assert_eq!(header[0], 1, "a method frame");
    assert_eq!(u16::from_be_bytes([header[1], header[2]]), 0, "channel 0");
    let size = u32::from_be_bytes([header[3], header[4], header[5], header[6]]) as usize;
    let mut payload = vec![0u8; size + 1];
    stream.read_exact(&mut payload).await?;
    assert_eq!(payload[size], 0xCE, "the frame-end octet");
    Ok((
        u16::from_be_bytes([payload[0], payload[1]]),
        u16::from_be_bytes([payload[2], payload[3]]),
    ))
}

async fn handshake_error(settings: &TlsSettings, host: &str, address: &str) -> String {
    match handshake(settings, host, tcp(address).await).await {
        Err(e) => e.to_string(),
        Ok(_) => panic!("the handshake with {address} as {host} succeeded"),
    }
}

#[tokio::test]
async fn the_broker_answers_in_amqp_over_the_handshake() {
    for host in ["127.0.0.1", "localhost"] {
        let mut stream = handshake(&trusting("ca.pem"), host, tcp("127.0.0.1:5671").await)
            .await
            .unwrap_or_else(|e| panic!("handshake as {host}: {e}"));
        let (_, connection) = stream.get_ref();
        assert!(connection.protocol_version().is_some());
        assert_eq!(
            amqp_greeting(&mut stream).await.expect("connection.start"),
            (10, 10),
            "connection.start"
        );
    }
}

#[tokio::test]
async fn a_server_certificate_of_an_unknown_ca_is_refused() {
    let error = handshake_error(&trusting("other-ca.pem"), "127.0.0.1", "127.0.0.1:5671").await;
    assert_eq!(
        error,
        format!(
            "the server's certificate is not signed by a CA this client trusts (it trusts only cacertfile={}); pass cacertfile=<the CA certificate (PEM) that signed the broker's certificate>",
            cert("other-ca.pem").display()
        )
    );

    // The default: the system's roots, which do not hold the test CA.
    let error = handshake_error(&TlsSettings::default(), "localhost", "127.0.0.1:5671").await;
    assert!(
        error.starts_with(
            "the server's certificate is not signed by a CA this client trusts (it trusts the system's root certificates); pass cacertfile="
        ),
        "{error}"
    );
}

#[tokio::test]
async fn a_host_the_certificate_does_not_name_is_refused() {
    // The same listener on another loopback address, which the certificate
    // (localhost, 127.0.0.1) does not hold.
    let error = handshake_error(&trusting("ca.pem"), "127.0.0.2", "127.0.0.2:5671").await;
    assert_eq!(
        error,
        "the server's certificate is not valid for 127.0.0.2: it is for localhost, 127.0.0.1; connect with a name the certificate holds, or pass server_name_indication=<a name it holds>"
    );

    // server_name_indication names what is checked instead of the host …
    let mut renamed = trusting("ca.pem");
    renamed.server_name = ServerNameChoice::Name("localhost".into());
    let mut stream = handshake(&renamed, "127.0.0.2", tcp("127.0.0.2:5671").await)
        .await
        .expect("checked against localhost");
    assert_eq!(
        amqp_greeting(&mut stream).await.expect("greeting"),
        (10, 10)
    );
    renamed.server_name = ServerNameChoice::Name("rabbit.example.com".into());
    let error = handshake_error(&renamed, "127.0.0.1", "127.0.0.1:5671").await;
    assert!(
        error.starts_with(
            "the server's certificate is not valid for rabbit.example.com: it is for localhost, 127.0.0.1;"
        ),
        "{error}"
    );

    // … and `disable` sends none, still checking the host.
    let mut no_sni = trusting("ca.pem");
    no_sni.server_name = ServerNameChoice::Disable;
    let mut stream = handshake(&no_sni, "localhost", tcp("127.0.0.1:5671").await)
        .await
        .expect("no SNI");
    assert_eq!(
        amqp_greeting(&mut stream).await.expect("greeting"),
        (10, 10)
    );
    let error = handshake_error(&no_sni, "127.0.0.2", "127.0.0.2:5671").await;
    assert!(
        error.starts_with("the server's certificate is not valid for 127.0.0.2"),
        "{error}"
    );
}

#[tokio::test]
async fn verify_none_accepts_any_certificate() {
    let settings = TlsSettings {
        verify: Verify::None,
        ..TlsSettings::default()
    };
    let mut stream = handshake(&settings, "127.0.0.2", tcp("127.0.0.2:5671").await)
        .await
        .expect("no verification");
    assert_eq!(
        amqp_greeting(&mut stream).await.expect("greeting"),
        (10, 10)
    );
}

#[tokio::test]
async fn a_plain_amqp_port_is_named_as_not_tls() {
    let error = handshake_error(&trusting("ca.pem"), "127.0.0.1", "127.0.0.1:5676").await;
    assert!(
        error.starts_with("the TLS handshake with 127.0.0.1 failed: ")
            && error.contains("is this port a TLS listener? (RabbitMQ's is usually 5671"),
        "{error}"
    );
}

#[tokio::test]
async fn client_certificates_are_presented() {
    let with = |cert_file: &str, key_file: &str| TlsSettings {
        client: Some(ClientCertificate {
            cert_file: cert(cert_file),
            key_file: cert(key_file),
        }),
        ..trusting("ca.pem")
    };

    // Signed by the broker's CA: accepted.
    let mut stream = handshake(
        &with("client.pem", "client.key"),
        "localhost",
        tcp("127.0.0.1:5671").await,
    )
    .await
    .expect("handshake with a client certificate");
    assert_eq!(
        amqp_greeting(&mut stream).await.expect("greeting"),
        (10, 10)
    );

    // Signed by another CA: the broker refuses it. With TLS 1.3 it says so
    // after the client's side of the handshake: its alert is the first thing
    // to read (written to, it may reset the connection before the alert is
    // read).
    let settings = with("other-client.pem", "other-client.key");
    let refused = match handshake(&settings, "localhost", tcp("127.0.0.1:5671").await).await {
        Err(e) => e,
        Ok(mut stream) => {
            let mut byte = [0u8; 1];
            let read =
                tokio::time::timeout(std::time::Duration::from_secs(10), stream.read(&mut byte))
                    .await
                    .expect("the broker answers a client certificate of another CA");
            let error = read.expect_err("the broker refuses a client certificate of another CA");
            settings
                .explain_io_error("localhost", &error)
                .unwrap_or_else(|| panic!("not a TLS error: {error}"))
        }
    };
    assert_eq!(
        refused.to_string(),
        format!(
            "the server at localhost ended the TLS handshake (UnknownCA): the server refused this client's certificate (certfile={}); give one signed by a CA the broker trusts (its ssl_options.cacertfile), valid now and for client authentication",
            cert("other-client.pem").display()
        )
    );

    // A key that is not the certificate's.
    let mismatched = with("client.pem", "other-client.key");
    let error = match mismatched.client_config("localhost") {
        Err(e) => e.to_string(),
        Ok(_) => panic!("a key of another certificate was accepted"),
    };
    assert!(
        error.starts_with(&format!(
            "keyfile={}: cannot be used with certfile={}",
            cert("other-client.key").display(),
            cert("client.pem").display()
        )),
        "{error}"
    );
}
