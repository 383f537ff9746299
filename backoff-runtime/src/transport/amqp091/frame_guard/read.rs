//! The read side: content-header frames held until whole, and flattened
//! when their headers nest too deeply.

use super::surgery::flatten;
use super::{FRAME_HEADER, frame_len, holds};

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
    pub(super) fn has_ready(&self) -> bool {
        self.ready_at < self.ready.len()
    }

    /// Moves ready bytes into `buf`; how many.
    pub(super) fn take_ready(&mut self, buf: &mut [u8]) -> usize {
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
    pub(super) fn hold(&mut self, mut data: &[u8]) {
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
