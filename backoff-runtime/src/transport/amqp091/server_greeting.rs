//! The server's greeting: the product and version a RabbitMQ node names in
//! its first frame, `connection.start`, read off the socket as lapin reads
//! it.
//!
//! lapin reads the server properties of `connection.start` and keeps them
//! to itself (it logs them at TRACE). The framework needs the release to
//! know, without asking the broker to refuse something, whether the node
//! holds retries back ([`HeldRetries`](rabbit_backoff_core::HeldRetries)):
//! a refusal closes a channel, which lapin logs at ERROR on every start.
//! [`Greeted`] sits under the frame guard, copies the bytes of the first
//! frame as they pass, untouched, and parses them once that frame is whole.
//! The fix that belongs upstream: lapin's `Connection` exposing the server
//! properties it received (as `configuration()` exposes what was
//! negotiated): docs/upstream.md, "Server properties not exposed" and "A
//! channel close logged at ERROR".

use std::io;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll, ready};

use lapin::protocol::{AMQPClass, connection::AMQPMethod};
use rabbit_backoff_core::{BrokerRelease, HeaderValue};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::frame_guard::{FRAME_HEADER, frame_len};
use crate::transport::amqp_values::header_view;

/// The type of a method frame.
const METHOD_FRAME: u8 = 1;
/// The most bytes kept waiting for the first frame: RabbitMQ's
/// `connection.start` is under 1 KiB; a first frame larger than this is not
/// one to read a release from.
const GREETING_LIMIT: usize = 16 * 1024;

/// Where a connection's greeting lands once read: the release, or `None`
/// when the first frame named none.
pub(crate) type Greeting = Arc<OnceLock<Option<BrokerRelease>>>;

/// `inner`, with the bytes of its first frame read copied into a
/// [`Greeting`].
pub(crate) struct Greeted<S> {
    inner: S,
    greeting: Greeting,
    /// The first frame's bytes so far; emptied once it is whole.
    first: Vec<u8>,
}

impl<S> Greeted<S> {
    /// Reads `inner`'s greeting into `greeting`.
    pub(crate) fn new(inner: S, greeting: Greeting) -> Self {
        Greeted {
            inner,
            greeting,
            first: Vec::new(),
        }
    }

    /// Keeps `read`, the next bytes from the server, until the first frame
    /// is whole, then parses it.
    fn keep(&mut self, read: &[u8]) {
        if self.greeting.get().is_some() || read.is_empty() {
            return;
        }
        self.first.extend_from_slice(read);
        if let Some(release) = parse(&self.first) {
            let _ = self.greeting.set(release);
            self.first = Vec::new();
        } else if self.first.len() > GREETING_LIMIT {
            let _ = self.greeting.set(None);
            self.first = Vec::new();
        }
    }
}

/// The release named by the frame at the start of `bytes`: `None` while the
/// frame is not whole, `Some(None)` when it is and names no release.
fn parse(bytes: &[u8]) -> Option<Option<BrokerRelease>> {
    let header = bytes.get(..FRAME_HEADER)?;
    let end = frame_len(header) - 1;
    let payload = bytes.get(FRAME_HEADER..end)?;
    if header[0] != METHOD_FRAME {
        return Some(None);
    }
    let Ok((_, AMQPClass::Connection(AMQPMethod::Start(start)))) =
        lapin::protocol::parse_class(payload)
    else {
        return Some(None);
    };
    let properties = start.server_properties.inner();
    let text = |key: &str| match properties.get(key).map(header_view) {
        Some(HeaderValue::Str(value)) => Some(value.to_owned()),
        _ => None,
    };
    Some(match (text("product"), text("version")) {
        (Some(product), Some(version)) => Some(BrokerRelease::new(product, version)),
        _ => None,
    })
}

impl<S: AsyncRead + Unpin> AsyncRead for Greeted<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        ready!(Pin::new(&mut this.inner).poll_read(cx, buf))?;
        this.keep(&buf.filled()[before..]);
        Poll::Ready(Ok(()))
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Greeted<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lapin::protocol::connection::Start;
    use lapin::types::{AMQPValue, FieldTable, LongString};

    /// `connection.start` as a server sends it, with `properties`.
    fn start_frame(properties: &[(&str, &str)]) -> Vec<u8> {
        let mut table = FieldTable::default();
        for (key, value) in properties {
            table.insert(
                (*key).into(),
                AMQPValue::LongString(LongString::from(*value)),
            );
        }
        let class = AMQPClass::Connection(AMQPMethod::Start(Start {
            version_major: 0,
            version_minor: 9,
            server_properties: table,
            mechanisms: "PLAIN AMQPLAIN".into(),
            locales: "en_US".into(),
        }));
        let (payload, _) =
            cookie_factory::r#gen(lapin::protocol::gen_class(&class), Vec::new()).expect("encoded");
        let mut frame = vec![METHOD_FRAME, 0, 0];
        frame.extend_from_slice(&(payload.len() as u32).to_be_bytes());
        frame.extend_from_slice(&payload);
        frame.push(0xCE);
        frame
    }

    #[test]
    fn the_release_is_read_from_a_first_frame_split_across_reads() {
        let frame = start_frame(&[("product", "RabbitMQ"), ("version", "4.3.6")]);
        let greeting = Greeting::default();
        let mut greeted = Greeted::new(tokio::io::empty(), Arc::clone(&greeting));
        for chunk in frame.chunks(5) {
            assert!(greeting.get().is_none());
            greeted.keep(chunk);
        }
        assert_eq!(
            greeting.get(),
            Some(&Some(BrokerRelease::new("RabbitMQ", "4.3.6")))
        );
        // What follows is not read.
        greeted.keep(&[1; 64]);
        assert!(greeted.first.is_empty());
    }

    #[test]
    fn a_first_frame_without_a_release_names_none() {
        let greeting = Greeting::default();
        let mut greeted = Greeted::new(tokio::io::empty(), Arc::clone(&greeting));
        greeted.keep(&start_frame(&[("product", "RabbitMQ")]));
        assert_eq!(greeting.get(), Some(&None));

        let greeting = Greeting::default();
        let mut greeted = Greeted::new(tokio::io::empty(), Arc::clone(&greeting));
        greeted.keep(&[8, 0, 0, 0, 0, 0, 0, 0xCE]);
        assert_eq!(greeting.get(), Some(&None), "a heartbeat frame names none");
    }
}
