//! The audit log: every replay, discard, edit, purge and rebuild of the
//! dead-letter index, every start, pause, resume and stop of a replay job
//! and the end of those this console drives (an entry of
//! `writes::audit_entry`: who asked for it, when, what it applied to and
//! how many messages it moved), appended as one line of JSON to a file that
//! is only ever appended to.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde::de::DeserializeOwned;

/// How much of the end of the file the page is shown from.
const TAIL_BYTES: u64 = 1 << 20;

/// The audit log: a file only ever appended to, one JSON object a line
/// per write (who, when, what and how many); the page shows its newest
/// entries.
#[derive(Debug)]
pub struct AuditLog {
    path: PathBuf,
    /// One append at a time, so that lines never interleave.
    lock: tokio::sync::Mutex<()>,
}

impl AuditLog {
    /// The log at `path`, created (with its folder) if missing; fails now,
    /// not at the first write, when it cannot be written.
    pub fn open(path: PathBuf) -> Result<AuditLog, String> {
        if let Some(folder) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(folder).map_err(|e| {
                format!(
                    "cannot create the audit log's folder {}: {e}",
                    folder.display()
                )
            })?;
        }
        append_file(&path)?;
        Ok(AuditLog {
            path,
            lock: tokio::sync::Mutex::new(()),
        })
    }

    /// Where it is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends `entry` as one line.
    pub(crate) async fn record(&self, entry: &impl Serialize) -> Result<(), String> {
        let mut line = serde_json::to_vec(entry).map_err(|e| e.to_string())?;
        line.push(b'\n');
        let _one_at_a_time = self.lock.lock().await;
        let path = self.path.clone();
        tokio::task::spawn_blocking(move || {
            let mut file = append_file(&path)?;
            file.write_all(&line)
                .and_then(|()| file.sync_data())
                .map_err(|e| format!("cannot write the audit log {}: {e}", path.display()))
        })
        .await
        .map_err(|e| e.to_string())?
    }

    /// The newest `limit` entries, newest first (from the last megabyte of
    /// the file; lines that are not entries are left out).
    pub(crate) async fn newest<T: DeserializeOwned + Send + 'static>(
        &self,
        limit: usize,
    ) -> Result<Vec<T>, String> {
        let path = self.path.clone();
        tokio::task::spawn_blocking(move || {
            let read =
                |e: std::io::Error| format!("cannot read the audit log {}: {e}", path.display());
            let mut file = File::open(&path).map_err(read)?;
            let len = file.metadata().map_err(read)?.len();
            let start = len.saturating_sub(TAIL_BYTES);
            file.seek(SeekFrom::Start(start)).map_err(read)?;
            let mut tail = Vec::new();
            file.read_to_end(&mut tail).map_err(read)?;
            let text = String::from_utf8_lossy(&tail);
            let mut lines: Vec<&str> = text.lines().collect();
            if start > 0 && !lines.is_empty() {
                lines.remove(0); // cut in the middle
            }
            Ok(lines
                .iter()
                .rev()
                .filter_map(|line| serde_json::from_str(line).ok())
                .take(limit)
                .collect())
        })
        .await
        .map_err(|e| e.to_string())?
    }
}

fn append_file(path: &Path) -> Result<File, String> {
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| format!("cannot open the audit log {}: {e}", path.display()))
}

/// `$XDG_STATE_HOME/rabbit-backoff/console-audit.jsonl`, else
/// `~/.local/state/rabbit-backoff/console-audit.jsonl`, else the file
/// `rabbit-backoff-console-audit.jsonl` in the working directory.
pub fn default_audit_path() -> PathBuf {
    let state = std::env::var_os("XDG_STATE_HOME")
        .filter(|s| !s.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|s| !s.is_empty())
                .map(|home| PathBuf::from(home).join(".local").join("state"))
        });
    match state {
        Some(state) => state.join("rabbit-backoff").join("console-audit.jsonl"),
        None => PathBuf::from("rabbit-backoff-console-audit.jsonl"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::selection::Selection;
    use crate::writes::audit_entry::{AuditEntry, AuditSelection};

    fn entry(who: &str, count: usize) -> AuditEntry {
        AuditEntry {
            at: "2026-12-02T10:00:00Z".into(),
            who: who.into(),
            action: "replay".into(),
            queue: "orders".into(),
            selection: AuditSelection::Selection(Selection::Group("0123456789ab".into())),
            count,
            message_ids: vec!["m-1".into()],
            error: None,
            note: None,
            job: None,
        }
    }

    #[tokio::test]
    async fn appends_and_shows_the_newest_first() {
        let folder = std::env::temp_dir().join(format!("rb-audit-{}", std::process::id()));
        let path = folder.join("deep").join("audit.jsonl");
        let log = AuditLog::open(path.clone()).unwrap();
        log.record(&entry("alice", 3)).await.unwrap();
        log.record(&entry("bob", 1)).await.unwrap();
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(b"not an entry\n")
            .unwrap();
        let newest: Vec<AuditEntry> = log.newest(10).await.unwrap();
        assert_eq!(newest, [entry("bob", 1), entry("alice", 3)]);
        assert_eq!(
            log.newest::<AuditEntry>(1).await.unwrap(),
            [entry("bob", 1)]
        );
        // Opened again, it keeps what it had.
        let again = AuditLog::open(path.clone()).unwrap();
        again.record(&entry("carol", 2)).await.unwrap();
        assert_eq!(again.newest::<AuditEntry>(10).await.unwrap().len(), 3);
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            text.starts_with("{\"at\":\"2026-12-02T10:00:00Z\",\"who\":\"alice\""),
            "{text}"
        );
        std::fs::remove_dir_all(folder).unwrap();
    }
}
