//! A small blocking HTTP/1.1 client over one keep-alive TCP connection:
//! enough for the load test and the integration tests to talk to the
//! server without pulling in an HTTP client crate.

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// An answer.
#[derive(Clone, Debug)]
pub struct Response {
    /// Status code.
    pub status: u16,
    /// Header names (lower-case) and values, in order.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Vec<u8>,
}

impl Response {
    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    /// The body as text (lossy).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// One connection to a server.
#[derive(Debug)]
pub struct Client {
    addr: SocketAddr,
    reader: Option<BufReader<TcpStream>>,
    timeout: Duration,
}

impl Client {
    /// A client of the server at `addr`; connects on first use.
    pub fn new(addr: SocketAddr) -> Client {
        Client { addr, reader: None, timeout: Duration::from_secs(30) }
    }

    /// Sends `method path` with extra `headers` and reads the answer,
    /// reconnecting once if the kept-alive connection was closed.
    pub fn request(&mut self, method: &str, path: &str, headers: &[(&str, &str)]) -> std::io::Result<Response> {
        let reused = self.reader.is_some();
        match self.try_request(method, path, headers) {
            Ok(response) => Ok(response),
            Err(_) if reused => {
                self.reader = None;
                self.try_request(method, path, headers)
            }
            Err(e) => Err(e),
        }
    }

    fn try_request(&mut self, method: &str, path: &str, headers: &[(&str, &str)]) -> std::io::Result<Response> {
        if self.reader.is_none() {
            let stream = TcpStream::connect_timeout(&self.addr, self.timeout)?;
            stream.set_read_timeout(Some(self.timeout))?;
            stream.set_nodelay(true)?;
            self.reader = Some(BufReader::new(stream));
        }
        let reader = self.reader.as_mut().ok_or_else(|| std::io::Error::other("not connected"))?;
        let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {}\r\n", self.addr);
        for (name, value) in headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str("\r\n");
        reader.get_mut().write_all(head.as_bytes())?;
        let result = read_response(reader, method == "HEAD");
        if result.as_ref().map_or(true, |r| r.header("connection").is_some_and(|c| c.eq_ignore_ascii_case("close"))) {
            self.reader = None;
        }
        result
    }
}

fn invalid(what: &str) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, what.to_owned())
}

/// Reads one response from `reader` (`head_only`: the answer of a HEAD).
pub fn read_response(reader: &mut impl BufRead, head_only: bool) -> std::io::Result<Response> {
    let mut line = String::new();
    if reader.read_line(&mut line)? == 0 {
        return Err(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "connection closed"));
    }
    let status =
        line.split_whitespace().nth(1).and_then(|s| s.parse().ok()).ok_or_else(|| invalid("bad status line"))?;
    let mut headers = Vec::new();
    loop {
        line.clear();
        reader.read_line(&mut line)?;
        let trimmed = line.trim_end();
        if trimmed.is_empty() {
            break;
        }
        let (name, value) = trimmed.split_once(':').ok_or_else(|| invalid("bad header line"))?;
        headers.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
    }
    let mut response = Response { status, headers, body: Vec::new() };
    if head_only || status == 204 || status == 304 {
        return Ok(response);
    }
    if response.header("transfer-encoding").is_some_and(|t| t.eq_ignore_ascii_case("chunked")) {
        loop {
            line.clear();
            reader.read_line(&mut line)?;
            let size = usize::from_str_radix(line.trim().split(';').next().unwrap_or(""), 16)
                .map_err(|_| invalid("bad chunk size"))?;
            let mut chunk = vec![0; size + 2];
            reader.read_exact(&mut chunk)?;
            if size == 0 {
                break;
            }
            response.body.extend_from_slice(&chunk[..size]);
        }
    } else if let Some(length) = response.header("content-length") {
        let length: usize = length.parse().map_err(|_| invalid("bad content-length"))?;
        response.body = vec![0; length];
        reader.read_exact(&mut response.body)?;
    } else {
        reader.read_to_end(&mut response.body)?;
    }
    Ok(response)
}
