//! The web console (`rabbit-backoff console`) against the real broker: its
//! page in a real headless Chromium driven through chromedriver, its guard
//! with a plain HTTP client.
//!
//! Needs RabbitMQ with its management API (scripts/ensure-broker.sh) and
//! /usr/bin/chromium with /usr/bin/chromedriver (scripts/browser.sh); both
//! are installed and started by scripts/test.sh.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use lapin::options::{
    BasicPublishOptions, ExchangeDeleteOptions, QueueDeclareOptions, QueueDeleteOptions,
};
use lapin::types::{AMQPValue, FieldTable};
use lapin::{BasicProperties, Connection, ConnectionProperties};
use rabbit_backoff::{ConsumerSpec, Topology};
use serde_json::{Value, json};

const TOKEN: &str = "console-test-token-0123456789";
const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
/// Queue depths reach the page through the management API, whose statistics
/// lag by up to 5 s.
const PATIENCE: Duration = Duration::from_secs(30);

fn url() -> String {
    std::env::var("AMQP_URL").unwrap_or_else(|_| "amqp://guest:guest@127.0.0.1:5672/%2f".to_owned())
}

fn unique(name: &str) -> String {
    format!(
        "rbt.console.{name}.{}",
        &uuid::Uuid::new_v4().simple().to_string()[..10]
    )
}

async fn connect() -> Connection {
    let url = url();
    Connection::connect(&url, ConnectionProperties::default())
        .await
        .unwrap_or_else(|e| {
            panic!("no RabbitMQ at {url} ({e}); run scripts/test.sh, which starts one")
        })
}

/// A dead letter as the framework writes it.
struct DeadLetter {
    id: &'static str,
    error: &'static str,
    reason: &'static str,
    retry_count: i64,
    body: &'static str,
}

/// A consumer's whole topology, declared as the framework declares it, with
/// dead letters published straight into its DLQ; deleted when dropped.
struct Fixture {
    spec: ConsumerSpec,
}

impl Fixture {
    async fn new(name: &str, dead_letters: &[DeadLetter]) -> Fixture {
        let spec = ConsumerSpec::new(unique(name), "1s,2s".parse().unwrap());
        let connection = rabbit_backoff::connect(&url())
            .await
            .unwrap_or_else(|e| panic!("no RabbitMQ at {} ({e}); run scripts/test.sh", url()));
        rabbit_backoff::declare_topology(&*connection, &Topology::of(&spec))
            .await
            .expect("declare the topology");
        connection.close().await;

        let connection = connect().await;
        let channel = connection.create_channel().await.unwrap();
        channel.confirm_select(Default::default()).await.unwrap();
        let text = |s: &str| AMQPValue::LongString(s.as_bytes().into());
        for letter in dead_letters {
            let mut headers = FieldTable::default();
            headers.insert("x-error".into(), text(letter.error));
            headers.insert("x-failed-at".into(), text("2026-12-02T10:40:07.121Z"));
            headers.insert("x-dead-letter-reason".into(), text(letter.reason));
            headers.insert("x-original-queue".into(), text(&spec.queue));
            headers.insert(
                "x-retry-count".into(),
                AMQPValue::LongLongInt(letter.retry_count),
            );
            channel
                .basic_publish(
                    "".into(),
                    spec.names().dead_letter_queue.as_str().into(),
                    BasicPublishOptions::default(),
                    letter.body.as_bytes(),
                    BasicProperties::default()
                        .with_message_id(letter.id.into())
                        .with_headers(headers),
                )
                .await
                .unwrap()
                .await
                .unwrap();
        }
        let _ = connection.close(200, "".into()).await;
        Fixture { spec }
    }

    fn queue(&self) -> &str {
        &self.spec.queue
    }

    /// Messages in the work queue and in the DLQ, asked of the broker itself.
    async fn depths(&self) -> (u32, u32) {
        let connection = connect().await;
        let channel = connection.create_channel().await.unwrap();
        let passive = QueueDeclareOptions {
            passive: true,
            ..Default::default()
        };
        let depth = async |queue: &str| {
            channel
                .queue_declare(queue.into(), passive, FieldTable::default())
                .await
                .unwrap()
                .message_count()
        };
        let work = depth(self.queue()).await;
        let dlq = depth(&self.spec.names().dead_letter_queue).await;
        let _ = connection.close(200, "".into()).await;
        (work, dlq)
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let topology = Topology::of(&self.spec);
        let queues: Vec<String> = topology.queues().map(|q| q.name.clone()).collect();
        let exchanges: Vec<String> = topology
            .exchanges()
            .iter()
            .map(|e| e.name.clone())
            .collect();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async {
                let connection = connect().await;
                let channel = connection.create_channel().await.unwrap();
                for q in queues {
                    let _ = channel
                        .queue_delete(q.as_str().into(), QueueDeleteOptions::default())
                        .await;
                }
                for e in exchanges {
                    let _ = channel
                        .exchange_delete(e.as_str().into(), ExchangeDeleteOptions::default())
                        .await;
                }
            });
        })
        .join()
        .unwrap();
    }
}

/// `rabbit-backoff console` on a free port with a known token; killed when dropped.
struct Console {
    child: Child,
    /// `http://127.0.0.1:<port>/`
    url: String,
}

impl Console {
    fn start(extra: &[&str]) -> Console {
        let mut child = Command::new(env!("CARGO_BIN_EXE_rabbit-backoff"))
            .args(["console", "--listen", "127.0.0.1:0"])
            .args(extra)
            .env("AMQP_URL", url())
            .env("RABBIT_BACKOFF_CONSOLE_TOKEN", TOKEN)
            .stdout(Stdio::piped())
            .spawn()
            .expect("start rabbit-backoff console");
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut first = String::new();
        stdout
            .read_line(&mut first)
            .expect("read the console's address");
        // The rest, read so that the console never writes to a closed pipe.
        std::thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::sink()));
        let url = first
            .trim()
            .strip_prefix("rabbit-backoff console: ")
            .unwrap_or_else(|| panic!("the console printed {first:?}, not its address"))
            .to_owned();
        Console { child, url }
    }

    fn host(&self) -> &str {
        self.url.trim_start_matches("http://").trim_end_matches('/')
    }

    fn origin(&self) -> String {
        format!("http://{}", self.host())
    }
}

impl Drop for Console {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// chromedriver on a free port with one headless Chromium session.
struct Browser {
    driver: Child,
    client: Client,
}

impl Browser {
    async fn start() -> Browser {
        for binary in [CHROMIUM, CHROMEDRIVER] {
            assert!(
                std::path::Path::new(binary).exists(),
                "{binary} is missing: run scripts/browser.sh (Debian: apt-get install chromium chromium-driver)"
            );
        }
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let driver = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start chromedriver");
        let started = Instant::now();
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "chromedriver does not answer on port {port}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let mut capabilities = serde_json::Map::new();
        capabilities.insert(
            "goog:chromeOptions".into(),
            json!({
                "binary": CHROMIUM,
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
            }),
        );
        let client = ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
            .capabilities(capabilities)
            .connect(&format!("http://127.0.0.1:{port}"))
            .await
            .expect("a Chromium session through chromedriver");
        Browser { driver, client }
    }

    /// Runs `script` (a function body) in the page and returns its result.
    async fn eval(&self, script: &str) -> Value {
        self.client
            .execute(script, vec![])
            .await
            .unwrap_or_else(|e| panic!("script {script:?}: {e}"))
    }

    /// Waits until `script` returns something other than null or false.
    async fn until(&self, what: &str, script: &str) -> Value {
        let started = Instant::now();
        loop {
            let value = self.eval(script).await;
            if !value.is_null() && value != Value::Bool(false) {
                return value;
            }
            if started.elapsed() > PATIENCE {
                let error = self
                    .eval("return document.getElementById('error').textContent")
                    .await;
                panic!("the page never showed {what} (its error box: {error})");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn click(&self, css: &str) {
        self.client
            .wait()
            .at_most(PATIENCE)
            .for_element(Locator::Css(css))
            .await
            .unwrap_or_else(|e| panic!("no {css} on the page: {e}"))
            .click()
            .await
            .unwrap_or_else(|e| panic!("click {css}: {e}"));
    }

    async fn text(&self, css: &str) -> String {
        self.client
            .find(Locator::Css(css))
            .await
            .unwrap_or_else(|e| panic!("no {css} on the page: {e}"))
            .text()
            .await
            .unwrap()
    }

    /// The text of the confirmation the page opened, once it is open.
    async fn confirmation(&self) -> String {
        let started = Instant::now();
        loop {
            match self.client.get_alert_text().await {
                Ok(text) => return text,
                Err(_) if started.elapsed() < Duration::from_secs(10) => {
                    tokio::time::sleep(Duration::from_millis(50)).await
                }
                Err(e) => panic!("the page asked for no confirmation: {e}"),
            }
        }
    }

    async fn close(mut self) {
        let _ = self.client.clone().close().await;
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.driver.kill();
    }
}

/// The groups the page shows: id, count, reason, error fingerprint, and
/// whether the row has write buttons.
const GROUPS: &str = "return [...document.querySelectorAll('#groups tbody tr')].map(r => ({
    id: r.dataset.group,
    count: r.querySelector('.count').textContent,
    reason: r.querySelector('.reason').textContent,
    fingerprint: r.querySelector('.fingerprint').textContent,
    writes: r.querySelectorAll('button.write').length,
}))";

fn group<'a>(groups: &'a Value, fingerprint: &str) -> &'a Value {
    groups
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["fingerprint"] == fingerprint)
        .unwrap_or_else(|| panic!("no group {fingerprint:?} among {groups}"))
}

/// A script that returns the consumer row's work and DLQ depths once they are
/// `work` and `dlq`.
fn depths_are(queue: &str, work: u32, dlq: u32) -> String {
    format!(
        "const r = [...document.querySelectorAll('#consumers tbody tr')].find(r => r.dataset.queue === {queue:?});
         return !!r && r.querySelector('.work').textContent === '{work}' && r.querySelector('.dlq').textContent === '{dlq}';"
    )
}

const HOSTILE_BODY: &str = "<script>document.title='pwned';window.pwned=true</script>";
const HOSTILE_ERROR: &str = "<img src=x onerror=\"document.title='pwned';window.pwned=true\">";

fn letters() -> Vec<DeadLetter> {
    let database = |id| DeadLetter {
        id,
        error: "database unavailable",
        reason: "exhausted",
        retry_count: 2,
        body: "{\"order\":1}",
    };
    vec![
        database("db-1"),
        DeadLetter {
            id: "order-17",
            error: "order 17 not found",
            reason: "permanent",
            retry_count: 0,
            body: "{\"order\":17}",
        },
        database("db-2"),
        DeadLetter {
            id: "order-42",
            error: "order 42 not found",
            reason: "permanent",
            retry_count: 0,
            body: "{\"order\":42}",
        },
        database("db-3"),
        DeadLetter {
            id: "hostile",
            error: HOSTILE_ERROR,
            reason: "decode",
            retry_count: 0,
            body: HOSTILE_BODY,
        },
    ]
}

/// One browser session: the groups of a DLQ, a hostile message shown as
/// text, a dismissed confirmation that changes nothing, a replay refused
/// with a wrong token from the URL fragment, the group replayed with the
/// token typed in, a read-only console without write buttons, and a broker
/// error shown in the page.
#[tokio::test]
async fn the_page_groups_dead_letters_shows_hostile_ones_as_text_and_replays_a_group() {
    let f = Fixture::new("page", &letters()).await;
    let queue = f.queue().to_owned();
    let console = Console::start(&[]);
    let browser = Browser::start().await;
    let b = &browser;
    // A token in the fragment is taken, and leaves the address bar; this
    // one is wrong.
    b.client
        .goto(&format!("{}#token=not-the-console-token-0000", console.url))
        .await
        .expect("open the console");
    b.until(
        "the fragment's token taken",
        "return location.hash === '' && document.getElementById('token-state').textContent === 'token set';",
    )
    .await;

    // The consumer, found through the management API, with its depths.
    b.until(
        "the consumer with 6 dead letters",
        &depths_are(&queue, 0, 6),
    )
    .await;
    let tiers = b
        .text(&format!("#consumers tr[data-queue=\"{queue}\"] .tiers"))
        .await;
    assert!(
        tiers.contains(&format!("{queue}.retry_1000ms: 0"))
            && tiers.contains(&format!("{queue}.retry_2000ms: 0")),
        "{tiers}"
    );

    // Its dead letters in three groups.
    b.click(&format!(
        "#consumers tr[data-queue=\"{queue}\"] button.open"
    ))
    .await;
    let groups = b
        .until(
            "three groups",
            &format!("const g = (() => {{ {GROUPS} }})(); return g.length === 3 ? g : null;"),
        )
        .await;
    let database = group(&groups, "database unavailable");
    assert_eq!(database["count"], "3");
    assert_eq!(database["reason"], "exhausted");
    assert_eq!(database["writes"], 2, "replay and discard");
    let orders = group(&groups, "order <n> not found");
    assert_eq!(orders["count"], "2");
    assert_eq!(orders["reason"], "permanent");
    let hostile = groups
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["reason"] == "decode")
        .expect("the hostile message's group");

    // The hostile message: its body and error are shown as text, and
    // nothing in them ran.
    b.click(&format!(
        "#groups tr[data-group=\"{}\"] button.messages",
        hostile["id"].as_str().unwrap()
    ))
    .await;
    b.click("#messages tr[data-message-id=\"hostile\"] button.show")
        .await;
    assert_eq!(b.text("#message-body").await, HOSTILE_BODY);
    assert_eq!(b.text("#message-error").await, HOSTILE_ERROR);
    let ran = b
        .eval(
            "return {
                title: document.title,
                pwned: typeof window.pwned,
                elements: document.querySelectorAll('main img, main script').length,
            }",
        )
        .await;
    assert_eq!(
        ran,
        json!({"title": "rabbit-backoff console", "pwned": "undefined", "elements": 0})
    );

    // A dismissed confirmation changes nothing.
    let database_id = database["id"].as_str().unwrap().to_owned();
    b.click(&format!(
        "#groups tr[data-group=\"{database_id}\"] button.discard"
    ))
    .await;
    let question = b.confirmation().await;
    assert!(question.contains("Discard the 3 message(s)"), "{question}");
    b.client.dismiss_alert().await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        f.depths().await,
        (0, 6),
        "a dismissed discard removed messages"
    );

    // With the fragment's wrong token, the confirmed replay is refused and
    // the page says so.
    b.click(&format!(
        "#groups tr[data-group=\"{database_id}\"] button.replay"
    ))
    .await;
    b.confirmation().await;
    b.client.accept_alert().await.unwrap();
    let error = b
        .until(
            "the refusal",
            "const e = document.getElementById('error'); return e.hidden ? null : e.textContent;",
        )
        .await;
    assert_eq!(error, "Replay refused or failed: wrong token");
    assert_eq!(f.depths().await, (0, 6), "a refused replay moved messages");

    // The right token typed in.
    b.client
        .find(Locator::Css("#token"))
        .await
        .unwrap()
        .send_keys(TOKEN)
        .await
        .unwrap();
    b.click("#token-save").await;

    // The group replayed after the confirmation.
    b.click(&format!(
        "#groups tr[data-group=\"{database_id}\"] button.replay"
    ))
    .await;
    let question = b.confirmation().await;
    assert!(
        question.contains("Replay the 3 message(s)") && question.contains(&queue),
        "{question}"
    );
    b.client.accept_alert().await.unwrap();
    let notice = b
        .until(
            "the replay's outcome",
            "const n = document.getElementById('notice'); return n.hidden ? null : n.textContent;",
        )
        .await;
    assert!(
        notice
            .as_str()
            .unwrap()
            .starts_with("Replayed 3 message(s); 3 left"),
        "{notice}"
    );
    let groups = b
        .until(
            "the replayed group gone",
            &format!("const g = (() => {{ {GROUPS} }})(); return g.length === 2 ? g : null;"),
        )
        .await;
    assert!(
        groups
            .as_array()
            .unwrap()
            .iter()
            .all(|g| g["id"] != database_id.as_str()),
        "{groups}"
    );
    assert_eq!(f.depths().await, (3, 3), "the broker: work queue, DLQ");
    assert!(
        b.client
            .find(Locator::Css("#error"))
            .await
            .unwrap()
            .attr("hidden")
            .await
            .unwrap()
            .is_some(),
        "the refusal's message is gone"
    );
    b.until(
        "the work queue holding the 3 replayed messages and the DLQ 3",
        &depths_are(&queue, 3, 3),
    )
    .await;

    // A read-only console offers no write.
    let read_only = Console::start(&["--read-only"]);
    b.client.goto(&read_only.url).await.unwrap();
    b.click(&format!(
        "#consumers tr[data-queue=\"{queue}\"] button.open"
    ))
    .await;
    let groups = b
        .until(
            "the groups in read-only mode",
            &format!("const g = (() => {{ {GROUPS} }})(); return g.length === 2 ? g : null;"),
        )
        .await;
    assert!(
        groups.as_array().unwrap().iter().all(|g| g["writes"] == 0),
        "{groups}"
    );
    assert_eq!(b.text("#mode").await, "read-only");
    assert!(
        !b.client
            .find(Locator::Css("#token-form"))
            .await
            .unwrap()
            .is_displayed()
            .await
            .unwrap(),
        "a read-only console asks for no token"
    );

    // A broker error comes back as JSON and shows in the page.
    let unreachable = Console::start(&["--management", "http://127.0.0.1:1"]);
    b.client.goto(&unreachable.url).await.unwrap();
    let error = b
        .until(
            "the management API's error",
            "const e = document.getElementById('error'); return e.hidden ? null : e.textContent;",
        )
        .await;
    assert!(
        error
            .as_str()
            .unwrap()
            .starts_with("Consumers: the broker: http://127.0.0.1:1"),
        "{error}"
    );
    browser.close().await;
}

/// An HTTP response's status, headers and body, without treating 4xx as errors.
fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(30)))
        .build()
        .new_agent()
}

/// POSTs `body` to a write endpoint with these headers; the status and body.
fn post(console: &Console, action: &str, queue: &str, headers: &[(&str, &str)]) -> (u16, Value) {
    let mut request = agent().post(format!("{}api/consumers/{queue}/{action}", console.url));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let mut response = request
        .send(r#"{"message_id":"db-1"}"#)
        .expect("the console answers");
    let status = response.status().as_u16();
    let body = response.body_mut().read_json().unwrap_or(Value::Null);
    (status, body)
}

/// The status line of a GET sent with this `Host` header.
fn status_with_host(console: &Console, host: &str) -> String {
    let mut stream = TcpStream::connect(console.host()).unwrap();
    write!(
        stream,
        "GET /api/config HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    response.lines().next().unwrap_or_default().to_owned()
}

#[tokio::test]
async fn a_write_needs_the_token_the_consoles_own_origin_and_json() {
    let f = Fixture::new("guard", &letters()[..1]).await;
    let console = Console::start(&[]);
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
    assert_eq!(
        html.matches("<script").count(),
        html.matches("<script src=").count(),
        "an inline script"
    );
}

#[tokio::test]
async fn a_read_only_console_refuses_writes_even_with_the_token() {
    let f = Fixture::new("read-only", &letters()[..1]).await;
    let console = Console::start(&["--read-only"]);
    let origin = console.origin();
    let bearer = format!("Bearer {TOKEN}");
    let headers = [
        ("Origin", origin.as_str()),
        ("Content-Type", "application/json"),
        ("Authorization", bearer.as_str()),
    ];
    for action in ["replay", "discard"] {
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

#[test]
fn refuses_to_listen_beyond_loopback_without_a_token_set_by_the_operator() {
    let output = Command::new(env!("CARGO_BIN_EXE_rabbit-backoff"))
        .args(["console", "--listen", "0.0.0.0:0", "--allowed-host", "x:1"])
        .env("AMQP_URL", url())
        .env_remove("RABBIT_BACKOFF_CONSOLE_TOKEN")
        .output()
        .expect("run the console");
    assert!(!output.status.success(), "{output:?}");
    assert!(
        String::from_utf8_lossy(&output.stderr)
            .contains("without a token set by the operator: set RABBIT_BACKOFF_CONSOLE_TOKEN"),
        "{output:?}"
    );
}
