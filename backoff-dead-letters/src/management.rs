//! The one thing AMQP cannot tell: which queues exist. The management API
//! lists them, so that retry tiers of an older schedule are found too
//! (feature `management`: an HTTP client that services which only operate
//! dead letters do not compile).

use std::str::FromStr;
use std::time::Duration;

use rabbit_backoff_core::Argument;
use rabbit_backoff_runtime::lapin::uri::AMQPUri;
use serde::Deserialize;

#[derive(Deserialize)]
struct Queue {
    name: String,
    #[serde(default)]
    arguments: serde_json::Map<String, serde_json::Value>,
    #[serde(default)]
    messages: Option<u64>,
    #[serde(default)]
    consumers: Option<u64>,
    #[serde(default)]
    messages_delayed: Option<u64>,
}

/// A queue as the management API lists it.
pub struct ListedQueue {
    /// Its name.
    pub name: String,
    /// Its integer and string arguments (others are left out).
    pub arguments: Vec<(String, Argument)>,
    /// Its messages (ready and unacknowledged), as of the API's last sample.
    pub messages: u64,
    /// Its consumers.
    pub consumers: u64,
    /// The messages a quorum queue with RabbitMQ 4.3's delayed retries holds
    /// back (not ready, not unacknowledged; 0 elsewhere).
    pub messages_delayed: u64,
}

/// A binding as the management API lists it: messages published to `source`
/// with `routing_key` reach the queue `destination`.
#[derive(Debug, Clone, Deserialize)]
pub struct ListedBinding {
    /// The exchange.
    pub source: String,
    /// The queue (or exchange) it routes to.
    pub destination: String,
    /// `queue` or `exchange`.
    pub destination_type: String,
    /// The binding key.
    pub routing_key: String,
}

/// The bindings of the AMQP address's vhost.
pub fn bindings(management: &str, amqp: &str) -> Result<Vec<ListedBinding>, String> {
    get(management, amqp, "bindings", "")
}

/// A node as `/api/nodes` lists it.
#[derive(Deserialize)]
struct Node {
    #[serde(default)]
    running: bool,
}

/// How many nodes of the cluster the management API reports running (1 on
/// a single node), or why not. Needs a user who may list nodes (the
/// `monitoring` tag or above).
pub fn running_nodes(management: &str, amqp: &str) -> Result<usize, String> {
    let nodes: Vec<Node> = get_path(management, amqp, "nodes?columns=name,running")?;
    Ok(nodes.iter().filter(|n| n.running).count())
}

/// Sends a GET to `/api/<what>/<vhost><query>` with the AMQP address's credentials.
fn get<T: serde::de::DeserializeOwned>(
    management: &str,
    amqp: &str,
    what: &str,
    query: &str,
) -> Result<T, String> {
    let uri = AMQPUri::from_str(amqp).map_err(|e| format!("AMQP address: {e}"))?;
    let vhost = encode(&uri.vhost);
    get_path(management, amqp, &format!("{what}/{vhost}{query}"))
}

/// Sends a GET to `/api/<path>` with the AMQP address's credentials.
fn get_path<T: serde::de::DeserializeOwned>(
    management: &str,
    amqp: &str,
    path: &str,
) -> Result<T, String> {
    let uri = AMQPUri::from_str(amqp).map_err(|e| format!("AMQP address: {e}"))?;
    let user = &uri.authority.userinfo.username;
    let password = &uri.authority.userinfo.password;
    let url = format!("{}/api/{path}", management.trim_end_matches('/'));
    let agent = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(5)))
        .build()
        .new_agent();
    let authorization = basic_auth(user, password);
    let mut attempt = 1;
    let mut response = loop {
        match agent
            .get(&url)
            .header("Authorization", &authorization)
            .call()
        {
            // A listing taken while another client deletes a queue can
            // fail with 500 on RabbitMQ 3.x: a moment later it answers.
            Err(ureq::Error::StatusCode(status)) if status >= 500 && attempt < ATTEMPTS => {
                std::thread::sleep(RETRY_PAUSE * attempt);
                attempt += 1;
            }
            other => break other.map_err(|e| format!("{management}: {e}"))?,
        }
    };
    response
        .body_mut()
        .read_json()
        .map_err(|e| format!("{management}: {e}"))
}

/// How many times a GET is sent when the API answers with a server error.
const ATTEMPTS: u32 = 3;

/// The pause before the second attempt; the third waits twice as long.
const RETRY_PAUSE: Duration = Duration::from_millis(200);

/// The management API's address for an AMQP address: same host, port 15672.
pub fn default_url(amqp: &str) -> Option<String> {
    let uri = AMQPUri::from_str(amqp).ok()?;
    Some(format!("http://{}:15672", uri.authority.host))
}

/// The queues of the AMQP address's vhost with their arguments and depth,
/// or why not.
pub fn queues(management: &str, amqp: &str) -> Result<Vec<ListedQueue>, String> {
    let queues: Vec<Queue> = get(
        management,
        amqp,
        "queues",
        "?columns=name,arguments,messages,consumers,messages_delayed",
    )?;
    Ok(queues
        .into_iter()
        .map(|q| ListedQueue {
            name: q.name,
            arguments: q
                .arguments
                .into_iter()
                .filter_map(|(k, v)| match v {
                    serde_json::Value::String(s) => Some((k, Argument::Str(s))),
                    serde_json::Value::Number(n) => n.as_i64().map(|n| (k, Argument::Int(n))),
                    _ => None,
                })
                .collect(),
            messages: q.messages.unwrap_or(0),
            consumers: q.consumers.unwrap_or(0),
            messages_delayed: q.messages_delayed.unwrap_or(0),
        })
        .collect())
}

/// Percent-encodes a vhost for a URL path (`/` is `%2F`).
fn encode(vhost: &str) -> String {
    vhost
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            other => format!("%{other:02X}"),
        })
        .collect()
}

fn basic_auth(user: &str, password: &str) -> String {
    use base64::Engine;
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn encodes_credentials_and_vhosts() {
        assert_eq!(
            super::basic_auth("guest", "guest"),
            "Basic Z3Vlc3Q6Z3Vlc3Q="
        );
        assert_eq!(super::basic_auth("a", "bc"), "Basic YTpiYw==");
        assert_eq!(super::encode("/"), "%2F");
        assert_eq!(
            super::default_url("amqp://u:p@rabbit.local:5672/%2f").as_deref(),
            Some("http://rabbit.local:15672")
        );
    }
}
