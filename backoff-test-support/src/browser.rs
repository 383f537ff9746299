//! A headless Chromium driven through chromedriver (feature `browser`), and
//! the waits a test of the console's page needs: the page loads its data
//! after it appears and reloads its views by itself, so a test waits for
//! what it expects to see, for at most [`PATIENCE`].
//!
//! Needs /usr/bin/chromium with /usr/bin/chromedriver (scripts/browser.sh;
//! Debian: `apt-get install chromium chromium-driver`).

use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};

use crate::PATIENCE;

/// The browser.
pub const CHROMIUM: &str = "/usr/bin/chromium";
/// The WebDriver server that drives it.
pub const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// A TCP port of 127.0.0.1 that nothing listens on (at the moment of asking).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// chromedriver on a free port with one headless Chromium session; the
/// driver is killed when dropped ([`Browser::close`] ends the session
/// first).
pub struct Browser {
    driver: Child,
    /// The session: `goto`, `find`, alerts.
    pub client: Client,
}

impl Browser {
    /// Starts chromedriver and a session; fails the test, with the way out,
    /// when Chromium or chromedriver is missing.
    pub async fn start() -> Browser {
        for binary in [CHROMIUM, CHROMEDRIVER] {
            assert!(
                std::path::Path::new(binary).exists(),
                "{binary} is missing: run scripts/browser.sh (Debian: apt-get install chromium chromium-driver)"
            );
        }
        let port = free_port();
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

    /// Waits until `script` returns something other than null or false,
    /// and returns that; fails the test with the page's error box after
    /// [`PATIENCE`].
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

    /// Accepts the replay's confirmation, which names `what` and the queue
    /// `queue`, and waits for the page's notice of its outcome, which
    /// starts with `outcome`; returns the notice.
    pub async fn confirm_replay(&self, what: &str, queue: &str, outcome: &str) -> Value {
        let question = self.confirmation().await;
        assert!(
            question.contains(what) && question.contains(queue),
            "{question}"
        );
        self.client.accept_alert().await.unwrap();
        let notice = self
            .until(
                "the replay's outcome",
                "const n = document.getElementById('notice'); return n.hidden ? null : n.textContent;",
            )
            .await;
        assert!(notice.as_str().unwrap().starts_with(outcome), "{notice}");
        notice
    }

    /// Ends the session and stops chromedriver.
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
