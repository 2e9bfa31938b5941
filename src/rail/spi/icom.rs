//! ICOM, the central bank's HTTP interface to the SPI: how a participant sends messages and
//! reads the ones addressed to it. Both ends live here: the wire format (paths, headers,
//! multipart bodies, gzip) that `pixgw spi-sim` serves too, and [`IcomClient`], the
//! participant's side.
//!
//! The protocol, as the interface manual describes it:
//! - **Send**: `POST /api/v1/in/{ispb}/msgs`, one message (`application/xml;
//!   charset=utf-8`) or up to [`MESSAGES_PER_REQUEST_MAX`] as `multipart/mixed`; the body may
//!   be gzipped (`Content-Encoding: gzip`). `201` stores them and answers their resource ids
//!   in `PI-ResourceId` (comma-separated for several). Nothing is checked then: a message the
//!   SPI cannot process comes back later, on the stream, as an admi.002.
//! - **Read**: `GET /api/v1/out/{ispb}/stream/start` opens a stream; `200` answers up to
//!   [`MESSAGES_PER_REQUEST_MAX`] messages (multipart when asked with `Accept:
//!   multipart/mixed`), `204` none after some seconds of long polling, and both name the next
//!   read in `PI-Pull-Next`. Reading that next URL confirms what the previous read
//!   delivered; `DELETE` on it closes the stream and confirms the last. What is not
//!   confirmed is delivered again, with the same resource id. A participant may hold at most
//!   [`STREAMS_PER_PARTICIPANT_MAX`] streams at once.
//! - **Headers**: only those in [`ALLOWED_REQUEST_HEADERS`]; `Host` without the port.
//! - **Busy**: `429` (with `Retry-After`) when the participant's token bucket is empty or it
//!   opened too many streams, `503` when the SPI is unavailable: both are retried later,
//!   and a message that got no `201` is sent again, byte for byte.
//!
//! Transport security is mutual TLS with the participant's certificate (`rustls`).

use std::io::{Read, Write};
use std::sync::Arc;
use std::time::Duration;

use actix_web::web::Bytes;

use super::message::Ispb;

/// Messages one request carries at most, sent or read.
pub const MESSAGES_PER_REQUEST_MAX: usize = 10;
/// Streams one participant may hold open at once.
pub const STREAMS_PER_PARTICIPANT_MAX: usize = 6;
/// The largest request or response body (compressed or not) either side accepts.
pub const BODY_BYTES_MAX: usize = 4 * 1024 * 1024;
/// A body this large or larger is sent gzipped (a batch; one message is cheaper plain).
pub const GZIP_BYTES_MIN: usize = 4 * 1024;
/// How long a read waits for a message before it answers 204 (the simulator's hold; the
/// client waits a little longer).
pub const LONG_POLL: Duration = Duration::from_secs(5);
/// How long a request may take before the client gives up on it.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(15);

pub const XML: &str = "application/xml; charset=utf-8";
pub const RESOURCE_ID: &str = "pi-resourceid";
pub const PULL_NEXT: &str = "pi-pull-next";

/// The request headers the interface accepts (lower case); any other is refused.
pub const ALLOWED_REQUEST_HEADERS: [&str; 12] = [
    "accept",
    "accept-encoding",
    "connection",
    "content-encoding",
    "content-length",
    "content-type",
    "cookie",
    "host",
    "max-forwards",
    "transfer-encoding",
    "user-agent",
    "via",
];

/// The path a participant sends to.
pub fn send_path(ispb: &Ispb) -> String {
    format!("/api/v1/in/{ispb}/msgs")
}

/// The path a participant opens a stream at.
pub fn stream_start_path(ispb: &Ispb) -> String {
    format!("/api/v1/out/{ispb}/stream/start")
}

/// One part of a multipart body: its resource id (on reads) and its message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part {
    pub resource_id: Option<String>,
    pub body: Bytes,
}

/// A `multipart/mixed` body of `parts` with `boundary`.
pub fn write_multipart(boundary: &str, parts: &[Part]) -> Vec<u8> {
    let mut out = Vec::with_capacity(parts.iter().map(|p| p.body.len() + 128).sum());
    for p in parts {
        out.extend_from_slice(b"--");
        out.extend_from_slice(boundary.as_bytes());
        out.extend_from_slice(b"\r\n");
        if let Some(id) = &p.resource_id {
            out.extend_from_slice(b"PI-ResourceId: ");
            out.extend_from_slice(id.as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(b"Content-Type: application/xml;charset=utf-8\r\n\r\n");
        out.extend_from_slice(&p.body);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"--");
    out.extend_from_slice(boundary.as_bytes());
    out.extend_from_slice(b"--\r\n");
    out
}

/// The boundary a `multipart/mixed` content type names.
pub fn boundary_of(content_type: &str) -> Option<&str> {
    let (kind, params) = content_type.split_once(';')?;
    if !kind.trim().eq_ignore_ascii_case("multipart/mixed") {
        return None;
    }
    params.split(';').find_map(|p| {
        let (k, v) = p.split_once('=')?;
        k.trim().eq_ignore_ascii_case("boundary").then(|| v.trim().trim_matches('"'))
    })
}

/// Reads a `multipart/mixed` body: its parts, each with its `PI-ResourceId` if it has one.
pub fn read_multipart(boundary: &str, body: &[u8]) -> Result<Vec<Part>, String> {
    let delimiter = format!("--{boundary}");
    let d = delimiter.as_bytes();
    let mut parts = Vec::new();
    let mut at = find(body, d, 0).ok_or("no boundary in the body")?;
    loop {
        let after = at + d.len();
        if body[after..].starts_with(b"--") {
            return Ok(parts);
        }
        let header_start = skip_line_end(body, after).ok_or("a boundary line does not end")?;
        let header_end =
            find(body, b"\r\n\r\n", header_start).ok_or("a part has no blank line after its headers")?;
        let headers = std::str::from_utf8(&body[header_start..header_end])
            .map_err(|_| "a part's headers are not UTF-8")?;
        let content_start = header_end + 4;
        let next = find(body, d, content_start).ok_or("a part is not closed by a boundary")?;
        // The line end before the delimiter belongs to the delimiter.
        let content_end = if body[..next].ends_with(b"\r\n") { next - 2 } else { next };
        let resource_id = headers.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim().eq_ignore_ascii_case(RESOURCE_ID).then(|| v.trim().to_owned())
        });
        if parts.len() >= MESSAGES_PER_REQUEST_MAX * 10 {
            return Err("too many parts".into());
        }
        parts.push(Part {
            resource_id,
            body: Bytes::copy_from_slice(&body[content_start..content_end.max(content_start)]),
        });
        at = next;
    }
}

fn find(hay: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    if from > hay.len() {
        return None;
    }
    hay[from..].windows(needle.len()).position(|w| w == needle).map(|i| i + from)
}

fn skip_line_end(body: &[u8], at: usize) -> Option<usize> {
    if body[at..].starts_with(b"\r\n") {
        Some(at + 2)
    } else if body[at..].starts_with(b"\n") {
        Some(at + 1)
    } else {
        None
    }
}

pub fn gzip(body: &[u8]) -> Vec<u8> {
    let mut e =
        flate2::write::GzEncoder::new(Vec::with_capacity(body.len() / 3), flate2::Compression::fast());
    // Writing to a Vec does not fail.
    let _ = e.write_all(body);
    e.finish().unwrap_or_default()
}

/// Inflates a gzipped body, refusing one that would grow past [`BODY_BYTES_MAX`].
pub fn gunzip(body: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(body.len() * 3);
    let mut d = flate2::read::GzDecoder::new(body).take(BODY_BYTES_MAX as u64 + 1);
    d.read_to_end(&mut out).map_err(|e| format!("the gzip body does not inflate: {e}"))?;
    if out.len() > BODY_BYTES_MAX {
        return Err(format!("the body inflates past {BODY_BYTES_MAX} bytes"));
    }
    Ok(out)
}

/// Why a request to ICOM did not get its answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IcomError {
    /// 429 (too many requests or streams) or 408 (the request was not read in time):
    /// nothing was stored; try again after this long.
    #[error("throttled; retry after {0:?}")]
    Throttled(Duration),
    /// 5xx, a timeout or a broken connection: the outcome is unknown; try again later.
    #[error("unavailable: {0}")]
    Unavailable(String),
    /// 4xx: the request was refused and nothing was stored; sending it again will not help.
    #[error("refused with {0}: {1}")]
    Refused(u16, String),
    /// 410: the stream this read belongs to is gone.
    #[error("the stream is gone")]
    Gone,
}

impl IcomError {
    /// Whether the same request may succeed later.
    pub fn is_transient(&self) -> bool {
        matches!(self, IcomError::Throttled(_) | IcomError::Unavailable(_))
    }
}

/// What one read answered: the messages, and where to read next.
#[derive(Debug, Clone, Default)]
pub struct Pulled {
    pub messages: Vec<Part>,
    pub next: Option<String>,
}

/// A participant's connection to ICOM: an HTTP/1.1 client over mutual TLS that sends only
/// the headers the interface allows.
#[derive(Clone, Debug)]
pub struct IcomClient {
    http: super::http1::Client,
    ispb: Ispb,
}

const USER_AGENT: &str = concat!("pixgw/", env!("CARGO_PKG_VERSION"));

impl IcomClient {
    /// A client of the ICOM at `base` (`https://host:port`) for participant `ispb`.
    pub fn new(tls: Arc<rustls::ClientConfig>, base: &str, ispb: Ispb) -> Result<IcomClient, String> {
        Ok(IcomClient { http: super::http1::Client::new(tls, base)?, ispb })
    }

    pub fn ispb(&self) -> &Ispb {
        &self.ispb
    }

    /// Sends 1 to [`MESSAGES_PER_REQUEST_MAX`] messages in one request; answers their
    /// resource ids.
    pub async fn send(&self, messages: &[Bytes]) -> Result<Vec<String>, IcomError> {
        if messages.is_empty() || messages.len() > MESSAGES_PER_REQUEST_MAX {
            return Err(IcomError::Refused(400, format!("{} messages in one request", messages.len())));
        }
        let (content_type, body) = if messages.len() == 1 {
            (XML.to_owned(), messages[0].to_vec())
        } else {
            let boundary = uuid::Uuid::new_v4().to_string();
            let parts: Vec<Part> =
                messages.iter().map(|m| Part { resource_id: None, body: m.clone() }).collect();
            (format!("multipart/mixed; boundary={boundary}"), write_multipart(&boundary, &parts))
        };
        let gzipped = body.len() >= GZIP_BYTES_MIN;
        let body = if gzipped { gzip(&body) } else { body };
        let mut headers = vec![("User-Agent", USER_AGENT), ("Content-Type", content_type.as_str())];
        if gzipped {
            headers.push(("Content-Encoding", "gzip"));
        }
        let res = self
            .http
            .send("POST", &send_path(&self.ispb), &headers, &body, REQUEST_TIMEOUT)
            .await
            .map_err(|e| IcomError::Unavailable(e.to_string()))?;
        if res.status == 201 {
            let ids = res.header(RESOURCE_ID).unwrap_or_default();
            return Ok(ids.split(',').map(|s| s.trim().to_owned()).filter(|s| !s.is_empty()).collect());
        }
        Err(error_of(&res))
    }

    /// Opens a stream: the first read.
    pub async fn start(&self) -> Result<Pulled, IcomError> {
        self.read(&stream_start_path(&self.ispb)).await
    }

    /// Reads at `next` (a `PI-Pull-Next`), which confirms the previous read.
    pub async fn pull(&self, next: &str) -> Result<Pulled, IcomError> {
        self.read(next).await
    }

    /// Closes the stream at `next`, confirming the last read: answers false when ICOM no
    /// longer has a stream there (410: closed, expired, or moved on by a later read).
    pub async fn close(&self, next: &str) -> Result<bool, IcomError> {
        let res = self
            .http
            .send("DELETE", &path_of(next), &[("User-Agent", USER_AGENT)], b"", REQUEST_TIMEOUT)
            .await
            .map_err(|e| IcomError::Unavailable(e.to_string()))?;
        match res.status {
            200 | 204 => Ok(true),
            410 => Ok(false),
            _ => Err(error_of(&res)),
        }
    }

    async fn read(&self, path: &str) -> Result<Pulled, IcomError> {
        let headers =
            [("User-Agent", USER_AGENT), ("Accept", "multipart/mixed"), ("Accept-Encoding", "gzip")];
        let res = self
            .http
            .send("GET", &path_of(path), &headers, b"", LONG_POLL + REQUEST_TIMEOUT)
            .await
            .map_err(|e| IcomError::Unavailable(e.to_string()))?;
        let next = res.header(PULL_NEXT).map(str::to_owned);
        match res.status {
            204 => Ok(Pulled { messages: Vec::new(), next }),
            200 => {
                let body = if res.header("content-encoding").is_some_and(|e| e.eq_ignore_ascii_case("gzip")) {
                    gunzip(&res.body).map_err(IcomError::Unavailable)?
                } else {
                    res.body.clone()
                };
                let content_type = res.header("content-type").unwrap_or_default().to_owned();
                let messages = match boundary_of(&content_type) {
                    Some(b) => read_multipart(b, &body).map_err(IcomError::Unavailable)?,
                    None => vec![Part {
                        resource_id: res.header(RESOURCE_ID).map(str::to_owned),
                        body: Bytes::from(body),
                    }],
                };
                Ok(Pulled { messages, next })
            }
            _ => Err(error_of(&res)),
        }
    }
}

/// The path of a `PI-Pull-Next`, which may be an absolute URL or a path.
fn path_of(next: &str) -> String {
    match super::http1::split_url(next) {
        Ok((_, _, path)) if !path.is_empty() => path,
        _ => next.to_owned(),
    }
}

/// The longest a `Retry-After` makes the client wait.
pub const RETRY_AFTER_MAX: Duration = Duration::from_secs(60);
/// How long a request answered 408 without `Retry-After` waits before it is made again.
pub const AGAIN_AFTER_408: Duration = Duration::from_millis(50);

/// How long a `Retry-After` value asks to wait at `now`: delay-seconds or an HTTP date
/// (RFC 9110), at least a second and at most [`RETRY_AFTER_MAX`]; a second when absent or
/// unreadable.
pub fn retry_after(value: Option<&str>, now: chrono::DateTime<chrono::Utc>) -> Duration {
    let min = Duration::from_secs(1);
    let wait = value.map(str::trim).and_then(|v| match v.parse::<u64>() {
        Ok(secs) => Some(Duration::from_secs(secs)),
        Err(_) => chrono::DateTime::parse_from_rfc2822(v)
            .ok()
            .map(|at| (at.with_timezone(&chrono::Utc) - now).to_std().unwrap_or_default()),
    });
    wait.unwrap_or(min).clamp(min, RETRY_AFTER_MAX)
}

fn error_of(res: &super::http1::Response) -> IcomError {
    let text = String::from_utf8_lossy(&res.body[..res.body.len().min(512)]).into_owned();
    match res.status {
        // 429: the bucket is empty or too many streams are open; 408: the request did not
        // reach the server whole in time. Neither stored anything: the same request later,
        // when `Retry-After` says; a 408 without it at once (after [`AGAIN_AFTER_408`]),
        // since nothing says ICOM is busy.
        408 if res.header("retry-after").is_none() => IcomError::Throttled(AGAIN_AFTER_408),
        429 | 408 => IcomError::Throttled(retry_after(res.header("retry-after"), chrono::Utc::now())),
        410 => IcomError::Gone,
        s if s >= 500 => IcomError::Unavailable(format!("{s}: {text}")),
        s => IcomError::Refused(s, text),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_multipart_body_reads_back_part_by_part_with_its_resource_ids() {
        let parts = vec![
            Part {
                resource_id: Some("UEkBmRU0GT9Cq9AT+ZxLxKrdjEv5dL9j".into()),
                body: Bytes::from_static(b"<a>1</a>"),
            },
            Part { resource_id: None, body: Bytes::from_static(b"<b>\r\n2</b>") },
            Part { resource_id: Some("x".into()), body: Bytes::new() },
        ];
        let boundary = "599a8c95-608a-49b5-8c8e-7755790f0160";
        let body = write_multipart(boundary, &parts);
        assert_eq!(read_multipart(boundary, &body).unwrap(), parts);
        let ct = format!("multipart/mixed; boundary=\"{boundary}\"");
        assert_eq!(boundary_of(&ct), Some(boundary));
        assert_eq!(boundary_of("application/xml; charset=utf-8"), None);
    }

    #[test]
    fn the_multipart_the_spi_sent_in_homologation_reads() {
        let body = b"--b1\r\nPI-ResourceId: UEkBmRU0GT9Cq9AT+ZxLxKrdjEv5dL9j\r\nContent-Type: application/xml;charset=utf-8\r\n\r\n<?xml version=\"1.0\"?><Envelope/>\r\n--b1\r\nPI-ResourceId: r2\r\nContent-Type: application/xml;charset=utf-8\r\n\r\n<Envelope/>\r\n--b1--\r\n";
        let parts = read_multipart("b1", body).unwrap();
        assert_eq!(parts.len(), 2);
        assert_eq!(parts[0].resource_id.as_deref(), Some("UEkBmRU0GT9Cq9AT+ZxLxKrdjEv5dL9j"));
        assert_eq!(&parts[1].body[..], b"<Envelope/>");
        assert!(read_multipart("b1", b"--b1\r\nContent-Type: x\r\n\r\nno end").is_err());
        assert!(read_multipart("b2", body).is_err());
    }

    #[test]
    fn retry_after_reads_seconds_and_http_dates_within_bounds() {
        let now: chrono::DateTime<chrono::Utc> = "2026-11-28T12:00:00Z".parse().unwrap();
        assert_eq!(retry_after(Some("7"), now), Duration::from_secs(7));
        assert_eq!(retry_after(Some(" 0 "), now), Duration::from_secs(1), "at least a second");
        assert_eq!(retry_after(Some("61"), now), RETRY_AFTER_MAX);
        assert_eq!(retry_after(Some("Sat, 28 Nov 2026 12:00:30 GMT"), now), Duration::from_secs(30));
        assert_eq!(
            retry_after(Some("Sat, 28 Nov 2026 11:00:00 GMT"), now),
            Duration::from_secs(1),
            "a past date"
        );
        assert_eq!(retry_after(Some("Sun, 29 Nov 2026 12:00:00 GMT"), now), RETRY_AFTER_MAX);
        assert_eq!(retry_after(Some("soon"), now), Duration::from_secs(1));
        assert_eq!(retry_after(None, now), Duration::from_secs(1));
    }

    #[test]
    fn a_408_and_a_429_are_tried_again_and_other_4xx_are_final() {
        let res = |status: u16, headers: Vec<(String, String)>| super::super::http1::Response {
            status,
            headers,
            body: b"no".to_vec(),
        };
        assert_eq!(error_of(&res(408, vec![])), IcomError::Throttled(AGAIN_AFTER_408));
        let after = vec![("Retry-After".to_owned(), "2".to_owned())];
        assert_eq!(error_of(&res(408, after)), IcomError::Throttled(Duration::from_secs(2)));
        let after = vec![("Retry-After".to_owned(), "3".to_owned())];
        assert_eq!(error_of(&res(429, after)), IcomError::Throttled(Duration::from_secs(3)));
        assert!(error_of(&res(503, vec![])).is_transient());
        assert_eq!(error_of(&res(410, vec![])), IcomError::Gone);
        assert_eq!(error_of(&res(400, vec![])), IcomError::Refused(400, "no".into()));
    }

    #[test]
    fn gzip_round_trips_and_a_bomb_is_refused() {
        let body = b"<Envelope>".repeat(1000);
        assert_eq!(gunzip(&gzip(&body)).unwrap(), body);
        let bomb = gzip(&vec![0u8; BODY_BYTES_MAX + 1]);
        assert!(bomb.len() < 100_000);
        assert!(gunzip(&bomb).unwrap_err().contains("inflates past"));
        assert!(gunzip(b"not gzip").is_err());
    }
}
