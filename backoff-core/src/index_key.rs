//! The identity of a dead letter in the dead-letter index.

/// The key of one dead letter in the dead-letter index: a 64-bit FNV-1a hash
/// of `parts` (each length-prefixed, an absent one distinct from an empty
/// one). The runtime passes the fields that grouping reads and those that
/// tell two failures apart (message id, correlation id, timestamp,
/// `x-error`, `x-failed-at`, `x-dead-letter-reason`, `x-original-queue`,
/// `x-retry-count`, the broker's `x-death`), read the same way from the
/// dead-letter queue and from the index, so that a tombstone written when a
/// message leaves the queue cancels one entry with its key. Two dead letters
/// with the same key group the same way, so which of them a tombstone
/// cancels changes no group.
///
/// ```
/// use rabbit_backoff::rules::index_key;
///
/// let a = index_key([Some(&b"m-1"[..]), Some(&b"db down"[..])]);
/// assert_eq!(a, index_key([Some(&b"m-1"[..]), Some(&b"db down"[..])]));
/// assert_ne!(a, index_key([Some(&b"m-1"[..]), None]));
/// assert_ne!(index_key([Some(&b"ab"[..]), Some(&b"c"[..])]), index_key([Some(&b"a"[..]), Some(&b"bc"[..])]));
/// ```
pub fn index_key<'a>(parts: impl IntoIterator<Item = Option<&'a [u8]>>) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for byte in bytes {
            hash ^= u64::from(*byte);
            hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        }
    };
    for part in parts {
        match part {
            None => eat(&[0]),
            Some(bytes) => {
                eat(&[1]);
                eat(&(bytes.len() as u64).to_le_bytes());
                eat(bytes);
            }
        }
    }
    hash
}
