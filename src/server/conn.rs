//! One connection as the server sees it: whether a request is in flight,
//! since when it has been idle or reading a request head, and the bytes it
//! moves.
//!
//! [`Watched`] wraps the socket under hyper. On the way in it notes when the
//! first byte of a request head arrives (for the header-read timeout); on
//! the way out it notes unflushed bytes, and it gives the responses hyper
//! writes by itself the API's error body: hyper answers a request it cannot
//! parse (400: a malformed request line or header; 414: a request target over
//! its 65534-byte limit; 431: a head over its buffer or header-count limit)
//! with a bodyless response, before any service sees the request. Those are
//! recognised by their shape (status 400, 414 or 431, `content-length: 0`,
//! no `content-type`: every error of ours has a JSON body and a content
//! type) at the start of a write while no request is in flight, and
//! replaced by the same head with `{"api_id", "error"}` as body (still
//! `connection: close`), logged like any request.
//!
//! [`Tracked`] wraps a response body: the request counts as in flight until
//! hyper has taken its last byte. A response whose bytes the client stops
//! taking for the idle timeout is abandoned ([`Due::Stalled`]).

use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use hyper::body::{Frame, SizeHint};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::LogSink;

/// "Not set" for the instants kept as milliseconds.
const UNSET: u64 = u64::MAX;

/// The state of one connection, shared by its socket wrapper, its service
/// and the accept loop.
#[derive(Debug)]
pub(crate) struct ConnState {
    /// The server's clock origin (instants are kept as milliseconds since).
    epoch: Instant,
    /// Requests whose response is not fully handed to hyper yet.
    busy: AtomicUsize,
    /// Bytes given to the socket since its last flush.
    unflushed: AtomicBool,
    /// When bytes last moved to the socket (or a write began).
    last_write: AtomicU64,
    /// Since when nothing has been in flight (accept, or the end of the
    /// last response).
    idle_since: AtomicU64,
    /// When the first byte of the next request head arrived, or [`UNSET`].
    head_since: AtomicU64,
    /// Picked to be closed to make room (see `listen.rs`).
    pub(crate) evicting: AtomicBool,
    /// Wakes the connection's task when it is picked.
    pub(crate) evict: tokio::sync::Notify,
    /// Wakes the connection's task when its timers change: the first byte
    /// of a head (the header-read timeout now applies, not the idle one)
    /// or the end of a response (the idle timeout starts).
    pub(crate) rearm: tokio::sync::Notify,
}

/// What a connection's timers decide.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Due {
    /// Nothing yet; look again at this instant.
    At(Instant),
    /// The connection has been idle too long.
    Idle,
    /// The request head took too long.
    HeaderRead,
    /// The client has not taken any of a response for the idle timeout.
    Stalled,
}

impl ConnState {
    /// A connection accepted now.
    pub(crate) fn new(epoch: Instant) -> ConnState {
        let state = ConnState {
            epoch,
            busy: AtomicUsize::new(0),
            unflushed: AtomicBool::new(false),
            last_write: AtomicU64::new(0),
            idle_since: AtomicU64::new(0),
            head_since: AtomicU64::new(UNSET),
            evicting: AtomicBool::new(false),
            evict: tokio::sync::Notify::new(),
            rearm: tokio::sync::Notify::new(),
        };
        state.idle_since.store(state.now_ms(), Ordering::Relaxed);
        state
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(UNSET - 1)
    }

    fn instant(&self, ms: u64) -> Instant {
        self.epoch + Duration::from_millis(ms)
    }

    /// No request in flight and nothing left to write: closing it now
    /// loses no response.
    pub(crate) fn is_idle(&self) -> bool {
        self.busy.load(Ordering::Acquire) == 0 && !self.unflushed.load(Ordering::Acquire)
    }

    /// Since when the connection has been idle (for picking the oldest).
    pub(crate) fn idle_since(&self) -> u64 {
        self.idle_since.load(Ordering::Relaxed)
    }

    /// A request reached the service.
    pub(crate) fn begin(self: &Arc<Self>) -> Busy {
        self.busy.fetch_add(1, Ordering::AcqRel);
        self.head_since.store(UNSET, Ordering::Relaxed);
        Busy(self.clone())
    }

    /// The timers at `now`: `idle` runs from the end of the last response
    /// (or the accept) to the first byte of the next request head, `header`
    /// from that byte to the complete head; a response the client takes
    /// nothing of for `idle` (unwritten bytes, no progress) is stalled.
    pub(crate) fn due(&self, idle: Duration, header: Duration) -> Due {
        let now = Instant::now();
        if self.unflushed.load(Ordering::Acquire) {
            let stalled_at = self.instant(self.last_write.load(Ordering::Relaxed)) + idle;
            return if now >= stalled_at { Due::Stalled } else { Due::At(stalled_at) };
        }
        if !self.is_idle() {
            return Due::At(now + idle.max(Duration::from_millis(100)));
        }
        let head = self.head_since.load(Ordering::Relaxed);
        let (since, limit, due) = if head == UNSET {
            (self.idle_since.load(Ordering::Relaxed), idle, Due::Idle)
        } else {
            (head, header, Due::HeaderRead)
        };
        let deadline = self.instant(since) + limit;
        if now >= deadline {
            due
        } else {
            Due::At(deadline)
        }
    }
}

/// A request in flight; dropped when its response body is done.
#[derive(Debug)]
pub(crate) struct Busy(Arc<ConnState>);

impl Drop for Busy {
    fn drop(&mut self) {
        let state = &self.0;
        state.idle_since.store(state.now_ms(), Ordering::Relaxed);
        state.busy.fetch_sub(1, Ordering::AcqRel);
        state.rearm.notify_one();
    }
}

/// A response body that keeps its request in flight until it is done.
#[derive(Debug)]
pub(crate) struct Tracked {
    /// The body.
    pub(crate) body: Body,
    /// Released with the body.
    pub(crate) _busy: Busy,
}

impl hyper::body::Body for Tracked {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// A socket under hyper (see the module documentation).
pub(crate) struct Watched<S> {
    inner: S,
    state: Arc<ConnState>,
    log: LogSink,
    /// An error response of ours being written in place of hyper's bodyless
    /// one.
    replacing: Option<Replacement>,
}

/// An error response written in place of hyper's.
struct Replacement {
    /// Its bytes.
    bytes: Vec<u8>,
    /// How many are written.
    written: usize,
    /// How many of hyper's bytes they stand for.
    stands_for: usize,
}

impl<S> Watched<S> {
    /// Wraps `inner`.
    pub(crate) fn new(inner: S, state: Arc<ConnState>, log: LogSink) -> Watched<S> {
        Watched { inner, state, log, replacing: None }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Watched<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let result = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(result, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            let state = &self.state;
            if state.busy.load(Ordering::Acquire) == 0 && state.head_since.load(Ordering::Relaxed) == UNSET {
                state.head_since.store(state.now_ms(), Ordering::Relaxed);
                state.rearm.notify_one();
            }
        }
        result
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Watched<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        let this = &mut *self;
        if !this.state.unflushed.swap(true, Ordering::AcqRel) {
            this.state.last_write.store(this.state.now_ms(), Ordering::Relaxed);
        }
        if this.replacing.is_none() && this.state.busy.load(Ordering::Acquire) == 0 {
            if let Some((length, status)) = hyper_refusal(buf) {
                let bytes = refusal_response(&buf[..length], status, &this.log);
                this.replacing = Some(Replacement { bytes, written: 0, stands_for: length });
            }
        }
        let Some(Replacement { bytes, written, stands_for }) = &mut this.replacing else {
            let result = Pin::new(&mut this.inner).poll_write(cx, buf);
            if matches!(result, Poll::Ready(Ok(n)) if n > 0) {
                this.state.last_write.store(this.state.now_ms(), Ordering::Relaxed);
            }
            return result;
        };
        while *written < bytes.len() {
            match Pin::new(&mut this.inner).poll_write(cx, &bytes[*written..]) {
                Poll::Ready(Ok(0)) => return Poll::Ready(Err(std::io::ErrorKind::WriteZero.into())),
                Poll::Ready(Ok(n)) => {
                    *written += n;
                    this.state.last_write.store(this.state.now_ms(), Ordering::Relaxed);
                }
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
        }
        let consumed = *stands_for;
        this.replacing = None;
        Poll::Ready(Ok(consumed))
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let result = Pin::new(&mut self.inner).poll_flush(cx);
        if matches!(result, Poll::Ready(Ok(()))) && self.replacing.is_none() {
            self.state.unflushed.store(false, Ordering::Release);
        }
        result
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// When `buf` starts with a response head of hyper's own (a bodyless 400,
/// 414 or 431 without a content type): its length and status.
fn hyper_refusal(buf: &[u8]) -> Option<(usize, u16)> {
    let end = memchr::memmem::find(buf, b"\r\n\r\n")? + 4;
    let head = std::str::from_utf8(&buf[..end]).ok()?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next()?;
    let rest = status_line.strip_prefix("HTTP/1.1 ").or_else(|| status_line.strip_prefix("HTTP/1.0 "))?;
    let status: u16 = rest.get(..3)?.parse().ok()?;
    if ![400, 414, 431].contains(&status) {
        return None;
    }
    let mut bodyless = false;
    for line in lines {
        let line = line.to_ascii_lowercase();
        if line.starts_with("content-type:") {
            return None;
        }
        bodyless |= line.replace(' ', "") == "content-length:0";
    }
    bodyless.then_some((end, status))
}

/// The message of a request hyper refused with `status`.
pub(crate) fn refusal_message(status: u16) -> String {
    match status {
        414 => format!("URI too long: the request target is over {} bytes", super::MAX_URI_BYTES),
        431 => format!(
            "request header fields too large: at most {} fields and {} bytes",
            super::MAX_HEADERS,
            super::MAX_HEADER_BYTES
        ),
        _ => "malformed request: the request line or a header field cannot be parsed".to_owned(),
    }
}

/// hyper's `head`, with the error body of `status`; logs the refusal.
fn refusal_response(head: &[u8], status: u16, log: &LogSink) -> Vec<u8> {
    let api_id = uuid::Uuid::new_v4().to_string();
    let message = refusal_message(status);
    let body = serde_json::json!({ "api_id": api_id, "error": message }).to_string();
    let text = String::from_utf8_lossy(head);
    let mut out = String::new();
    for line in text.split("\r\n").filter(|l| !l.is_empty()) {
        if !line.to_ascii_lowercase().starts_with("content-length:") {
            out.push_str(line);
            out.push_str("\r\n");
        }
    }
    out.push_str(&format!("content-type: application/json\r\ncontent-length: {}\r\n\r\n{body}", body.len()));
    let line = serde_json::json!({
        "time": chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        "event": "refused",
        "status": status,
        "api_id": api_id,
        "error": message,
    });
    log(&line.to_string());
    out.into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_bodyless_refusals_without_a_content_type_are_hyper_s() {
        let hyper = b"HTTP/1.1 414 URI Too Long\r\nconnection: close\r\ncontent-length: 0\r\ndate: x\r\n\r\n";
        assert_eq!(hyper_refusal(hyper), Some((hyper.len(), 414)));
        let mut more = hyper.to_vec();
        more.extend_from_slice(b"HTTP/1.1 200 OK\r\n");
        assert_eq!(hyper_refusal(&more), Some((hyper.len(), 414)));
        for ours in [
            &b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: 0\r\n\r\n"[..],
            b"HTTP/1.1 400 Bad Request\r\ncontent-length: 12\r\n\r\n",
            b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n",
            b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\n",
            b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n",
        ] {
            assert_eq!(hyper_refusal(ours), None, "{}", String::from_utf8_lossy(ours));
        }
    }

    #[test]
    fn a_refusal_gets_the_error_body() {
        let lines = Arc::new(std::sync::Mutex::new(Vec::new()));
        let sink = lines.clone();
        let log: LogSink = Arc::new(move |line: &str| sink.lock().unwrap().push(line.to_owned()));
        let head = b"HTTP/1.1 431 Request Header Fields Too Large\r\nconnection: close\r\ncontent-length: 0\r\n\r\n";
        let out = String::from_utf8(refusal_response(head, 431, &log)).unwrap();
        let (head, body) = out.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 431 Request Header Fields Too Large\r\nconnection: close\r\n"));
        assert!(head.contains(&format!("content-length: {}", body.len())));
        let body: serde_json::Value = serde_json::from_str(body).unwrap();
        assert!(body["error"].as_str().unwrap().contains("header fields too large"));
        assert!(lines.lock().unwrap()[0].contains(body["api_id"].as_str().unwrap()));
    }

    #[test]
    fn timers_run_from_idle_then_from_the_first_byte_of_a_head() {
        let state = Arc::new(ConnState::new(Instant::now()));
        let (idle, header) = (Duration::from_secs(60), Duration::from_secs(5));
        assert!(matches!(state.due(idle, header), Due::At(t) if t > Instant::now() + Duration::from_secs(50)));
        state.head_since.store(state.now_ms(), Ordering::Relaxed);
        assert!(matches!(state.due(idle, header), Due::At(t) if t < Instant::now() + Duration::from_secs(6)));
        assert_eq!(state.due(idle, Duration::ZERO), Due::HeaderRead);
        let busy = state.begin();
        assert!(!state.is_idle());
        assert!(matches!(state.due(Duration::ZERO, Duration::ZERO), Due::At(_)));
        drop(busy);
        assert!(state.is_idle());
        assert_eq!(state.due(Duration::ZERO, header), Due::Idle);
        // Bytes the client does not take: stalled after the idle timeout,
        // busy or not.
        let _busy = state.begin();
        state.unflushed.store(true, Ordering::Release);
        state.last_write.store(state.now_ms(), Ordering::Relaxed);
        assert!(matches!(state.due(idle, header), Due::At(t) if t > Instant::now() + Duration::from_secs(50)));
        assert_eq!(state.due(Duration::ZERO, header), Due::Stalled);
    }
}
