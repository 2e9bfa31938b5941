//! `pixgw webhooks listen`: a receiver for developers. It prints every delivery it gets,
//! says whether its signature verifies with the given secret, and answers a chosen status
//! (200 by default; a bad signature gets 401, as a real receiver should answer), so a user
//! can watch the webhooks of their sandbox and see retries happen.
//!
//! With `--forward-to URL` it also sends each delivery on to the developer's own endpoint
//! (as Stripe's CLI does): the same body bytes and the same headers but the connection's
//! own, so the signature verifies there as it did here, at the URL plus the path the
//! delivery came to. The gateway is answered with that endpoint's status (502 when it
//! cannot be reached), so its retries follow what the application answered.

use std::io::Write;
use std::net::SocketAddr;

use actix_web::web::{self, Bytes};
use actix_web::{App, HttpRequest, HttpResponse, HttpServer};
use chrono::Utc;

use crate::domain::webhooks::{secret_key, verify};

/// Seconds a `webhook-timestamp` may be away from this machine's clock before it is
/// flagged (the tolerance Standard Webhooks suggests against replays).
pub const TIMESTAMP_TOLERANCE_SECONDS: i64 = 300;

/// How long a forwarded delivery may take, like the gateway's own deliveries.
pub const FORWARD_TIMEOUT_SECONDS: u64 = 10;

/// Headers that belong to one connection, never carried to the next hop.
const HOP_BY_HOP: [&str; 7] =
    ["host", "content-length", "connection", "transfer-encoding", "keep-alive", "upgrade", "te"];

#[derive(Clone)]
struct Listener {
    key: Option<Vec<u8>>,
    status: u16,
    /// Where deliveries go on to (`--forward-to`), without a trailing slash.
    forward_to: Option<String>,
}

/// The URL a delivery to `path` of the listener goes on to: the base plus that path.
pub fn forward_url(base: &str, path: &str) -> String {
    match path.trim_start_matches('/') {
        "" => base.to_owned(),
        rest => format!("{}/{rest}", base.trim_end_matches('/')),
    }
}

/// Sends the delivery on, unchanged; answers the endpoint's status, or why it got none.
async fn forward(url: &str, req: &HttpRequest, body: Bytes) -> Result<u16, String> {
    let client = awc::Client::builder()
        .timeout(std::time::Duration::from_secs(FORWARD_TIMEOUT_SECONDS))
        .disable_redirects()
        .finish();
    let mut out = client.request(req.method().clone(), url);
    for (name, value) in req.headers() {
        if !HOP_BY_HOP.contains(&name.as_str()) {
            out = out.append_header((name.clone(), value.clone()));
        }
    }
    let response = out.send_body(body).await.map_err(|e| e.to_string())?;
    Ok(response.status().as_u16())
}

/// What the listener makes of one delivery.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    Verified,
    Invalid(&'static str),
    NotChecked,
}

/// Checks the Standard Webhooks headers of a delivery against `key`.
pub fn check(
    key: Option<&[u8]>,
    id: Option<&str>,
    timestamp: Option<&str>,
    signature: Option<&str>,
    body: &[u8],
) -> Verdict {
    let Some(key) = key else { return Verdict::NotChecked };
    let (Some(id), Some(ts), Some(sig)) = (id, timestamp, signature) else {
        return Verdict::Invalid("a webhook-id, webhook-timestamp or webhook-signature header is missing");
    };
    let Ok(ts) = ts.parse::<i64>() else { return Verdict::Invalid("webhook-timestamp is not unix seconds") };
    if verify(key, id, ts, body, sig) {
        Verdict::Verified
    } else {
        Verdict::Invalid("the signature does not match this secret")
    }
}

async fn receive(req: HttpRequest, body: Bytes, me: web::Data<Listener>) -> HttpResponse {
    let header = |name: &str| req.headers().get(name).and_then(|v| v.to_str().ok());
    let verdict = check(
        me.key.as_deref(),
        header("webhook-id"),
        header("webhook-timestamp"),
        header("webhook-signature"),
        &body,
    );
    let mut out = std::io::stdout().lock();
    let _ = writeln!(
        out,
        "--- {} {} webhook-id={} at {}",
        req.method(),
        req.path(),
        header("webhook-id").unwrap_or("-"),
        Utc::now().to_rfc3339()
    );
    match &verdict {
        Verdict::Verified => {
            let _ = writeln!(out, "signature: verified");
        }
        Verdict::Invalid(why) => {
            let _ = writeln!(out, "signature: INVALID ({why})");
        }
        Verdict::NotChecked => {
            let _ = writeln!(out, "signature: not checked (no --secret)");
        }
    }
    if let Some(skew) = header("webhook-timestamp")
        .and_then(|t| t.parse::<i64>().ok())
        .map(|t| (Utc::now().timestamp() - t).abs())
        .filter(|s| *s > TIMESTAMP_TOLERANCE_SECONDS)
    {
        let _ = writeln!(out, "timestamp: {skew}s away from this clock (a test clock, or a replay)");
    }
    for (name, value) in req.headers() {
        let n = name.as_str();
        if !n.starts_with("webhook-")
            && !["content-type", "user-agent", "host", "content-length", "date", "accept-encoding"]
                .contains(&n)
        {
            let _ = writeln!(out, "header {n}: {}", value.to_str().unwrap_or("(binary)"));
        }
    }
    let text = serde_json::from_slice::<serde_json::Value>(&body)
        .ok()
        .and_then(|v| serde_json::to_string_pretty(&v).ok())
        .unwrap_or_else(|| String::from_utf8_lossy(&body).into_owned());
    let _ = writeln!(out, "{text}");
    let _ = out.flush();
    drop(out);
    if let Some(base) = &me.forward_to {
        let url = forward_url(base, req.path());
        let status = match forward(&url, &req, body).await {
            Ok(status) => {
                crate::say!("forwarded to {url}: {status}");
                status
            }
            Err(e) => {
                crate::say!("forwarded to {url}: FAILED ({e}); the gateway is answered 502");
                502
            }
        };
        let _ = std::io::stdout().flush();
        return HttpResponse::build(actix_web::http::StatusCode::from_u16(status).unwrap_or_default())
            .json(serde_json::json!({"received": status < 300, "forwardedTo": url}));
    }
    let status = match verdict {
        Verdict::Invalid(_) => 401,
        _ => me.status,
    };
    HttpResponse::build(actix_web::http::StatusCode::from_u16(status).unwrap_or_default())
        .json(serde_json::json!({"received": status < 300}))
}

/// Serves until Ctrl-C. The first line printed is `listening on http://ADDR`.
pub async fn run(
    addr: SocketAddr,
    secret: Option<String>,
    status: u16,
    forward_to: Option<String>,
) -> anyhow::Result<()> {
    let key = match &secret {
        Some(s) => {
            Some(secret_key(s).ok_or_else(|| anyhow::anyhow!("--secret must be whsec_ followed by base64"))?)
        }
        None => None,
    };
    anyhow::ensure!((100..600).contains(&status), "--status must be an HTTP status");
    if let Some(url) = &forward_to {
        let uri: actix_web::http::Uri =
            url.parse().map_err(|_| anyhow::anyhow!("--forward-to {url:?} is not a URL"))?;
        anyhow::ensure!(
            matches!(uri.scheme_str(), Some("http" | "https")) && uri.host().is_some(),
            "--forward-to must be an http or https URL with a host, such as http://localhost:3000/webhooks"
        );
        crate::trust::install_provider();
    }
    let forward_to = forward_to.map(|u| u.trim_end_matches('/').to_owned());
    let me = web::Data::new(Listener { key, status, forward_to: forward_to.clone() });
    let server = HttpServer::new(move || App::new().app_data(me.clone()).default_service(web::to(receive)))
        .workers(1)
        .bind(addr)?;
    let bound = server.addrs().first().copied().unwrap_or(addr);
    crate::say!("listening on http://{bound}");
    if secret.is_none() {
        crate::say!("no --secret: signatures are shown but not checked");
    }
    if let Some(url) = &forward_to {
        crate::say!("forwarding every delivery to {url}");
    }
    let _ = std::io::stdout().flush();
    server.run().await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::webhooks::sign;

    #[test]
    fn deliveries_are_judged_by_their_signature() {
        let key = secret_key("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        let sig = sign(&key, "msg_1", 100, b"{}");
        assert_eq!(check(Some(&key), Some("msg_1"), Some("100"), Some(&sig), b"{}"), Verdict::Verified);
        assert!(matches!(
            check(Some(&key), Some("msg_1"), Some("101"), Some(&sig), b"{}"),
            Verdict::Invalid(_)
        ));
        assert!(matches!(
            check(Some(&key), Some("msg_1"), Some("x"), Some(&sig), b"{}"),
            Verdict::Invalid(_)
        ));
        assert!(matches!(check(Some(&key), None, Some("100"), Some(&sig), b"{}"), Verdict::Invalid(_)));
        assert_eq!(check(None, None, None, None, b"{}"), Verdict::NotChecked);
    }

    #[test]
    fn a_delivery_goes_on_to_the_same_path_under_the_forward_url() {
        let base = "http://localhost:3000/webhooks";
        assert_eq!(forward_url(base, "/"), base);
        assert_eq!(forward_url(base, ""), base);
        assert_eq!(forward_url(base, "/pix"), "http://localhost:3000/webhooks/pix");
        assert_eq!(forward_url("http://localhost:3000", "/cobr"), "http://localhost:3000/cobr");
    }
}
