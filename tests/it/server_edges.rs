//! `telemeter serve` at its edges, over real sockets: idle and slow
//! connections are closed, a request is answered while the connection cap
//! (or the file-descriptor limit) is reached, and the requests hyper itself
//! refuses answer with the `{api_id, error}` body too.

use std::io::{BufReader, ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::Command;
use std::time::{Duration, Instant};

use telemeter::server::client::{read_response, Response};

use crate::server::{assert_error, basic, data_dir, get, json, Server, A};

/// Whether the server closed `stream` (EOF or reset) within `wait`; any
/// bytes read mean it did not.
fn closed_within(stream: &mut TcpStream, wait: Duration) -> bool {
    stream.set_read_timeout(Some(wait)).unwrap();
    let mut byte = [0u8; 1];
    match stream.read(&mut byte) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => matches!(e.kind(), ErrorKind::ConnectionReset | ErrorKind::ConnectionAborted | ErrorKind::BrokenPipe),
    }
}

/// Sends `request` on a fresh connection and reads one response.
fn raw(addr: SocketAddr, request: &[u8]) -> Response {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    // The server may answer (and close) before it has read everything.
    let _ = stream.write_all(request);
    read_response(&mut BufReader::new(stream), false).unwrap()
}

fn serve(extra: &[&str]) -> (tempfile::TempDir, Server) {
    let data = data_dir();
    let db = data.path().join("state/db.sqlite");
    let server = Server::start(data.path(), &db, "127.0.0.1:0", extra);
    (data, server)
}

#[test]
fn idle_slow_and_kept_alive_connections_are_closed_after_their_timeouts() {
    let (_data, server) = serve(&["--idle-timeout", "1", "--header-read-timeout", "3"]);
    let started = Instant::now();
    let mut idle: Vec<TcpStream> = (0..300).map(|_| TcpStream::connect(server.addr).unwrap()).collect();
    // A request head that never ends (a byte a second keeps it from idling).
    let mut slow = TcpStream::connect(server.addr).unwrap();
    slow.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n").unwrap();
    // A kept-alive connection after one answer.
    let mut kept = TcpStream::connect(server.addr).unwrap();
    kept.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut reader = BufReader::new(kept.try_clone().unwrap());
    assert_eq!(read_response(&mut reader, false).unwrap().status, 200);
    assert!(reader.buffer().is_empty());

    for stream in &mut idle {
        assert!(closed_within(stream, Duration::from_secs(10)), "an idle connection is still open");
    }
    let idle_closed = started.elapsed();
    assert!(idle_closed >= Duration::from_millis(900), "closed before the idle timeout: {idle_closed:?}");
    assert!(closed_within(&mut kept, Duration::from_secs(10)), "the kept-alive connection is still open");
    // The slow head outlives the idle timeout, and is closed at the
    // header-read timeout (3 s after its first byte).
    for _ in 0..2 {
        let _ = slow.write_all(b"X");
        std::thread::sleep(Duration::from_millis(500));
    }
    assert!(closed_within(&mut slow, Duration::from_secs(10)), "the slow request head is still open");
    assert!(started.elapsed() >= Duration::from_millis(2900), "{:?}", started.elapsed());
    // The server still answers.
    assert_eq!(server.client().request("GET", "/healthz", &[]).unwrap().status, 200);
}

#[test]
fn at_the_connection_cap_a_new_request_is_still_answered() {
    let (_data, server) = serve(&["--max-connections", "20", "--idle-timeout", "600"]);
    let mut idle: Vec<TcpStream> = (0..40).map(|_| TcpStream::connect(server.addr).unwrap()).collect();
    std::thread::sleep(Duration::from_millis(300));
    let started = Instant::now();
    let response = get(&mut server.client(), &format!("/v1/Account/{A}/Endpoint/E1/"), &basic(A, "token-a"));
    assert_eq!(response.status, 200, "{}", response.text());
    assert!(started.elapsed() < Duration::from_secs(10));
    // The oldest idle connections made room for the newer ones.
    assert!(closed_within(&mut idle[0], Duration::from_secs(5)));
    let logs = server.logs_when(|logs| logs.iter().any(|l| l.contains("\"event\":\"evicted\"")));
    assert!(logs.iter().any(|l| l.contains("\"event\":\"evicted\"")), "{logs:?}");
}

#[test]
fn under_a_low_descriptor_limit_a_new_request_is_still_answered() {
    let data = data_dir();
    let db = data.path().join("state/db.sqlite");
    let mut shell = Command::new("sh");
    shell.args(["-c", "ulimit -n 64 && exec \"$0\" \"$@\"", env!("CARGO_BIN_EXE_telemeter")]);
    let args = ["--data".into(), data.path().as_os_str().to_owned(), "--db".into(), db.as_os_str().to_owned()];
    let server = Server::start_command(shell, "127.0.0.1:0", &args);
    let _idle: Vec<TcpStream> = (0..150).map(|_| TcpStream::connect(server.addr).unwrap()).collect();
    std::thread::sleep(Duration::from_millis(300));
    let mut stream = TcpStream::connect(server.addr).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
    stream.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let response = read_response(&mut BufReader::new(stream), false).expect("an answer under the descriptor limit");
    assert_eq!(response.status, 200);
}

#[test]
fn requests_hyper_refuses_have_the_error_body() {
    let (_data, server) = serve(&[]);
    let addr = server.addr;
    let long = |n: usize| "a".repeat(n);
    // Over hyper's own URI limit (64 KiB), and over ours (8 KiB).
    for n in [100_000, 10_000] {
        let response =
            raw(addr, format!("GET /{} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", long(n)).as_bytes());
        assert_error(&response, 414, "URI");
    }
    // Malformed request lines.
    for line in ["NOT A REQUEST", "GET /\u{1} HTTP/1.1", "GET / HTTP/9.9"] {
        let response = raw(addr, format!("{line}\r\nHost: x\r\n\r\n").as_bytes());
        assert_error(&response, 400, "malformed");
    }
    // Too many header fields (over our limit of 100, and over hyper's),
    // and one field too large.
    for n in [150, 5000] {
        let mut request = String::from("GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n");
        for i in 0..n {
            request.push_str(&format!("X-{i}: y\r\n"));
        }
        request.push_str("\r\n");
        assert_error(&raw(addr, request.as_bytes()), 431, "header");
    }
    let request = format!("GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\nX-Big: {}\r\n\r\n", long(100_000));
    assert_error(&raw(addr, request.as_bytes()), 431, "header");
    // Each refusal is logged with its api_id.
    let logs = server.logs_when(|logs| logs.iter().filter(|l| l.contains("\"status\":414")).count() >= 2);
    assert_eq!(logs.iter().filter(|l| l.contains("\"status\":414") && l.contains("api_id")).count(), 2, "{logs:?}");
}

#[test]
fn a_page_token_is_not_counted_against_the_target_limit() {
    let (_data, server) = serve(&[]);
    let long = |n: usize| "a".repeat(n);
    // A page-1 request just under the limit (an unknown key, dropped, fills
    // it) can ask for its next page: the page token is not counted.
    let auth = basic(A, "token-a");
    let base = format!(
        "/v1/Account/{A}/UsageSummary/?granularity=day&page_size=1&from_date=2026-11-01&to_date=2026-11-22&pad="
    );
    let first = format!("{base}{}", long(8192 - base.len()));
    let page = get(&mut server.client(), &first, &auth);
    assert_eq!(page.status, 200, "{}", String::from_utf8_lossy(&page.body));
    let token = json(&page)["meta"]["next_page_token"].as_str().expect("a next page").to_owned();
    let next = get(&mut server.client(), &format!("{first}&page_token={token}"), &auth);
    assert_eq!(next.status, 200, "{}", String::from_utf8_lossy(&next.body));
    // One byte more is over, token or not.
    let over = get(&mut server.client(), &format!("{first}a&page_token={token}"), &auth);
    assert_error(&over, 414, "URI");
}

#[test]
fn control_characters_in_messages_are_escaped() {
    let (_data, server) = serve(&[]);
    let mut c = server.client();
    let auth = basic(A, "token-a");
    for query in ["granularity=we%07ek", "from_date=2026-11-01%0D%0AX:%20y", "timezone=%1B[31mRed", "product=%C2%9B"] {
        let response = get(&mut c, &format!("/v1/Account/{A}/UsageSummary/?{query}"), &auth);
        assert_eq!(response.status, 400, "{}", response.text());
        let body = json(&response);
        let message = body["error"].as_str().unwrap();
        assert!(!message.chars().any(char::is_control), "{query}: {message:?}");
        assert!(message.contains('\\'), "{query}: {message:?}");
    }
}

#[test]
fn a_slow_request_head_is_cut_at_the_header_read_timeout_not_the_idle_one() {
    let (_data, server) = serve(&["--idle-timeout", "30", "--header-read-timeout", "1"]);
    let mut slow = TcpStream::connect(server.addr).unwrap();
    let started = Instant::now();
    slow.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n").unwrap();
    assert!(closed_within(&mut slow, Duration::from_secs(10)), "the slow request head is still open");
    let elapsed = started.elapsed();
    assert!(elapsed >= Duration::from_millis(900), "closed before the header-read timeout: {elapsed:?}");
    assert!(elapsed < Duration::from_secs(3), "held past the header-read timeout: {elapsed:?}");
}

#[test]
fn a_doubled_authorization_and_a_missing_or_doubled_host_are_400() {
    let (_data, server) = serve(&[]);
    let addr = server.addr;
    let valid = basic(A, "token-a");
    let path = format!("/v1/Account/{A}/Endpoint/E1/");
    let request = |head: &str| raw(addr, format!("{head}Connection: close\r\n\r\n").as_bytes());
    // The same request with one of each is answered.
    let one = request(&format!("GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: {valid}\r\n"));
    assert_eq!(one.status, 200, "{}", one.text());
    for second in [valid.as_str(), "Basic Zm9vOmJhcg=="] {
        let two = request(&format!(
            "GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: {valid}\r\nAuthorization: {second}\r\n"
        ));
        assert_error(&two, 400, "more than one Authorization header field");
    }
    assert_error(&request(&format!("GET {path} HTTP/1.1\r\nAuthorization: {valid}\r\n")), 400, "no Host header field");
    assert_error(
        &request(&format!("GET {path} HTTP/1.1\r\nHost: x\r\nHost: y\r\nAuthorization: {valid}\r\n")),
        400,
        "more than one Host header field",
    );
    assert_error(&request("GET /healthz HTTP/1.1\r\nHost: x\r\nHost: x\r\n"), 400, "more than one Host");
    // HTTP/1.0 has no Host requirement.
    assert_eq!(request("GET /healthz HTTP/1.0\r\n").status, 200);
}

/// No route takes a body: one of up to 1 MiB is read and dropped, and the
/// connection carries the next request; a longer one is refused (413), a
/// broken chunked one too (400), each saying the connection closes.
#[test]
fn a_request_body_is_read_and_dropped_or_refused_with_the_connection_closed() {
    let (_data, server) = serve(&[]);
    let auth = basic(A, "token-a");
    let recording = format!("/v1/Account/{A}/Recording/nope/");
    let endpoint = format!("/v1/Account/{A}/Endpoint/E1/");
    let mut stream = TcpStream::connect(server.addr).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    for size in [8 << 10, 64 << 10, 1 << 20] {
        let head = format!(
            "DELETE {recording} HTTP/1.1\r\nHost: x\r\nAuthorization: {auth}\r\nContent-Length: {size}\r\n\r\n"
        );
        stream.write_all(head.as_bytes()).unwrap();
        stream.write_all(&vec![b'x'; size]).unwrap();
        let answer = read_response(&mut reader, false).unwrap();
        assert_eq!(answer.status, 404, "{size}: {}", answer.text());
        assert_eq!(answer.header("connection"), None, "{size}");
        let next = format!("GET {endpoint} HTTP/1.1\r\nHost: x\r\nAuthorization: {auth}\r\n\r\n");
        stream.write_all(next.as_bytes()).unwrap();
        let answer = read_response(&mut reader, false).unwrap();
        assert_eq!(answer.status, 200, "{size}: the next request is read as one: {}", answer.text());
    }

    let size = (1 << 20) + 1;
    let head =
        format!("DELETE {recording} HTTP/1.1\r\nHost: x\r\nAuthorization: {auth}\r\nContent-Length: {size}\r\n\r\n");
    let mut request = head.into_bytes();
    request.extend(vec![b'x'; size]);
    let answer = raw(server.addr, &request);
    assert_eq!(answer.status, 413, "{}", answer.text());
    assert_eq!(answer.header("connection"), Some("close"));
    assert!(json(&answer)["error"].as_str().unwrap().contains("request body too large"), "{}", answer.text());

    let chunked = format!(
        "GET {endpoint} HTTP/1.1\r\nHost: x\r\nAuthorization: {auth}\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n"
    );
    let answer = raw(server.addr, chunked.as_bytes());
    assert_eq!(answer.status, 400, "{}", answer.text());
    assert_eq!(answer.header("connection"), Some("close"));
}

/// A body is never waited for without bound: one whose length is over the
/// limit is refused before a byte of it arrives, one that arrives too
/// slowly is a 408 after `--header-read-timeout`, and a client that waits
/// for `100 Continue` is answered without being invited to send it; each
/// closes the connection.
#[test]
fn a_request_body_is_not_waited_for_without_bound() {
    let (_data, server) = serve(&["--header-read-timeout", "1"]);
    let auth = basic(A, "token-a");
    let recording = format!("/v1/Account/{A}/Recording/nope/");
    let head = |extra: &str| {
        format!("DELETE {recording} HTTP/1.1\r\nHost: x\r\nAuthorization: {auth}\r\n{extra}\r\n").into_bytes()
    };
    let started = Instant::now();
    let answer = raw(server.addr, &head("Content-Length: 2097152\r\n"));
    assert_eq!(answer.status, 413, "{}", answer.text());
    assert_eq!(answer.header("connection"), Some("close"));

    let mut slow = head("Content-Length: 10\r\n");
    slow.extend_from_slice(b"x");
    let answer = raw(server.addr, &slow);
    assert_eq!(answer.status, 408, "{}", answer.text());
    assert_eq!(answer.header("connection"), Some("close"));
    assert!(started.elapsed() < Duration::from_secs(10), "{:?}", started.elapsed());

    let answer = raw(server.addr, &head("Content-Length: 10\r\nExpect: 100-continue\r\n"));
    assert_eq!(answer.status, 404, "answered, not invited: {}", answer.text());
    assert_eq!(answer.header("connection"), Some("close"));
}
