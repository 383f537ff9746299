//! What the console's browser tests need: a consumer's topology with dead
//! letters on the real broker, deleted when dropped, and a headless
//! Chromium driven through chromedriver. A copy of the helpers of
//! backoff-cli/tests/console.rs (which runs the command's binary), kept to
//! what the mounted console's test uses.
#![allow(dead_code)]

use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use lapin::options::{
    BasicPublishOptions, ExchangeDeleteOptions, QueueDeclareOptions, QueueDeleteOptions,
};
use lapin::types::{AMQPValue, FieldTable};
use lapin::{BasicProperties, Connection, ConnectionProperties};
use rabbit_backoff::ConsumerSpec;
use rabbit_backoff::topology::Topology;
use serde_json::{Value, json};

pub const CHROMIUM: &str = "/usr/bin/chromium";
pub const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
/// Queue depths reach the page through the management API, whose statistics
/// lag by up to 5 s.
pub const PATIENCE: Duration = Duration::from_secs(30);

pub fn url() -> String {
    std::env::var("AMQP_URL").unwrap_or_else(|_| "amqp://guest:guest@127.0.0.1:5672/%2f".to_owned())
}

pub fn unique(name: &str) -> String {
    format!(
        "rbt.console-crate.{name}.{}",
        &uuid::Uuid::new_v4().simple().to_string()[..10]
    )
}

pub async fn connect() -> Connection {
    let url = url();
    Connection::connect(&url, ConnectionProperties::default())
        .await
        .unwrap_or_else(|e| {
            panic!("no RabbitMQ at {url} ({e}); run scripts/test.sh, which starts one")
        })
}

/// A dead letter as the framework writes it.
pub struct DeadLetter {
    pub id: &'static str,
    pub error: String,
    pub reason: &'static str,
    pub retry_count: i64,
    pub body: String,
    /// User headers.
    pub headers: Vec<(&'static str, &'static str)>,
    /// `x-failed-at`.
    pub failed_at: String,
}

/// A consumer's whole topology, declared as the framework declares it, with
/// dead letters published through its dead-letter exchange; deleted when
/// dropped.
pub struct Fixture {
    pub spec: ConsumerSpec,
}

impl Fixture {
    pub async fn new(name: &str, dead_letters: &[DeadLetter]) -> Fixture {
        Fixture::with_delays(name, "1s,2s", dead_letters).await
    }

    pub async fn with_delays(name: &str, delays: &str, dead_letters: &[DeadLetter]) -> Fixture {
        let spec = ConsumerSpec::new(unique(name), delays.parse().unwrap());
        let connection = rabbit_backoff::connect(&url())
            .await
            .unwrap_or_else(|e| panic!("no RabbitMQ at {} ({e}); run scripts/test.sh", url()));
        rabbit_backoff::topology::declare_topology(&*connection, &Topology::of(&spec))
            .await
            .expect("declare the topology");
        connection.close().await;

        let connection = connect().await;
        let channel = connection.create_channel().await.unwrap();
        channel.confirm_select(Default::default()).await.unwrap();
        let text = |s: &str| AMQPValue::LongString(s.as_bytes().into());
        for letter in dead_letters {
            let mut headers = FieldTable::default();
            headers.insert("x-error".into(), text(&letter.error));
            headers.insert("x-failed-at".into(), text(&letter.failed_at));
            headers.insert("x-dead-letter-reason".into(), text(letter.reason));
            headers.insert("x-original-queue".into(), text(&spec.queue));
            headers.insert(
                "x-retry-count".into(),
                AMQPValue::LongLongInt(letter.retry_count),
            );
            for (name, value) in &letter.headers {
                headers.insert((*name).into(), text(value));
            }
            // Through the dead-letter exchange, as the consumer sends them:
            // the dead-letter index beside the queue has them too.
            channel
                .basic_publish(
                    spec.names().dead_letter_exchange.as_str().into(),
                    spec.names().dead_letter_routing_key.as_str().into(),
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

    pub fn queue(&self) -> &str {
        &self.spec.queue
    }

    /// Messages in the work queue and in the DLQ, asked of the broker itself,
    /// at a moment when no pass holds dead letters: the page reads the queue
    /// again after each write, and a pass's messages are out of the count
    /// while it holds them.
    pub async fn depths(&self) -> (u32, u32) {
        let connection = connect().await;
        let channel = connection.create_channel().await.unwrap();
        let passive = QueueDeclareOptions {
            passive: true,
            ..Default::default()
        };
        let declare = async |queue: &str| {
            channel
                .queue_declare(queue.into(), passive, FieldTable::default())
                .await
                .unwrap()
        };
        let started = Instant::now();
        let dlq = loop {
            let dlq = declare(&self.spec.names().dead_letter_queue).await;
            if dlq.consumer_count() == 0 {
                break dlq.message_count();
            }
            assert!(started.elapsed() < PATIENCE, "a pass never ended");
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        let work = declare(self.queue()).await.message_count();
        let _ = connection.close(200, "".into()).await;
        (work, dlq)
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let topology = Topology::of(&self.spec);
        let queues: Vec<String> = topology.every_queue().map(|q| q.name.clone()).collect();
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

/// chromedriver on a free port with one headless Chromium session.
pub struct Browser {
    driver: Child,
    pub client: Client,
}

impl Browser {
    pub async fn start() -> Browser {
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
    pub async fn eval(&self, script: &str) -> Value {
        self.client
            .execute(script, vec![])
            .await
            .unwrap_or_else(|e| panic!("script {script:?}: {e}"))
    }

    /// Waits until `script` returns something other than null or false.
    pub async fn until(&self, what: &str, script: &str) -> Value {
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

    /// Clicks the element, found again when the page replaced it between
    /// finding and clicking (a view reloaded by itself).
    pub async fn click(&self, css: &str) {
        let started = Instant::now();
        loop {
            let element = self
                .client
                .wait()
                .at_most(PATIENCE)
                .for_element(Locator::Css(css))
                .await
                .unwrap_or_else(|e| panic!("no {css} on the page: {e}"));
            match element.click().await {
                Ok(_) => return,
                Err(e)
                    if started.elapsed() < PATIENCE && e.to_string().contains("stale element") =>
                {
                    tokio::time::sleep(Duration::from_millis(50)).await
                }
                Err(e) => panic!("click {css}: {e}"),
            }
        }
    }

    /// Shows the dead letter `id`: clicks its "Show" until the message
    /// panel holds that message, for at most [`PATIENCE`]. A click is
    /// dispatched where the button was found, so when the page re-renders
    /// the list in between (it reloads its view by itself whenever the
    /// polled depth of the dead-letter queue changes, and RabbitMQ 4's
    /// management API reports depths late), it can land on another row or
    /// none and show nothing.
    pub async fn show_message(&self, id: &str) {
        let button = format!("#messages tr[data-message-id=\"{id}\"] button.show");
        let shown = format!(
            "return !document.getElementById('message').hidden \
             && document.getElementById('message-id').textContent === {};",
            serde_json::to_string(id).unwrap()
        );
        let started = Instant::now();
        loop {
            self.click(&button).await;
            let waited = Instant::now();
            while waited.elapsed() < Duration::from_secs(2) {
                if self.eval(&shown).await == Value::Bool(true) {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            assert!(
                started.elapsed() < PATIENCE,
                "message {id} was not shown after clicking its Show for {PATIENCE:?}"
            );
        }
    }

    /// The text of `css`, once the page has filled it in (views load their
    /// data after they appear): empty only if it stays empty.
    pub async fn text(&self, css: &str) -> String {
        let started = Instant::now();
        loop {
            let text = match self.client.find(Locator::Css(css)).await {
                Ok(element) => element.text().await.unwrap_or_default(),
                Err(e) if started.elapsed() > PATIENCE => panic!("no {css} on the page: {e}"),
                Err(_) => String::new(),
            };
            if !text.is_empty() || started.elapsed() > PATIENCE {
                return text;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The text of the confirmation the page opened, once it is open.
    pub async fn confirmation(&self) -> String {
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

    pub async fn close(mut self) {
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
