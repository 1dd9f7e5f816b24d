//! The HTTP API (api.md): usage summary, SIP endpoints and recordings, with
//! Basic auth, IP allowlists and the usage summary's rate limit.
//!
//! [`app`] builds the router from a shared [`Server`], so that unit tests
//! drive it without a socket and `telemeter serve` runs it on one. The
//! usage summary goes through the same [`crate::query`] and
//! [`crate::summary::build`] as `telemeter summary`, on the blocking pool
//! (never on the async threads); the resources come from SQLite
//! ([`crate::resources::ResourceDb`]).
//!
//! Every response carries a fresh random `api_id` (UUID v4), made by the
//! request middleware, which also enforces the limits on the request target
//! and header fields, writes every error body (control characters escaped)
//! and one log line per request (method, path, status, latency, api_id;
//! never a header). The requests hyper refuses before the middleware sees
//! them get the same body from `conn.rs`.
//!
//! What requests are answered from is a [`Generation`] (data set,
//! resources, credentials), swapped whole when a followed store publishes
//! (`follow.rs`); connections, their timeouts and their cap are in
//! `listen.rs`. Every route under `/v1/Account/{auth_id}/` reads its path
//! and checks the credentials and client address of its generation in one
//! extractor, `authorized.rs`.

pub mod auth;
mod authorized;
pub mod client;
mod conn;
pub mod error;
pub mod follow;
mod handlers;
pub mod listen;
pub mod rate;

use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use chrono::{DateTime, Utc};

use crate::dataset::Dataset;
use crate::error::printable;
use crate::resources::ResourceDb;
use crate::token::TokenKey;
use auth::{Credentials, Refusal};
use error::{ApiError, PendingError};
use rate::RateLimiter;

/// Usage summary requests per account per window.
pub const RATE_LIMIT: usize = 20;
/// The rate limit's window.
pub const RATE_WINDOW: Duration = Duration::from_secs(60);

/// The rate limit's log that servers of one store (or data folder) share,
/// beside the deletions database ([`rate::RateLimiter::shared`]).
pub const RATE_DB: &str = "rate.sqlite";
/// The SIP domain of `sip_uri` when none is configured.
pub const DEFAULT_SIP_DOMAIN: &str = "sip.telemeter.local";
/// The longest request target (path and query) answered; longer is a 414.
pub const MAX_URI_BYTES: usize = 8192;
/// Bytes of `page_token=...` pairs not counted against [`MAX_URI_BYTES`]
/// (a token is under 100).
pub const PAGE_TOKEN_ROOM: usize = 256;
/// The most header fields in a request; more is a 431.
pub const MAX_HEADERS: usize = 100;
/// The most bytes of header fields (names and values) in a request; more
/// is a 431.
pub const MAX_HEADER_BYTES: usize = 65_536;

/// The most bytes of a request body the server reads (and drops: no route
/// takes a body) before it answers, so that the connection stays usable;
/// a longer body is refused (413) and the connection closed.
pub const MAX_BODY_BYTES: usize = 1 << 20;

/// Where log lines go (stderr in `telemeter serve`).
pub type LogSink = Arc<dyn Fn(&str) + Send + Sync>;

/// What requests are answered from, as of one generation of a store (or a
/// data directory): replaced whole, never changed in place.
pub struct Generation {
    /// Usage records and accounts (with a store: its read lease).
    pub dataset: Dataset,
    /// Endpoints, registrations and recordings.
    pub resources: Arc<ResourceDb>,
    /// Account credentials and allowlists, from the data set's accounts.
    pub credentials: Credentials,
    /// The store generation, when the data set is a store.
    pub number: Option<u64>,
}

impl Generation {
    /// Answers from `dataset` and `resources`, with the credentials of the
    /// data set's accounts.
    pub fn new(dataset: Dataset, resources: Arc<ResourceDb>) -> Generation {
        let credentials = Credentials::from_accounts(&dataset.accounts);
        let number = dataset.store().map(|store| store.manifest.generation);
        Generation { dataset, resources, credentials, number }
    }

    /// The current generation of the store at `dir`, with its resources;
    /// `None` when it is `previous`'s (whose resources connection is
    /// reused when the database is the same file).
    pub fn open_store(dir: &Path, previous: Option<&Generation>) -> Result<Option<Generation>, String> {
        let dataset = Dataset::open_store(dir).map_err(|e| e.chain())?;
        let number = dataset.store().map(|store| store.manifest.generation);
        if previous.is_some_and(|p| p.number == number) {
            return Ok(None);
        }
        let Some(store) = dataset.store() else { return Err(format!("{} is not a store", dir.display())) };
        let db = ResourceDb::path_for_store(store);
        let resources = match previous {
            Some(previous) if previous.resources.path() == db => previous.resources.clone(),
            _ => Arc::new(ResourceDb::open_for_store(store).map_err(|e| e.chain())?),
        };
        Ok(Some(Generation::new(dataset, resources)))
    }
}

/// The generation requests start on now.
pub struct Current(RwLock<Arc<Generation>>);

impl Current {
    /// Starts on `generation`.
    pub fn new(generation: Generation) -> Current {
        Current(RwLock::new(Arc::new(generation)))
    }

    /// The generation now (a request keeps it until it is done).
    pub fn get(&self) -> Arc<Generation> {
        self.0.read().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    /// Replaces the generation; requests in flight finish on the old one.
    pub fn set(&self, generation: Arc<Generation>) {
        *self.0.write().unwrap_or_else(std::sync::PoisonError::into_inner) = generation;
    }
}

/// Everything a request is answered from, shared by every worker.
pub struct Server {
    /// The data set, resources and credentials now.
    pub current: Current,
    /// The usage summary's limiter.
    pub rate: RateLimiter,
    /// Page-token key (the same as `summary`'s).
    pub token_key: TokenKey,
    /// Domain of `sip_uri`.
    pub sip_domain: String,
    /// Header naming the client address (set behind a trusted proxy).
    pub trust_proxy_header: Option<String>,
    /// A fixed "now" (tests); `None` reads the clock.
    pub fixed_now: Option<DateTime<Utc>>,
    /// How long a request's body may take to arrive once its head has
    /// (`--header-read-timeout`, as for the head).
    pub body_read_timeout: Duration,
    /// The request log.
    pub log: LogSink,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let current = self.current.get();
        f.debug_struct("Server")
            .field("dataset", &current.dataset.dir())
            .field("generation", &current.number)
            .field("sip_domain", &self.sip_domain)
            .finish()
    }
}

impl Server {
    /// Now: the fixed instant, or the clock.
    pub fn now(&self) -> DateTime<Utc> {
        self.fixed_now.unwrap_or_else(Utc::now)
    }

    /// The client's address: the socket peer, or the right-most entry of
    /// the trusted proxy header (the address the proxy itself saw). `None`
    /// when the header is present but unreadable.
    pub fn client_ip(&self, headers: &HeaderMap, peer: SocketAddr) -> Option<IpAddr> {
        let Some(name) = &self.trust_proxy_header else { return Some(peer.ip()) };
        let values: Vec<&HeaderValue> = headers.get_all(name.as_str()).iter().collect();
        let Some(last) = values.last() else { return Some(peer.ip()) };
        let text = last.to_str().ok()?;
        let entry = text.rsplit(',').next()?.trim();
        entry.parse::<IpAddr>().ok().or_else(|| entry.parse::<SocketAddr>().ok().map(|s| s.ip()))
    }

    /// 401/403 unless the request may act for `auth_id` (with the
    /// credentials of `generation`).
    pub fn authorize(
        &self,
        generation: &Generation,
        auth_id: &str,
        headers: &HeaderMap,
        peer: SocketAddr,
    ) -> Result<(), ApiError> {
        let authorization = headers.get(header::AUTHORIZATION).map(HeaderValue::as_bytes);
        match generation.credentials.check(auth_id, authorization, self.client_ip(headers, peer)) {
            Ok(()) => Ok(()),
            Err(Refusal::Unauthorized) => Err(ApiError::new(StatusCode::UNAUTHORIZED, "invalid auth ID or auth token")),
            Err(Refusal::Forbidden) => {
                Err(ApiError::new(StatusCode::FORBIDDEN, "request from an IP address that is not allowed"))
            }
        }
    }
}

/// The request identifier of one request.
#[derive(Clone, Debug)]
pub struct ApiId(pub String);

/// The router of the whole API over `server`.
pub fn app(server: Arc<Server>) -> Router {
    let account = "/v1/Account/{auth_id}";
    let mut router =
        Router::new().route("/healthz", get(handlers::healthz)).route("/openapi.json", get(handlers::openapi));
    let routes = [
        (format!("{account}/UsageSummary"), get(handlers::usage_summary)),
        (format!("{account}/Endpoint/{{endpoint_id}}"), get(handlers::endpoint)),
        (format!("{account}/Recording"), get(handlers::list_recordings)),
        (format!("{account}/Recording/{{recording_id}}"), get(handlers::recording).delete(handlers::delete_recording)),
    ];
    for (path, route) in routes {
        router = router.route(&format!("{path}/"), route.clone()).route(&path, route);
    }
    router
        .fallback(handlers::not_found)
        .method_not_allowed_fallback(handlers::method_not_allowed)
        .layer(middleware::from_fn_with_state(server.clone(), requests))
        .with_state(server)
}

/// Gives the request its `api_id`, writes error bodies, logs the request.
async fn requests(State(server): State<Arc<Server>>, mut request: Request, next: Next) -> Response {
    let started = std::time::Instant::now();
    let api_id = uuid::Uuid::new_v4().to_string();
    request.extensions_mut().insert(ApiId(api_id.clone()));
    let method = request.method().to_string();
    let path = request.uri().path().to_owned();
    let refused = match over_limits(&request).or_else(|| malformed(&request)) {
        // Its body, if any, is left unread: the connection closes.
        Some(refusal) if !hyper::body::Body::is_end_stream(request.body()) => Err(refusal.closing()),
        Some(refusal) => Err(refusal),
        None => drain_body(request, server.body_read_timeout).await,
    };
    let mut response = match refused {
        Err(refusal) => refusal.into_response(),
        Ok((request, close)) => {
            let mut response = next.run(request).await;
            if close {
                response.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
            }
            response
        }
    };
    let mut detail = None;
    if let Some(pending) = response.extensions_mut().remove::<PendingError>() {
        detail = pending.detail.map(|d| printable(&d).into_owned());
        let body = serde_json::json!({ "api_id": api_id, "error": printable(&pending.message) });
        let (parts, _) = response.into_parts();
        response = Response::from_parts(parts, Body::from(body.to_string()));
    }
    let mut line = serde_json::json!({
        "time": Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        "method": method,
        "path": path,
        "status": response.status().as_u16(),
        "latency_ms": (started.elapsed().as_secs_f64() * 1000.0 * 1000.0).round() / 1000.0,
        "api_id": api_id,
    });
    if let (Some(detail), Some(map)) = (detail, line.as_object_mut()) {
        map.insert("error".to_owned(), serde_json::Value::String(detail));
    }
    (server.log)(&line.to_string());
    response
}

/// The request with its body read and dropped (no route takes one), so
/// that the connection can carry the next request, and whether the
/// connection closes after the answer. Refused, and the connection closed:
/// a body over [`MAX_BODY_BYTES`] (413, at once when its length says so),
/// one whose framing is broken (400), one that does not arrive within
/// `timeout` (408: the connection counts as busy meanwhile,
/// which no idle timeout cuts). A client that waits for `100 Continue`
/// before sending its body is not invited to send it: its request is
/// answered without the body, and the connection closed.
async fn drain_body(request: Request, timeout: Duration) -> Result<(Request, bool), ApiError> {
    use http_body_util::BodyExt;
    let (parts, mut body) = request.into_parts();
    if hyper::body::Body::is_end_stream(&body) {
        return Ok((Request::from_parts(parts, body), false));
    }
    let too_large = || {
        let message =
            format!("request body too large: no route takes a body, and at most {MAX_BODY_BYTES} bytes are read");
        ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, message).closing()
    };
    if hyper::body::Body::size_hint(&body).lower() > MAX_BODY_BYTES as u64 {
        return Err(too_large());
    }
    if parts.headers.contains_key(header::EXPECT) {
        return Ok((Request::from_parts(parts, Body::empty()), true));
    }
    let drained = tokio::time::timeout(timeout, async {
        let mut read = 0usize;
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| {
                ApiError::new(StatusCode::BAD_REQUEST, format!("malformed request body: {e}")).closing()
            })?;
            read = read.saturating_add(frame.data_ref().map_or(0, |data| data.len()));
            if read > MAX_BODY_BYTES {
                return Err(too_large());
            }
        }
        Ok(())
    })
    .await;
    match drained {
        Ok(Ok(())) => Ok((Request::from_parts(parts, Body::empty()), false)),
        Ok(Err(refusal)) => Err(refusal),
        Err(_) => {
            let message = format!("request body not received within {} seconds", timeout.as_secs_f64());
            Err(ApiError::new(StatusCode::REQUEST_TIMEOUT, message).closing())
        }
    }
}

/// The refusal of a request whose target or header fields are over the
/// limits ([`MAX_URI_BYTES`], [`MAX_HEADERS`], [`MAX_HEADER_BYTES`]).
fn over_limits(request: &Request) -> Option<ApiError> {
    let target = request.uri().path_and_query().map_or(0, |p| p.as_str().len());
    // A page token is not counted (up to [`PAGE_TOKEN_ROOM`] bytes): a
    // request answered with a `next_page_token` can ask for its next page.
    let token = request.uri().query().map_or(0, |query| {
        query.split('&').filter(|pair| pair.starts_with("page_token=")).map(|pair| pair.len() + 1).sum::<usize>()
    });
    if target - token.min(PAGE_TOKEN_ROOM).min(target) > MAX_URI_BYTES {
        let message = format!("URI too long: the request target is {target} bytes, over {MAX_URI_BYTES}");
        return Some(ApiError::new(StatusCode::URI_TOO_LONG, message));
    }
    let headers = request.headers();
    let bytes: usize = headers.iter().map(|(name, value)| name.as_str().len() + value.len()).sum();
    if headers.len() > MAX_HEADERS || bytes > MAX_HEADER_BYTES {
        let message = format!(
            "request header fields too large: {} fields of {bytes} bytes, at most {MAX_HEADERS} fields and {MAX_HEADER_BYTES} bytes",
            headers.len()
        );
        return Some(ApiError::new(StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE, message));
    }
    None
}

/// The refusal (400) of a request whose header fields cannot be taken
/// as sent (RFC 9110 section 5.3, RFC 9112 section 3.2): an HTTP/1.1
/// request without a `Host`, any request with two, and two
/// `Authorization` fields (which of them would be the caller's is not
/// for the server to guess, even when one is valid).
fn malformed(request: &Request) -> Option<ApiError> {
    let headers = request.headers();
    let hosts = headers.get_all(header::HOST).iter().count();
    if hosts > 1 {
        return Some(ApiError::new(StatusCode::BAD_REQUEST, "malformed request: more than one Host header field"));
    }
    if hosts == 0 && request.version() >= axum::http::Version::HTTP_11 {
        return Some(ApiError::new(StatusCode::BAD_REQUEST, "malformed request: no Host header field"));
    }
    if headers.get_all(header::AUTHORIZATION).iter().count() > 1 {
        let message = "malformed request: more than one Authorization header field; send one";
        return Some(ApiError::new(StatusCode::BAD_REQUEST, message));
    }
    None
}

/// A JSON body with status 200.
fn json_response(status: StatusCode, text: String) -> Response {
    (status, [(header::CONTENT_TYPE, HeaderValue::from_static("application/json"))], text).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::extract::connect_info::MockConnectInfo;
    use std::sync::Mutex;
    use tower::ServiceExt;

    fn server(logs: Arc<Mutex<Vec<String>>>) -> (tempfile::TempDir, Arc<Server>) {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let token = auth::token_sha256_hex("tok");
        std::fs::write(d.join("accounts.csv"), format!("auth_id,auth_token_sha256,allowed_ips\nA,{token},\n")).unwrap();
        std::fs::write(
            d.join("endpoints.csv"),
            "endpoint_id,auth_id,sub_account,alias,username,password_md5,application_id\n\
             E1,A,,Desk,desk,5EBE2294ECD0E0F08EAB7690D2A6EE69,\n",
        )
        .unwrap();
        let db = d.join("db.sqlite");
        crate::resources::load(d, &db).unwrap();
        let dataset = Dataset::open(d).unwrap();
        let server = Server {
            current: Current::new(Generation::new(dataset, Arc::new(ResourceDb::open(&db).unwrap()))),
            rate: RateLimiter::new(RATE_LIMIT, RATE_WINDOW, Arc::new(rate::SystemClock::default())),
            token_key: TokenKey::from_secret("unit tests"),
            sip_domain: DEFAULT_SIP_DOMAIN.to_owned(),
            trust_proxy_header: None,
            fixed_now: DateTime::parse_from_rfc3339("2026-11-21T00:00:00Z").ok().map(|t| t.with_timezone(&Utc)),
            body_read_timeout: Duration::from_secs(10),
            log: Arc::new(move |line: &str| logs.lock().unwrap().push(line.to_owned())),
        };
        (dir, Arc::new(server))
    }

    async fn call(app: Router, method: &str, uri: &str, auth: Option<&str>) -> (StatusCode, HeaderMap, String) {
        let mut request = Request::builder().method(method).uri(uri).header(header::HOST, "localhost");
        if let Some(auth) = auth {
            request = request.header(header::AUTHORIZATION, auth);
        }
        let response = app.oneshot(request.body(Body::empty()).unwrap()).await.unwrap();
        let status = response.status();
        let headers = response.headers().clone();
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 20).await.unwrap();
        (status, headers, String::from_utf8(bytes.to_vec()).unwrap())
    }

    #[tokio::test]
    async fn answers_without_a_socket_and_logs_each_request_once() {
        let logs = Arc::new(Mutex::new(Vec::new()));
        let (_dir, server) = server(logs.clone());
        let app = app(server).layer(MockConnectInfo(SocketAddr::from(([127, 0, 0, 1], 4000))));
        let auth = "Basic QTp0b2s="; // A:tok
        let (status, _, body) = call(app.clone(), "GET", "/v1/Account/A/Endpoint/E1", Some(auth)).await;
        assert_eq!(status, StatusCode::OK);
        let body: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(body["password"], "5ebe2294ecd0e0f08eab7690d2a6ee69");
        let api_id = body["api_id"].as_str().unwrap();
        assert_eq!(uuid::Uuid::parse_str(api_id).unwrap().get_version_num(), 4);
        let (status, headers, body) = call(app.clone(), "GET", "/v1/Account/A/Endpoint/E2/", Some(auth)).await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        assert_eq!(headers[header::CONTENT_TYPE], "application/json");
        let error: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(error["error"], "not found");
        let (status, _, _) = call(app.clone(), "GET", "/v1/Account/A/Endpoint/E1/", Some("Basic QTp0b2sy")).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);
        let (status, _, body) = call(app, "PATCH", "/v1/Account/A/Endpoint/E1/", Some(auth)).await;
        assert_eq!((status, body.contains("method not allowed")), (StatusCode::METHOD_NOT_ALLOWED, true));
        let logs = logs.lock().unwrap();
        assert_eq!(logs.len(), 4);
        let first: serde_json::Value = serde_json::from_str(&logs[0]).unwrap();
        assert_eq!((first["api_id"].as_str(), first["status"].as_u64()), (Some(api_id), Some(200)));
        assert!(logs[1].contains(error["api_id"].as_str().unwrap()));
        assert!(logs.iter().all(|l| !l.contains("QTp0b2s") && !l.contains("tok\"")));
    }

    /// The preamble of every account route, in its order: a path that
    /// cannot be decoded is a 404 whatever the credentials, then 401 and
    /// 403; the 429's text is the limiter's own numbers.
    #[tokio::test]
    async fn account_routes_read_the_path_then_the_credentials_then_the_rate() {
        let (_dir, server) = server(Arc::new(Mutex::new(Vec::new())));
        let app = app(server).layer(MockConnectInfo(SocketAddr::from(([127, 0, 0, 1], 4000))));
        let auth = "Basic QTp0b2s="; // A:tok
        for uri in ["/v1/Account/A/Recording/%FF/", "/v1/Account/%FF/Endpoint/E1/", "/v1/Account/%FF/UsageSummary/"] {
            let (status, _, body) = call(app.clone(), "GET", uri, None).await;
            assert_eq!((status, body.contains("\"not found\"")), (StatusCode::NOT_FOUND, true), "{uri}: {body}");
        }
        let (status, _, _) = call(app.clone(), "DELETE", "/v1/Account/A/Recording/R1/", None).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);
        let (status, _, _) = call(app.clone(), "GET", "/v1/Account/B/Recording/", Some(auth)).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "A's credentials do not act for B");
        let (status, _, _) = call(app.clone(), "GET", "/v1/Account/A/Recording/R1/", Some(auth)).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "authorized, and no such recording");
        let summary = "/v1/Account/A/UsageSummary/";
        for _ in 0..RATE_LIMIT {
            assert_eq!(call(app.clone(), "GET", summary, Some(auth)).await.0, StatusCode::OK);
        }
        let (status, headers, body) = call(app, "GET", summary, Some(auth)).await;
        assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
        assert!(headers.contains_key(header::RETRY_AFTER));
        let error: serde_json::Value = serde_json::from_str(&body).unwrap();
        let expected =
            format!("rate limit exceeded: {RATE_LIMIT} requests per {} seconds; retry later", RATE_WINDOW.as_secs());
        assert_eq!(error["error"], expected.as_str());
    }
}
