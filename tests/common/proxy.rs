//! A TCP proxy in front of the real broker, so that a test can kill the
//! connections that go through it (both sockets dropped at once, as when a
//! node dies or a network link breaks) without touching the broker or any
//! other test's connection. New connections go through it as before.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use tokio::net::{TcpListener, TcpStream};
use tokio::task::AbortHandle;

pub struct Proxy {
    url: String,
    live: Arc<Mutex<Vec<AbortHandle>>>,
    accept: tokio::task::JoinHandle<()>,
}

impl Proxy {
    /// A proxy to the broker of `url` (an `amqp://` address).
    pub async fn start(url: &str) -> Proxy {
        Self::start_at(url, 0).await
    }

    /// A proxy to the broker of `url` listening on local `port` (0: any).
    pub async fn start_at(url: &str, port: u16) -> Proxy {
        let (scheme_user, rest) = url.split_once('@').expect("an address with credentials");
        let (upstream, vhost) = rest.split_once('/').unwrap_or((rest, ""));
        let upstream: String = upstream.to_owned();
        let listener = TcpListener::bind(("127.0.0.1", port))
            .await
            .expect("a local port");
        let local: SocketAddr = listener.local_addr().expect("its address");
        let live: Arc<Mutex<Vec<AbortHandle>>> = Arc::default();
        let connections = Arc::clone(&live);
        let accept = tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                let upstream = upstream.clone();
                let forward = tokio::spawn(async move {
                    if let Ok(mut server) = TcpStream::connect(&upstream).await {
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                    }
                });
                connections.lock().unwrap().push(forward.abort_handle());
            }
        });
        Proxy {
            url: format!("{scheme_user}@{local}/{vhost}"),
            live,
            accept,
        }
    }

    /// The address to connect to instead of the broker's.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Kills every connection through the proxy so far.
    pub fn kill(&self) {
        for connection in self.live.lock().unwrap().drain(..) {
            connection.abort();
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.accept.abort();
        self.kill();
    }
}
