//! A small HTTP/1.1 client over mutual TLS, for the rails: it sends exactly the headers it is
//! given (ICOM refuses any header outside its list, and `Host` must carry no port, so a
//! general client that adds `Date` or a port cannot be used), keeps connections open
//! between requests, and reads `Content-Length` and chunked bodies.
//!
//! Each connection carries one request at a time; the client keeps the idle ones for the
//! next request ([`IDLE_CONNECTIONS_MAX`]). A read (`GET`, `DELETE`) on a kept connection
//! that the server closed meanwhile is sent once more on a fresh one: a read that got no
//! answer confirmed nothing. A `POST` never is: the server may have taken it before it
//! closed, so the caller hears that its outcome is unknown and decides (the SPI rail counts
//! the next posting as a repeat). One deadline bounds the whole request, connecting included.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rustls::pki_types::ServerName;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

/// Idle connections kept per client.
pub const IDLE_CONNECTIONS_MAX: usize = 16;
/// The largest response body read.
pub const RESPONSE_BYTES_MAX: usize = 8 * 1024 * 1024;
/// The largest response head (status line and headers).
pub const HEAD_BYTES_MAX: usize = 64 * 1024;
/// Headers a response may carry at most.
const HEADERS_MAX: usize = 64;

/// A response.
#[derive(Debug, Clone)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    /// A header's value (names compared without case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

/// A client of one server (`https://host:port`).
#[derive(Clone)]
pub struct Client {
    connector: TlsConnector,
    /// What to connect to.
    authority: String,
    /// The `Host` header: the host, without the port.
    host: String,
    name: ServerName<'static>,
    idle: Arc<Mutex<Vec<TlsStream<TcpStream>>>>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client").field("authority", &self.authority).finish()
    }
}

/// The `(host, port)` of an https URL, and its path (possibly empty).
pub fn split_url(url: &str) -> Result<(String, u16, String), String> {
    let rest = url.strip_prefix("https://").ok_or_else(|| format!("{url:?} is not an https URL"))?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    let (host, port) = match authority.rsplit_once(':') {
        Some((h, p)) if !h.ends_with(']') || h.starts_with('[') => {
            (h, p.parse::<u16>().map_err(|_| format!("{url:?} has no valid port"))?)
        }
        _ => (authority, 443),
    };
    if host.is_empty() {
        return Err(format!("{url:?} names no host"));
    }
    Ok((
        host.trim_start_matches('[').trim_end_matches(']').to_owned(),
        port,
        path.trim_end_matches('/').to_owned(),
    ))
}

impl Client {
    pub fn new(tls: Arc<rustls::ClientConfig>, base: &str) -> Result<Client, String> {
        let (host, port, _) = split_url(base)?;
        let name =
            ServerName::try_from(host.clone()).map_err(|e| format!("{host:?} is not a server name: {e}"))?;
        let authority =
            if host.contains(':') { format!("[{host}]:{port}") } else { format!("{host}:{port}") };
        Ok(Client {
            connector: TlsConnector::from(tls),
            authority,
            host,
            name,
            idle: Arc::new(Mutex::new(Vec::new())),
        })
    }

    async fn connect(&self) -> std::io::Result<TlsStream<TcpStream>> {
        let tcp = TcpStream::connect(&self.authority).await?;
        tcp.set_nodelay(true)?;
        self.connector.connect(self.name.clone(), tcp).await
    }

    /// Sends a request and reads its answer within `timeout`. `headers` are sent as given,
    /// after `Host`; `Content-Length` is added when there is a body.
    pub async fn send(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
        timeout: Duration,
    ) -> std::io::Result<Response> {
        let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {}\r\n", self.host);
        for (k, v) in headers {
            if v.contains(['\r', '\n']) {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    "a header value holds a line end",
                ));
            }
            head.push_str(k);
            head.push_str(": ");
            head.push_str(v);
            head.push_str("\r\n");
        }
        if !body.is_empty() || method == "POST" || method == "PUT" {
            head.push_str(&format!("Content-Length: {}\r\n", body.len()));
        }
        head.push_str("\r\n");
        let deadline = tokio::time::Instant::now() + timeout;
        let kept = self.idle.lock().unwrap_or_else(|p| p.into_inner()).pop();
        let attempt = |conn: TlsStream<TcpStream>| exchange(conn, head.as_bytes(), body, method == "HEAD");
        let repeatable = method != "POST";
        let result = match kept {
            Some(conn) => match tokio::time::timeout_at(deadline, attempt(conn)).await {
                Ok(Err(Exchange::Stale)) if repeatable => None,
                other => Some(other),
            },
            None => None,
        };
        let result = match result {
            Some(r) => r,
            None => {
                let conn = tokio::time::timeout_at(deadline, self.connect()).await.map_err(|_| {
                    std::io::Error::new(std::io::ErrorKind::TimedOut, "connecting timed out")
                })??;
                tokio::time::timeout_at(deadline, attempt(conn)).await
            }
        };
        match result {
            Err(_) => Err(std::io::Error::new(std::io::ErrorKind::TimedOut, "no answer in time")),
            Ok(Err(Exchange::Stale)) => {
                Err(std::io::Error::new(std::io::ErrorKind::ConnectionReset, "the connection closed"))
            }
            Ok(Err(Exchange::Io(e))) => Err(e),
            Ok(Ok((response, keep))) => {
                if let Some(conn) = keep {
                    let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
                    if idle.len() < IDLE_CONNECTIONS_MAX {
                        idle.push(conn);
                    }
                }
                Ok(response)
            }
        }
    }
}

enum Exchange {
    /// The connection closed before any answer: a kept connection the server dropped.
    Stale,
    Io(std::io::Error),
}

impl From<std::io::Error> for Exchange {
    fn from(e: std::io::Error) -> Self {
        Exchange::Io(e)
    }
}

fn invalid(what: &str) -> Exchange {
    Exchange::Io(std::io::Error::new(std::io::ErrorKind::InvalidData, what.to_owned()))
}

/// Writes a request and reads its response; answers the connection back when it may be
/// used again.
async fn exchange(
    mut conn: TlsStream<TcpStream>,
    head: &[u8],
    body: &[u8],
    head_only: bool,
) -> Result<(Response, Option<TlsStream<TcpStream>>), Exchange> {
    let mut request = Vec::with_capacity(head.len() + body.len());
    request.extend_from_slice(head);
    request.extend_from_slice(body);
    if conn.write_all(&request).await.is_err() {
        return Err(Exchange::Stale);
    }
    conn.flush().await.map_err(|_| Exchange::Stale)?;
    let mut buf = Vec::with_capacity(8192);
    let mut chunk = [0u8; 16 * 1024];
    let (status, headers, head_len) = loop {
        let n =
            conn.read(&mut chunk)
                .await
                .map_err(|e| if buf.is_empty() { Exchange::Stale } else { e.into() })?;
        if n == 0 {
            return Err(if buf.is_empty() { Exchange::Stale } else { invalid("the answer ended early") });
        }
        buf.extend_from_slice(&chunk[..n]);
        let mut parsed = [httparse::EMPTY_HEADER; HEADERS_MAX];
        let mut r = httparse::Response::new(&mut parsed);
        match r.parse(&buf) {
            Ok(httparse::Status::Complete(len)) => {
                let headers: Vec<(String, String)> = r
                    .headers
                    .iter()
                    .map(|h| (h.name.to_owned(), String::from_utf8_lossy(h.value).trim().to_owned()))
                    .collect();
                break (r.code.unwrap_or(0), headers, len);
            }
            Ok(httparse::Status::Partial) if buf.len() < HEAD_BYTES_MAX => continue,
            Ok(httparse::Status::Partial) => return Err(invalid("the answer's head is too large")),
            Err(_) => return Err(invalid("the answer is not HTTP/1.1")),
        }
    };
    let header =
        |name: &str| headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.clone());
    let close = header("connection").is_some_and(|v| v.eq_ignore_ascii_case("close"));
    let mut rest = buf.split_off(head_len);
    let body = if head_only || status == 204 || status == 304 || (100..200).contains(&status) {
        Vec::new()
    } else if header("transfer-encoding").is_some_and(|v| v.to_ascii_lowercase().contains("chunked")) {
        read_chunked(&mut conn, rest).await?
    } else if let Some(len) = header("content-length") {
        let len: usize = len.parse().map_err(|_| invalid("a bad Content-Length"))?;
        if len > RESPONSE_BYTES_MAX {
            return Err(invalid("the answer is too large"));
        }
        while rest.len() < len {
            let n = conn.read(&mut chunk).await?;
            if n == 0 {
                return Err(invalid("the answer's body ended early"));
            }
            rest.extend_from_slice(&chunk[..n]);
        }
        rest.truncate(len);
        rest
    } else {
        // No length: the body runs to the end of the connection.
        loop {
            let n = conn.read(&mut chunk).await?;
            if n == 0 {
                break;
            }
            rest.extend_from_slice(&chunk[..n]);
            if rest.len() > RESPONSE_BYTES_MAX {
                return Err(invalid("the answer is too large"));
            }
        }
        return Ok((Response { status, headers, body: rest }, None));
    };
    let keep = (!close).then_some(conn);
    Ok((Response { status, headers, body }, keep))
}

async fn read_chunked(conn: &mut TlsStream<TcpStream>, mut buf: Vec<u8>) -> Result<Vec<u8>, Exchange> {
    let mut out = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    let mut at = 0;
    loop {
        // A size line.
        let line_end = loop {
            if let Some(i) = buf[at..].windows(2).position(|w| w == b"\r\n") {
                break at + i;
            }
            let n = conn.read(&mut chunk).await?;
            if n == 0 {
                return Err(invalid("a chunked body ended early"));
            }
            buf.extend_from_slice(&chunk[..n]);
        };
        let size_text = std::str::from_utf8(&buf[at..line_end]).map_err(|_| invalid("a bad chunk size"))?;
        let size = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16)
            .map_err(|_| invalid("a bad chunk size"))?;
        at = line_end + 2;
        if out.len() + size > RESPONSE_BYTES_MAX {
            return Err(invalid("the answer is too large"));
        }
        // The chunk and its CRLF (the last chunk: the trailer's blank line).
        while buf.len() < at + size + 2 {
            let n = conn.read(&mut chunk).await?;
            if n == 0 {
                return Err(invalid("a chunked body ended early"));
            }
            buf.extend_from_slice(&chunk[..n]);
        }
        if size == 0 {
            return Ok(out);
        }
        out.extend_from_slice(&buf[at..at + size]);
        at += size + 2;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_split_into_host_port_and_path() {
        assert_eq!(
            split_url("https://icom-h.pi.rsfn.net.br:16522").unwrap(),
            ("icom-h.pi.rsfn.net.br".into(), 16522, "".into())
        );
        assert_eq!(
            split_url("https://127.0.0.1:8443/api/v2/").unwrap(),
            ("127.0.0.1".into(), 8443, "/api/v2".into())
        );
        assert_eq!(split_url("https://dict.example").unwrap(), ("dict.example".into(), 443, "".into()));
        assert!(split_url("http://x:1").is_err());
        assert!(split_url("https://:1").is_err());
        assert!(split_url("https://x:port").is_err());
    }

    /// A TLS server on loopback that answers each request `200` with `keep-alive` and then
    /// closes the connection from its side (a server dropping an idle connection): what it
    /// does is counted, connections and requests.
    async fn closing_server(
    ) -> (Client, Arc<std::sync::atomic::AtomicUsize>, Arc<std::sync::atomic::AtomicUsize>) {
        use rustls::pki_types::pem::PemObject;
        use std::sync::atomic::{AtomicUsize, Ordering};
        let dir = tempfile::tempdir().unwrap();
        let now = time::OffsetDateTime::now_utc();
        let ca = super::super::pki::Authority::new(
            "test CA",
            now - time::Duration::days(1),
            now + time::Duration::days(1),
        )
        .unwrap();
        let server = ca.issue("localhost", &["localhost"], 2, super::super::pki::Usage::Server).unwrap();
        let client = ca.issue("client", &[], 3, super::super::pki::Usage::Client).unwrap();
        let write = |name: &str, text: &str| {
            let path = dir.path().join(name);
            std::fs::write(&path, text).unwrap();
            std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
            path
        };
        let ca_pem = write("ca.pem", &ca.cert_pem);
        let (cert, key) = (write("client.pem", &client.cert_pem), write("client.key", &client.key_pem));
        let tls = super::super::settings::client_tls(&ca_pem, &cert, &key).unwrap();
        let certs: Vec<rustls::pki_types::CertificateDer<'static>> =
            rustls::pki_types::CertificateDer::pem_slice_iter(server.cert_pem.as_bytes())
                .collect::<Result<_, _>>()
                .unwrap();
        let key = rustls::pki_types::PrivateKeyDer::from_pem_slice(server.key_pem.as_bytes()).unwrap();
        let config =
            rustls::ServerConfig::builder().with_no_client_auth().with_single_cert(certs, key).unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let (connections, requests) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let (c, r) = (Arc::clone(&connections), Arc::clone(&requests));
        tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else { return };
                c.fetch_add(1, Ordering::SeqCst);
                let Ok(mut tls) = acceptor.accept(tcp).await else { continue };
                let mut buf = vec![0u8; 4096];
                let mut got = Vec::new();
                while !got.windows(4).any(|w| w == b"\r\n\r\n") {
                    match tls.read(&mut buf).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => got.extend_from_slice(&buf[..n]),
                    }
                }
                r.fetch_add(1, Ordering::SeqCst);
                let _ = tls
                    .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: keep-alive\r\n\r\nok")
                    .await;
                let _ = tls.flush().await;
                // Closed right after: the client keeps a connection the server dropped.
                let _ = tls.shutdown().await;
            }
        });
        std::mem::forget(dir);
        let client = Client::new(tls, &format!("https://localhost:{port}")).unwrap();
        (client, connections, requests)
    }

    #[tokio::test]
    async fn a_post_on_a_connection_the_server_dropped_is_never_sent_again_by_the_client() {
        use std::sync::atomic::Ordering;
        let (client, connections, requests) = closing_server().await;
        let timeout = Duration::from_secs(5);
        let first = client.send("GET", "/", &[], b"", timeout).await.unwrap();
        assert_eq!(first.status, 200);
        // The server never reads a connection again once it answered: a GET on the kept one
        // finds it dropped and goes again on a fresh one.
        let read = client.send("GET", "/", &[], b"", timeout).await.unwrap();
        assert_eq!(read.status, 200);
        assert_eq!(connections.load(Ordering::SeqCst), 2, "the read went again on a new connection");
        // A POST on the dropped connection: its outcome is the caller's to decide.
        let post = client.send("POST", "/msgs", &[], b"<Envelope/>", timeout).await;
        assert!(post.is_err(), "{post:?}");
        assert_eq!(
            (connections.load(Ordering::SeqCst), requests.load(Ordering::SeqCst)),
            (2, 2),
            "no second connection, no second POST"
        );
    }
}
