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
//! recurses as well.

use std::fmt;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::task::{Context, Poll, ready};

use lapin::BasicProperties;
use lapin::types::AMQPValue;
use rabbit_backoff_core::MAX_HEADER_DEPTH;
use rabbit_backoff_core::deep_headers::{pack, table_depth, unpack};
use rabbit_backoff_core::headers::DEEP_HEADERS;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The largest frame the runtime negotiates, whatever the broker offers: the
/// broker's default. It bounds how large the properties of one message can
/// be, and what the guard holds.
pub const MAX_FRAME_SIZE: u32 = 131_072;

/// Type (1), channel (2) and payload size (4) of a frame.
const FRAME_HEADER: usize = 7;
/// A frame's type, channel, size and end marker: everything but the payload.
const FRAME_OVERHEAD: usize = FRAME_HEADER + 1;
/// The type of a content-header frame, which carries a message's properties.
const CONTENT_HEADER: u8 = 2;
/// The class of every content RabbitMQ sends: `basic`.
const BASIC_CLASS: u16 = 60;
/// Where a content header's property flags start: after the class (2),
/// weight (2) and body size (8).
const PROPERTY_FLAGS: usize = 12;
/// Property flags, from the highest bit down: content type and content
/// encoding (short strings) come before the headers table.
const CONTENT_TYPE: u16 = 1 << 15;
const CONTENT_ENCODING: u16 = 1 << 14;
const HEADERS: u16 = 1 << 13;
/// The protocol header a client sends before its first frame:
/// `AMQP 0 0 9 1`.
const PROTOCOL_HEADER: usize = 8;
/// The largest content-header frame held back whole. lapin's receive buffer
/// holds 32 frames of the largest size it negotiates: a larger frame is one
/// it could never read anyway, so it passes through untouched.
const HOLD_LIMIT: usize = 32 * MAX_FRAME_SIZE as usize;

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
fn frame_len(header: &[u8]) -> usize {
    let size = u32::from_be_bytes([header[3], header[4], header[5], header[6]]);
    size as usize + FRAME_OVERHEAD
}

/// Whether the frame whose header starts `header` is a content header small
/// enough to be held back whole.
fn holds(header: &[u8]) -> bool {
    header[0] == CONTENT_HEADER && frame_len(header) <= HOLD_LIMIT
}

/// The read side: hands lapin every byte as it comes, except content-header
/// frames, each held back until whole and rewritten when its headers nest too
/// deeply.
#[derive(Debug, Default)]
pub(crate) struct ReadGuard {
    /// Bytes of the current frame still to hand over untouched.
    passing: usize,
    /// The start of a frame held back: its header, while incomplete, or a
    /// whole content-header frame.
    held: Vec<u8>,
    /// Bytes to hand over before reading more, from `ready_at` on.
    ready: Vec<u8>,
    ready_at: usize,
}

impl ReadGuard {
    fn has_ready(&self) -> bool {
        self.ready_at < self.ready.len()
    }

    /// Moves ready bytes into `buf`; how many.
    fn take_ready(&mut self, buf: &mut [u8]) -> usize {
        let n = buf.len().min(self.ready.len() - self.ready_at);
        buf[..n].copy_from_slice(&self.ready[self.ready_at..self.ready_at + n]);
        self.ready_at += n;
        if self.ready_at == self.ready.len() {
            self.ready.clear();
            self.ready_at = 0;
        }
        n
    }

    /// Takes `data`, just read; returns how many of its first bytes go to
    /// lapin as they are. The rest is held back or made ready, in order,
    /// behind them.
    pub(crate) fn filter(&mut self, data: &[u8]) -> usize {
        let mut at = 0;
        while self.held.is_empty() && at < data.len() {
            if self.passing > 0 {
                let n = self.passing.min(data.len() - at);
                self.passing -= n;
                at += n;
                continue;
            }
            let rest = &data[at..];
            if rest.len() < FRAME_HEADER {
                break;
            }
            let len = frame_len(rest);
            if !holds(rest) {
                self.passing = len;
                continue;
            }
            if rest.len() < len {
                break;
            }
            if let Some(flat) = flatten(&rest[..len]) {
                self.ready.extend_from_slice(&flat);
                self.hold(&rest[len..]);
                return at;
            }
            at += len;
        }
        self.hold(&data[at..]);
        at
    }

    /// Takes `data` into the held frame and the ready bytes.
    fn hold(&mut self, mut data: &[u8]) {
        while !data.is_empty() {
            if self.passing > 0 {
                let n = self.passing.min(data.len());
                self.ready.extend_from_slice(&data[..n]);
                self.passing -= n;
                data = &data[n..];
                continue;
            }
            if self.held.len() < FRAME_HEADER {
                let n = (FRAME_HEADER - self.held.len()).min(data.len());
                self.held.extend_from_slice(&data[..n]);
                data = &data[n..];
                if self.held.len() < FRAME_HEADER {
                    return;
                }
            }
            let len = frame_len(&self.held);
            if !holds(&self.held) {
                self.passing = len - self.held.len();
                self.ready.append(&mut self.held);
                continue;
            }
            let n = (len - self.held.len()).min(data.len());
            self.held.extend_from_slice(&data[..n]);
            data = &data[n..];
            if self.held.len() == len {
                match flatten(&self.held) {
                    Some(flat) => {
                        self.ready.extend_from_slice(&flat);
                        self.held.clear();
                    }
                    None => self.ready.append(&mut self.held),
                }
            }
        }
    }
}

/// What the write side does with the bytes lapin writes.
#[derive(Debug, PartialEq, Eq)]
enum Plan {
    /// Write this many of them to the socket as they are.
    Pass(usize),
    /// It took this many (held back, or rewritten and pending).
    Took(usize),
}

/// The write side: passes lapin's bytes to the socket as they are, except a
/// content-header frame whose headers are the flat [`DEEP_HEADERS`] table,
/// which it writes with the original headers again.
#[derive(Debug)]
pub(crate) struct WriteGuard {
    /// Bytes of the protocol header still to go out.
    preamble: usize,
    /// Bytes of the current frame still to go out untouched.
    passing: usize,
    /// The start of a frame taken but not yet written: its header, while
    /// incomplete, or a content-header frame.
    held: Vec<u8>,
    /// Bytes to write before any more of lapin's, from `pending_at` on.
    pending: Vec<u8>,
    pending_at: usize,
    /// The negotiated frame size (0: none).
    frame_max: Arc<AtomicU32>,
}

impl WriteGuard {
    pub(crate) fn new(frame_max: Arc<AtomicU32>) -> Self {
        WriteGuard {
            preamble: PROTOCOL_HEADER,
            passing: 0,
            held: Vec::new(),
            pending: Vec::new(),
            pending_at: 0,
            frame_max,
        }
    }

    fn pending(&self) -> &[u8] {
        &self.pending[self.pending_at..]
    }

    fn sent(&mut self, n: usize) {
        self.pending_at += n;
        if self.pending_at == self.pending.len() {
            self.pending.clear();
            self.pending_at = 0;
        }
    }

    /// What to do with `buf`, lapin's next bytes, once nothing is pending.
    fn plan(&mut self, buf: &[u8]) -> Plan {
        if self.preamble > 0 {
            return Plan::Pass(self.preamble.min(buf.len()));
        }
        if !self.held.is_empty() {
            return Plan::Took(self.take(buf));
        }
        let mut at = self.passing.min(buf.len());
        while at < buf.len() {
            let rest = &buf[at..];
            if rest.len() < FRAME_HEADER {
                break;
            }
            let len = frame_len(rest);
            if holds(rest) && (rest.len() < len || is_flat(&rest[..len])) {
                break;
            }
            at = (at + len).min(buf.len());
        }
        if at > 0 {
            Plan::Pass(at)
        } else {
            Plan::Took(self.take(buf))
        }
    }

    /// Follows the frames in the first `n` bytes of `buf`, written as they
    /// were (`buf` holds the header of every frame among them).
    fn passed(&mut self, buf: &[u8], n: usize) {
        if self.preamble > 0 {
            self.preamble -= n;
            return;
        }
        let mut at = self.passing.min(n);
        self.passing -= at;
        while at < n {
            let end = at + frame_len(&buf[at..]);
            if end > n {
                self.passing = end - n;
            }
            at = end;
        }
    }

    /// Takes the start of `buf`, at a frame's start, into the held frame, up
    /// to that frame's end; once it is whole, makes it pending, unpacked when
    /// it is the flat table. How many bytes it took.
    fn take(&mut self, buf: &[u8]) -> usize {
        let mut taken = 0;
        if self.held.len() < FRAME_HEADER {
            taken = (FRAME_HEADER - self.held.len()).min(buf.len());
            self.held.extend_from_slice(&buf[..taken]);
            if self.held.len() < FRAME_HEADER {
                return taken;
            }
        }
        let len = frame_len(&self.held);
        if !holds(&self.held) {
            self.passing = len - self.held.len();
            self.pending.append(&mut self.held);
            return taken;
        }
        let n = (len - self.held.len()).min(buf.len() - taken);
        self.held.extend_from_slice(&buf[taken..taken + n]);
        taken += n;
        if self.held.len() == len {
            let frame_max = self.frame_max.load(Ordering::Relaxed) as usize;
            match unflatten(&self.held, frame_max) {
                Some(original) => {
                    self.pending.extend_from_slice(&original);
                    self.held.clear();
                }
                None => self.pending.append(&mut self.held),
            }
        }
        taken
    }
}

/// Where the headers table of a content-header `frame` is: the start of its
/// 4-byte length and its end, within the frame. `None` without headers, or
/// when the properties before them run past the frame.
fn headers_span(frame: &[u8]) -> Option<(usize, usize)> {
    let payload = frame.get(FRAME_HEADER..frame.len().checked_sub(1)?)?;
    let class = u16::from_be_bytes([*payload.first()?, *payload.get(1)?]);
    let flags = u16::from_be_bytes([
        *payload.get(PROPERTY_FLAGS)?,
        *payload.get(PROPERTY_FLAGS + 1)?,
    ]);
    if class != BASIC_CLASS || flags & HEADERS == 0 {
        return None;
    }
    let mut at = PROPERTY_FLAGS + 2;
    for flag in [CONTENT_TYPE, CONTENT_ENCODING] {
        if flags & flag != 0 {
            at += 1 + usize::from(*payload.get(at)?);
        }
    }
    let len = payload.get(at..at + 4)?;
    let len = u32::from_be_bytes([len[0], len[1], len[2], len[3]]) as usize;
    let end = at + 4 + len;
    (end <= payload.len()).then_some((FRAME_HEADER + at, FRAME_HEADER + end))
}

/// `frame` with the headers table at `span` replaced by `table` (its
/// length included), and its size fixed up.
fn replace_headers(frame: &[u8], (start, end): (usize, usize), table: &[u8]) -> Vec<u8> {
    let len = frame.len() - (end - start) + table.len();
    let mut out = Vec::with_capacity(len);
    out.extend_from_slice(&frame[..3]);
    let size = u32::try_from(len - FRAME_OVERHEAD).unwrap_or(u32::MAX);
    out.extend_from_slice(&size.to_be_bytes());
    out.extend_from_slice(&frame[FRAME_HEADER..start]);
    out.extend_from_slice(table);
    out.extend_from_slice(&frame[end..]);
    out
}

/// The content-header `frame` lapin gets instead, when its headers nest
/// deeper than [`MAX_HEADER_DEPTH`] (the flat table, with the headers
/// packed) or cannot be read (the flat table, empty).
pub(crate) fn flatten(frame: &[u8]) -> Option<Vec<u8>> {
    let span = headers_span(frame)?;
    let entries = &frame[span.0 + 4..span.1];
    let packed = match table_depth(entries) {
        Ok(depth) if depth <= MAX_HEADER_DEPTH => return None,
        Ok(_) => pack(entries).unwrap_or_default(),
        Err(_) => Vec::new(),
    };
    let name = DEEP_HEADERS.as_bytes();
    let entry = 1 + name.len() + 1 + 4 + packed.len();
    let mut table = Vec::with_capacity(4 + entry);
    table.extend_from_slice(&u32::try_from(entry).unwrap_or(u32::MAX).to_be_bytes());
    table.push(name.len() as u8);
    table.extend_from_slice(name);
    table.push(b'x');
    table.extend_from_slice(
        &u32::try_from(packed.len())
            .unwrap_or(u32::MAX)
            .to_be_bytes(),
    );
    table.extend_from_slice(&packed);
    Some(replace_headers(frame, span, &table))
}

/// The packed headers of a flat table's encoded entries: exactly one entry,
/// [`DEEP_HEADERS`], a byte array.
fn packed_of(entries: &[u8]) -> Option<&[u8]> {
    let name = DEEP_HEADERS.as_bytes();
    let rest = entries
        .strip_prefix(&[name.len() as u8])?
        .strip_prefix(name)?
        .strip_prefix(b"x")?;
    let len = rest.get(..4)?;
    let len = u32::from_be_bytes([len[0], len[1], len[2], len[3]]) as usize;
    (rest.len() == 4 + len).then(|| &rest[4..])
}

/// Whether the content-header `frame` carries the flat table.
fn is_flat(frame: &[u8]) -> bool {
    headers_span(frame).is_some_and(|(start, end)| packed_of(&frame[start + 4..end]).is_some())
}

/// The content-header `frame` with the headers the flat table holds, when
/// they nest deeper than [`MAX_HEADER_DEPTH`] and the frame then fits in
/// `frame_max` bytes (0: no limit).
pub(crate) fn unflatten(frame: &[u8], frame_max: usize) -> Option<Vec<u8>> {
    let span = headers_span(frame)?;
    let unpacked = unpack(packed_of(&frame[span.0 + 4..span.1])?).ok()?;
    if unpacked.depth <= MAX_HEADER_DEPTH {
        return None;
    }
    let mut table = Vec::with_capacity(4 + unpacked.entries.len());
    table.extend_from_slice(&u32::try_from(unpacked.entries.len()).ok()?.to_be_bytes());
    table.extend_from_slice(&unpacked.entries);
    let original = replace_headers(frame, span, &table);
    (frame_max == 0 || original.len() <= frame_max).then_some(original)
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

/// Headers the frame guard set aside: what a delivery whose headers nest too
/// deeply carries instead (see the [module](self) documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SetAside {
    /// They nest this deep, in this many encoded bytes; the broker's copy is
    /// intact.
    Deep {
        /// Levels of tables and arrays.
        depth: usize,
        /// The encoded table's size.
        len: usize,
    },
    /// They are not a well-formed table.
    Unreadable,
}

/// The packed headers `properties` stand for, when their headers are the
/// flat table (empty when the original could not be read).
pub(crate) fn packed_headers(properties: &BasicProperties) -> Option<&[u8]> {
    let table = properties.headers().as_ref()?.inner();
    if table.len() != 1 {
        return None;
    }
    match table.get(DEEP_HEADERS)? {
        AMQPValue::ByteArray(packed) => Some(packed.as_slice()),
        _ => None,
    }
}

impl SetAside {
    /// The headers `properties` stand for, when they are the flat table.
    pub(crate) fn of(properties: &BasicProperties) -> Option<SetAside> {
        Some(match unpack(packed_headers(properties)?) {
            Ok(unpacked) => SetAside::Deep {
                depth: unpacked.depth,
                len: 4 + unpacked.entries.len(),
            },
            Err(_) => SetAside::Unreadable,
        })
    }
}

impl fmt::Display for SetAside {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SetAside::Deep { depth, len } => write!(
                f,
                "its headers nest {depth} levels deep ({len} bytes), more than {MAX_HEADER_DEPTH}"
            ),
            SetAside::Unreadable => f.write_str("its headers are not a well-formed field table"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lapin::types::FieldTable;

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

    /// A table's entries holding `deep`, nested `levels` levels, tables or
    /// arrays, built by hand.
    fn nested(levels: usize, arrays: bool) -> Vec<u8> {
        let mut value = vec![b't', 1];
        for _ in 1..levels {
            let mut outer = Vec::with_capacity(value.len() + 7);
            if arrays {
                outer.push(b'A');
                outer.extend_from_slice(&(value.len() as u32).to_be_bytes());
            } else {
                outer.push(b'F');
                outer.extend_from_slice(&(value.len() as u32 + 2).to_be_bytes());
                outer.extend_from_slice(&[1, b'a']);
            }
            outer.extend_from_slice(&value);
            value = outer;
        }
        let mut entries = vec![4];
        entries.extend_from_slice(b"deep");
        entries.extend_from_slice(&value);
        entries
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
            with_headers(&nested(MAX_HEADER_DEPTH, false)),
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
        let deep = with_headers(&nested(levels, arrays));
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
            let deep = with_headers(&nested(levels, arrays));
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
        let deep = with_headers(&nested(5_000, false));
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
                len: 4 + nested(5_000, false).len()
            })
        );
        assert_eq!(SetAside::of(&shallow_properties()), None);
    }

    #[test]
    fn unreadable_headers_are_set_aside_too() {
        let mut entries = nested(10, false);
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
        let shallow = with_headers(&nested(3, false));
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
