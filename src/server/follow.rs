//! Following a store: `telemeter serve --store` answers from each newly
//! published generation within one poll interval, without a restart.
//!
//! Every interval the follower looks at `STORE/manifest.json` (one `stat`:
//! size, modification time and inode); when it changed, it opens the store
//! anew on the blocking pool ([`Generation::open_store`]: manifest, read
//! lease, accounts, credentials, resources) and, if the generation differs,
//! swaps it in whole ([`super::Current::set`]). A request takes the current
//! generation once, when it starts, and finishes on it; the old generation
//! (and its read lease, so its files) goes when its last request is done.
//! A reload that fails keeps the old generation answering, logs
//! `reload_failed` (once per distinct error) and is tried again at the next
//! interval.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::{Generation, Server};

/// What identifies one version of the manifest file without reading it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Stamp {
    len: u64,
    modified: Option<std::time::SystemTime>,
    inode: u64,
}

fn stamp(store: &Path) -> Option<Stamp> {
    let meta = std::fs::metadata(store.join(crate::store::MANIFEST)).ok()?;
    #[cfg(unix)]
    let inode = std::os::unix::fs::MetadataExt::ino(&meta);
    #[cfg(not(unix))]
    let inode = 0;
    Some(Stamp { len: meta.len(), modified: meta.modified().ok(), inode })
}

/// Follows `store` for `server` every `interval`, forever.
pub async fn follow(server: Arc<Server>, store: PathBuf, interval: Duration) {
    let mut seen = None;
    let mut last_error = None;
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        let now = stamp(&store);
        if now.is_none() || now == seen {
            continue;
        }
        let current = server.current.get();
        let dir = store.clone();
        let opened = tokio::task::spawn_blocking(move || Generation::open_store(&dir, Some(&current))).await;
        let opened = opened.unwrap_or_else(|e| Err(format!("reload failed: {e}")));
        match opened {
            Ok(Some(generation)) => {
                let number = generation.number;
                server.current.set(Arc::new(generation));
                let line = serde_json::json!({"event": "generation", "generation": number});
                (server.log)(&line.to_string());
            }
            Ok(None) => {}
            Err(error) => {
                if last_error.as_ref() != Some(&error) {
                    let line = serde_json::json!({"event": "reload_failed", "error": error});
                    (server.log)(&line.to_string());
                    last_error = Some(error);
                }
                continue;
            }
        }
        last_error = None;
        seen = now;
    }
}
