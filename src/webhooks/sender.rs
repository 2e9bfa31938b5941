//! A sender: one actor of the pool that makes the HTTP requests of webhook deliveries.
//!
//! `awc::Client` is not `Send`, so each sender builds its own client on its own thread
//! (it holds `Rc`s); requests run concurrently inside the actor, and the dispatcher
//! bounds how many. A sender knows nothing of outboxes or retries: it takes a signed
//! request and answers what happened to it.
//!
//! Safety rules applied here, on every request (decisions.md "Webhooks"):
//! - `https` only, unless plain `http` is allowed (`PIXGW_WEBHOOK_ALLOW_HTTP`);
//! - the host is resolved here and every address it resolves to must pass
//!   [`address_allowed`] (unless `PIXGW_WEBHOOK_ALLOW_PRIVATE`); the request then goes
//!   to that checked address, so a name that changes its answer between check and connect
//!   cannot reach inside the network;
//! - redirects are not followed (a 3xx is a failed attempt): following one would skip the
//!   address check;
//! - the whole attempt, from resolving to the response head, has [`DELIVERY_TIMEOUT`].

use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::prelude::*;
use actix_web::http::Uri;
use actix_web::web::Bytes;
use rustls::ClientConfig;

use crate::domain::delivery::address_allowed;

/// A receiver has this long to answer with a 2xx (decisions.md "Webhooks").
pub const DELIVERY_TIMEOUT: Duration = Duration::from_secs(10);
/// Characters of a network error kept in the delivery log.
const ERROR_TEXT_LEN_MAX: usize = 300;

/// What the sender may connect to.
#[derive(Debug, Clone, Copy, Default)]
pub struct Policy {
    pub allow_http: bool,
    pub allow_private: bool,
}

/// The TLS settings of every sender: the public web roots, plus the CA of
/// `PIXGW_WEBHOOK_CA_FILE` (PEM, one or more certificates) when given.
pub fn tls_config(ca_file: Option<&Path>) -> anyhow::Result<Arc<ClientConfig>> {
    crate::trust::install_provider();
    let mut roots = crate::trust::public_roots();
    if let Some(path) = ca_file {
        crate::trust::add_pem_file(&mut roots, path, "webhook CA file").map_err(anyhow::Error::msg)?;
    }
    let mut config = ClientConfig::builder().with_root_certificates(roots).with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// One signed request to send.
#[derive(Debug, Clone)]
pub struct Request {
    pub url: String,
    /// Every header to send: the account's custom ones, then the gateway's.
    pub headers: Vec<(String, String)>,
    pub body: Bytes,
}

/// What happened to one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attempt {
    /// The receiver's status; `None` when no answer came in time.
    pub status: Option<u16>,
    pub error: Option<String>,
    pub duration: Duration,
}

impl Attempt {
    /// Success is any 2xx within the timeout.
    pub fn delivered(&self) -> bool {
        self.status.is_some_and(|s| (200..300).contains(&s))
    }
}

#[derive(Message)]
#[rtype(result = "Attempt")]
pub struct Send(pub Request);

pub struct Sender {
    tls: Arc<ClientConfig>,
    policy: Policy,
    client: Option<awc::Client>,
}

impl Sender {
    pub fn new(tls: Arc<ClientConfig>, policy: Policy) -> Sender {
        Sender { tls, policy, client: None }
    }
}

impl Actor for Sender {
    type Context = Context<Self>;

    fn started(&mut self, _: &mut Context<Self>) {
        let connector = awc::Connector::new()
            .rustls_0_23(Arc::clone(&self.tls))
            .timeout(DELIVERY_TIMEOUT)
            .handshake_timeout(DELIVERY_TIMEOUT)
            // The dispatcher bounds requests; the pool must not queue them behind its own cap.
            .limit(super::dispatcher::DELIVERIES_IN_FLIGHT_MAX);
        self.client = Some(
            awc::Client::builder()
                .connector(connector)
                .disable_redirects()
                .timeout(DELIVERY_TIMEOUT)
                .add_default_header(("user-agent", concat!("pixgw-webhooks/", env!("CARGO_PKG_VERSION"))))
                .finish(),
        );
    }
}

impl Handler<Send> for Sender {
    type Result = ResponseFuture<Attempt>;

    fn handle(&mut self, msg: Send, _: &mut Context<Self>) -> Self::Result {
        let client = self.client.clone();
        let policy = self.policy;
        Box::pin(async move {
            let started = Instant::now();
            let outcome = match client {
                Some(c) => tokio::time::timeout(DELIVERY_TIMEOUT, send(&c, policy, msg.0))
                    .await
                    .unwrap_or_else(|_| Err(format!("no answer within {}s", DELIVERY_TIMEOUT.as_secs()))),
                None => Err("the sender has no client".to_owned()),
            };
            let (status, error) = match outcome {
                Ok(status) => (Some(status), None),
                Err(e) => (None, Some(e.chars().take(ERROR_TEXT_LEN_MAX).collect())),
            };
            Attempt { status, error, duration: started.elapsed() }
        })
    }
}

async fn send(client: &awc::Client, policy: Policy, req: Request) -> Result<u16, String> {
    let uri: Uri = req.url.parse().map_err(|_| "the URL is not valid".to_owned())?;
    let default_port = match uri.scheme_str() {
        Some("https") => 443,
        Some("http") if policy.allow_http => 80,
        Some("http") => return Err("plain http is not allowed (PIXGW_WEBHOOK_ALLOW_HTTP)".into()),
        _ => return Err("the URL is not http(s)".into()),
    };
    let host = uri.host().ok_or("the URL has no host")?;
    let port = uri.port_u16().unwrap_or(default_port);
    let address = resolve(host, port, policy.allow_private).await?;
    let mut request = client.post(&req.url).address(address);
    for (k, v) in &req.headers {
        request = request.insert_header((k.as_str(), v.as_str()));
    }
    let response = request.send_body(req.body).await.map_err(|e| e.to_string())?;
    Ok(response.status().as_u16())
}

/// Resolves the host and checks every address (see the module's safety rules).
async fn resolve(host: &str, port: u16, allow_private: bool) -> Result<SocketAddr, String> {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    let addresses: Vec<SocketAddr> = match bare.parse::<IpAddr>() {
        Ok(ip) => vec![SocketAddr::new(ip, port)],
        Err(_) => tokio::net::lookup_host((bare, port))
            .await
            .map_err(|e| format!("cannot resolve {bare}: {e}"))?
            .collect(),
    };
    if !allow_private {
        if let Some(bad) = addresses.iter().find(|a| !address_allowed(a.ip())) {
            return Err(format!(
                "refused: {bare} is {}, a private or local address (PIXGW_WEBHOOK_ALLOW_PRIVATE)",
                bad.ip()
            ));
        }
    }
    addresses.first().copied().ok_or_else(|| format!("{bare} has no address"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[actix_rt::test]
    async fn local_addresses_are_refused_unless_allowed() {
        let e = resolve("127.0.0.1", 80, false).await.unwrap_err();
        assert!(e.contains("refused"), "{e}");
        let e = resolve("localhost", 80, false).await.unwrap_err();
        assert!(e.contains("refused") || e.contains("cannot resolve"), "{e}");
        let e = resolve("[::1]", 80, false).await.unwrap_err();
        assert!(e.contains("refused"), "{e}");
        assert_eq!(resolve("127.0.0.1", 8080, true).await.unwrap(), "127.0.0.1:8080".parse().unwrap());
        assert_eq!(resolve("8.8.8.8", 443, false).await.unwrap(), "8.8.8.8:443".parse().unwrap());
    }

    #[test]
    fn a_ca_file_must_hold_a_certificate() {
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "nothing here").unwrap();
        assert!(tls_config(Some(&empty)).is_err());
        assert!(tls_config(Some(&dir.path().join("missing.pem"))).is_err());
        let now = chrono::Utc::now();
        let ca = crate::auth::certs::generate("test ca", now, now + chrono::Duration::days(1)).unwrap();
        let good = dir.path().join("ca.pem");
        std::fs::write(&good, ca.cert_pem).unwrap();
        assert!(tls_config(Some(&good)).is_ok());
        assert!(tls_config(None).is_ok());
    }
}
