//! The frame guard: the runtime's socket as lapin sees it, with every message
//! whose headers nest too deeply for lapin made flat before lapin reads it.
//!
//! lapin parses each frame on its I/O thread, and its parser (amq-protocol)
//! reads a field table recursively, one level of stack per level of nesting.
//! RabbitMQ accepts and delivers headers nested 18 000 levels deep (126 KB,
//! within one 131 072-byte frame); parsing them overflows that thread's
//! 2 MiB stack, which aborts the whole process, and since the message was
//! never acknowledged the broker delivers it again to the restarted
//! consumer, which dies again.
//!
//! [`GuardedStream`] sits between the socket (plain or, above it, TLS) and
//! lapin, and follows the AMQP frames in both directions across any read or
//! write boundaries (type, channel, size, payload, `0xCE`):
//!
//! - **Read side.** Every content-header frame is held back until it is
//!   whole; the nesting of its `headers` property is measured without
//!   recursion ([`table_depth`]). When it nests deeper than
//!   [`MAX_HEADER_DEPTH`] (or cannot be read at all), the frame is rewritten:
//!   the headers become one flat header, [`DEEP_HEADERS`], whose byte array
//!   holds the original headers [packed](rabbit_backoff_core::deep_headers),
//!   and the frame's size is fixed up. The packed form is always smaller than
//!   the headers, so the frame still fits the negotiated frame size. Every
//!   other frame passes through untouched, in place.
//! - **Write side.** A content-header frame whose headers are exactly such a
//!   flat header is written with the original headers unpacked again, byte
//!   for byte, when they still fit the negotiated frame size. So a
//!   dead-letter pass, which moves a message by publishing a copy of its
//!   properties, leaves a deep message intact.
//!
//! A consumer rejects a delivery carrying [`DEEP_HEADERS`] without requeue:
//! the broker dead-letters its untouched original, and the messages behind
//! it flow. Operations show it with a note instead of the deep value.
//!
//! The fix that belongs upstream: amq-protocol's field-table parser made
//! iterative (an explicit stack instead of recursion, as here), or lapin
//! letting its caller size the I/O thread's stack (`ConnectionProperties`
//! could take a stack size for `lapin-io-loop`; a table of 131 072 bytes
//! needs about 65 MiB in a release build). Either would make this guard
//! unnecessary for the crash; the guard would still keep deep values out of
//! handlers, whose own code (cloning, dropping, serializing headers)
//! recurses as well. The reproduction and the report to file upstream:
//! docs/upstream.md, "Headers nested too deep".

use std::fmt;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::AtomicU32;
use std::task::{Context, Poll, ready};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

mod read;
mod set_aside;
mod surgery;
mod write;

use read::ReadGuard;
pub(crate) use set_aside::{SetAside, packed_headers};
use write::{Plan, WriteGuard};

/// The largest frame the runtime negotiates, whatever the broker offers: the
/// broker's default. It bounds how large the properties of one message can
/// be, and what the guard holds.
pub const MAX_FRAME_SIZE: u32 = 131_072;

/// Type (1), channel (2) and payload size (4) of a frame.
pub(crate) const FRAME_HEADER: usize = 7;
/// A frame's type, channel, size and end marker: everything but the payload.
pub(super) const FRAME_OVERHEAD: usize = FRAME_HEADER + 1;
/// The type of a content-header frame, which carries a message's properties.
pub(super) const CONTENT_HEADER: u8 = 2;
/// The class of every content RabbitMQ sends: `basic`.
pub(super) const BASIC_CLASS: u16 = 60;
/// Where a content header's property flags start: after the class (2),
/// weight (2) and body size (8).
pub(super) const PROPERTY_FLAGS: usize = 12;
/// Property flags, from the highest bit down: content type and content
/// encoding (short strings) come before the headers table.
pub(super) const CONTENT_TYPE: u16 = 1 << 15;
pub(super) const CONTENT_ENCODING: u16 = 1 << 14;
pub(super) const HEADERS: u16 = 1 << 13;
/// The protocol header a client sends before its first frame:
/// `AMQP 0 0 9 1`.
pub(super) const PROTOCOL_HEADER: usize = 8;
/// The largest content-header frame held back whole. lapin's receive buffer
/// holds 32 frames of the largest size it negotiates: a larger frame is one
/// it could never read anyway, so it passes through untouched.
pub(super) const HOLD_LIMIT: usize = 32 * MAX_FRAME_SIZE as usize;

/// The socket lapin reads and writes: `inner` with the frame guard on both
/// sides (see the [module](self) documentation).
pub(crate) struct GuardedStream<S> {
    inner: S,
    reader: ReadGuard,
    writer: WriteGuard,
}

impl<S> GuardedStream<S> {
    /// Guards `inner`. `frame_max` is the connection's negotiated frame size
    /// (0 for none): no unpacked frame is written larger.
    pub(crate) fn new(inner: S, frame_max: Arc<AtomicU32>) -> Self {
        GuardedStream {
            inner,
            reader: ReadGuard::default(),
            writer: WriteGuard::new(frame_max),
        }
    }
}

impl<S> fmt::Debug for GuardedStream<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GuardedStream").finish_non_exhaustive()
    }
}

impl<S: AsyncRead + Unpin> futures_io::AsyncRead for GuardedStream<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        loop {
            if this.reader.has_ready() {
                return Poll::Ready(Ok(this.reader.take_ready(buf)));
            }
            let mut read = ReadBuf::new(buf);
            ready!(Pin::new(&mut this.inner).poll_read(cx, &mut read))?;
            let n = read.filled().len();
            if n == 0 {
                return Poll::Ready(Ok(0));
            }
            let untouched = this.reader.filter(&buf[..n]);
            if untouched > 0 {
                return Poll::Ready(Ok(untouched));
            }
        }
    }
}

impl<S: AsyncWrite + Unpin> GuardedStream<S> {
    /// Writes out what the write guard took and rewrote.
    fn poll_pending(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while !self.writer.pending().is_empty() {
            let n = ready!(Pin::new(&mut self.inner).poll_write(cx, self.writer.pending()))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.writer.sent(n);
        }
        Poll::Ready(Ok(()))
    }
}

impl<S: AsyncWrite + Unpin> futures_io::AsyncWrite for GuardedStream<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        ready!(this.poll_pending(cx))?;
        match this.writer.plan(buf) {
            Plan::Pass(len) => {
                let n = ready!(Pin::new(&mut this.inner).poll_write(cx, &buf[..len]))?;
                this.writer.passed(buf, n);
                Poll::Ready(Ok(n))
            }
            Plan::Took(len) => {
                // Start sending at once; what the socket does not take now
                // goes before the next write or flush.
                if let Poll::Ready(Err(e)) = this.poll_pending(cx) {
                    return Poll::Ready(Err(e));
                }
                Poll::Ready(Ok(len))
            }
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_pending(cx))?;
        Pin::new(&mut this.inner).poll_flush(cx)
    }

    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_pending(cx))?;
        Pin::new(&mut this.inner).poll_shutdown(cx)
    }
}

/// The payload size a frame's header (its first 7 bytes) says, plus the
/// header and the end marker: the whole frame's length.
pub(crate) fn frame_len(header: &[u8]) -> usize {
    let size = u32::from_be_bytes([header[3], header[4], header[5], header[6]]);
    size as usize + FRAME_OVERHEAD
}

/// Whether the frame whose header starts `header` is a content header small
/// enough to be held back whole.
pub(super) fn holds(header: &[u8]) -> bool {
    header[0] == CONTENT_HEADER && frame_len(header) <= HOLD_LIMIT
}

/// Runs the read guard over `stream` as lapin would read it from a socket
/// handing over `chunk` bytes a read; how many bytes lapin gets. For
/// benchmarks.
pub fn read_through(stream: &[u8], chunk: usize) -> usize {
    let mut guard = ReadGuard::default();
    let mut buf = vec![0; chunk];
    let mut total = 0;
    for read in stream.chunks(chunk) {
        total += guard.filter(read);
        while guard.has_ready() {
            total += guard.take_ready(&mut buf);
        }
    }
    total
}

/// Runs the write guard over `stream` (the protocol header, then frames) as
/// lapin would write it, `chunk` bytes a write, to a socket that takes
/// everything; how many bytes reach the socket. For benchmarks.
pub fn write_through(stream: &[u8], chunk: usize) -> usize {
    let mut guard = WriteGuard::new(Arc::new(AtomicU32::new(MAX_FRAME_SIZE)));
    let mut total = 0;
    for mut write in stream.chunks(chunk) {
        while !write.is_empty() {
            total += guard.pending().len();
            guard.sent(guard.pending().len());
            let n = match guard.plan(write) {
                Plan::Pass(n) => {
                    guard.passed(write, n);
                    total += n;
                    n
                }
                Plan::Took(n) => n,
            };
            write = &write[n..];
        }
    }
    total + guard.pending().len()
}

#[cfg(test)]
mod tests {
    use super::surgery::{flatten, headers_span, is_flat, unflatten};
    use super::*;
    use lapin::BasicProperties;
    use lapin::types::{AMQPValue, FieldTable};
    use rabbit_backoff_core::MAX_HEADER_DEPTH;
    use rabbit_backoff_core::deep_headers::pack;
    use rabbit_backoff_core::headers::DEEP_HEADERS;
    use rabbit_backoff_test_support::deep_headers as deep;

    /// A frame of `kind` on channel 1 around `payload`.
    fn frame(kind: u8, payload: &[u8]) -> Vec<u8> {
        let mut f = vec![kind, 0, 1];
        f.extend_from_slice(&(payload.len() as u32).to_be_bytes());
        f.extend_from_slice(payload);
        f.push(0xCE);
        f
    }

    /// A content-header frame: basic class, a body of 2 bytes, the given
    /// property flags, then `properties` as encoded.
    fn content_header(flags: u16, properties: &[u8]) -> Vec<u8> {
        let mut p = Vec::new();
        p.extend_from_slice(&BASIC_CLASS.to_be_bytes());
        p.extend_from_slice(&[0, 0]);
        p.extend_from_slice(&2u64.to_be_bytes());
        p.extend_from_slice(&flags.to_be_bytes());
        p.extend_from_slice(properties);
        frame(CONTENT_HEADER, &p)
    }

    /// A content header as lapin's own encoder writes these properties.
    fn encoded(properties: &BasicProperties) -> Vec<u8> {
        let (bytes, _) = cookie_factory::r#gen(
            lapin::protocol::basic::gen_properties(properties),
            Vec::new(),
        )
        .unwrap();
        let mut p = Vec::new();
        p.extend_from_slice(&BASIC_CLASS.to_be_bytes());
        p.extend_from_slice(&[0, 0]);
        p.extend_from_slice(&2u64.to_be_bytes());
        p.extend_from_slice(&bytes);
        frame(CONTENT_HEADER, &p)
    }

    /// A content-header frame with a content type, then `entries` as its
    /// headers, then a delivery mode.
    fn with_headers(entries: &[u8]) -> Vec<u8> {
        let mut p = vec![4];
        p.extend_from_slice(b"json");
        p.extend_from_slice(&(entries.len() as u32).to_be_bytes());
        p.extend_from_slice(entries);
        p.push(2);
        content_header(CONTENT_TYPE | HEADERS | (1 << 12), &p)
    }

    fn shallow_properties() -> BasicProperties {
        let mut inner = FieldTable::default();
        inner.insert("n".into(), AMQPValue::LongLongInt(1));
        let mut headers = FieldTable::default();
        headers.insert("x-retry-count".into(), AMQPValue::LongInt(2));
        headers.insert("x-error".into(), AMQPValue::LongString("boom".into()));
        headers.insert("nested".into(), AMQPValue::FieldTable(inner));
        BasicProperties::default()
            .with_content_type("application/json".into())
            .with_content_encoding("gzip".into())
            .with_headers(headers)
            .with_delivery_mode(2)
            .with_message_id("m-1".into())
    }

    /// Frames as a broker sends them: a delivery (method, header, body), a
    /// heartbeat, a content header without headers, a large body frame.
    fn untouched_frames() -> Vec<Vec<u8>> {
        vec![
            frame(1, &[0, 60, 0, 60, 3, b't', b'a', b'g']),
            encoded(&shallow_properties()),
            frame(3, b"{}"),
            frame(8, &[]),
            encoded(&BasicProperties::default().with_delivery_mode(1)),
            frame(3, &vec![7; 70_000]),
            with_headers(&deep::entries(MAX_HEADER_DEPTH, false)),
        ]
    }

    /// What lapin reads through the read guard when the socket hands over
    /// `stream` in `chunks`.
    fn read_through(stream: &[u8], chunks: impl IntoIterator<Item = usize>) -> Vec<u8> {
        let mut guard = ReadGuard::default();
        let mut out = Vec::new();
        let mut at = 0;
        for len in chunks {
            let chunk = &stream[at..(at + len).min(stream.len())];
            at += chunk.len();
            let untouched = guard.filter(chunk);
            out.extend_from_slice(&chunk[..untouched]);
            let mut buf = [0; 4096];
            while guard.has_ready() {
                let n = guard.take_ready(&mut buf);
                out.extend_from_slice(&buf[..n]);
            }
        }
        assert_eq!(at, stream.len());
        out
    }

    /// What reaches the socket through the write guard when lapin writes
    /// `stream` in `chunks` and the socket takes at most `cap` bytes a write.
    fn write_through(
        stream: &[u8],
        chunks: impl IntoIterator<Item = usize>,
        cap: usize,
        frame_max: u32,
    ) -> Vec<u8> {
        let mut guard = WriteGuard::new(Arc::new(AtomicU32::new(frame_max)));
        let mut socket = Vec::new();
        let drain = |guard: &mut WriteGuard, socket: &mut Vec<u8>| {
            while !guard.pending().is_empty() {
                let n = guard.pending().len().min(cap);
                socket.extend_from_slice(&guard.pending()[..n]);
                guard.sent(n);
            }
        };
        let mut at = 0;
        for len in chunks {
            let mut chunk = &stream[at..(at + len).min(stream.len())];
            at += chunk.len();
            while !chunk.is_empty() {
                drain(&mut guard, &mut socket);
                match guard.plan(chunk) {
                    Plan::Pass(len) => {
                        let n = len.min(cap);
                        assert!(n > 0);
                        socket.extend_from_slice(&chunk[..n]);
                        guard.passed(chunk, n);
                        chunk = &chunk[n..];
                    }
                    Plan::Took(n) => {
                        assert!(n > 0);
                        chunk = &chunk[n..];
                    }
                }
            }
        }
        drain(&mut guard, &mut socket);
        assert_eq!(at, stream.len());
        socket
    }

    /// Splits at `cut`, then the rest whole.
    fn split(len: usize, cut: usize) -> Vec<usize> {
        vec![cut, len - cut]
    }

    #[test]
    fn frames_with_shallow_or_no_headers_pass_through_unchanged() {
        let stream: Vec<u8> = untouched_frames().concat();
        assert_eq!(read_through(&stream, [stream.len()]), stream);
        assert_eq!(read_through(&stream, vec![1; stream.len()]), stream);
        for cut in (0..stream.len()).step_by(97).chain(0..200) {
            assert_eq!(
                read_through(&stream, split(stream.len(), cut)),
                stream,
                "{cut}"
            );
        }
        let mut written = b"AMQP\x00\x00\x09\x01".to_vec();
        written.extend_from_slice(&stream);
        for cap in [1, 5, 4096, usize::MAX] {
            assert_eq!(
                write_through(&written, [written.len()], cap, 131_072),
                written
            );
        }
        for cut in (0..written.len()).step_by(89).chain(0..200) {
            assert_eq!(
                write_through(&written, split(written.len(), cut), 1000, 131_072),
                written,
                "{cut}"
            );
        }
    }

    /// A stream with deep headers between untouched frames, and what lapin
    /// must read of it.
    fn deep_stream(levels: usize, arrays: bool) -> (Vec<u8>, Vec<u8>, Vec<u8>) {
        let deep = with_headers(&deep::entries(levels, arrays));
        let flat = flatten(&deep).expect("flattened");
        let mut frames = untouched_frames();
        // Without the large body, so that every boundary can be tried.
        frames.retain(|f| f.len() < 10_000);
        let mut stream = frames[..3].concat();
        let mut expected = stream.clone();
        stream.extend_from_slice(&deep);
        expected.extend_from_slice(&flat);
        frames.drain(..3);
        stream.extend_from_slice(&frames.concat());
        expected.extend_from_slice(&frames.concat());
        (stream, expected, deep)
    }

    #[test]
    fn deep_headers_are_flattened_across_every_read_boundary() {
        let (stream, expected, _) = deep_stream(300, false);
        assert_ne!(stream, expected);
        assert_eq!(read_through(&stream, [stream.len()]), expected);
        assert_eq!(read_through(&stream, vec![1; stream.len()]), expected);
        for cut in 0..stream.len() {
            assert_eq!(
                read_through(&stream, split(stream.len(), cut)),
                expected,
                "{cut}"
            );
        }
        for size in [2, 3, 7, 8, 13, 64, 1000] {
            let chunks = vec![size; stream.len().div_ceil(size)];
            assert_eq!(read_through(&stream, chunks), expected, "{size}");
        }
    }

    #[test]
    fn flat_headers_are_unflattened_across_every_write_boundary() {
        let (original, flattened, _) = deep_stream(300, true);
        let mut written = b"AMQP\x00\x00\x09\x01".to_vec();
        written.extend_from_slice(&flattened);
        let mut wire = b"AMQP\x00\x00\x09\x01".to_vec();
        wire.extend_from_slice(&original);
        for cut in 0..written.len() {
            assert_eq!(
                write_through(&written, split(written.len(), cut), usize::MAX, 131_072),
                wire,
                "{cut}"
            );
        }
        for cap in [1, 3, 8, 100] {
            assert_eq!(write_through(&written, [written.len()], cap, 131_072), wire);
            assert_eq!(
                write_through(&written, vec![1; written.len()], cap, 0),
                wire
            );
        }
    }

    #[test]
    fn the_deepest_headers_a_frame_holds_come_back_byte_for_byte() {
        for (levels, arrays) in [(18_000, false), (25_000, true)] {
            let deep = with_headers(&deep::entries(levels, arrays));
            assert!(deep.len() <= 131_072);
            let flat = flatten(&deep).unwrap();
            assert!(flat.len() < deep.len(), "the flat frame is smaller");
            assert_eq!(unflatten(&flat, 131_072).as_deref(), Some(&deep[..]));
            // Not when the original would not fit the frame size.
            assert_eq!(unflatten(&flat, flat.len()), None);
        }
    }

    #[test]
    fn lapin_parses_the_flat_frame() {
        let deep = with_headers(&deep::entries(5_000, false));
        let flat = flatten(&deep).unwrap();
        let payload = &flat[FRAME_HEADER + PROPERTY_FLAGS..flat.len() - 1];
        let (rest, properties) = lapin::protocol::basic::parse_properties(payload).unwrap();
        assert!(rest.is_empty());
        assert_eq!(properties.content_type().as_ref().unwrap().as_str(), "json");
        assert_eq!(*properties.delivery_mode(), Some(2));
        assert_eq!(
            SetAside::of(&properties),
            Some(SetAside::Deep {
                depth: 5_000,
                len: 4 + deep::entries(5_000, false).len()
            })
        );
        assert_eq!(SetAside::of(&shallow_properties()), None);
    }

    #[test]
    fn unreadable_headers_are_set_aside_too() {
        let mut entries = deep::entries(10, false);
        let last = entries.len() - 2;
        entries[last] = b'?';
        let flat = flatten(&with_headers(&entries)).expect("flattened");
        let payload = &flat[FRAME_HEADER + PROPERTY_FLAGS..flat.len() - 1];
        let (_, properties) = lapin::protocol::basic::parse_properties(payload).unwrap();
        assert_eq!(SetAside::of(&properties), Some(SetAside::Unreadable));
        // And never written out as headers again.
        assert_eq!(unflatten(&flat, 0), None);
    }

    #[test]
    fn a_flat_table_of_shallow_headers_is_written_as_it_is() {
        // Someone else's message with the flat header and shallow contents:
        // unflattening it would change a copy of it.
        let shallow = with_headers(&deep::entries(3, false));
        let (start, end) = headers_span(&shallow).unwrap();
        let entries = &shallow[start + 4..end];
        let mut table = vec![DEEP_HEADERS.len() as u8];
        table.extend_from_slice(DEEP_HEADERS.as_bytes());
        table.push(b'x');
        let packed = pack(entries).unwrap();
        table.extend_from_slice(&(packed.len() as u32).to_be_bytes());
        table.extend_from_slice(&packed);
        let frame = with_headers(&table);
        assert!(is_flat(&frame));
        assert_eq!(unflatten(&frame, 0), None);
    }
}
