//! Threads started without a panic: [`spawn_scoped`] and [`spawn`] start a
//! named thread through `std::thread::Builder`, and a thread the operating
//! system will not give (its stack cannot be had under a small `ulimit -v`,
//! or the process limit of `ulimit -u` is reached) is an [`Error`] saying
//! which limit to raise. `std::thread::scope`'s own `spawn` and
//! `std::thread::spawn` panic instead.
//!
//! The worker pool's threads are started once, at the start of the binary
//! (`cli`); these are the few threads of our own beside it.

use std::thread::{Builder, JoinHandle, Scope, ScopedJoinHandle};

use crate::error::{Error, Result};

/// Starts `work` on a thread named `name` inside `scope`.
pub fn spawn_scoped<'scope, 'env, T: Send + 'scope>(
    scope: &'scope Scope<'scope, 'env>,
    name: &str,
    work: impl FnOnce() -> T + Send + 'scope,
) -> Result<ScopedJoinHandle<'scope, T>> {
    Builder::new().name(name.to_owned()).spawn_scoped(scope, work).map_err(|e| cannot_start(name, e))
}

/// Starts `work` on a thread named `name`.
pub fn spawn<T: Send + 'static>(name: &str, work: impl FnOnce() -> T + Send + 'static) -> Result<JoinHandle<T>> {
    Builder::new().name(name.to_owned()).spawn(work).map_err(|e| cannot_start(name, e))
}

/// The error for a thread the operating system would not start.
fn cannot_start(name: &str, error: std::io::Error) -> Error {
    Error::External(format!(
        "cannot start a thread ({name}): {error}; raise the process's memory or process limit (ulimit -v, ulimit -u)"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A started thread runs its work and carries its name.
    #[test]
    fn a_thread_runs_under_its_name() {
        let name = std::thread::scope(|scope| {
            let handle = spawn_scoped(scope, "telemeter-test", || std::thread::current().name().map(str::to_owned));
            handle.expect("started").join().expect("joined")
        });
        assert_eq!(name.as_deref(), Some("telemeter-test"));
        assert_eq!(spawn("telemeter-test", || 7).expect("started").join().expect("joined"), 7);
    }

    /// The error names the thread and the limits to raise.
    #[test]
    fn the_error_names_the_thread_and_the_limits() {
        let error = cannot_start("telemeter-sync", std::io::Error::from_raw_os_error(libc::EAGAIN));
        let text = error.to_string();
        assert!(text.starts_with("cannot start a thread (telemeter-sync): "), "{text}");
        assert!(text.contains("ulimit -v, ulimit -u"), "{text}");
    }
}
