//! The usage summary's rate limit: at most N requests per account in any
//! sliding window of W (api.md section 8: 20 per 60 s).
//!
//! A sliding log per account behind one mutex, so the limit holds across
//! every worker thread. Only admitted requests are logged: a client that
//! keeps retrying too early does not push its own window forward. The
//! clock is injected so that tests step time by hand.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A monotonic clock: time elapsed since an arbitrary origin.
pub trait Clock: Send + Sync {
    /// Now, as time since the origin.
    fn elapsed(&self) -> Duration;
}

/// The process's monotonic clock.
#[derive(Debug)]
pub struct SystemClock(std::time::Instant);

impl Default for SystemClock {
    fn default() -> SystemClock {
        SystemClock(std::time::Instant::now())
    }
}

impl Clock for SystemClock {
    fn elapsed(&self) -> Duration {
        self.0.elapsed()
    }
}

/// The limiter: `limit` admitted requests per key per `window`.
pub struct RateLimiter {
    limit: usize,
    window: Duration,
    clock: Arc<dyn Clock>,
    admitted: Mutex<HashMap<String, VecDeque<Duration>>>,
}

impl std::fmt::Debug for RateLimiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RateLimiter").field("limit", &self.limit).field("window", &self.window).finish()
    }
}

impl RateLimiter {
    /// A limiter of `limit` requests per `window` on `clock`.
    pub fn new(limit: usize, window: Duration, clock: Arc<dyn Clock>) -> RateLimiter {
        RateLimiter { limit, window, clock, admitted: Mutex::new(HashMap::new()) }
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
    pub fn admit(&self, key: &str) -> Result<(), Duration> {
        let now = self.clock.elapsed();
        // A poisoned lock only means another thread panicked mid-update of
        // plain timestamps; the data is still usable.
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
