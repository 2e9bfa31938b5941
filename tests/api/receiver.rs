//! A webhook receiver for the tests: a real HTTP server on a free port that records every
//! request it gets and answers by a plan (a status per request, or no answer at all).
//! Tests wait on a channel for what it received, never on a sleep.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use actix_web::web::{self, Bytes};
use actix_web::{App, HttpRequest, HttpResponse, HttpServer};
use base64::Engine;
use hmac::{KeyInit, Mac};
use serde_json::Value;
use tokio::sync::mpsc;

/// How the receiver answers one request.
#[derive(Debug, Clone, Copy)]
pub enum Answer {
    Status(u16),
    /// Never answers (the connection stays open until the sender gives up).
    Hang,
}

#[derive(Debug, Clone)]
pub struct Received {
    pub path: String,
    pub headers: HashMap<String, String>,
    pub body: Bytes,
}

impl Received {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap()
    }

    pub fn header(&self, name: &str) -> &str {
        self.headers
            .get(name)
            .map(String::as_str)
            .unwrap_or_else(|| panic!("no {name} header: {:?}", self.headers))
    }
}

struct Plan {
    next: Mutex<VecDeque<Answer>>,
    otherwise: Answer,
    seen: mpsc::UnboundedSender<Received>,
}

pub struct Receiver {
    pub url: String,
    rx: mpsc::UnboundedReceiver<Received>,
}

async fn record(req: HttpRequest, body: Bytes, plan: web::Data<Plan>) -> HttpResponse {
    let headers = req
        .headers()
        .iter()
        .map(|(k, v)| (k.as_str().to_owned(), v.to_str().unwrap_or("").to_owned()))
        .collect();
    let _ = plan.seen.send(Received { path: req.path().to_owned(), headers, body });
    let answer = plan.next.lock().unwrap().pop_front().unwrap_or(plan.otherwise);
    match answer {
        // A 3xx points back at this receiver, so a sender that followed it would be seen.
        Answer::Status(s) if (300..400).contains(&s) => {
            HttpResponse::build(actix_web::http::StatusCode::from_u16(s).unwrap())
                .insert_header(("location", "/followed"))
                .finish()
        }
        Answer::Status(s) => HttpResponse::build(actix_web::http::StatusCode::from_u16(s).unwrap()).finish(),
        Answer::Hang => std::future::pending().await,
    }
}

impl Receiver {
    /// Starts a receiver that answers `plan` in order, then `otherwise` forever.
    pub fn start(plan: Vec<Answer>, otherwise: Answer) -> Receiver {
        Receiver::serve(plan, otherwise, None)
    }

    /// Starts an https receiver on `localhost` with this certificate and key (PEM).
    pub fn start_tls(cert_pem: &str, key_pem: &str) -> Receiver {
        Receiver::serve(vec![], Answer::Status(200), Some((cert_pem, key_pem)))
    }

    fn serve(plan: Vec<Answer>, otherwise: Answer, tls: Option<(&str, &str)>) -> Receiver {
        use rustls::pki_types::pem::PemObject;
        let (tx, rx) = mpsc::unbounded_channel();
        let plan = Arc::new(Plan { next: Mutex::new(plan.into()), otherwise, seen: tx });
        let data = web::Data::from(Arc::clone(&plan));
        let server =
            HttpServer::new(move || App::new().app_data(data.clone()).default_service(web::to(record)))
                .workers(1)
                .disable_signals()
                .shutdown_timeout(0);
        let (server, scheme, host) = match tls {
            None => (server.bind("127.0.0.1:0").unwrap(), "http", "127.0.0.1"),
            Some((cert, key)) => {
                let _ = rustls::crypto::ring::default_provider().install_default();
                let cert = rustls::pki_types::CertificateDer::from_pem_slice(cert.as_bytes()).unwrap();
                let key = rustls::pki_types::PrivateKeyDer::from_pem_slice(key.as_bytes()).unwrap();
                let config = rustls::ServerConfig::builder()
                    .with_no_client_auth()
                    .with_single_cert(vec![cert], key)
                    .unwrap();
                (server.bind_rustls_0_23("127.0.0.1:0", config).unwrap(), "https", "localhost")
            }
        };
        let addr = server.addrs()[0];
        actix_rt::spawn(server.run());
        Receiver { url: format!("{scheme}://{host}:{}/hook", addr.port()), rx }
    }

    /// Answers 200 to everything.
    pub fn ok() -> Receiver {
        Receiver::start(vec![], Answer::Status(200))
    }

    /// The next request received (fails the test after 20 s).
    pub async fn next(&mut self) -> Received {
        tokio::time::timeout(Duration::from_secs(20), self.rx.recv())
            .await
            .expect("no webhook arrived within 20 s")
            .expect("receiver closed")
    }

    /// Whatever was received and not yet taken.
    pub fn drain(&mut self) -> Vec<Received> {
        let mut out = Vec::new();
        while let Ok(r) = self.rx.try_recv() {
            out.push(r);
        }
        out
    }
}

/// Checks a Standard Webhooks signature with the `hmac` crate, independently of the
/// gateway's own implementation.
pub fn signature_verifies(secret: &str, r: &Received) -> bool {
    let key =
        base64::engine::general_purpose::STANDARD.decode(secret.strip_prefix("whsec_").unwrap()).unwrap();
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(&key).unwrap();
    mac.update(r.header("webhook-id").as_bytes());
    mac.update(b".");
    mac.update(r.header("webhook-timestamp").as_bytes());
    mac.update(b".");
    mac.update(&r.body);
    let expected =
        format!("v1,{}", base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes()));
    r.header("webhook-signature").split(' ').any(|s| s == expected)
}
