//! The usage summary's rate limit: at most N requests per account in any
//! sliding window of W (api.md section 8: 20 per 60 s).
//!
//! A sliding log per account behind one mutex, so the limit holds across
//! every worker thread. Only admitted requests are logged: a client that
//! keeps retrying too early does not push its own window forward. The
//! clock is injected so that tests step time by hand.
//!
//! Servers on one store (or one data folder) share the log in a SQLite
//! database beside the deletions ([`RateLimiter::shared`]), so that the
//! limit holds per account whichever server answers: each admission is
//! one IMMEDIATE transaction (wait for the other writers, prune the
//! account's old entries, count, insert). The times there are wall-clock
//! milliseconds, so the servers' clocks must agree to well under a
//! second. Should the database fail at runtime, the process's own log
//! decides, as without one: a request is never refused for it.

use std::collections::{HashMap, VecDeque};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rusqlite::{Connection, TransactionBehavior};

use crate::error::{Error, Result};

/// A clock: time since the Unix epoch, never going back within a process.
pub trait Clock: Send + Sync {
    /// Now, as time since the epoch.
    fn elapsed(&self) -> Duration;
}

/// The process's clock: the wall clock at its start, then the monotonic
/// clock (a wall clock stepped back would shrink a window).
#[derive(Debug)]
pub struct SystemClock {
    started: std::time::Instant,
    wall: Duration,
}

impl Default for SystemClock {
    fn default() -> SystemClock {
        let wall = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        SystemClock { started: std::time::Instant::now(), wall }
    }
}

impl Clock for SystemClock {
    fn elapsed(&self) -> Duration {
        self.wall + self.started.elapsed()
    }
}

/// The limiter: `limit` admitted requests per key per `window`.
pub struct RateLimiter {
    limit: usize,
    window: Duration,
    clock: Arc<dyn Clock>,
    admitted: Mutex<HashMap<String, VecDeque<Duration>>>,
    /// The log shared with the other servers of the store, when there is one.
    shared: Option<Mutex<Connection>>,
}

impl std::fmt::Debug for RateLimiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RateLimiter")
            .field("limit", &self.limit)
            .field("window", &self.window)
            .field("shared", &self.shared.is_some())
            .finish()
    }
}

/// The shared log's table: one row per admitted request.
const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS admitted (auth_id TEXT NOT NULL, at_ms INTEGER NOT NULL);
     CREATE INDEX IF NOT EXISTS admitted_by_account ON admitted (auth_id, at_ms);";

impl RateLimiter {
    /// A limiter of `limit` requests per `window` on `clock`, for this
    /// process alone.
    pub fn new(limit: usize, window: Duration, clock: Arc<dyn Clock>) -> RateLimiter {
        RateLimiter { limit, window, clock, admitted: Mutex::new(HashMap::new()), shared: None }
    }

    /// A limiter whose log is the SQLite database at `path` (created when
    /// missing), shared with every process that opens it.
    pub fn shared(limit: usize, window: Duration, clock: Arc<dyn Clock>, path: &Path) -> Result<RateLimiter> {
        let fail = |e: rusqlite::Error| Error::io(path, format!("the shared rate-limit log: {e}"));
        let connection = Connection::open(path).map_err(fail)?;
        // Other servers hold the lock for a transaction of microseconds;
        // one held longer (a stuck process) is not waited for: this
        // process's own log decides meanwhile.
        connection.busy_timeout(Duration::from_millis(20)).map_err(fail)?;
        // Runtime state that a crash may lose (the window restarts), in a
        // rollback journal that lives only for a transaction: no files are
        // left beside it while servers run, or when the disk is full.
        connection.pragma_update(None, "journal_mode", "DELETE").map_err(fail)?;
        connection.pragma_update(None, "synchronous", "OFF").map_err(fail)?;
        connection.execute_batch(SCHEMA).map_err(fail)?;
        Ok(RateLimiter { shared: Some(Mutex::new(connection)), ..RateLimiter::new(limit, window, clock) })
    }

    /// Requests admitted per key per [`window`](RateLimiter::window).
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// The sliding window.
    pub fn window(&self) -> Duration {
        self.window
    }

    /// Admits a request of `key` (and counts it), or says how long until
    /// one would be admitted.
    pub fn admit(&self, key: &str) -> std::result::Result<(), Duration> {
        let now = self.clock.elapsed();
        if let Some(shared) = &self.shared {
            // A poisoned lock only means another thread panicked mid-use.
            let mut connection = shared.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            if let Ok(decided) = self.admit_shared(&mut connection, key, now) {
                return decided;
            }
        }
        let mut admitted = self.admitted.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let log = admitted.entry(key.to_owned()).or_default();
        while log.front().is_some_and(|t| now.saturating_sub(*t) >= self.window) {
            log.pop_front();
        }
        if log.len() >= self.limit {
            let oldest = log.front().copied().unwrap_or(now);
            return Err((oldest + self.window).saturating_sub(now));
        }
        log.push_back(now);
        Ok(())
    }

    /// [`RateLimiter::admit`] in the shared log.
    fn admit_shared(
        &self,
        connection: &mut Connection,
        key: &str,
        now: Duration,
    ) -> rusqlite::Result<std::result::Result<(), Duration>> {
        let millis = |d: Duration| i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
        let (now_ms, window_ms) = (millis(now), millis(self.window));
        let transaction = connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
        transaction.execute(
            "DELETE FROM admitted WHERE auth_id = ?1 AND at_ms <= ?2",
            rusqlite::params![key, now_ms.saturating_sub(window_ms)],
        )?;
        let (count, oldest): (i64, Option<i64>) =
            transaction.query_row("SELECT COUNT(*), MIN(at_ms) FROM admitted WHERE auth_id = ?1", [key], |row| {
                Ok((row.get(0)?, row.get(1)?))
            })?;
        let decided = if usize::try_from(count).unwrap_or(usize::MAX) >= self.limit {
            let wait = oldest.unwrap_or(now_ms).saturating_add(window_ms).saturating_sub(now_ms);
            Err(Duration::from_millis(u64::try_from(wait).unwrap_or(0)))
        } else {
            transaction
                .execute("INSERT INTO admitted (auth_id, at_ms) VALUES (?1, ?2)", rusqlite::params![key, now_ms])?;
            Ok(())
        };
        transaction.commit()?;
        Ok(decided)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    #[derive(Default)]
    struct ManualClock(AtomicU64);

    impl Clock for ManualClock {
        fn elapsed(&self) -> Duration {
            Duration::from_millis(self.0.load(Ordering::SeqCst))
        }
    }

    #[test]
    fn admits_twenty_per_sliding_minute_per_account() {
        let clock = Arc::new(ManualClock::default());
        let limiter = RateLimiter::new(20, Duration::from_secs(60), clock.clone());
        let step = |ms: u64| clock.0.fetch_add(ms, Ordering::SeqCst);
        for _ in 0..20 {
            assert_eq!(limiter.admit("A"), Ok(()));
            step(1000);
        }
        // t = 20 s: the first request (t = 0) leaves the window at t = 60 s.
        assert_eq!(limiter.admit("A"), Err(Duration::from_secs(40)));
        assert_eq!(limiter.admit("B"), Ok(()));
        step(39_999);
        assert_eq!(limiter.admit("A"), Err(Duration::from_millis(1)));
        step(1);
        assert_eq!(limiter.admit("A"), Ok(()));
        assert_eq!(limiter.admit("A"), Err(Duration::from_secs(1)));
        step(1000);
        assert_eq!(limiter.admit("A"), Ok(()));
    }

    /// Two limiters on one shared log (two servers of a store) admit the
    /// limit between them, with the same waits as one.
    #[test]
    fn a_shared_log_holds_across_limiters() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rate.sqlite");
        let clock = Arc::new(ManualClock::default());
        clock.0.store(1_795_000_000_000, Ordering::SeqCst);
        let one = RateLimiter::shared(20, Duration::from_secs(60), clock.clone(), &path).unwrap();
        let two = RateLimiter::shared(20, Duration::from_secs(60), clock.clone(), &path).unwrap();
        for i in 0..20 {
            let limiter = if i % 2 == 0 { &one } else { &two };
            assert_eq!(limiter.admit("A"), Ok(()));
            clock.0.fetch_add(1000, Ordering::SeqCst);
        }
        assert_eq!(one.admit("A"), Err(Duration::from_secs(40)));
        assert_eq!(two.admit("A"), Err(Duration::from_secs(40)));
        assert_eq!(two.admit("B"), Ok(()));
        clock.0.fetch_add(40_000, Ordering::SeqCst);
        assert_eq!(two.admit("A"), Ok(()));
        assert_eq!(one.admit("A"), Err(Duration::from_secs(1)));
        // Across threads too, through two connections at once.
        let (one, two) = (Arc::new(one), Arc::new(two));
        let handles: Vec<_> = (0..8)
            .map(|t| {
                let limiter = if t % 2 == 0 { one.clone() } else { two.clone() };
                std::thread::spawn(move || (0..10).filter(|_| limiter.admit("C").is_ok()).count())
            })
            .collect();
        let admitted: usize = handles.into_iter().map(|h| h.join().unwrap()).sum();
        assert_eq!(admitted, 20);
    }

    #[test]
    fn holds_across_threads() {
        let limiter = Arc::new(RateLimiter::new(20, Duration::from_secs(60), Arc::new(ManualClock::default())));
        let handles: Vec<_> = (0..8)
            .map(|_| {
                let limiter = limiter.clone();
                std::thread::spawn(move || (0..10).filter(|_| limiter.admit("A").is_ok()).count())
            })
            .collect();
        let admitted: usize = handles.into_iter().map(|h| h.join().unwrap()).sum();
        assert_eq!(admitted, 20);
    }
}
