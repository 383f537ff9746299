//! The console's guard, asked over plain HTTP: a write needs the token,
//! the console's own origin and JSON; a read-only console refuses every
//! write; reads of the API from other sites are refused, and equal reads
//! share one pass.

mod common;

use rabbit_backoff_test_support::dead_letter_fixture::{DeadLetter, Fixture};
use serde_json::Value;

use common::*;

#[tokio::test]
async fn a_write_needs_the_token_the_consoles_own_origin_and_json() {
    let f = Fixture::new("console.guard", &letters()[..1]).await;
    let console = Console::start();
    let origin = console.origin();
    let bearer = format!("Bearer {TOKEN}");
    let queue = f.queue().to_owned();
    let refused = |headers: &[(&str, &str)]| post(&console, "replay", &queue, headers);

    let (status, body) = refused(&[("Origin", &origin), ("Content-Type", "application/json")]);
    assert_eq!(status, 401, "no token: {body}");
    assert!(body["error"].as_str().unwrap().contains("token"), "{body}");
    let (status, _) = refused(&[
        ("Origin", &origin),
        ("Content-Type", "application/json"),
        ("Authorization", "Bearer not-the-token-at-all"),
    ]);
    assert_eq!(status, 401, "a wrong token");
    let (status, body) = refused(&[
        ("Origin", "http://evil.example"),
        ("Content-Type", "application/json"),
        ("Authorization", &bearer),
    ]);
    assert_eq!(status, 403, "a foreign origin: {body}");
    let (status, _) = refused(&[
        ("Sec-Fetch-Site", "cross-site"),
        ("Content-Type", "application/json"),
        ("Authorization", &bearer),
    ]);
    assert_eq!(status, 403, "no origin, from another site");
    let (status, _) = refused(&[
        ("Origin", &origin),
        ("Content-Type", "text/plain"),
        ("Authorization", &bearer),
    ]);
    assert_eq!(status, 415, "not JSON, as a cross-site form would send");
    assert!(
        status_with_host(&console, "evil.example").contains(" 421 "),
        "a rebound name is refused"
    );
    assert_eq!(f.depths().await, (0, 1), "a refused write changed nothing");
    let (status, body) = post(
        &console,
        "replay",
        "rbt.console.no-such-queue",
        &[
            ("Origin", &origin),
            ("Content-Type", "application/json"),
            ("Authorization", &bearer),
        ],
    );
    assert_eq!(status, 404, "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("no consumer with the work queue `rbt.console.no-such-queue`"),
        "{body}"
    );

    // The same request with everything in place goes through.
    let (status, body) = post(
        &console,
        "replay",
        &queue,
        &[
            ("Origin", &origin),
            ("Content-Type", "application/json"),
            ("Authorization", &bearer),
        ],
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["matched"][0]["message_id"], "db-1");
    assert_eq!(f.depths().await, (1, 0));

    // Every response carries the browser's protections, and the page has no
    // inline script for the policy to allow.
    let mut page = agent().get(&console.url).call().unwrap();
    let header = |name: &str| {
        page.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let policy = header("content-security-policy").unwrap_or_default();
    assert!(
        policy.contains("default-src 'self'") && policy.contains("script-src 'self'"),
        "{policy}"
    );
    assert!(!policy.contains("unsafe-inline"), "{policy}");
    assert_eq!(header("x-content-type-options").as_deref(), Some("nosniff"));
    assert_eq!(header("x-frame-options").as_deref(), Some("DENY"));
    let html = page.body_mut().read_to_string().unwrap();
    let scripts: Vec<&str> = html
        .split("<script")
        .skip(1)
        .map(|tag| tag.split('>').next().unwrap_or_default())
        .collect();
    assert!(!scripts.is_empty(), "the page loads its script: {html}");
    for tag in scripts {
        assert!(tag.contains(" src="), "an inline script: <script{tag}>");
    }
}

#[tokio::test]
async fn a_read_only_console_refuses_writes_even_with_the_token() {
    let f = Fixture::new("console.read-only", &letters()[..1]).await;
    let console = Console::start_with(|console| console.read_only(true));
    let origin = console.origin();
    let bearer = format!("Bearer {TOKEN}");
    let headers = [
        ("Origin", origin.as_str()),
        ("Content-Type", "application/json"),
        ("Authorization", bearer.as_str()),
    ];
    for action in ["replay", "discard", "purge", "rebuild-index"] {
        let (status, body) = post(&console, action, f.queue(), &headers);
        assert_eq!(status, 403, "{action}: {body}");
        assert!(
            body["error"].as_str().unwrap().contains("read-only"),
            "{body}"
        );
    }
    assert_eq!(
        f.depths().await,
        (0, 1),
        "a read-only console changed the queues"
    );
    let config: Value = agent()
        .get(format!("{}api/config", console.url))
        .call()
        .unwrap()
        .body_mut()
        .read_json()
        .unwrap();
    assert_eq!(config["read_only"], true);
    // Reading still works: the message is listed.
    let report: Value = agent()
        .get(format!(
            "{}api/consumers/{}/messages?message_id=db-1",
            console.url,
            f.queue()
        ))
        .call()
        .unwrap()
        .body_mut()
        .read_json()
        .unwrap();
    assert_eq!(report["matched"][0]["error"], "database unavailable");
}

#[tokio::test]
async fn api_reads_from_other_sites_are_refused_and_equal_reads_share_one_pass() {
    let many: Vec<DeadLetter> = (0..600)
        .map(|i| letter("many", &format!("order {i} not found"), "permanent", "{}"))
        .collect();
    let f = Fixture::new("console.flight", &many).await;
    let console = Console::start();
    let groups = format!("api/consumers/{}/groups", f.queue());

    // An <img> or fetch from another site is refused before any pass runs.
    for headers in [
        &[
            ("Origin", "http://evil.example"),
            ("Sec-Fetch-Site", "cross-site"),
        ][..],
        &[("Sec-Fetch-Site", "cross-site")],
        &[("Sec-Fetch-Site", "same-site")],
        &[("Origin", "http://evil.example")],
    ] {
        let (status, body) = get(&console, &groups, headers);
        assert_eq!(status, 403, "{headers:?}: {body}");
        assert!(
            body["error"]
                .as_str()
                .unwrap()
                .contains("console's own page"),
            "{body}"
        );
    }
    let (status, body) = get(&console, &groups, &[("Sec-Fetch-Site", "same-origin")]);
    assert_eq!(status, 200, "{body}");
    assert_eq!(body[0]["count"], 600);
    // Read from the dead-letter index, not with a pass, over the stream
    // protocol at the test broker's stream port (RABBITMQ_STREAM_PORT, read
    // by --stream-port); over AMQP with --stream-port 0.
    assert_eq!(body[0]["source"], "index", "{body}");
    assert_eq!(body[0]["index_protocol"], "stream", "{body}");
    let over_amqp = Console::start_with(|console| console.stream_port(0));
    let (status, amqp) = get(&over_amqp, &groups, &[]);
    assert_eq!(status, 200, "{amqp}");
    assert_eq!(amqp[0]["index_protocol"], "amqp", "{amqp}");
    assert_eq!(amqp[0]["count"], 600);
    drop(over_amqp);
    let (status, _) = get(&console, "", &[("Sec-Fetch-Site", "cross-site")]);
    assert_eq!(status, 200, "the page itself may be opened from a link");

    // Six equal reads at once share one pass; a later one makes its own.
    let view = format!("api/consumers/{}/dead-letters?limit=5", f.queue());
    let start = std::sync::Arc::new(std::sync::Barrier::new(6));
    let passes: Vec<Value> = std::thread::scope(|scope| {
        let threads: Vec<_> = (0..6)
            .map(|_| {
                let (start, view, console) = (start.clone(), &view, &console);
                scope.spawn(move || {
                    start.wait();
                    let (status, body) = get(console, view, &[]);
                    assert_eq!(status, 200, "{body}");
                    assert_eq!(body["total"], 600);
                    body["pass"].clone()
                })
            })
            .collect();
        threads.into_iter().map(|t| t.join().unwrap()).collect()
    });
    assert!(passes.iter().all(|p| *p == passes[0]), "{passes:?}");
    let (_, later) = get(&console, &view, &[]);
    assert!(
        later["pass"].as_u64() > passes[0].as_u64(),
        "{later} after {passes:?}"
    );
    assert_eq!(f.depths().await, (0, 600), "reads move nothing");
}
