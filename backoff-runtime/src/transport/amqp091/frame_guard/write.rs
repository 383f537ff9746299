//! The write side: a flattened content-header frame written with its
//! original headers again, when they still fit the negotiated frame size.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use super::surgery::{is_flat, unflatten};
use super::{FRAME_HEADER, PROTOCOL_HEADER, frame_len, holds};

/// What the write side does with the bytes lapin writes.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Plan {
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

    pub(super) fn pending(&self) -> &[u8] {
        &self.pending[self.pending_at..]
    }

    pub(super) fn sent(&mut self, n: usize) {
        self.pending_at += n;
        if self.pending_at == self.pending.len() {
            self.pending.clear();
            self.pending_at = 0;
        }
    }

    /// What to do with `buf`, lapin's next bytes, once nothing is pending.
    pub(super) fn plan(&mut self, buf: &[u8]) -> Plan {
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
    pub(super) fn passed(&mut self, buf: &[u8], n: usize) {
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
    pub(super) fn take(&mut self, buf: &[u8]) -> usize {
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
