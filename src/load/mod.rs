//! `pixgw load`: a load generator for a running gateway, with a consistency check.
//!
//! It gets a token (the Demo account of a data dir by default), funds the account through
//! the sandbox, runs a scenario in a closed loop (N connections, each sending its next
//! request when the last answered) or an open loop (a fixed arrival rate; each latency is
//! measured from the request's *intended* send time, so a slow server cannot hide its
//! queueing: no coordinated omission), prints a progress line every second and a summary
//! (HDR histogram percentiles, errors by status and code; `--json` for scripts).
//!
//! At the end it waits for the account's payments to settle and checks, against the
//! server's own figures, that:
//! - the server counts exactly as many new Pix out transactions as it accepted (201), plus
//!   those of the cash-outs in doubt that it finds;
//! - the available balance equals the balance before, plus the funding, minus value and
//!   fee of every accepted (or found) cash-out, plus those that ended in ERROR (their money
//!   returns);
//! - no externalId was accepted twice.
//!
//! A cash-out is *in doubt* when it was sent and no answer says what became of it: the
//! connection broke after the request left (a server killed or re-executing, a proxy cut),
//! or a 5xx, which docs/decisions.md calls an unknown outcome. A client resolves such a
//! request by its externalId, and so does the check: it reads each one back
//! (`GET /api/transactions/{externalId}`) and counts those the server holds. A request that
//! never reached a connection (refused, no route) is not in doubt: nothing was sent.
//!
//! A violation makes the exit status non-zero.
//!
//! With `--rates R1,R2,...` it runs the open loop at each rate in turn, `--duration` each, on
//! the same server and account, and prints the latency curve: per rate, the server's share
//! of the latency (from the actual send) at p50, p99, p99.9 and max, the client's own
//! lateness apart, and the errors. `--slo 5ms` then finds the highest rate whose server p99
//! stays within the bound without an error: the best of the rates given, narrowed by up to
//! [`SLO_SEARCH_STEPS_MAX`] further runs between it and the next rate, which failed. The
//! consistency check covers every request of every rate.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;
use std::rc::Rc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use awc::error::{ConnectError, SendRequestError};
use chrono::{DateTime, Utc};
use hdrhistogram::Histogram;
use serde_json::{json, Value};

pub mod report;
pub mod server_clock;

use crate::domain::account::AccountSettings;
use crate::domain::listing::local_day;
use crate::domain::money::Money;
use crate::domain::pix_key::DirectoryKeyType;

/// The scenarios of `--scenario`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Scenario {
    /// Cash-outs, each with a new externalId.
    CashOut,
    /// Cash-outs, cash-ins, balances and transaction lists in the `--mix` proportions.
    Mixed,
    /// Cash-outs where groups of `--storm-group` concurrent requests share an externalId:
    /// exactly one of each group may be accepted.
    DuplicateStorm,
    /// `GET /healthz`: the server's baseline.
    Healthz,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    CashOut,
    CashIn,
    Balance,
    List,
    Healthz,
}

/// Further runs `--slo` makes between the highest rate that met the bound and the next,
/// which did not, halving the gap each time.
pub const SLO_SEARCH_STEPS_MAX: usize = 3;

/// Rates `--rates` takes at most, so that a curve stays a run of minutes.
pub const RATES_MAX: usize = 20;

/// The rates of `--rates` as the command line holds them (one argument, not a list of
/// arguments).
#[derive(Debug, Clone, PartialEq)]
pub struct Rates(pub Vec<f64>);

/// [`parse_rates`] for the command line.
pub fn parse_rates_arg(text: &str) -> Result<Rates, String> {
    parse_rates(text).map(Rates)
}

/// Parses `1000,3000,6000`: positive request rates, at most [`RATES_MAX`].
pub fn parse_rates(text: &str) -> Result<Vec<f64>, String> {
    let rates: Vec<f64> = text
        .split(',')
        .map(|r| match r.trim().parse::<f64>() {
            Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
            _ => Err(format!("{r:?} is not a positive rate (requests per second)")),
        })
        .collect::<Result<_, _>>()?;
    if rates.is_empty() || rates.len() > RATES_MAX {
        return Err(format!("give 1 to {RATES_MAX} rates"));
    }
    Ok(rates)
}

/// Settings of one run (from the command line).
#[derive(Debug, Clone)]
pub struct LoadSettings {
    pub url: String,
    pub data_dir: PathBuf,
    pub client_id: Option<String>,
    pub client_secret: Option<String>,
    pub cert: Option<PathBuf>,
    pub scenario: Scenario,
    pub connections: usize,
    pub rate: Option<f64>,
    pub duration: Duration,
    pub requests: Option<u64>,
    pub warmup: Duration,
    pub fund: Money,
    pub value: Money,
    /// Weights of cash-out, cash-in, balance, list in the mixed scenario.
    pub mix: [u32; 4],
    pub storm_group: u64,
    pub json: bool,
    /// The rates of a latency curve (empty: one run at `rate`, or a closed loop).
    pub rates: Vec<f64>,
    /// The bound on the server's p99 that `--slo` searches the highest rate for.
    pub slo: Option<Duration>,
    /// Where to write the HTML report of the run.
    pub report: Option<PathBuf>,
}

/// Parses `20s`, `500ms`, `2m`, `1h` or a bare number of seconds.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let (num, unit) = t.find(|c: char| !c.is_ascii_digit() && c != '.').map_or((t, "s"), |i| t.split_at(i));
    let n: f64 = num.parse().map_err(|_| format!("{text:?} is not a duration like 20s, 500ms or 2m"))?;
    let secs = match unit {
        "ms" => n / 1000.0,
        "s" => n,
        "m" => n * 60.0,
        "h" => n * 3600.0,
        _ => return Err(format!("{text:?}: the unit must be ms, s, m or h")),
    };
    if !secs.is_finite() || secs < 0.0 {
        return Err(format!("{text:?} is not a duration"));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// Parses `cash-out=25,cash-in=25,balance=25,list=25`.
pub fn parse_mix(text: &str) -> Result<[u32; 4], String> {
    let mut mix = [0u32; 4];
    for part in text.split(',').filter(|p| !p.is_empty()) {
        let (name, weight) = part.split_once('=').ok_or_else(|| format!("{part:?} is not name=weight"))?;
        let w: u32 = weight.parse().map_err(|_| format!("{weight:?} is not a whole number"))?;
        let slot = match name {
            "cash-out" => 0,
            "cash-in" => 1,
            "balance" => 2,
            "list" => 3,
            _ => return Err(format!("{name:?}: the mix names cash-out, cash-in, balance and list")),
        };
        mix[slot] = w;
    }
    if mix.iter().sum::<u32>() == 0 {
        return Err("the mix must give some operation a weight".into());
    }
    Ok(mix)
}

/// The operation of the `n`-th request: the mix is spread evenly, not drawn at random, so
/// two runs send the same sequence.
fn op_for(scenario: Scenario, mix: &[u32; 4], n: u64) -> Op {
    match scenario {
        Scenario::CashOut | Scenario::DuplicateStorm => Op::CashOut,
        Scenario::Healthz => Op::Healthz,
        Scenario::Mixed => {
            let total: u64 = mix.iter().map(|w| u64::from(*w)).sum();
            let mut slot = n % total.max(1);
            for (i, w) in mix.iter().enumerate() {
                if slot < u64::from(*w) {
                    return [Op::CashOut, Op::CashIn, Op::Balance, Op::List][i];
                }
                slot -= u64::from(*w);
            }
            Op::Balance
        }
    }
}

#[derive(Default)]
struct Stats {
    /// From each request's intended send time (what a client of an open loop sees).
    latency: Option<Histogram<u64>>,
    /// From the moment it was actually sent: the server's (and the network's) share.
    service: Option<Histogram<u64>>,
    /// How late the client sent it (its timer's granularity and scheduling): `latency` less
    /// `service`. An open loop never waits for answers before sending, so this is the
    /// client's own delay, not the server's backpressure.
    late: Option<Histogram<u64>>,
    done: u64,
    /// Requests of the warm-up: not timed, but their cash-outs are on the server, so the
    /// consistency checks count them.
    warmup_done: u64,
    by_status: BTreeMap<u16, u64>,
    errors: BTreeMap<(u16, String), u64>,
    accepted: HashSet<String>,
    /// externalIds accepted more than once: a broken promise of the server.
    accepted_twice: Vec<String>,
    /// externalIds of cash-outs sent without an answer that says what became of them.
    /// With the status each last answered (0: the connection was cut after sending).
    in_doubt: BTreeMap<String, u16>,
    recording: bool,
    /// The current step of a latency curve (reset before each rate).
    step: Step,
    /// Latencies of the current second, for the timeline (reset every second).
    second: Option<Histogram<u64>>,
    /// One point a second: `{t, requests, p50, p99}` (ms), for the report.
    timeline: Vec<Value>,
}

/// What one rate of a curve saw.
#[derive(Default)]
struct Step {
    service: Option<Histogram<u64>>,
    late: Option<Histogram<u64>>,
    done: u64,
    errors: u64,
}

impl Step {
    fn new() -> Step {
        Step {
            service: Histogram::new_with_bounds(1, 60_000_000, 3).ok(),
            late: Histogram::new_with_bounds(1, 60_000_000, 3).ok(),
            ..Step::default()
        }
    }

    /// The row of the curve: the server's share of latency and the client's lateness in
    /// milliseconds, the requests and errors, at `rate` over `seconds`.
    fn row(&self, rate: f64, seconds: f64) -> Value {
        let at = |h: &Option<Histogram<u64>>, q: f64| {
            h.as_ref().map_or(0.0, |h| h.value_at_quantile(q) as f64 / 1000.0)
        };
        let max = |h: &Option<Histogram<u64>>| h.as_ref().map_or(0.0, |h| h.max() as f64 / 1000.0);
        json!({
            "rate": rate,
            "requests": self.done,
            "achievedPerSecond": self.done as f64 / seconds.max(1e-9),
            "serverMs": {"p50": at(&self.service, 0.5), "p99": at(&self.service, 0.99), "p999": at(&self.service, 0.999), "max": max(&self.service)},
            "lateMs": {"p99": at(&self.late, 0.99), "max": max(&self.late)},
            "errors": self.errors,
        })
    }
}

/// Whether a row of the curve meets the bound: the server's p99 within it, and no error.
fn meets(row: &Value, bound: Duration) -> bool {
    let p99 = row["serverMs"]["p99"].as_f64().unwrap_or(f64::INFINITY);
    p99 <= bound.as_secs_f64() * 1000.0
        && row["errors"].as_u64() == Some(0)
        && row["requests"].as_u64() > Some(0)
}

/// The highest rate of `rows` that meets the bound, and the lowest rate above it that does
/// not (where a search between them goes on).
fn slo_bracket(rows: &[Value], bound: Duration) -> (Option<f64>, Option<f64>) {
    let rate = |r: &Value| r["rate"].as_f64().unwrap_or(0.0);
    let best = rows
        .iter()
        .filter(|r| meets(r, bound))
        .map(rate)
        .fold(None, |m: Option<f64>, r| Some(m.map_or(r, |m| m.max(r))));
    let above = rows
        .iter()
        .filter(|r| !meets(r, bound) && best.is_none_or(|b| rate(r) > b))
        .map(rate)
        .fold(None, |m: Option<f64>, r| Some(m.map_or(r, |m| m.min(r))));
    (best, above)
}

struct Ctx {
    client: awc::Client,
    base: String,
    token: String,
    settings: LoadSettings,
    run_id: String,
    payee: (String, String),
    stats: RefCell<Stats>,
}

impl Ctx {
    async fn one(&self, n: u64, intended: Instant) {
        let op = op_for(self.settings.scenario, &self.settings.mix, n);
        let sent = Instant::now();
        let (status, body, external, sent_out) = self.send(op, n).await;
        let elapsed = intended.elapsed();
        let service = sent.elapsed();
        let late = sent.saturating_duration_since(intended);
        let mut s = self.stats.borrow_mut();
        if let Some(ext) = external {
            if status == 201 {
                if !s.accepted.insert(ext.clone()) {
                    s.accepted_twice.push(ext);
                }
            } else if outcome_unknown(status, sent_out) {
                s.in_doubt.insert(ext, status);
            }
        }
        if !s.recording {
            s.warmup_done += 1;
            return;
        }
        s.done += 1;
        s.step.done += 1;
        *s.by_status.entry(status).or_default() += 1;
        if !(200..300).contains(&status) {
            s.step.errors += 1;
            let code =
                body.get("code").and_then(Value::as_str).unwrap_or(if status == 0 { "NETWORK" } else { "-" });
            *s.errors.entry((status, code.to_owned())).or_default() += 1;
        }
        let micros = |d: Duration| u64::try_from(d.as_micros()).unwrap_or(u64::MAX).max(1);
        let st = &mut *s;
        for (h, d) in [
            (&mut st.latency, elapsed),
            (&mut st.service, service),
            (&mut st.late, late),
            (&mut st.step.service, service),
            (&mut st.step.late, late),
            (&mut st.second, elapsed),
        ] {
            if let Some(h) = h.as_mut() {
                let _ = h.record(micros(d).min(h.high()));
            }
        }
    }

    /// Sends one request; answers (status or 0, JSON body, the externalId of a cash-out,
    /// whether the request may have reached the server).
    async fn send(&self, op: Op, n: u64) -> (u16, Value, Option<String>, bool) {
        let auth = format!("Bearer {}", self.token);
        let (req, body, external) = match op {
            Op::Healthz => (self.client.get(format!("{}/healthz", self.base)), None, None),
            Op::Balance => (
                self.client.get(format!("{}/api/balance", self.base)).insert_header(("Authorization", auth)),
                None,
                None,
            ),
            Op::List => (
                self.client
                    .get(format!("{}/api/transactions?size=20", self.base))
                    .insert_header(("Authorization", auth)),
                None,
                None,
            ),
            Op::CashIn => {
                let body = json!({
                    "transaction": {"value": 1, "description": "load", "externalId": format!("load-in-{}-{n}", self.run_id), "generateQrCode": false},
                    "payer": {"fullName": "Load Test", "document": "52998224725"},
                });
                (
                    self.client
                        .post(format!("{}/api/pix/cash-in", self.base))
                        .insert_header(("Authorization", auth)),
                    Some(body.to_string()),
                    None,
                )
            }
            Op::CashOut => {
                let ext = match self.settings.scenario {
                    Scenario::DuplicateStorm => {
                        format!("storm-{}-{}", self.run_id, n / self.settings.storm_group.max(1))
                    }
                    _ => format!("load-{}-{n}", self.run_id),
                };
                let body = format!(
                    r#"{{"value": {}, "externalId": "{ext}", "details": {{"key": "{}", "keyType": "EMAIL", "name": "Load Payee", "document": "{}"}}}}"#,
                    self.settings.value, self.payee.0, self.payee.1
                );
                (
                    self.client
                        .post(format!("{}/api/pix/cash-out", self.base))
                        .insert_header(("Authorization", auth)),
                    Some(body),
                    Some(ext),
                )
            }
        };
        let sent = match body {
            Some(b) => req.content_type("application/json").send_body(b).await,
            None => req.send().await,
        };
        match sent {
            Ok(mut res) => {
                let status = res.status().as_u16();
                let bytes = res.body().limit(1 << 20).await.unwrap_or_default();
                (status, serde_json::from_slice(&bytes).unwrap_or(Value::Null), external, true)
            }
            // No connection was made, so no byte of the request left. (awc also reports an end
            // of stream before the response's head as `Disconnected`, after the request was
            // written: that one is in doubt.)
            Err(SendRequestError::Connect(e)) if !matches!(e, ConnectError::Disconnected) => {
                (0, Value::Null, external, false)
            }
            Err(_) => (0, Value::Null, external, true),
        }
    }
}

/// Whether a cash-out answered `status` (0: no answer) may have been applied all the same.
/// A 4xx is a refusal (nothing changed); a 5xx says the outcome is unknown.
fn outcome_unknown(status: u16, sent: bool) -> bool {
    (status == 0 && sent) || status >= 500
}

/// Reads each cash-out in doubt back by its externalId; answers how many the server holds,
/// of those cut after sending and of those answered 5xx, or why one could not be learned.
async fn resolve_in_doubt(ctx: &Ctx, in_doubt: &[(String, u16)]) -> Result<(u64, u64), String> {
    let mut found = (0, 0);
    for (ext, status) in in_doubt {
        let encoded = percent_encoding::utf8_percent_encode(ext, percent_encoding::NON_ALPHANUMERIC);
        let url = format!("{}/api/transactions/{encoded}", ctx.base);
        let res = ctx
            .client
            .get(&url)
            .insert_header(("Authorization", format!("Bearer {}", ctx.token)))
            .send()
            .await;
        match res.map(|r| r.status().as_u16()) {
            Ok(200) if *status == 0 => found.0 += 1,
            Ok(200) => found.1 += 1,
            Ok(404) => {}
            Ok(status) => return Err(format!("{ext}: GET {url} answered {status}")),
            Err(e) => return Err(format!("{ext}: GET {url}: {e}")),
        }
    }
    Ok(found)
}

/// What the server says before and after a run.
#[derive(Debug, Clone, Copy)]
struct Snapshot {
    net: Money,
    blocked: Money,
    withdrawals: u64,
    withdrawal_errors: u64,
}

async fn get_json(client: &awc::Client, url: &str, token: &str) -> anyhow::Result<Value> {
    let mut res = client
        .get(url)
        .insert_header(("Authorization", format!("Bearer {token}")))
        .send()
        .await
        .map_err(|e| anyhow::anyhow!("GET {url}: {e}"))?;
    let status = res.status();
    let bytes = res.body().limit(1 << 20).await.map_err(|e| anyhow::anyhow!("GET {url}: {e}"))?;
    if !status.is_success() {
        bail!("GET {url} answered {status}: {}", String::from_utf8_lossy(&bytes));
    }
    Ok(serde_json::from_slice(&bytes)?)
}

fn money_of(v: &Value) -> anyhow::Result<Money> {
    Money::parse(&v.to_string()).map_err(|e| anyhow::anyhow!("the server sent {v} as an amount: {e:?}"))
}

async fn snapshot(client: &awc::Client, base: &str, token: &str) -> anyhow::Result<Snapshot> {
    let b = get_json(client, &format!("{base}/api/balance"), token).await?;
    // Yesterday and today in Sao Paulo by the server's clock (a test clock may be days
    // ahead of this machine's): a run that crosses midnight is still counted whole.
    let server_now = b["consultedAt"]
        .as_str()
        .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
        .map(|t| t.with_timezone(&Utc))
        .ok_or_else(|| anyhow::anyhow!("the balance has no consultedAt: {b}"))?;
    let today = local_day(server_now);
    let range = format!("startDate={}&endDate={today}", today - chrono::Duration::days(1));
    let w = get_json(client, &format!("{base}/api/transactions?type=WITHDRAW&size=1&{range}"), token).await?;
    let e = get_json(
        client,
        &format!("{base}/api/transactions?type=WITHDRAW&status=ERROR&size=1&{range}"),
        token,
    )
    .await?;
    Ok(Snapshot {
        net: money_of(&b["netBalance"])?,
        blocked: money_of(&b["blockedBalance"])?,
        withdrawals: w["metadata"]["total"].as_u64().unwrap_or(0),
        withdrawal_errors: e["metadata"]["total"].as_u64().unwrap_or(0),
    })
}

fn credentials(s: &LoadSettings) -> anyhow::Result<(String, String, String)> {
    let demo = s.data_dir.join("demo");
    let file: Option<Value> =
        std::fs::read(demo.join("credentials.json")).ok().and_then(|b| serde_json::from_slice(&b).ok());
    let from_file = |k: &str| file.as_ref().and_then(|f| f[k].as_str()).map(str::to_owned);
    let client_id = s.client_id.clone().or_else(|| from_file("clientId"));
    let secret = s.client_secret.clone().or_else(|| from_file("clientSecret"));
    let cert_path = s.cert.clone().unwrap_or_else(|| demo.join("client-cert.pem"));
    let (Some(client_id), Some(secret)) = (client_id, secret) else {
        bail!("no credentials: give --client-id, --client-secret and --cert, or --data-dir of a server with its demo/credentials.json");
    };
    let pem = std::fs::read_to_string(&cert_path)
        .with_context(|| format!("reading the certificate {}", cert_path.display()))?;
    Ok((client_id, secret, pem))
}

/// Runs the load; answers whether the consistency check passed.
pub async fn run(s: LoadSettings) -> anyhow::Result<bool> {
    let base = s.url.trim_end_matches('/').to_owned();
    let client = awc::Client::builder()
        .connector(awc::Connector::new().limit(s.connections.max(1) * 2))
        .timeout(Duration::from_secs(30))
        .finish();
    let (client_id, secret, pem) = credentials(&s)?;
    let mut res = client
        .post(format!("{base}/api/auth/token"))
        .insert_header(("X-SSL-Client-Cert", crate::auth::certs::url_encode_pem(&pem)))
        .send_json(&json!({"clientId": client_id, "clientSecret": secret}))
        .await
        .map_err(|e| anyhow::anyhow!("cannot reach {base}: {e}"))?;
    let body: Value = serde_json::from_slice(&res.body().await.unwrap_or_default()).unwrap_or(Value::Null);
    let token = body["access_token"]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| anyhow::anyhow!("no token: {body}"))?;
    let me = get_json(&client, &format!("{base}/api/account"), &token).await?;
    let settings: AccountSettings =
        serde_json::from_value(me["settings"].clone()).context("reading the account's settings")?;
    let fee = settings.fees.cash_out.fee_for(s.value);
    let moves_money = matches!(s.scenario, Scenario::CashOut | Scenario::Mixed | Scenario::DuplicateStorm);
    let before = snapshot(&client, &base, &token).await?;
    let mut funded = Money::ZERO;
    if moves_money && !s.fund.is_zero() {
        let mut r = client
            .post(format!("{base}/sandbox/pix-in"))
            .insert_header(("Authorization", format!("Bearer {token}")))
            .content_type("application/json")
            .send_body(format!(r#"{{"amount": {}}}"#, s.fund))
            .await
            .map_err(|e| anyhow::anyhow!("funding: {e}"))?;
        if r.status().as_u16() != 201 {
            let b = r.body().await.unwrap_or_default();
            bail!(
                "funding answered {}: {} (a live account: fund it yourself and pass --fund 0)",
                r.status(),
                String::from_utf8_lossy(&b)
            );
        }
        let b: Value = serde_json::from_slice(&r.body().await.unwrap_or_default()).unwrap_or(Value::Null);
        // The cash-in fee, if any, comes off what arrives.
        funded = settings.fees.cash_in.fee_for(s.fund);
        funded = s.fund.checked_sub(funded).unwrap_or(Money::ZERO);
        if b["status"] != "CONFIRMED" {
            bail!("funding did not confirm: {b}");
        }
    }
    let before_funded = Snapshot { net: before.net.checked_add(funded).unwrap_or(before.net), ..before };
    let directory = crate::rail::sim::directory::Directory::embedded()?;
    let payee_key = directory
        .keys_of_type(DirectoryKeyType::Email)
        .into_iter()
        .next()
        .context("the directory has no e-mail key")?;
    let payee_doc = crate::domain::pix_key::parse_directory_key(&payee_key)
        .ok()
        .and_then(|k| directory.lookup(&k).map(|e| e.document.clone()))
        .context("the directory's e-mail key has no holder")?;
    let ctx = Rc::new(Ctx {
        client,
        base: base.clone(),
        token,
        settings: s.clone(),
        run_id: format!("{:x}", Utc::now().timestamp_millis()),
        payee: (payee_key, payee_doc),
        stats: RefCell::new(Stats {
            latency: Histogram::new_with_bounds(1, 60_000_000, 3).ok(),
            service: Histogram::new_with_bounds(1, 60_000_000, 3).ok(),
            late: Histogram::new_with_bounds(1, 60_000_000, 3).ok(),
            second: Histogram::new_with_bounds(1, 60_000_000, 3).ok(),
            ..Stats::default()
        }),
    });
    let counter = Rc::new(std::cell::Cell::new(0u64));
    if !s.warmup.is_zero() {
        drive(&ctx, &counter, s.warmup, None, s.rate.or(s.rates.first().copied())).await;
    }
    ctx.stats.borrow_mut().recording = true;
    let started = Instant::now();
    let progress = {
        let ctx = Rc::clone(&ctx);
        actix_web::rt::spawn(async move {
            let mut last = 0;
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            tick.tick().await;
            loop {
                tick.tick().await;
                let mut guard = ctx.stats.borrow_mut();
                let st = &mut *guard;
                let p99 = st.latency.as_ref().map_or(0.0, |h| h.value_at_quantile(0.99) as f64 / 1000.0);
                let errs: u64 = st.errors.values().sum();
                if let Some(h) = st.second.as_mut() {
                    let at = |q: f64| if h.is_empty() { 0.0 } else { h.value_at_quantile(q) as f64 / 1000.0 };
                    let point = json!({"t": started.elapsed().as_secs_f64().round(), "requests": st.done - last,
                        "p50": at(0.5), "p99": at(0.99)});
                    st.timeline.push(point);
                    h.reset();
                }
                eprintln!(
                    "{:>5.0}s  {:>9} requests  {:>7}/s  p99 {:>7.2} ms  non-2xx {}",
                    started.elapsed().as_secs_f64(),
                    st.done,
                    st.done - last,
                    p99,
                    errs
                );
                last = st.done;
            }
        })
    };
    let clock_before = server_clock(&ctx).await;
    let curve = if s.rates.is_empty() {
        drive(&ctx, &counter, s.duration, s.requests, s.rate).await;
        None
    } else {
        Some(latency_curve(&ctx, &counter, started).await)
    };
    let clock = match (clock_before, server_clock(&ctx).await) {
        (Some(before), Some(after)) => after.since(&before).row(),
        _ => Value::Null,
    };
    let elapsed = started.elapsed();
    progress.abort();
    let report = consistency(&ctx, &before_funded, fee).await?;
    let st = ctx.stats.borrow();
    let mut summary = summary_json(&s, &st, elapsed, &report);
    summary["serverClock"] = clock;
    if let Some(curve) = curve {
        summary["curve"] = curve;
    }
    if let Some(path) = &s.report {
        std::fs::write(path, report::render(&summary))
            .with_context(|| format!("writing the report {}", path.display()))?;
        eprintln!("report: {}", path.display());
    }
    if s.json {
        crate::say!("{}", serde_json::to_string_pretty(&summary).unwrap_or_default());
    } else {
        print_summary(&summary);
    }
    Ok(report["ok"].as_bool().unwrap_or(false))
}

/// Runs the open loop at each rate of `--rates` (then the `--slo` search); answers the
/// curve: `{rates: [row...], slo: {boundMs, highestRate, search: [row...]}}`.
async fn latency_curve(ctx: &Rc<Ctx>, counter: &Rc<std::cell::Cell<u64>>, run_started: Instant) -> Value {
    let s = &ctx.settings;
    let step = |rate: f64| {
        let (ctx, counter) = (Rc::clone(ctx), Rc::clone(counter));
        async move {
            ctx.stats.borrow_mut().step = Step::new();
            let before = server_clock(&ctx).await;
            let started = Instant::now();
            // Where the step begins on the report's timeline.
            let start_seconds = started.duration_since(run_started).as_secs_f64();
            drive(&ctx, &counter, ctx.settings.duration, ctx.settings.requests, Some(rate)).await;
            let mut row = ctx.stats.borrow().step.row(rate, started.elapsed().as_secs_f64());
            row["startSeconds"] = json!((start_seconds * 10.0).round() / 10.0);
            let after = server_clock(&ctx).await;
            if let (Some(before), Some(after)) = (before, after) {
                row["serverClock"] = after.since(&before).row();
            }
            eprintln!("rate {rate:.0}/s: {row}");
            row
        }
    };
    let mut rows = Vec::new();
    for rate in &s.rates {
        rows.push(step(*rate).await);
    }
    let mut curve = json!({"rates": rows});
    if let Some(bound) = s.slo {
        let (mut best, mut above) = slo_bracket(&rows, bound);
        let mut search = Vec::new();
        for _ in 0..SLO_SEARCH_STEPS_MAX {
            let (Some(low), Some(high)) = (best, above) else { break };
            let mid = ((low + high) / 2.0).round();
            if mid <= low || mid >= high {
                break;
            }
            let row = step(mid).await;
            if meets(&row, bound) {
                best = Some(mid);
            } else {
                above = Some(mid);
            }
            search.push(row);
        }
        curve["slo"] =
            json!({"boundMs": bound.as_secs_f64() * 1000.0, "highestRate": best, "search": search});
    }
    curve
}

/// The server's own request-duration buckets of the cash-out route, from `/metrics` (none
/// if it cannot be read: a proxy in front may not pass it).
async fn server_clock(ctx: &Ctx) -> Option<server_clock::Buckets> {
    let url = format!("{}/metrics", ctx.base);
    let mut res = ctx.client.get(&url).send().await.ok()?;
    if !res.status().is_success() {
        return None;
    }
    let bytes = res.body().limit(METRICS_BYTES_MAX).await.ok()?;
    Some(server_clock::Buckets::parse(&String::from_utf8_lossy(&bytes), CASH_OUT_ROUTE))
}

/// The route whose server-side latency the curve reads.
const CASH_OUT_ROUTE: &str = "/api/pix/cash-out";
/// The most of `/metrics` the tool reads.
const METRICS_BYTES_MAX: usize = 16 << 20;

/// Sends the scenario's requests until `duration` passes or `limit` requests were sent, in
/// an open loop at `rate`, or a closed loop without one.
async fn drive(
    ctx: &Rc<Ctx>,
    counter: &Rc<std::cell::Cell<u64>>,
    duration: Duration,
    limit: Option<u64>,
    rate: Option<f64>,
) {
    let deadline = Instant::now() + duration;
    let take = {
        let counter = Rc::clone(counter);
        let start = counter.get();
        move || {
            let n = counter.get();
            if Instant::now() >= deadline || limit.is_some_and(|l| n - start >= l) {
                return None;
            }
            counter.set(n + 1);
            Some(n)
        }
    };
    let take = Rc::new(take);
    match rate {
        None => {
            let workers: Vec<_> = (0..ctx.settings.connections.max(1))
                .map(|_| {
                    let (ctx, take) = (Rc::clone(ctx), Rc::clone(&take));
                    actix_web::rt::spawn(async move {
                        while let Some(n) = take() {
                            ctx.one(n, Instant::now()).await;
                        }
                    })
                })
                .collect();
            for w in workers {
                let _ = w.await;
            }
        }
        Some(rate) => {
            // Open loop: request k is due at start + k / rate, whatever happened to the
            // earlier ones; its latency counts from then.
            let interval = Duration::from_secs_f64(1.0 / rate.max(0.001));
            let start = Instant::now();
            let mut inflight = Vec::new();
            let mut k: u32 = 0;
            while let Some(n) = take() {
                let due = start + interval * k;
                k = k.saturating_add(1);
                tokio::time::sleep_until(due.into()).await;
                let ctx = Rc::clone(ctx);
                inflight.push(actix_web::rt::spawn(async move { ctx.one(n, due).await }));
                inflight.retain(|h: &actix_web::rt::task::JoinHandle<()>| !h.is_finished());
            }
            for h in inflight {
                let _ = h.await;
            }
        }
    }
}

/// Waits for the account's payments to settle, then checks the server's figures.
async fn consistency(ctx: &Ctx, before: &Snapshot, fee: Money) -> anyhow::Result<Value> {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut after = snapshot(&ctx.client, &ctx.base, &ctx.token).await?;
    while after.blocked > before.blocked && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(200)).await;
        after = snapshot(&ctx.client, &ctx.base, &ctx.token).await?;
    }
    // The in-doubt ones another request of the same externalId got a 201 for are counted
    // already (a duplicate storm).
    let in_doubt: Vec<(String, u16)> = {
        let st = ctx.stats.borrow();
        st.in_doubt
            .iter()
            .filter(|(ext, _)| !st.accepted.contains(*ext))
            .map(|(e, s)| (e.clone(), *s))
            .collect()
    };
    let cut = in_doubt.iter().filter(|(_, s)| *s == 0).count();
    let landed = resolve_in_doubt(ctx, &in_doubt).await;
    let st = ctx.stats.borrow();
    let acknowledged = st.accepted.len() as u64 + st.accepted_twice.len() as u64;
    let accepted = acknowledged + landed.as_ref().map_or(0, |(c, f)| c + f);
    let errored = after.withdrawal_errors.saturating_sub(before.withdrawal_errors);
    let per = ctx.settings.value.checked_add(fee).unwrap_or(ctx.settings.value);
    let times = |m: Money, n: u64| -> Option<Money> {
        Money::parse(&format!("{:.2}", m.as_decimal() * rust_decimal::Decimal::from(n))).ok()
    };
    let expected = times(per, accepted)
        .zip(times(per, errored))
        .and_then(|(out, back)| before.net.checked_sub(out).and_then(|m| m.checked_add(back)));
    let mut checks = Vec::new();
    let mut ok = true;
    let mut check = |name: &str, pass: bool, detail: String| {
        ok &= pass;
        checks.push(json!({"check": name, "ok": pass, "detail": detail}));
    };
    check(
        "cash-outs in doubt resolved by their externalId",
        landed.is_ok(),
        match &landed {
            Ok((found_cut, found_5xx)) => format!(
                "{} sent without an answer that says what became of them ({cut} cut after sending, {} answered 5xx); found on the server and counted as accepted: {found_cut} of those cut, {found_5xx} of the 5xx",
                in_doubt.len(),
                in_doubt.len() - cut
            ),
            Err(why) => format!("{} in doubt; could not read one back: {why}", in_doubt.len()),
        },
    );
    check(
        "settled",
        after.blocked <= before.blocked,
        format!("blocked {} before, {} after (waited up to 60 s)", before.blocked, after.blocked),
    );
    check(
        "server counts every accepted cash-out once",
        after.withdrawals - before.withdrawals.min(after.withdrawals) == accepted,
        format!(
            "{} new Pix out transactions on the server, {accepted} accepted here ({acknowledged} answered 201, {} found in doubt)",
            after.withdrawals.saturating_sub(before.withdrawals),
            accepted - acknowledged
        ),
    );
    check(
        "balance",
        expected == Some(after.net),
        format!(
            "available {} after; expected {} = {} before (with the funding) - {accepted} x {per} accepted + {errored} x {per} returned (ERROR)",
            after.net,
            expected.map_or("?".into(), |m| m.to_string()),
            before.net
        ),
    );
    check(
        "no externalId accepted twice",
        st.accepted_twice.is_empty(),
        format!(
            "{} accepted twice: {:?}",
            st.accepted_twice.len(),
            st.accepted_twice.iter().take(5).collect::<Vec<_>>()
        ),
    );
    Ok(json!({
        "ok": ok,
        "checks": checks,
        "acceptedCashOuts": accepted,
        "acknowledgedCashOuts": acknowledged,
        "inDoubt": in_doubt.len(),
        "inDoubtFound": accepted - acknowledged,
    }))
}

/// The quantiles of an HDR percentile plot, `[q, ms]`, up to the largest value recorded.
fn percentile_points(h: &Option<Histogram<u64>>) -> Vec<Value> {
    const QUANTILES: [f64; 12] =
        [0.0, 0.5, 0.75, 0.9, 0.95, 0.99, 0.995, 0.999, 0.9995, 0.9999, 0.99999, 1.0];
    let Some(h) = h.as_ref().filter(|h| !h.is_empty()) else { return Vec::new() };
    QUANTILES.iter().map(|q| json!([q, h.value_at_quantile(*q) as f64 / 1000.0])).collect()
}

fn summary_json(s: &LoadSettings, st: &Stats, elapsed: Duration, report: &Value) -> Value {
    let ms = |q: f64| st.latency.as_ref().map_or(0.0, |h| h.value_at_quantile(q) as f64 / 1000.0);
    let quantiles = |h: &Option<Histogram<u64>>| {
        let at = |q: f64| h.as_ref().map_or(0.0, |h| h.value_at_quantile(q) as f64 / 1000.0);
        json!({"p50": at(0.50), "p90": at(0.90), "p99": at(0.99), "p999": at(0.999),
            "max": h.as_ref().map_or(0.0, |h| h.max() as f64 / 1000.0)})
    };
    json!({
        "scenario": format!("{:?}", s.scenario),
        "mode": match (s.rates.is_empty(), s.rate) {
            (false, _) => "curve",
            (true, Some(_)) => "open",
            (true, None) => "closed",
        },
        "connections": s.connections,
        "rate": s.rate,
        "seconds": elapsed.as_secs_f64(),
        "requests": st.done,
        "warmupRequests": st.warmup_done,
        "requestsPerSecond": st.done as f64 / elapsed.as_secs_f64().max(1e-9),
        "latencyMs": {
            "p50": ms(0.50), "p90": ms(0.90), "p99": ms(0.99), "p999": ms(0.999),
            "max": st.latency.as_ref().map_or(0.0, |h| h.max() as f64 / 1000.0),
        },
        "serviceMs": quantiles(&st.service),
        "lateMs": quantiles(&st.late),
        "timeline": st.timeline,
        "percentiles": {
            "latency": percentile_points(&st.latency),
            "server": percentile_points(&st.service),
        },
        "byStatus": st.by_status.iter().map(|(k, v)| (k.to_string(), json!(v))).collect::<serde_json::Map<_, _>>(),
        "errors": st.errors.iter().map(|((status, code), n)| json!({"status": status, "code": code, "count": n})).collect::<Vec<_>>(),
        "consistency": report,
    })
}

fn print_summary(v: &Value) {
    let l = &v["latencyMs"];
    let mode = match v["mode"].as_str().unwrap_or("") {
        "curve" => "open loop, a latency curve".to_owned(),
        other => format!("{other} loop"),
    };
    crate::say!(
        "{} ({mode}): {} requests in {:.1} s = {:.0} requests/s",
        v["scenario"].as_str().unwrap_or(""),
        v["requests"],
        v["seconds"].as_f64().unwrap_or(0.0),
        v["requestsPerSecond"].as_f64().unwrap_or(0.0)
    );
    if let Some(warm) = v["warmupRequests"].as_u64().filter(|n| *n > 0) {
        crate::say!(
            "  after a warm-up of {warm} requests, not timed here; the consistency checks below count them too"
        );
    }
    crate::say!("latency ms: {}", percentiles(l));
    if v["mode"] == "open" || v["mode"] == "curve" {
        for (name, key) in [
            ("  of which the server's (from the actual send)", "serviceMs"),
            ("  client's lateness in sending", "lateMs"),
        ] {
            crate::say!("{name} ms: {}", percentiles(&v[key]));
        }
    }
    if v["serverClock"].is_object() {
        crate::say!("the server's own clock (cash-out route): {}", server_clock::describe(&v["serverClock"]));
    }
    if let Some(rows) = v["curve"]["rates"].as_array() {
        print_curve(rows, &v["curve"]["slo"]);
    }
    crate::say!("by status: {}", v["byStatus"]);
    for e in v["errors"].as_array().into_iter().flatten() {
        crate::say!("  {} {}: {}", e["status"], e["code"].as_str().unwrap_or(""), e["count"]);
    }
    for c in v["consistency"]["checks"].as_array().into_iter().flatten() {
        crate::say!(
            "{} {}: {}",
            if c["ok"] == true { "ok  " } else { "FAIL" },
            c["check"].as_str().unwrap_or(""),
            c["detail"].as_str().unwrap_or("")
        );
    }
}

/// "p50 ..  p90 ..  p99 ..  p99.9 ..  max .." of a summary's percentiles (ms).
fn percentiles(q: &Value) -> String {
    let at = |k: &str| q[k].as_f64().unwrap_or(0.0);
    format!(
        "p50 {:.2}  p90 {:.2}  p99 {:.2}  p99.9 {:.2}  max {:.2}",
        at("p50"),
        at("p90"),
        at("p99"),
        at("p999"),
        at("max")
    )
}

/// The latency curve as a table, then what `--slo` found.
fn print_curve(rows: &[Value], slo: &Value) {
    crate::say!("server's share of latency (ms, from the actual send) by rate; the client's lateness apart:");
    let line = |cells: &[String]| cells.iter().map(|c| format!("{c:>11}")).collect::<Vec<_>>().join(" ");
    crate::say!("{}", line(&report::CURVE_COLUMNS.map(str::to_owned)));
    let search = slo["search"].as_array().cloned().unwrap_or_default();
    for r in rows.iter().chain(search.iter()) {
        crate::say!("{}", line(&report::curve_cells(r)));
    }
    crate::say!(
        "(server clock: the server's own histogram, from taking a request to the response; the share runs from the send)"
    );
    for r in rows.iter().chain(search.iter()) {
        let share = r["serverMs"]["p99"].as_f64().unwrap_or(0.0);
        if let Some(note) =
            server_clock::queued_note(r["rate"].as_f64().unwrap_or(0.0), share, &r["serverClock"])
        {
            crate::say!("{note}");
        }
    }
    if let Some(bound) = slo["boundMs"].as_f64() {
        match slo["highestRate"].as_f64() {
            Some(rate) => {
                crate::say!("highest rate with the server's p99 within {bound} ms and no error: {rate:.0}/s")
            }
            None => crate::say!("no rate kept the server's p99 within {bound} ms without an error"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_parse_within_their_bounds() {
        assert_eq!(parse_rates("1000,3000"), Ok(vec![1000.0, 3000.0]));
        assert_eq!(parse_rates(" 500 "), Ok(vec![500.0]));
        for bad in ["", "0", "-5", "a", "1000,,2000"] {
            assert!(parse_rates(bad).is_err(), "{bad:?}");
        }
        let most = vec!["1"; RATES_MAX].join(",");
        assert_eq!(parse_rates(&most).map(|r| r.len()), Ok(RATES_MAX));
        assert!(parse_rates(&format!("{most},1")).is_err(), "one more than the most");
    }

    fn row(rate: f64, p99: f64, errors: u64) -> Value {
        json!({"rate": rate, "requests": 100, "serverMs": {"p99": p99}, "errors": errors})
    }

    #[test]
    fn the_slo_brackets_the_highest_rate_that_meets_it() {
        let bound = Duration::from_millis(5);
        let rows = [row(1000.0, 1.0, 0), row(3000.0, 4.9, 0), row(6000.0, 5.1, 0), row(9000.0, 30.0, 0)];
        assert_eq!(slo_bracket(&rows, bound), (Some(3000.0), Some(6000.0)));
        // Exactly at the bound meets it; an error does not, however fast.
        let rows = [row(1000.0, 5.0, 0), row(2000.0, 0.5, 1)];
        assert_eq!(slo_bracket(&rows, bound), (Some(1000.0), Some(2000.0)));
        // Nothing meets it, or everything does: no search.
        assert_eq!(slo_bracket(&[row(1000.0, 9.0, 0)], bound), (None, Some(1000.0)));
        assert_eq!(slo_bracket(&[row(1000.0, 1.0, 0), row(2000.0, 2.0, 0)], bound), (Some(2000.0), None));
    }

    #[test]
    fn durations_and_mixes_parse() {
        assert_eq!(parse_duration("20s"), Ok(Duration::from_secs(20)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("3"), Ok(Duration::from_secs(3)));
        assert!(parse_duration("3 days").is_err());
        assert!(parse_duration("-1s").is_err());
        assert_eq!(parse_mix("cash-out=1,list=3"), Ok([1, 0, 0, 3]));
        assert!(parse_mix("cash-out=0").is_err());
        assert!(parse_mix("pay=1").is_err());
    }

    #[test]
    fn amounts_multiply_exactly() {
        let per = Money::parse("0.01").unwrap();
        let n = rust_decimal::Decimal::from(0u64);
        assert_eq!(Money::parse(&format!("{:.2}", per.as_decimal() * n)).ok(), Some(Money::ZERO));
        let n = rust_decimal::Decimal::from(123_457u64);
        assert_eq!(Money::parse(&format!("{:.2}", per.as_decimal() * n)).ok(), Money::parse("1234.57").ok());
    }

    #[test]
    fn the_mix_is_spread_evenly() {
        let mix = [1, 1, 2, 0];
        let ops: Vec<Op> = (0..8).map(|n| op_for(Scenario::Mixed, &mix, n)).collect();
        assert_eq!(ops.iter().filter(|o| **o == Op::Balance).count(), 4);
        assert_eq!(ops.iter().filter(|o| **o == Op::CashOut).count(), 2);
        assert!(!ops.contains(&Op::List));
        assert_eq!(op_for(Scenario::DuplicateStorm, &mix, 5), Op::CashOut);
    }

    #[test]
    fn only_a_request_that_may_have_left_or_a_5xx_is_in_doubt() {
        assert!(outcome_unknown(0, true), "cut after sending");
        assert!(!outcome_unknown(0, false), "no connection: nothing left");
        assert!(outcome_unknown(500, true) && outcome_unknown(503, true));
        for refused in [201, 400, 409, 422, 499] {
            assert!(!outcome_unknown(refused, true), "{refused}");
        }
    }
}
