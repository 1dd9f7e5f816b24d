//! The accept loop of `telemeter serve`: HTTP/1.1 connections (hyper) under
//! the limits of [`Limits`], each answered by the router of [`super::app`].
//!
//! - **Header-read timeout**: from the first byte of a request head to its
//!   end; a connection still reading a head after it is closed (no response).
//!   The first byte wakes the connection's timer, so a head that starts
//!   while the idle timer runs is cut at its own timeout, not the idle one.
//! - **Idle timeout**: from the end of the last response (or the accept) to
//!   the first byte of the next request; an idle connection is closed after
//!   it. Neither timer runs while a request is in flight (a long usage
//!   summary is never cut); but a response the client takes no byte of for
//!   the idle timeout is abandoned and the connection closed (slow readers).
//! - **Connection cap**: at most `max_connections` open connections. A new
//!   connection over the cap closes the connection that has been idle
//!   longest (no request in flight, nothing left to write), so a client
//!   always gets in while others merely hold connections open; when every
//!   connection is busy, new connections wait in the listen backlog until
//!   one ends. When the process is out of file descriptors (`accept`
//!   fails), the longest-idle connection is closed the same way and
//!   `accept` is tried again.
//!
//! Shutdown: stop accepting, close idle connections, let in-flight requests
//! finish (hyper closes their connections after the response).

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Notify};
use tokio::task::JoinSet;

use super::conn::{ConnState, Due, Tracked, Watched};
use super::{LogSink, Server};

/// The limits of the connection layer (flags of `telemeter serve`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// From the first byte of a request head to its end.
    pub header_read_timeout: Duration,
    /// From the end of a response (or the accept) to the next request.
    pub idle_timeout: Duration,
    /// Open connections at most.
    pub max_connections: usize,
}

impl Limits {
    /// The default header-read timeout.
    pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
    /// The default idle timeout.
    pub const IDLE_TIMEOUT: Duration = Duration::from_secs(30);
    /// The default connection cap.
    pub const MAX_CONNECTIONS: usize = 1024;
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            header_read_timeout: Limits::HEADER_READ_TIMEOUT,
            idle_timeout: Limits::IDLE_TIMEOUT,
            max_connections: Limits::MAX_CONNECTIONS,
        }
    }
}

/// hyper's read buffer, and so the largest request head it reads (above
/// our own limits, so that ours answer with the error body first).
const HYPER_MAX_BUF: usize = 256 << 10;
/// hyper's header-count limit (above ours, [`super::MAX_HEADERS`]).
const HYPER_MAX_HEADERS: usize = 1000;
/// How long the accept loop waits before trying again after a failure.
const ACCEPT_RETRY: Duration = Duration::from_millis(10);

/// The open connections.
#[derive(Default)]
struct Registry {
    connections: Mutex<Vec<(u64, Arc<ConnState>)>>,
    /// Signalled whenever a connection ends.
    released: Notify,
}

impl Registry {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<(u64, Arc<ConnState>)>> {
        self.connections.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn len(&self) -> usize {
        self.lock().len()
    }

    fn add(&self, id: u64, state: Arc<ConnState>) {
        self.lock().push((id, state));
    }

    fn remove(&self, id: u64) {
        self.lock().retain(|(other, _)| *other != id);
        self.released.notify_waiters();
    }

    /// Picks the connection idle longest to be closed, unless one is being
    /// closed already; whether one is on its way out.
    fn evict_one(&self) -> bool {
        let connections = self.lock();
        if connections.iter().any(|(_, c)| c.evicting.load(Ordering::Relaxed)) {
            return true;
        }
        let oldest = connections.iter().filter(|(_, c)| c.is_idle()).min_by_key(|(_, c)| c.idle_since());
        match oldest {
            Some((_, state)) => {
                state.evicting.store(true, Ordering::Relaxed);
                state.evict.notify_one();
                true
            }
            None => false,
        }
    }
}

/// Serves `server` on `listener` until `shutdown` resolves, then lets
/// in-flight requests finish.
pub async fn serve(
    listener: TcpListener,
    server: Arc<Server>,
    limits: Limits,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let router = super::app(server.clone());
    let log = server.log.clone();
    let epoch = Instant::now();
    let registry = Arc::new(Registry::default());
    let (stop, stopping) = watch::channel(false);
    let mut tasks = JoinSet::new();
    let mut next_id = 0u64;
    let mut last_failure_logged: Option<Instant> = None;
    tokio::pin!(shutdown);
    loop {
        while tasks.try_join_next().is_some() {}
        let accepted = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => accepted,
        };
        let (stream, peer) = match accepted {
            Ok(pair) => pair,
            Err(error) => {
                // Most often out of descriptors: make room, then try again.
                let evicting = registry.evict_one();
                if last_failure_logged.is_none_or(|at| at.elapsed() > Duration::from_secs(1)) {
                    last_failure_logged = Some(Instant::now());
                    let line = serde_json::json!({"event": "accept_failed", "error": error.to_string(), "closing_idle": evicting});
                    log(&line.to_string());
                }
                tokio::time::sleep(ACCEPT_RETRY).await;
                continue;
            }
        };
        // Over the cap: the longest-idle connection makes room; when all
        // are busy, wait for one to end (the backlog holds the rest).
        while registry.len() >= limits.max_connections {
            registry.evict_one();
            let released = registry.released.notified();
            tokio::select! {
                () = &mut shutdown => {
                    drop(stream);
                    return finish(stop, tasks).await;
                },
                () = released => {},
                () = tokio::time::sleep(Duration::from_millis(50)) => {},
            }
        }
        next_id += 1;
        let state = Arc::new(ConnState::new(epoch));
        registry.add(next_id, state.clone());
        let connection = Connection {
            id: next_id,
            stream,
            peer,
            router: router.clone(),
            state,
            registry: registry.clone(),
            log: log.clone(),
            limits,
            stopping: stopping.clone(),
        };
        tasks.spawn(connection.run());
    }
    finish(stop, tasks).await
}

/// Tells every connection to stop, and waits for them.
async fn finish(stop: watch::Sender<bool>, mut tasks: JoinSet<()>) -> std::io::Result<()> {
    let _ = stop.send(true);
    while tasks.join_next().await.is_some() {}
    Ok(())
}

/// One accepted connection and what it needs.
struct Connection {
    id: u64,
    stream: TcpStream,
    peer: SocketAddr,
    router: Router,
    state: Arc<ConnState>,
    registry: Arc<Registry>,
    log: LogSink,
    limits: Limits,
    stopping: watch::Receiver<bool>,
}

impl Connection {
    /// Serves the connection until the client closes it or a limit does.
    async fn run(mut self) {
        let _ = self.stream.set_nodelay(true);
        let (state, peer, router) = (self.state.clone(), self.peer, self.router.clone());
        let service = hyper::service::service_fn(move |mut request: hyper::Request<Incoming>| {
            let busy = state.begin();
            request.extensions_mut().insert(ConnectInfo(peer));
            let router = router.clone();
            async move {
                let response = tower::ServiceExt::oneshot(router, request.map(Body::new)).await;
                let response = match response {
                    Ok(response) => response,
                    Err(never) => match never {},
                };
                Ok::<_, Infallible>(response.map(|body| Tracked { body, _busy: busy }))
            }
        });
        let io = TokioIo::new(Watched::new(self.stream, self.state.clone(), self.log.clone()));
        let connection = hyper::server::conn::http1::Builder::new()
            .keep_alive(true)
            .header_read_timeout(None)
            .max_buf_size(HYPER_MAX_BUF)
            .max_headers(HYPER_MAX_HEADERS)
            .serve_connection(io, service);
        tokio::pin!(connection);
        let mut stopping = false;
        let closed_by_us = loop {
            let due = self.state.due(self.limits.idle_timeout, self.limits.header_read_timeout);
            let deadline = match due {
                Due::At(at) => at,
                Due::Idle => break Some("idle_timeout"),
                Due::HeaderRead => break Some("header_read_timeout"),
                Due::Stalled => break Some("stalled"),
            };
            if stopping && self.state.is_idle() {
                break Some("shutdown");
            }
            tokio::select! {
                _ = connection.as_mut() => break None,
                () = self.state.evict.notified() => {
                    if self.state.is_idle() {
                        break Some("evicted");
                    }
                    self.state.evicting.store(false, Ordering::Relaxed);
                }
                changed = self.stopping.changed(), if !stopping => {
                    let _ = changed;
                    stopping = true;
                    connection.as_mut().graceful_shutdown();
                }
                () = self.state.rearm.notified() => {}
                () = tokio::time::sleep_until(deadline.into()) => {}
            }
        };
        if let Some(reason) = closed_by_us {
            if reason == "evicted" {
                let line = serde_json::json!({"event": "evicted", "peer": self.peer.to_string(), "reason": "make room for a new connection"});
                (self.log)(&line.to_string());
            }
        }
        self.registry.remove(self.id);
    }
}
