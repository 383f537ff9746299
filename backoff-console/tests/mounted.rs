//! The console mounted by a service: its router nested under `/ops/console`
//! in a small axum application beside the service's own route, against the
//! real broker, its page in a real headless Chromium.
//!
//! Needs RabbitMQ with its management API (scripts/ensure-broker.sh) and
//! /usr/bin/chromium with /usr/bin/chromedriver (scripts/browser.sh).

use axum::Router;
use axum::routing::get;
use rabbit_backoff::console::{AuditLog, Console, Tokens};
use rabbit_backoff_test_support::broker::{management_url, stream_port, url};
use rabbit_backoff_test_support::browser::Browser;
use rabbit_backoff_test_support::dead_letter_fixture::{DeadLetter, Fixture};
use rabbit_backoff_test_support::http;
use serde_json::Value;

const TOKEN: &str = "mounted-console-token-0123456789";

/// A dead letter of the database group.
fn letter(id: &'static str, error: &str) -> DeadLetter {
    DeadLetter {
        id,
        error: error.to_owned(),
        reason: "exhausted",
        retry_count: 3,
        body: format!("{{\"id\":\"{id}\"}}"),
        headers: Vec::new(),
        failed_at: "2026-12-02T10:40:07.000Z".to_owned(),
    }
}

/// A service: its own `/` and the console under `/ops/console`, on a free
/// port; its address and the audit log's path.
async fn service() -> (String, std::path::PathBuf) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let host = listener.local_addr().unwrap().to_string();
    let audit = std::env::temp_dir().join(format!(
        "rbt-mounted-audit-{}.jsonl",
        &uuid::Uuid::new_v4().simple().to_string()[..10]
    ));
    let console = Console::builder(url())
        .management_url(management_url())
        .stream_port(stream_port())
        .tokens(Tokens::parse(&format!("alice:{TOKEN}")).unwrap())
        .allowed_host(host.clone())
        .audit_log(AuditLog::open(audit.clone()).unwrap())
        .build()
        .expect("a console");
    let app = Router::new()
        .route("/", get(|| async { "the service itself" }))
        .nest("/ops/console", console.router());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (host, audit)
}

/// The status line, headers and body of a GET of `path` from `host`.
fn get_raw(host: &str, path: &str, headers: &str) -> (String, String) {
    let response = http::get(host, path, host, headers);
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    (head.to_ascii_lowercase(), body.to_owned())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_console_mounted_under_a_prefix_serves_its_page_api_and_guard_there() {
    let (host, audit) = service().await;

    // The service's own route stays its own, without the console's headers.
    let (head, body) = get_raw(&host, "/", "");
    assert!(head.starts_with("http/1.1 200"), "{head}");
    assert_eq!(body, "the service itself");
    assert!(!head.contains("content-security-policy"), "{head}");

    // At the prefix (nested, it has no final slash), the page names its
    // files under it.
    let (head, page) = get_raw(&host, "/ops/console", "");
    assert!(head.starts_with("http/1.1 200"), "{head}");
    assert!(
        head.contains("content-security-policy: default-src 'self'"),
        "{head}"
    );
    assert!(
        page.contains("<script type=\"module\" src=\"console/console.js\">"),
        "{page}"
    );
    assert!(page.contains("href=\"console/console.css\""), "{page}");
    assert!(
        !page.contains("\"/"),
        "an absolute address in the page: {page}"
    );
    for file in ["console.js", "console.css"] {
        let (head, _) = get_raw(&host, &format!("/ops/console/{file}"), "");
        assert!(head.starts_with("http/1.1 200"), "{file}: {head}");
    }

    // The API answers under the prefix, and the guard stands in front of it.
    let (head, config) = get_raw(&host, "/ops/console/api/config", "");
    assert!(head.starts_with("http/1.1 200"), "{head}");
    let config: Value = serde_json::from_str(&config).unwrap();
    assert_eq!(config["read_only"], false);
    assert_eq!(config["audit_log"], audit.display().to_string());
    let (head, refusal) = get_raw(
        &host,
        "/ops/console/api/config",
        "Sec-Fetch-Site: cross-site\r\n",
    );
    assert!(head.starts_with("http/1.1 403"), "{head}");
    assert!(
        refusal.contains("does not come from the console's own page"),
        "{refusal}"
    );
    let response = http::get(&host, "/ops/console/api/config", "evil.example", "");
    assert!(
        response.starts_with("HTTP/1.1 421"),
        "a rebound name: {response}"
    );
    let _ = std::fs::remove_file(audit);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_mounted_page_lists_dead_letters_and_replays_one_with_the_token() {
    let f = Fixture::new(
        "console-crate.mounted",
        &[
            letter("mnt-1", "database unavailable"),
            letter("mnt-2", "database unavailable"),
        ],
    )
    .await;
    let queue = f.queue().to_owned();
    let (host, audit) = service().await;
    let browser = Browser::start().await;
    let b = &browser;

    // Opened at the prefix, with the token in the fragment.
    b.client
        .goto(&format!("http://{host}/ops/console#token={TOKEN}"))
        .await
        .expect("open the console");
    b.until(
        "the page under the prefix, the fragment's token taken",
        "return location.pathname === '/ops/console' && location.hash === '' \
         && document.getElementById('token-state').textContent === 'token set';",
    )
    .await;

    // The consumer, found through the API under the prefix, and its dead letters.
    b.click(&format!(
        "#consumers tr[data-queue=\"{queue}\"] button.open"
    ))
    .await;
    let listed = b
        .until(
            "the two dead letters",
            "const ids = [...document.querySelectorAll('#messages tbody tr')].map(r => r.dataset.messageId);
             return ids.length === 2 ? ids : null;",
        )
        .await;
    assert_eq!(listed, serde_json::json!(["mnt-1", "mnt-2"]));

    // One of them replayed through the prefix, with the token.
    b.show_message("mnt-1").await;
    b.click("#message-replay").await;
    let notice = b
        .confirm_replay(
            "Replay message mnt-1",
            &queue,
            "Replayed 1 message(s); 1 left",
        )
        .await;
    assert!(notice.as_str().unwrap().contains("(by alice)"), "{notice}");
    assert_eq!(
        f.depths().await,
        (1, 1),
        "one message back in the work queue"
    );
    let who = b
        .until(
            "the replay in the audit table",
            "const r = document.querySelector('#audit tbody tr.entry'); \
             return r && r.querySelector('.action').textContent === 'replay' ? r.querySelector('.who').textContent : null;",
        )
        .await;
    assert_eq!(who, "alice");
    let recorded = std::fs::read_to_string(&audit).unwrap();
    assert!(
        recorded.contains("\"who\":\"alice\"") && recorded.contains("\"message_id\":\"mnt-1\""),
        "{recorded}"
    );
    browser.close().await;
    let _ = std::fs::remove_file(audit);
}
