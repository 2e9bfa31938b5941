//! The simulator's ICOM: the routes a participant sends and reads on, as
//! [`crate::rail::spi::icom`] describes the protocol, behind mutual TLS.
//!
//! Each request is checked as the interface would: the client certificate names a
//! participant, the path's ISPB is that participant's, every header is one the manual
//! allows, and `Host` carries no port (400 otherwise, 403 for another participant's path).
//! A message that does not verify or does not follow the catalogue is still answered `201`
//! (ICOM stores before it checks) and refused afterwards by an admi.002 on the sender's
//! stream, as the SPI does.

use std::sync::Arc;
use std::time::Instant;

use actix_web::dev::Extensions;
use actix_web::http::header;
use actix_web::web::{self, Bytes};
use actix_web::{HttpRequest, HttpResponse};
use anyhow::Context;
use sha2::Digest;

use super::core::Outgoing;
use super::{resource_id, Delivery, Sim};
use crate::rail::spi::dsig::{self, Profile};
use crate::rail::spi::icom::{
    boundary_of, gunzip, gzip, read_multipart, write_multipart, Part, ALLOWED_REQUEST_HEADERS,
    BODY_BYTES_MAX, GZIP_BYTES_MIN, MESSAGES_PER_REQUEST_MAX, PULL_NEXT, RESOURCE_ID,
    STREAMS_PER_PARTICIPANT_MAX,
};
use crate::rail::spi::message::{Body, Ispb, Message, Reject};
use crate::rail::spi::xml::Document;

/// The SHA-256 of the client certificate of a connection.
#[derive(Clone, Copy)]
pub struct PeerCert(pub [u8; 32]);

/// Keeps the client certificate of each TLS connection for its requests.
pub fn peer_certificate(conn: &dyn std::any::Any, ext: &mut Extensions) {
    type Tls = actix_tls::accept::rustls_0_23::TlsStream<actix_web::rt::net::TcpStream>;
    if let Some(tls) = conn.downcast_ref::<Tls>() {
        let (_, session) = tls.get_ref();
        if let Some(cert) = session.peer_certificates().and_then(|c| c.first()) {
            ext.insert(PeerCert(sha2::Sha256::digest(cert.as_ref()).into()));
        }
    }
}

/// The server's TLS: its certificate, and client certificates required, from the local CA.
pub fn server_tls(dir: &std::path::Path) -> anyhow::Result<rustls::ServerConfig> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let mut roots = rustls::RootCertStore::empty();
    crate::trust::add_pem_file(&mut roots, &dir.join("ca.pem"), "simulator CA")
        .map_err(anyhow::Error::msg)?;
    let verifier = rustls::server::WebPkiClientVerifier::builder(Arc::new(roots))
        .build()
        .context("the client verifier")?;
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(dir.join("spi/tls.pem"))
        .context("reading spi/tls.pem")?
        .collect::<Result<_, _>>()
        .context("reading spi/tls.pem")?;
    let key = PrivateKeyDer::from_pem_file(dir.join("spi/tls.key")).context("reading spi/tls.key")?;
    rustls::ServerConfig::builder()
        .with_client_cert_verifier(verifier)
        .with_single_cert(certs, key)
        .context("the server certificate")
}

pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.app_data(web::PayloadConfig::new(BODY_BYTES_MAX))
        .route("/api/v1/in/{ispb}/msgs", web::post().to(send))
        .route("/api/v1/out/{ispb}/stream/start", web::get().to(start))
        .route("/api/v1/out/{ispb}/stream/{token}", web::get().to(next))
        .route("/api/v1/out/{ispb}/stream/{token}", web::delete().to(close));
}

/// An RFC 7807 problem, as ICOM answers errors.
pub fn problem(status: u16, kind: &str, title: &str) -> HttpResponse {
    let body = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?><problem xmlns=\"urn:ietf:rfc:7807\"><type>https://icom.pi.rsfn.net.br/api/v1/error/{kind}</type><title>{}</title><status>{status}</status></problem>",
        crate::rail::spi::xml::escape_text(title)
    );
    HttpResponse::build(
        actix_web::http::StatusCode::from_u16(status).unwrap_or(actix_web::http::StatusCode::BAD_REQUEST),
    )
    .content_type("application/problem+xml")
    .body(body)
}

/// Why a request was refused before anything of it ran.
#[derive(Debug)]
pub struct Refused {
    status: u16,
    kind: &'static str,
    title: String,
}

impl Refused {
    fn new(status: u16, kind: &'static str, title: impl Into<String>) -> Refused {
        Refused { status, kind, title: title.into() }
    }

    pub fn response(&self) -> HttpResponse {
        problem(self.status, self.kind, &self.title)
    }
}

/// The headers the DICT takes besides ICOM's list: its lookup's own.
pub const DICT_HEADERS: [&str; 3] = ["pi-requestingparticipant", "pi-payerid", "pi-endtoendid"];

/// The participant a request comes from, after the interface's checks; `dict`: a request
/// to the DICT, which also takes the headers of its lookup.
pub fn participant(
    req: &HttpRequest,
    sim: &Sim,
    path_ispb: Option<&str>,
    dict: bool,
) -> Result<Ispb, Refused> {
    if req.version() != actix_web::http::Version::HTTP_11 {
        return Err(Refused::new(400, "version", "the interface speaks HTTP/1.1"));
    }
    for (name, _) in req.headers() {
        let allowed = ALLOWED_REQUEST_HEADERS.contains(&name.as_str())
            || (dict && DICT_HEADERS.contains(&name.as_str()));
        if !allowed {
            return Err(Refused::new(400, "header", format!("the header {name} is not allowed")));
        }
    }
    match req.headers().get(header::HOST).and_then(|h| h.to_str().ok()) {
        Some(host) if !host.contains(':') => {}
        Some(host) => return Err(Refused::new(400, "host", format!("Host {host} must not carry the port"))),
        None => return Err(Refused::new(400, "host", "Host is required")),
    }
    let cert =
        req.conn_data::<PeerCert>().ok_or_else(|| Refused::new(403, "forbidden", "no client certificate"))?;
    let ispb = sim
        .tls_certs
        .get(&cert.0)
        .cloned()
        .ok_or_else(|| Refused::new(403, "forbidden", "Acesso não permitido."))?;
    if path_ispb.is_some_and(|p| p != ispb.as_str()) {
        return Err(Refused::new(403, "forbidden", "Acesso não permitido."));
    }
    Ok(ispb)
}

async fn send(req: HttpRequest, path: web::Path<String>, body: Bytes, sim: web::Data<Sim>) -> HttpResponse {
    let from = match participant(&req, &sim, Some(&path), false) {
        Ok(p) => p,
        Err(r) => return r.response(),
    };
    if sim.outage.lock().unwrap_or_else(|p| p.into_inner()).sends {
        sim.disturbed();
        return problem(503, "unavailable", "ICOM is unavailable");
    }
    let every = sim.every();
    let stored_then_502 = {
        let mut f = sim.faults.lock().unwrap_or_else(|p| p.into_inner());
        let take = |n: &mut u32| n.checked_sub(1).map(|left| *n = left).is_some();
        let (t408, t429, t502) = (
            take(&mut f.answer_408),
            take(&mut f.answer_429_http_date),
            take(&mut f.answer_502_after_storing),
        );
        drop(f);
        if t408 || sim.plays("post408", every.post408) {
            return problem(408, "timeout", "the request was not read in time");
        }
        if t429 || sim.plays("post429", every.post429) {
            return too_many_until(chrono::Utc::now() + chrono::Duration::seconds(1));
        }
        if sim.plays("post500", every.post500) {
            return problem(500, "internal", "ICOM failed");
        }
        t502
    };
    let reset_after_storing = sim.plays("postReset", every.post_reset);
    let text = |name: header::HeaderName| {
        req.headers().get(name).and_then(|v| v.to_str().ok()).unwrap_or("").to_owned()
    };
    let body = match text(header::CONTENT_ENCODING).to_ascii_lowercase().as_str() {
        "" | "identity" => body,
        // actix-web inflates a gzip request body before the handler sees it (its compress
        // feature is on for the server's own answers); a body still gzipped is inflated here.
        "gzip" if !body.starts_with(&[0x1f, 0x8b]) => body,
        "gzip" => match gunzip(&body) {
            Ok(b) => Bytes::from(b),
            Err(e) => return problem(400, "encoding", &e),
        },
        other => return problem(415, "encoding", &format!("Content-Encoding {other} is not supported")),
    };
    let content_type = text(header::CONTENT_TYPE);
    let messages: Vec<Bytes> = match boundary_of(&content_type) {
        Some(b) => match read_multipart(b, &body) {
            Ok(parts) => parts.into_iter().map(|p| p.body).collect(),
            Err(e) => return problem(400, "multipart", &e),
        },
        None if content_type.to_ascii_lowercase().replace(' ', "") == "application/xml;charset=utf-8" => {
            vec![body]
        }
        None => return problem(415, "charset", "Content-Type must be application/xml; charset=utf-8"),
    };
    if messages.is_empty() || messages.len() > MESSAGES_PER_REQUEST_MAX {
        return problem(400, "multipart", &format!("1 to {MESSAGES_PER_REQUEST_MAX} messages per request"));
    }
    let mut ids = Vec::with_capacity(messages.len());
    for m in messages {
        let id = resource_id();
        receive(&sim, &from, &m, &id);
        ids.push(id);
    }
    if stored_then_502 {
        return problem(502, "badGateway", "the upstream answered too late");
    }
    if reset_after_storing {
        let mut head = HttpResponse::Created();
        head.insert_header((RESOURCE_ID, ids.join(",")));
        return dropped(head);
    }
    HttpResponse::Created().insert_header((RESOURCE_ID, ids.join(","))).finish()
}

/// A 429 whose `Retry-After` is the HTTP date `at`.
fn too_many_until(at: chrono::DateTime<chrono::Utc>) -> HttpResponse {
    let mut res = problem(429, "tooManyRequests", "too many requests");
    if let Ok(v) = header::HeaderValue::from_str(&at.format("%a, %d %b %Y %H:%M:%S GMT").to_string()) {
        res.headers_mut().insert(header::RETRY_AFTER, v);
    }
    res
}

/// An answer whose connection drops after its head: the body (chunked) ends with an error,
/// so the client reads no complete answer, as after a reset.
fn dropped(mut head: actix_web::HttpResponseBuilder) -> HttpResponse {
    let fails = futures_util::stream::once(async {
        Err::<Bytes, std::io::Error>(std::io::Error::new(std::io::ErrorKind::ConnectionReset, "dropped"))
    });
    head.streaming(fails)
}

/// A fault a read plays before it touches its stream (nothing delivered or confirmed).
fn read_fault(sim: &Sim) -> Option<HttpResponse> {
    let every = sim.every();
    if sim.plays("read408", every.read408) {
        return Some(problem(408, "timeout", "the request was not read in time"));
    }
    if sim.plays("read429", every.read429) {
        let mut res = problem(429, "tooManyRequests", "too many requests");
        res.headers_mut().insert(header::RETRY_AFTER, header::HeaderValue::from_static("1"));
        return Some(res);
    }
    if sim.plays("read500", every.read500) {
        return Some(problem(500, "internal", "ICOM failed"));
    }
    None
}

/// Checks and settles one message a participant sent; a message that fails a check is
/// answered with an admi.002.
pub fn receive(sim: &Sim, from: &Ispb, body: &[u8], resource: &str) {
    sim.spool("in", body);
    sim.stats.lock().unwrap_or_else(|p| p.into_inner()).messages_received += 1;
    let refuse = |reference: &str, reason: &str, location: Option<String>, description: String| {
        let mut stats = sim.stats.lock().unwrap_or_else(|p| p.into_inner());
        if reason == "DS0G" {
            stats.unsigned_or_bad_signature += 1;
        } else {
            stats.malformed += 1;
        }
        stats.rejections_sent += 1;
        drop(stats);
        tracing::info!(participant = %from, reference, reason, description, "spi-sim refuses a message");
        let id = sim.engine.lock().unwrap_or_else(|p| p.into_inner()).spi_msg_id();
        let reject = Reject {
            reference: reference.to_owned(),
            reason: reason.to_owned(),
            rejected_at: Some(chrono::Utc::now()),
            location,
            description: Some(description.chars().take(350).collect()),
        };
        let m = Message::new(Ispb::spi(), from.clone(), id, chrono::Utc::now(), Body::Reject(reject));
        sim.dispatch(vec![Outgoing { to: from.clone(), message: m }]);
    };
    let doc = match Document::parse(body) {
        Ok(d) => d,
        Err(e) => return refuse(resource, "CH16", None, e.to_string()),
    };
    let msg_id = doc
        .root
        .text_at(&["AppHdr", "BizMsgIdr"])
        .filter(|t| !t.is_empty())
        .unwrap_or_else(|| resource.to_owned());
    {
        use sha2::Digest;
        let mut postings = sim.postings.lock().unwrap_or_else(|p| p.into_inner());
        let p = postings.entry(msg_id.clone()).or_default();
        p.resource_ids.push(resource.to_owned());
        p.bodies.insert(sha2::Sha256::digest(body).into());
    }
    let unsigned_allowed = sim.accept_unsigned && dsig::signature_of(&doc, Profile::Spi).is_none();
    if !unsigned_allowed {
        let certs = sim.signing_certs.get(from).map(Vec::as_slice).unwrap_or(&[]);
        if let Err(e) = dsig::verify(&doc, Profile::Spi, certs) {
            return refuse(&msg_id, "DS0G", Some("AppHdr/Sgntr".into()), e.to_string());
        }
    }
    let message = match Message::read(&doc) {
        Ok(m) => m,
        Err(e) => return refuse(&msg_id, "CH16", Some(e.location.clone()), e.reason),
    };
    if message.from != *from || message.to != Ispb::spi() {
        return refuse(&msg_id, "AGNT", Some("AppHdr".into()), "Fr must be the sender and To the SPI".into());
    }
    // A payment after a lookup gives the payer's token back.
    if let Body::CreditTransfers { txs, .. } = &message.body {
        let mut d = sim.directory.lock().unwrap_or_else(|p| p.into_inner());
        for t in txs.iter().filter(|t| t.proxy.is_some()) {
            d.refund_token(&t.debtor_document);
        }
    }
    let out = {
        let mut engine = sim.engine.lock().unwrap_or_else(|p| p.into_inner());
        engine.receive(from, message, Instant::now(), chrono::Utc::now())
    };
    sim.dispatch(out);
}

async fn start(req: HttpRequest, path: web::Path<String>, sim: web::Data<Sim>) -> HttpResponse {
    let ispb = match participant(&req, &sim, Some(&path), false) {
        Ok(p) => p,
        Err(r) => return r.response(),
    };
    // An outage refuses the start before it opens anything.
    if sim.outage.lock().unwrap_or_else(|p| p.into_inner()).reads {
        sim.stats.lock().unwrap_or_else(|p| p.into_inner()).reads_refused += 1;
        sim.disturbed();
        return problem(503, "unavailable", "ICOM is unavailable");
    }
    if let Some(fault) = read_fault(&sim) {
        return fault;
    }
    let token = uuid::Uuid::new_v4().to_string();
    {
        let mut queues = sim.queues.lock().unwrap_or_else(|p| p.into_inner());
        let q = queues.entry(ispb.clone()).or_default();
        if q.streams.len() >= STREAMS_PER_PARTICIPANT_MAX {
            drop(queues);
            sim.stats.lock().unwrap_or_else(|p| p.into_inner()).streams_refused += 1;
            let mut res = problem(429, "tooManyStreams", "too many open streams");
            res.headers_mut().insert(header::RETRY_AFTER, header::HeaderValue::from_static("1"));
            return res;
        }
        // Idle counts from the end of the read now starting (its long poll).
        q.streams.insert(token.clone(), (Vec::new(), Instant::now() + sim.long_poll));
    }
    read(&req, &sim, &ispb, token).await
}

async fn next(req: HttpRequest, path: web::Path<(String, String)>, sim: web::Data<Sim>) -> HttpResponse {
    let (path_ispb, token) = path.into_inner();
    let ispb = match participant(&req, &sim, Some(&path_ispb), false) {
        Ok(p) => p,
        Err(r) => return r.response(),
    };
    if let Some(fault) = read_fault(&sim) {
        return fault;
    }
    {
        let mut queues = sim.queues.lock().unwrap_or_else(|p| p.into_inner());
        let q = queues.entry(ispb.clone()).or_default();
        match q.streams.get_mut(&token) {
            // Reading on confirms what the last read delivered; idle counts from the end
            // of this read's long poll.
            Some(stream) => *stream = (Vec::new(), Instant::now() + sim.long_poll),
            None => return problem(410, "gone", "the stream is closed"),
        }
    }
    read(&req, &sim, &ispb, token).await
}

async fn close(req: HttpRequest, path: web::Path<(String, String)>, sim: web::Data<Sim>) -> HttpResponse {
    let (path_ispb, token) = path.into_inner();
    let ispb = match participant(&req, &sim, Some(&path_ispb), false) {
        Ok(p) => p,
        Err(r) => return r.response(),
    };
    let removed = {
        let mut queues = sim.queues.lock().unwrap_or_else(|p| p.into_inner());
        queues.get_mut(&ispb).and_then(|q| q.streams.remove(&token)).is_some()
    };
    if !removed {
        return problem(410, "gone", "the stream is closed");
    }
    // Closing confirms what the last read delivered.
    sim.stats.lock().unwrap_or_else(|p| p.into_inner()).streams_closed += 1;
    HttpResponse::Ok().finish()
}

/// Answers the next read of stream `token`: up to ten messages as soon as one is there, or
/// 204 after the long poll. The stream moves to a new token, named in `PI-Pull-Next`.
async fn read(req: &HttpRequest, sim: &Sim, ispb: &Ispb, token: String) -> HttpResponse {
    if sim.outage.lock().unwrap_or_else(|p| p.into_inner()).reads {
        sim.stats.lock().unwrap_or_else(|p| p.into_inner()).reads_refused += 1;
        sim.disturbed();
        return problem(503, "unavailable", "ICOM is unavailable");
    }
    let multipart = req
        .headers()
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| a.contains("multipart/mixed"));
    let gzip_ok = req
        .headers()
        .get(header::ACCEPT_ENCODING)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| a.contains("gzip"));
    let limit = if multipart { MESSAGES_PER_REQUEST_MAX } else { 1 };
    let deadline = tokio::time::Instant::now() + sim.long_poll;
    let new_token = uuid::Uuid::new_v4().to_string();
    loop {
        // Interest is registered before the queue is looked at, so a message queued in
        // between wakes this read.
        let notify = {
            let mut queues = sim.queues.lock().unwrap_or_else(|p| p.into_inner());
            Arc::clone(&queues.entry(ispb.clone()).or_default().notify)
        };
        let notified = notify.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        {
            let mut queues = sim.queues.lock().unwrap_or_else(|p| p.into_inner());
            let q = queues.entry(ispb.clone()).or_default();
            if !q.streams.contains_key(&token) {
                return problem(410, "gone", "the stream is closed");
            }
            let n = q.pending.len().min(limit);
            if n > 0 || tokio::time::Instant::now() >= deadline {
                let batch: Vec<Delivery> = q.pending.drain(..n).collect();
                q.streams.remove(&token);
                q.streams.insert(new_token.clone(), (batch.clone(), Instant::now()));
                drop(queues);
                if !batch.is_empty() && sim.plays("readDropped", sim.every().read_dropped) {
                    // Delivered on a stream the reader never learns of: given again once
                    // it expires.
                    return dropped(HttpResponse::Ok());
                }
                return answer(ispb, &new_token, batch, multipart, gzip_ok);
            }
        }
        let _ = tokio::time::timeout_at(deadline, notified).await;
    }
}

fn answer(ispb: &Ispb, token: &str, batch: Vec<Delivery>, multipart: bool, gzip_ok: bool) -> HttpResponse {
    let next = format!("/api/v1/out/{ispb}/stream/{token}");
    if batch.is_empty() {
        return HttpResponse::NoContent().insert_header((PULL_NEXT, next)).finish();
    }
    let mut res = HttpResponse::Ok();
    res.insert_header((PULL_NEXT, next));
    let body = if multipart {
        let boundary = uuid::Uuid::new_v4().to_string();
        res.content_type(format!("multipart/mixed; boundary={boundary}"));
        let parts: Vec<Part> =
            batch.into_iter().map(|d| Part { resource_id: Some(d.resource_id), body: d.body }).collect();
        write_multipart(&boundary, &parts)
    } else {
        let d =
            batch.into_iter().next().unwrap_or(Delivery { resource_id: String::new(), body: Bytes::new() });
        res.content_type("application/xml;charset=utf-8").insert_header((RESOURCE_ID, d.resource_id));
        d.body.to_vec()
    };
    if gzip_ok && body.len() >= GZIP_BYTES_MIN {
        res.insert_header((header::CONTENT_ENCODING, "gzip"));
        return res.body(gzip(&body));
    }
    res.body(body)
}
