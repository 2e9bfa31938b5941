//! pixgw's client of the DICT: looks keys up before a payment to them, and registers and
//! removes the keys of pixgw's accounts. One actor on the SPI rail's thread holds the
//! mutual-TLS connection; every answer's signature is checked against the DICT's
//! certificate before it is believed.
//!
//! Lookups respect the DICT's anti-scan policies (DICT API 2.12.1, "Limitação de
//! requisições") on pixgw's side first, so one client's typos are refused here with a clear
//! error before they can empty the participant's budget:
//! - per payer (the account's document, `PI-PayerId`), two buckets: one for e-mail and phone
//!   keys (`ENTRIES_READ_USER_ANTISCAN`), one for CPF, CNPJ and EVP keys (`…_V2`); a miss
//!   costs 20 tokens, a hit 1; a person's holds 100, refilled 2 a minute, a company's 1,000,
//!   20 a minute; a payment after a lookup gives 1 back (a company's 2);
//! - per participant (`ENTRIES_READ_PARTICIPANT_ANTISCAN`), one bucket of the category the
//!   central bank gave it (`[spi] dict_category`, A to H); a miss costs 3, a hit 1, a
//!   payment gives 1 back.
//!
//! A 429 from the DICT empties the payer's bucket here (the mirror was behind) and is passed
//! on with the wait the bucket then gives, never retried.
//! Answers are cached for as long as their `Cache-Control` says (`max-age`), per key, in an
//! [`EntryCache`] that request handlers read on their own thread: a cash-out to a key looked
//! up recently costs no trip to this actor.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use actix::prelude::*;

use super::claims::DictClaim;
use super::dict::{create_request, delete_request, Entry, Problem};
use super::dsig::{self, Profile};
use super::message::Ispb;
use super::settings::SpiSettings;
use super::xml::Document;
use crate::domain::claim::{ClaimType, Step};

/// Keys cached at most (a full cache drops what expired, then the oldest).
pub const CACHE_ENTRIES_MAX: usize = 100_000;
/// Payers whose buckets are kept at most (a full map drops the fullest buckets).
pub const BUCKETS_MAX: usize = 100_000;
/// A person's and a company's bucket (size, refill a minute), and what a lookup costs.
pub const BUCKET_PERSON: (f64, f64) = (100.0, 2.0);
pub const BUCKET_COMPANY: (f64, f64) = (1000.0, 20.0);
pub const COST_HIT: f64 = 1.0;
pub const COST_MISS: f64 = 20.0;
/// How long one request to the DICT may take.
pub const DICT_TIMEOUT: Duration = Duration::from_secs(5);

/// Why a lookup or a registration did not give an entry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DictError {
    /// 404 NotFound: a key lookup's "no such key", or a route or resource the DICT does
    /// not have (the caller says which it asked for).
    #[error("the DICT has no such entry (404 NotFound)")]
    NotFound,
    /// The payer's bucket (here or at the DICT) is empty: try again after this long.
    #[error("too many key lookups; retry after {0:?}")]
    RateLimited(Duration),
    /// The DICT refused the request (its problem type and title).
    #[error("the DICT refused: {0}")]
    Refused(String),
    /// The DICT did not answer, or answered something that does not verify.
    #[error("the DICT is unavailable: {0}")]
    Unavailable(String),
}

/// A lookup's answer: the key's entry, and the anti-fraud counters the DICT gave with it
/// (zeros when it gave none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    pub entry: Entry,
    pub signals: crate::domain::risk::Signals,
}

/// The DICT's answers still fresh, by key; shared between the client actor (which fills it)
/// and the request handlers (which read it first).
#[derive(Clone, Default)]
pub struct EntryCache(std::sync::Arc<std::sync::Mutex<HashMap<String, (Found, Instant)>>>);

impl EntryCache {
    fn locked(&self) -> std::sync::MutexGuard<'_, HashMap<String, (Found, Instant)>> {
        // A panic while holding it leaves a map that is still a valid cache.
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The entry of `key`, if its answer is still fresh at `now`.
    pub fn get(&self, key: &str, now: Instant) -> Option<Found> {
        let hit = self.locked().get(key).filter(|(_, until)| *until > now).map(|(e, _)| e.clone());
        if hit.is_some() {
            metrics::counter!("pixgw_dict_lookups_total", "result" => "cached").increment(1);
        }
        hit
    }

    /// Keeps `entry` until `until`; a full cache drops what expired, then everything.
    fn put(&self, key: String, entry: Found, until: Instant, now: Instant) {
        let mut cache = self.locked();
        if cache.len() >= CACHE_ENTRIES_MAX && !cache.contains_key(&key) {
            cache.retain(|_, (_, u)| *u > now);
            if cache.len() >= CACHE_ENTRIES_MAX {
                cache.clear();
            }
        }
        cache.insert(key, (entry, until));
    }

    pub fn len(&self) -> usize {
        self.locked().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

impl Bucket {
    /// Refilled to `at` by `(size, per_minute)`.
    fn refill(&mut self, (size, per_minute): (f64, f64), at: Instant) {
        self.tokens =
            (self.tokens + at.saturating_duration_since(self.at).as_secs_f64() * per_minute / 60.0).min(size);
        self.at = at;
    }

    /// How long until it holds a token again, at `per_minute`; `None` when it holds one.
    fn wait(&self, per_minute: f64) -> Option<Duration> {
        (self.tokens <= 0.0)
            .then(|| Duration::from_secs_f64(((COST_HIT - self.tokens) * 60.0 / per_minute).max(1.0)))
    }
}

/// The DICT's two anti-scan buckets of a payer, by the type of key looked up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KeyGroup {
    /// E-mail and phone keys (`ENTRIES_READ_USER_ANTISCAN`).
    EmailPhone,
    /// CPF, CNPJ and EVP keys (`ENTRIES_READ_USER_ANTISCAN_V2`).
    Documents,
}

/// The bucket a lookup of `key` is charged to.
pub fn key_group(key: &str) -> KeyGroup {
    if key.contains('@') || key.starts_with('+') {
        KeyGroup::EmailPhone
    } else {
        KeyGroup::Documents
    }
}

/// The participant's bucket by its category (`ENTRIES_READ_PARTICIPANT_ANTISCAN`): size and
/// refill a minute.
pub fn participant_policy(category: char) -> Option<(f64, f64)> {
    Some(match category {
        'A' => (50_000.0, 25_000.0),
        'B' => (40_000.0, 20_000.0),
        'C' => (30_000.0, 15_000.0),
        'D' => (16_000.0, 8_000.0),
        'E' => (5_000.0, 2_500.0),
        'F' => (500.0, 250.0),
        'G' => (250.0, 25.0),
        'H' => (50.0, 2.0),
        _ => return None,
    })
}

/// What a miss costs the participant's bucket.
pub const PARTICIPANT_COST_MISS: f64 = 3.0;

/// The buckets pixgw keeps, mirroring the DICT's: per payer and key group, and the
/// participant's.
pub struct Buckets {
    by_payer: HashMap<(String, KeyGroup), Bucket>,
    participant: Option<(Bucket, (f64, f64))>,
}

impl Default for Buckets {
    fn default() -> Buckets {
        Buckets::new(None, Instant::now())
    }
}

impl Buckets {
    /// Buckets for a participant of `category` (none mirrored when `None`).
    pub fn new(category: Option<char>, at: Instant) -> Buckets {
        let participant =
            category.and_then(participant_policy).map(|policy| (Bucket { tokens: policy.0, at }, policy));
        Buckets { by_payer: HashMap::new(), participant }
    }

    fn is_company(payer: &str) -> bool {
        payer.len() != 11
    }

    fn policy(payer: &str) -> (f64, f64) {
        if Buckets::is_company(payer) {
            BUCKET_COMPANY
        } else {
            BUCKET_PERSON
        }
    }

    fn refill(&mut self, payer: &str, group: KeyGroup, at: Instant) -> &mut Bucket {
        let policy = Buckets::policy(payer);
        if self.by_payer.len() >= BUCKETS_MAX && !self.by_payer.contains_key(&(payer.to_owned(), group)) {
            // Full buckets are the ones a new bucket would start as: forgetting them is free.
            self.by_payer.retain(|(p, _), b| b.tokens < Buckets::policy(p).0);
        }
        let b = self.by_payer.entry((payer.to_owned(), group)).or_insert(Bucket { tokens: policy.0, at });
        b.refill(policy, at);
        b
    }

    fn participant(&mut self, at: Instant) -> Option<(&mut Bucket, (f64, f64))> {
        let (b, policy) = self.participant.as_mut()?;
        b.refill(*policy, at);
        Some((b, *policy))
    }

    /// Whether `payer` may look a key of `group` up now; when not, how long until it may.
    pub fn admit(&mut self, payer: &str, group: KeyGroup, at: Instant) -> Result<(), Duration> {
        let per_minute = Buckets::policy(payer).1;
        let user = self.refill(payer, group, at).wait(per_minute);
        let participant = self.participant(at).and_then(|(b, policy)| b.wait(policy.1));
        match user.into_iter().chain(participant).max() {
            Some(wait) => Err(wait),
            None => Ok(()),
        }
    }

    /// Charges a lookup's answer (`hit`: found).
    pub fn charge(&mut self, payer: &str, group: KeyGroup, hit: bool, at: Instant) {
        self.refill(payer, group, at).tokens -= if hit { COST_HIT } else { COST_MISS };
        if let Some((b, _)) = self.participant(at) {
            b.tokens -= if hit { COST_HIT } else { PARTICIPANT_COST_MISS };
        }
    }

    /// The DICT refused a lookup with 429: the payer's bucket there is empty, whatever the
    /// mirror says. Answers how long until it may look up again.
    pub fn exhausted(&mut self, payer: &str, group: KeyGroup, at: Instant) -> Duration {
        let b = self.refill(payer, group, at);
        b.tokens = b.tokens.min(0.0);
        b.wait(Buckets::policy(payer).1).unwrap_or(Duration::from_secs(1))
    }

    /// Gives tokens back: the payer sent a payment after a lookup (the DICT does the same
    /// when a payment carries the lookup's end-to-end id): a person 1, a company 2, the
    /// participant 1.
    pub fn paid(&mut self, payer: &str, group: KeyGroup, at: Instant) {
        let (size, _) = Buckets::policy(payer);
        let back = if Buckets::is_company(payer) { 2.0 } else { COST_HIT };
        let b = self.refill(payer, group, at);
        b.tokens = (b.tokens + back).min(size);
        if let Some((b, (size, _))) = self.participant(at) {
            b.tokens = (b.tokens + COST_HIT).min(size);
        }
    }
}

/// The `max-age` of a `Cache-Control` header, if it allows caching.
pub fn max_age(cache_control: &str) -> Option<Duration> {
    let directives: Vec<String> = cache_control.split(',').map(|d| d.trim().to_ascii_lowercase()).collect();
    if directives.iter().any(|d| d == "no-store" || d == "no-cache") {
        return None;
    }
    directives
        .iter()
        .find_map(|d| d.strip_prefix("max-age=")?.parse::<u64>().ok())
        .filter(|s| *s > 0)
        .map(Duration::from_secs)
}

/// Look a key up for a payment.
#[derive(Message)]
#[rtype(result = "Result<Found, DictError>")]
pub struct Lookup {
    pub key: String,
    /// The paying user's CPF or CNPJ (`PI-PayerId`).
    pub payer_document: String,
    /// The end-to-end id the payment will carry (`PI-EndToEndId`).
    pub end_to_end_id: String,
}

/// A payment was sent after a lookup of `key` by this payer: its bucket gets tokens back.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Paid {
    pub payer_document: String,
    pub key: String,
}

impl Handler<Paid> for DictClient {
    type Result = ();

    fn handle(&mut self, msg: Paid, _: &mut Context<Self>) {
        self.buckets.paid(&msg.payer_document, key_group(&msg.key), Instant::now());
    }
}

/// Register a key of an account of pixgw (an EVP with no key: the DICT makes one), under
/// a `RequestId` the same registration always has ([`super::dict::request_id_of`]), so a
/// registration tried again is the same request to the DICT.
#[derive(Message)]
#[rtype(result = "Result<Entry, DictError>")]
pub struct Register(pub Entry, pub uuid::Uuid);

/// Update a key's entry of an account of pixgw (its owner's name, its account) with a
/// reason [`super::dict::update_reason_allowed`] takes; answers the entry as the DICT now
/// has it.
#[derive(Message)]
#[rtype(result = "Result<Entry, DictError>")]
pub struct UpdateEntry {
    pub entry: Entry,
    pub reason: &'static str,
}

/// Remove a key of an account of pixgw.
#[derive(Message)]
#[rtype(result = "Result<(), DictError>")]
pub struct Remove {
    pub key: String,
    pub reason: String,
}

pub struct DictClient {
    settings: SpiSettings,
    /// `None` when the DICT's URL does not parse (every request answers unavailable).
    http: Option<super::http1::Client>,
    /// The path the API's routes start with (`/api/v2`).
    base_path: String,
    cache: EntryCache,
    buckets: Buckets,
}

const USER_AGENT: &str = concat!("pixgw/", env!("CARGO_PKG_VERSION"));

impl DictClient {
    pub fn new(settings: SpiSettings, cache: EntryCache) -> DictClient {
        let http = super::http1::Client::new(std::sync::Arc::clone(&settings.tls), &settings.dict_url)
            .map_err(|e| tracing::error!(error = %e, "no DICT client"))
            .ok();
        let base_path = super::http1::split_url(&settings.dict_url).map(|(_, _, p)| p).unwrap_or_default();
        let buckets = Buckets::new(Some(settings.dict_category), Instant::now());
        DictClient { settings, http, base_path, cache, buckets }
    }
}

impl Actor for DictClient {
    type Context = Context<Self>;
}

/// A response's body, inflated when the DICT gzipped it (we ask with `Accept-Encoding: gzip`,
/// as the API recommends).
fn inflated(res: &super::http1::Response) -> Result<Vec<u8>, DictError> {
    if res.header("content-encoding").is_some_and(|e| e.eq_ignore_ascii_case("gzip")) {
        super::icom::gunzip(&res.body).map_err(DictError::Unavailable)
    } else {
        Ok(res.body.clone())
    }
}

/// Reads a DICT answer: a signed body that verifies, or the problem it reports.
fn answer(settings: &SpiSettings, status: u16, body: &[u8]) -> Result<Document, DictError> {
    let doc =
        Document::parse(body).map_err(|e| DictError::Unavailable(format!("the answer is not XML: {e}")))?;
    if let Some(p) = Problem::read(&doc) {
        return Err(match (p.status.max(status), p.kind.as_str()) {
            (404, _) | (_, "NotFound") => DictError::NotFound,
            // The API gives a 429 no Retry-After: the payer's mirrored bucket says the wait.
            (429, _) => DictError::RateLimited(Duration::ZERO),
            (s, _) if s >= 500 => DictError::Unavailable(format!("{}: {}", p.kind, p.title)),
            _ => DictError::Refused(format!("{}: {}", p.kind, p.title)),
        });
    }
    if !(200..300).contains(&status) {
        return Err(DictError::Unavailable(format!("status {status}")));
    }
    if !(settings.accept_unsigned && dsig::signature_of(&doc, Profile::Dict).is_none()) {
        dsig::verify(&doc, Profile::Dict, &settings.trusted)
            .map_err(|e| DictError::Unavailable(format!("the answer's signature: {e}")))?;
    }
    Ok(doc)
}

fn entry_of(doc: &Document) -> Result<Entry, DictError> {
    let e =
        doc.root.child("Entry").ok_or_else(|| DictError::Unavailable("the answer has no Entry".into()))?;
    Entry::read(e).map_err(DictError::Unavailable)
}

impl Handler<Lookup> for DictClient {
    type Result = ResponseActFuture<Self, Result<Found, DictError>>;

    fn handle(&mut self, msg: Lookup, _: &mut Context<Self>) -> Self::Result {
        let now = Instant::now();
        if let Some(entry) = self.cache.get(&msg.key, now) {
            return Box::pin(fut::ready(Ok(entry)));
        }
        let group = key_group(&msg.key);
        if let Err(wait) = self.buckets.admit(&msg.payer_document, group, now) {
            metrics::counter!("pixgw_dict_lookups_total", "result" => "limited_here").increment(1);
            return Box::pin(fut::ready(Err(DictError::RateLimited(wait))));
        }
        let Some(http) = self.http.clone() else {
            return Box::pin(fut::ready(Err(DictError::Unavailable("no client".into()))));
        };
        // The anti-fraud counters come with the entry: the risk rule reads them.
        let path = format!(
            "{}/entries/{}?IncludeStatistics=true",
            self.base_path,
            percent_encoding::utf8_percent_encode(&msg.key, percent_encoding::NON_ALPHANUMERIC)
        );
        let settings = self.settings.clone();
        let (payer, e2e) = (msg.payer_document.clone(), msg.end_to_end_id.clone());
        let started = Instant::now();
        Box::pin(
            async move {
                let headers = [
                    ("User-Agent", USER_AGENT),
                    ("Accept", "application/xml"),
                    ("Accept-Encoding", "gzip"),
                    ("PI-RequestingParticipant", settings.ispb.as_str()),
                    ("PI-PayerId", payer.as_str()),
                    ("PI-EndToEndId", e2e.as_str()),
                ];
                let res = http
                    .send("GET", &path, &headers, b"", DICT_TIMEOUT)
                    .await
                    .map_err(|e| DictError::Unavailable(e.to_string()))?;
                let cache = res.header("cache-control").and_then(max_age);
                let asked_wait =
                    res.header("retry-after").map(|v| super::icom::retry_after(Some(v), chrono::Utc::now()));
                let body = inflated(&res)?;
                let doc = answer(&settings, res.status, &body).map_err(|e| match (e, asked_wait) {
                    (DictError::RateLimited(_), Some(w)) => DictError::RateLimited(w),
                    (e, _) => e,
                })?;
                let found = Found { entry: entry_of(&doc)?, signals: super::fraud::read_signals(&doc) };
                Ok((found, cache))
            }
            .into_actor(self)
            .map(move |got: Result<(Found, Option<Duration>), DictError>, act, _| {
                metrics::histogram!("pixgw_dict_lookup_seconds").record(started.elapsed().as_secs_f64());
                let result = match &got {
                    Ok(_) => "found",
                    Err(DictError::NotFound) => "not_found",
                    Err(DictError::RateLimited(_)) => "rate_limited",
                    Err(_) => "error",
                };
                metrics::counter!("pixgw_dict_lookups_total", "result" => result).increment(1);
                match got {
                    Ok((entry, cache)) => {
                        act.buckets.charge(&msg.payer_document, group, true, Instant::now());
                        if let Some(age) = cache {
                            let now = Instant::now();
                            act.cache.put(msg.key.clone(), entry.clone(), now + age, now);
                        }
                        Ok(entry)
                    }
                    Err(DictError::NotFound) => {
                        act.buckets.charge(&msg.payer_document, group, false, Instant::now());
                        Err(DictError::NotFound)
                    }
                    Err(DictError::RateLimited(asked)) => {
                        // The DICT's bucket is empty whatever ours says: ours follows it.
                        let ours = act.buckets.exhausted(&msg.payer_document, group, Instant::now());
                        Err(DictError::RateLimited(ours.max(asked)))
                    }
                    Err(e) => Err(e),
                }
            }),
        )
    }
}

impl DictClient {
    /// Signs a write request and posts it; answers the DICT's document.
    fn signed_post(&self, path: &str, body: String) -> ResponseFuture<Result<Document, DictError>> {
        self.signed_send("POST", path, body)
    }

    fn signed_send(
        &self,
        method: &'static str,
        path: &str,
        body: String,
    ) -> ResponseFuture<Result<Document, DictError>> {
        let signed =
            dsig::sign_dict(&body, &self.settings.signer).map_err(|e| DictError::Unavailable(e.to_string()));
        let http = self.http.clone();
        let path = format!("{}{path}", self.base_path);
        let settings = self.settings.clone();
        Box::pin(async move {
            let http = http.ok_or_else(|| DictError::Unavailable("no client".into()))?;
            let headers = [
                ("User-Agent", USER_AGENT),
                ("Content-Type", "application/xml"),
                ("Accept", "application/xml"),
            ];
            let res = http
                .send(method, &path, &headers, signed?.as_bytes(), DICT_TIMEOUT)
                .await
                .map_err(|e| DictError::Unavailable(e.to_string()))?;
            answer(&settings, res.status, &res.body)
        })
    }
}

impl Handler<Register> for DictClient {
    type Result = ResponseFuture<Result<Entry, DictError>>;

    fn handle(&mut self, msg: Register, _: &mut Context<Self>) -> Self::Result {
        let body = create_request(&msg.0, "USER_REQUESTED", &msg.1);
        let sent = self.signed_post("/entries/", body);
        Box::pin(async move { entry_of(&sent.await?) })
    }
}

impl Handler<UpdateEntry> for DictClient {
    type Result = ResponseFuture<Result<Entry, DictError>>;

    fn handle(&mut self, msg: UpdateEntry, _: &mut Context<Self>) -> Self::Result {
        // A lookup answered before the update would show the old owner.
        self.cache.locked().remove(&msg.entry.key);
        let body = super::dict::update_request(&msg.entry, msg.reason);
        let path = format!(
            "/entries/{}",
            percent_encoding::utf8_percent_encode(&msg.entry.key, percent_encoding::NON_ALPHANUMERIC)
        );
        let sent = self.signed_send("PUT", &path, body);
        Box::pin(async move { entry_of(&sent.await?) })
    }
}

impl Handler<Remove> for DictClient {
    type Result = ResponseFuture<Result<(), DictError>>;

    fn handle(&mut self, msg: Remove, _: &mut Context<Self>) -> Self::Result {
        self.cache.locked().remove(&msg.key);
        let body = delete_request(&msg.key, &self.settings.ispb, &msg.reason);
        let path = format!(
            "/entries/{}/delete",
            percent_encoding::utf8_percent_encode(&msg.key, percent_encoding::NON_ALPHANUMERIC)
        );
        let sent = self.signed_post(&path, body);
        Box::pin(async move { sent.await.map(|_| ()) })
    }
}

/// The MED's refund requests open against this participant's payments (it is the
/// contested participant), oldest change first.
#[derive(Message)]
#[rtype(result = "Result<Vec<super::dict::Refund>, DictError>")]
pub struct OpenRefunds;

/// Close a refund request with this participant's analysis.
#[derive(Message)]
#[rtype(result = "Result<(), DictError>")]
pub struct CloseRefund {
    pub id: String,
    /// `TOTALLY_ACCEPTED`, `PARTIALLY_ACCEPTED` or `REJECTED`.
    pub result: &'static str,
    pub details: Option<String>,
    /// The return that gave the money back, when accepted.
    pub refund_transaction_id: Option<String>,
}

impl Handler<OpenRefunds> for DictClient {
    type Result = ResponseFuture<Result<Vec<super::dict::Refund>, DictError>>;

    fn handle(&mut self, _: OpenRefunds, _: &mut Context<Self>) -> Self::Result {
        let http = self.http.clone();
        let settings = self.settings.clone();
        let path = format!(
            "{}/refunds/?Participant={}&ParticipantRole=CONTESTED&Status=OPEN&IncludeDetails=true&Limit={}",
            self.base_path,
            settings.ispb,
            super::dict::REFUNDS_LIST_MAX
        );
        Box::pin(async move {
            let http = http.ok_or_else(|| DictError::Unavailable("no client".into()))?;
            let headers = [("User-Agent", USER_AGENT), ("Accept", "application/xml")];
            let res = http
                .send("GET", &path, &headers, b"", DICT_TIMEOUT)
                .await
                .map_err(|e| DictError::Unavailable(e.to_string()))?;
            let doc = answer(&settings, res.status, &res.body)?;
            super::dict::read_refunds(&doc).map(|(refunds, _)| refunds).map_err(DictError::Unavailable)
        })
    }
}

impl Handler<CloseRefund> for DictClient {
    type Result = ResponseFuture<Result<(), DictError>>;

    fn handle(&mut self, msg: CloseRefund, _: &mut Context<Self>) -> Self::Result {
        let body = super::dict::close_refund_request(
            &msg.id,
            &self.settings.ispb,
            msg.result,
            msg.details.as_deref(),
            msg.refund_transaction_id.as_deref(),
        );
        let path = format!(
            "/refunds/{}/close",
            percent_encoding::utf8_percent_encode(&msg.id, percent_encoding::NON_ALPHANUMERIC)
        );
        let sent = self.signed_post(&path, body);
        Box::pin(async move { sent.await.map(|_| ()) })
    }
}

/// Open a claim for a key, as claimer: `claimer` names the key, the account of pixgw it is
/// to come to and its holder.
#[derive(Message)]
#[rtype(result = "Result<DictClaim, DictError>")]
pub struct CreateClaim {
    pub claim_type: ClaimType,
    pub claimer: Entry,
}

/// Take a step of a claim (as donor or claimer); answers the claim as it now is. A
/// completion's `request_id` names the entry it makes, so a completion tried again is the
/// same request.
#[derive(Message)]
#[rtype(result = "Result<DictClaim, DictError>")]
pub struct TakeStep {
    pub id: String,
    pub step: Step,
    pub request_id: uuid::Uuid,
}

/// The claims this participant is donor or claimer of whose status changed at or after
/// `modified_after` (all of them when `None`), oldest change first; and whether more follow.
#[derive(Message)]
#[rtype(result = "Result<(Vec<DictClaim>, bool), DictError>")]
pub struct ListClaims {
    pub modified_after: Option<chrono::DateTime<chrono::Utc>>,
}

impl Handler<CreateClaim> for DictClient {
    type Result = ResponseFuture<Result<DictClaim, DictError>>;

    fn handle(&mut self, msg: CreateClaim, _: &mut Context<Self>) -> Self::Result {
        let sent = self.signed_post("/claims/", super::claims::create_request(msg.claim_type, &msg.claimer));
        Box::pin(async move { super::claims::read_claim(&sent.await?).map_err(DictError::Unavailable) })
    }
}

impl Handler<TakeStep> for DictClient {
    type Result = ResponseFuture<Result<DictClaim, DictError>>;

    fn handle(&mut self, msg: TakeStep, _: &mut Context<Self>) -> Self::Result {
        let body = super::claims::step_request(msg.step, &msg.id, &self.settings.ispb, &msg.request_id);
        let path = format!(
            "/claims/{}/{}",
            percent_encoding::utf8_percent_encode(&msg.id, percent_encoding::NON_ALPHANUMERIC),
            msg.step.name()
        );
        let sent = self.signed_post(&path, body);
        Box::pin(async move { super::claims::read_claim(&sent.await?).map_err(DictError::Unavailable) })
    }
}

impl Handler<ListClaims> for DictClient {
    type Result = ResponseFuture<Result<(Vec<DictClaim>, bool), DictError>>;

    fn handle(&mut self, msg: ListClaims, _: &mut Context<Self>) -> Self::Result {
        let http = self.http.clone();
        let settings = self.settings.clone();
        // Donor and claimer both true: either role (the API's disjunctive filter), which the
        // DICT charges to the list-with-role bucket (40 a minute).
        let mut path = format!(
            "{}/claims/?Participant={}&IsDonor=true&IsClaimer=true&Limit={}",
            self.base_path,
            settings.ispb,
            super::claims::CLAIMS_LIST_MAX
        );
        if let Some(after) = msg.modified_after {
            let stamp = super::dict::stamp(after);
            path.push_str("&ModifiedAfter=");
            path.extend(percent_encoding::utf8_percent_encode(&stamp, percent_encoding::NON_ALPHANUMERIC));
        }
        Box::pin(async move {
            let http = http.ok_or_else(|| DictError::Unavailable("no client".into()))?;
            let headers = [("User-Agent", USER_AGENT), ("Accept", "application/xml")];
            let res = http
                .send("GET", &path, &headers, b"", DICT_TIMEOUT)
                .await
                .map_err(|e| DictError::Unavailable(e.to_string()))?;
            let doc = answer(&settings, res.status, &res.body)?;
            super::claims::read_list(&doc).map_err(DictError::Unavailable)
        })
    }
}

/// Ask the DICT whether this participant's keys of a type are its own: `true` for `OK`.
#[derive(Message)]
#[rtype(result = "Result<bool, DictError>")]
pub struct VerifySync {
    pub key_type: String,
    pub vsync: String,
}

/// Ask for the file of this participant's CIDs of a key type.
#[derive(Message)]
#[rtype(result = "Result<super::sync::CidFile, DictError>")]
pub struct RequestCidFile {
    pub key_type: String,
}

/// A CID file as it now is.
#[derive(Message)]
#[rtype(result = "Result<super::sync::CidFile, DictError>")]
pub struct GetCidFile {
    pub id: u64,
}

/// The CIDs of an available file, once its bytes match the SHA-256 the DICT gave.
#[derive(Message)]
#[rtype(result = "Result<Vec<String>, DictError>")]
pub struct FetchCidFile {
    pub file: super::sync::CidFile,
}

/// The active entry a CID names, and the `RequestId` that created it.
#[derive(Message)]
#[rtype(result = "Result<(Entry, uuid::Uuid), DictError>")]
pub struct EntryByCid {
    pub cid: String,
}

impl DictClient {
    /// A signed answer to a GET of `path` (under the API's base), with this participant named.
    fn signed_get(&self, path: String) -> ResponseFuture<Result<Document, DictError>> {
        let http = self.http.clone();
        let settings = self.settings.clone();
        let path = format!("{}{path}", self.base_path);
        Box::pin(async move {
            let http = http.ok_or_else(|| DictError::Unavailable("no client".into()))?;
            let ispb = settings.ispb.to_string();
            let headers = [
                ("User-Agent", USER_AGENT),
                ("Accept", "application/xml"),
                ("PI-RequestingParticipant", ispb.as_str()),
            ];
            let res = http
                .send("GET", &path, &headers, b"", DICT_TIMEOUT)
                .await
                .map_err(|e| DictError::Unavailable(e.to_string()))?;
            answer(&settings, res.status, &inflated(&res)?)
        })
    }
}

impl Handler<VerifySync> for DictClient {
    type Result = ResponseFuture<Result<bool, DictError>>;

    fn handle(&mut self, msg: VerifySync, _: &mut Context<Self>) -> Self::Result {
        let body = super::sync::verification_request(&self.settings.ispb, &msg.key_type, &msg.vsync);
        let sent = self.signed_post("/sync-verifications/", body);
        Box::pin(async move {
            super::sync::read_verification_result(&sent.await?).map_err(DictError::Unavailable)
        })
    }
}

impl Handler<RequestCidFile> for DictClient {
    type Result = ResponseFuture<Result<super::sync::CidFile, DictError>>;

    fn handle(&mut self, msg: RequestCidFile, _: &mut Context<Self>) -> Self::Result {
        let body = super::sync::cid_file_request(&self.settings.ispb, &msg.key_type);
        let sent = self.signed_post("/cids/files/", body);
        Box::pin(async move { super::sync::read_cid_file(&sent.await?).map_err(DictError::Unavailable) })
    }
}

impl Handler<GetCidFile> for DictClient {
    type Result = ResponseFuture<Result<super::sync::CidFile, DictError>>;

    fn handle(&mut self, msg: GetCidFile, _: &mut Context<Self>) -> Self::Result {
        let got = self.signed_get(format!("/cids/files/{}", msg.id));
        Box::pin(async move { super::sync::read_cid_file(&got.await?).map_err(DictError::Unavailable) })
    }
}

impl Handler<FetchCidFile> for DictClient {
    type Result = ResponseFuture<Result<Vec<String>, DictError>>;

    fn handle(&mut self, msg: FetchCidFile, _: &mut Context<Self>) -> Self::Result {
        let http = self.http.clone();
        let dict = super::http1::split_url(&self.settings.dict_url).ok().map(|(host, port, _)| (host, port));
        Box::pin(async move {
            let http = http.ok_or_else(|| DictError::Unavailable("no client".into()))?;
            let (Some(url), Some(sha)) = (&msg.file.url, &msg.file.sha256) else {
                return Err(DictError::Unavailable("the file is not available".into()));
            };
            // The file is read over the DICT's own connection: a URL elsewhere is refused.
            let (host, port, path) = super::http1::split_url(url)
                .map_err(|e| DictError::Unavailable(format!("the file's URL: {e}")))?;
            if dict.as_ref().is_none_or(|(h, p)| *h != host || *p != port) {
                return Err(DictError::Unavailable(format!("the file's URL {url} is not the DICT's")));
            }
            let headers = [("User-Agent", USER_AGENT), ("Accept", "text/plain")];
            let res = http
                .send("GET", &path, &headers, b"", DICT_TIMEOUT)
                .await
                .map_err(|e| DictError::Unavailable(e.to_string()))?;
            if res.status != 200 {
                return Err(DictError::Unavailable(format!("the file answered {}", res.status)));
            }
            let body = inflated(&res)?;
            use sha2::Digest;
            let got: String = sha2::Sha256::digest(&body).iter().map(|b| format!("{b:02x}")).collect();
            if !got.eq_ignore_ascii_case(sha) {
                return Err(DictError::Unavailable("the file's SHA-256 is not the one the DICT gave".into()));
            }
            let text =
                String::from_utf8(body).map_err(|_| DictError::Unavailable("the file is not text".into()))?;
            crate::domain::cid::read_cid_file(&text)
                .ok_or_else(|| DictError::Unavailable("the file holds a line that is not a CID".into()))
        })
    }
}

impl Handler<EntryByCid> for DictClient {
    type Result = ResponseFuture<Result<(Entry, uuid::Uuid), DictError>>;

    fn handle(&mut self, msg: EntryByCid, _: &mut Context<Self>) -> Self::Result {
        let got = self.signed_get(format!("/cids/entries/{}", msg.cid));
        Box::pin(async move { super::sync::read_entry_by_cid(&got.await?).map_err(DictError::Unavailable) })
    }
}

/// Mark a person (and one of its keys) for fraud, under a `RequestId` the same mark always
/// has, so a mark tried again is the same request.
#[derive(Message)]
#[rtype(result = "Result<super::fraud::FraudMarker, DictError>")]
pub struct MarkFraud {
    pub marker: super::fraud::FraudMarker,
    pub request_id: uuid::Uuid,
}

/// Cancel a fraud mark of ours.
#[derive(Message)]
#[rtype(result = "Result<super::fraud::FraudMarker, DictError>")]
pub struct CancelFraudMark {
    pub id: String,
}

/// A person's fraud marks (and of one of its keys, when named).
#[derive(Message)]
#[rtype(result = "Result<Vec<super::fraud::FraudMarker>, DictError>")]
pub struct FraudMarks {
    pub tax_id: String,
    pub key: Option<String>,
}

impl Handler<MarkFraud> for DictClient {
    type Result = ResponseFuture<Result<super::fraud::FraudMarker, DictError>>;

    fn handle(&mut self, msg: MarkFraud, _: &mut Context<Self>) -> Self::Result {
        let body = super::fraud::create_request(&self.settings.ispb, &msg.marker, &msg.request_id);
        let sent = self.signed_post("/fraud-markers/", body);
        Box::pin(async move { super::fraud::read_marker(&sent.await?).map_err(DictError::Unavailable) })
    }
}

impl Handler<CancelFraudMark> for DictClient {
    type Result = ResponseFuture<Result<super::fraud::FraudMarker, DictError>>;

    fn handle(&mut self, msg: CancelFraudMark, _: &mut Context<Self>) -> Self::Result {
        let body = super::fraud::cancel_request(&self.settings.ispb, &msg.id);
        let path = format!(
            "/fraud-markers/{}/cancel",
            percent_encoding::utf8_percent_encode(&msg.id, percent_encoding::NON_ALPHANUMERIC)
        );
        let sent = self.signed_post(&path, body);
        Box::pin(async move { super::fraud::read_marker(&sent.await?).map_err(DictError::Unavailable) })
    }
}

impl Handler<FraudMarks> for DictClient {
    type Result = ResponseFuture<Result<Vec<super::fraud::FraudMarker>, DictError>>;

    fn handle(&mut self, msg: FraudMarks, _: &mut Context<Self>) -> Self::Result {
        let enc = |t: &str| {
            percent_encoding::utf8_percent_encode(t, percent_encoding::NON_ALPHANUMERIC).to_string()
        };
        let mut path =
            format!("/fraud-markers/?Participant={}&TaxIdNumber={}", self.settings.ispb, enc(&msg.tax_id));
        if let Some(k) = &msg.key {
            path.push_str(&format!("&Key={}", enc(k)));
        }
        let got = self.signed_get(path);
        Box::pin(async move { super::fraud::read_list(&got.await?).map_err(DictError::Unavailable) })
    }
}

/// Open a funds recovery (MED 2.0) for a payment of ours, as the DICT's defaults and maxima
/// trace it; answers the recovery and the graph the DICT drew.
#[derive(Message)]
#[rtype(
    result = "Result<(super::recovery::FundsRecovery, Option<super::recovery::TrackingGraph>), DictError>"
)]
pub struct CreateRecovery {
    pub recovery: super::recovery::FundsRecovery,
}

/// The creator's update of a funds recovery: its situation, details and contact as `recovery`
/// has them (its id the DICT's).
#[derive(Message)]
#[rtype(result = "Result<super::recovery::FundsRecovery, DictError>")]
pub struct UpdateRecovery {
    pub recovery: super::recovery::FundsRecovery,
}

/// A funds recovery as the DICT has it now.
#[derive(Message)]
#[rtype(result = "Result<super::recovery::FundsRecovery, DictError>")]
pub struct GetRecovery {
    pub id: String,
}

/// The creator's steps of a funds recovery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecoveryStep {
    /// Ask the institutions that agreed to give the money back.
    Refund,
    Cancel,
}

/// Take a step of one of our funds recoveries; answers it as it now is.
#[derive(Message)]
#[rtype(result = "Result<super::recovery::FundsRecovery, DictError>")]
pub struct StepRecovery {
    pub id: String,
    pub step: RecoveryStep,
}

/// The DICT's event notifications after `cursor` (from the first it keeps when `None`):
/// the events, where the next list starts, and whether more wait.
#[derive(Message)]
#[rtype(result = "Result<(Vec<super::recovery::EventNotification>, Option<String>, bool), DictError>")]
pub struct RecoveryEvents {
    pub cursor: Option<String>,
}

/// The infraction reports against this participant still to be answered (`OPEN` or
/// `ACKNOWLEDGED`), oldest change first.
#[derive(Message)]
#[rtype(result = "Result<Vec<super::recovery::InfractionReport>, DictError>")]
pub struct OpenReports;

/// The counterparty's answers to an infraction report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReportAnswer {
    Acknowledge,
    /// The analysis: `agreed` with the fraud type found, or not.
    Close {
        agreed: bool,
        fraud_type: String,
        details: Option<String>,
    },
}

/// Answer an infraction report against us; answers it as it now is.
#[derive(Message)]
#[rtype(result = "Result<super::recovery::InfractionReport, DictError>")]
pub struct AnswerReport {
    pub id: String,
    pub answer: ReportAnswer,
}

/// The CID events of a key type of ours from `start` on (inclusive), oldest first, and
/// whether more follow.
#[derive(Message)]
#[rtype(result = "Result<(Vec<super::sync::CidEvent>, bool), DictError>")]
pub struct ListCidEvents {
    pub key_type: String,
    pub start: chrono::DateTime<chrono::Utc>,
}

impl Handler<ListCidEvents> for DictClient {
    type Result = ResponseFuture<Result<(Vec<super::sync::CidEvent>, bool), DictError>>;

    fn handle(&mut self, msg: ListCidEvents, _: &mut Context<Self>) -> Self::Result {
        let start = super::dict::stamp(msg.start);
        let path = format!(
            "/cids/events?Participant={}&KeyType={}&StartTime={}&Limit={}",
            self.settings.ispb,
            path_id(&msg.key_type),
            path_id(&start),
            super::sync::CID_EVENTS_LIST_MAX
        );
        let got = self.signed_get(path);
        Box::pin(async move { super::sync::read_cid_events(&got.await?).map_err(DictError::Unavailable) })
    }
}

/// An infraction report as the DICT has it now.
#[derive(Message)]
#[rtype(result = "Result<super::recovery::InfractionReport, DictError>")]
pub struct GetReport {
    pub id: String,
}

impl Handler<GetReport> for DictClient {
    type Result = ResponseFuture<Result<super::recovery::InfractionReport, DictError>>;

    fn handle(&mut self, msg: GetReport, _: &mut Context<Self>) -> Self::Result {
        let got = self.signed_get(format!("/infraction-reports/{}", path_id(&msg.id)));
        Box::pin(async move { super::recovery::read_report(&got.await?).map_err(DictError::Unavailable) })
    }
}

fn path_id(id: &str) -> percent_encoding::PercentEncode<'_> {
    percent_encoding::utf8_percent_encode(id, percent_encoding::NON_ALPHANUMERIC)
}

impl Handler<CreateRecovery> for DictClient {
    type Result = ResponseFuture<
        Result<(super::recovery::FundsRecovery, Option<super::recovery::TrackingGraph>), DictError>,
    >;

    fn handle(&mut self, msg: CreateRecovery, _: &mut Context<Self>) -> Self::Result {
        let body =
            super::recovery::create_request(&self.settings.ispb, &msg.recovery, &super::recovery::GRAPH_MAX);
        let sent = self.signed_post("/funds-recoveries/", body);
        Box::pin(async move { super::recovery::read_recovery(&sent.await?).map_err(DictError::Unavailable) })
    }
}

impl Handler<UpdateRecovery> for DictClient {
    type Result = ResponseFuture<Result<super::recovery::FundsRecovery, DictError>>;

    fn handle(&mut self, msg: UpdateRecovery, _: &mut Context<Self>) -> Self::Result {
        let body = super::recovery::update_request(&self.settings.ispb, &msg.recovery);
        let sent = self.signed_send("PUT", &format!("/funds-recoveries/{}", path_id(&msg.recovery.id)), body);
        Box::pin(async move {
            super::recovery::read_recovery(&sent.await?).map(|(r, _)| r).map_err(DictError::Unavailable)
        })
    }
}

impl Handler<GetRecovery> for DictClient {
    type Result = ResponseFuture<Result<super::recovery::FundsRecovery, DictError>>;

    fn handle(&mut self, msg: GetRecovery, _: &mut Context<Self>) -> Self::Result {
        let got = self.signed_get(format!("/funds-recoveries/{}", path_id(&msg.id)));
        Box::pin(async move {
            super::recovery::read_recovery(&got.await?).map(|(r, _)| r).map_err(DictError::Unavailable)
        })
    }
}

impl Handler<StepRecovery> for DictClient {
    type Result = ResponseFuture<Result<super::recovery::FundsRecovery, DictError>>;

    fn handle(&mut self, msg: StepRecovery, _: &mut Context<Self>) -> Self::Result {
        let (root, step) = match msg.step {
            RecoveryStep::Refund => ("RefundFundsRecoveryRequest", "refund"),
            RecoveryStep::Cancel => ("CancelFundsRecoveryRequest", "cancel"),
        };
        let body = super::recovery::step_request(root, &self.settings.ispb, &msg.id);
        let sent = self.signed_post(&format!("/funds-recoveries/{}/{step}", path_id(&msg.id)), body);
        Box::pin(async move {
            super::recovery::read_recovery(&sent.await?).map(|(r, _)| r).map_err(DictError::Unavailable)
        })
    }
}

impl Handler<RecoveryEvents> for DictClient {
    type Result =
        ResponseFuture<Result<(Vec<super::recovery::EventNotification>, Option<String>, bool), DictError>>;

    fn handle(&mut self, msg: RecoveryEvents, _: &mut Context<Self>) -> Self::Result {
        let mut path = format!("/event-notifications?Participant={}", self.settings.ispb);
        if let Some(c) = &msg.cursor {
            path.push_str(&format!("&Cursor={}", path_id(c)));
        }
        let got = self.signed_get(path);
        Box::pin(async move { super::recovery::read_events(&got.await?).map_err(DictError::Unavailable) })
    }
}

impl Handler<OpenReports> for DictClient {
    type Result = ResponseFuture<Result<Vec<super::recovery::InfractionReport>, DictError>>;

    fn handle(&mut self, _: OpenReports, _: &mut Context<Self>) -> Self::Result {
        let path = format!(
            "/infraction-reports/?Participant={}&IsCounterparty=true&Status=OPEN,ACKNOWLEDGED&IncludeDetails=true&Limit={}",
            self.settings.ispb,
            super::recovery::LIST_MAX
        );
        let got = self.signed_get(path);
        Box::pin(async move { super::recovery::read_reports(&got.await?).map_err(DictError::Unavailable) })
    }
}

impl Handler<AnswerReport> for DictClient {
    type Result = ResponseFuture<Result<super::recovery::InfractionReport, DictError>>;

    fn handle(&mut self, msg: AnswerReport, _: &mut Context<Self>) -> Self::Result {
        let ispb = &self.settings.ispb;
        let (body, step) = match &msg.answer {
            ReportAnswer::Acknowledge => (super::recovery::acknowledge_request(ispb, &msg.id), "acknowledge"),
            ReportAnswer::Close { agreed, fraud_type, details } => (
                super::recovery::close_request(ispb, &msg.id, *agreed, fraud_type, details.as_deref()),
                "close",
            ),
        };
        let sent = self.signed_post(&format!("/infraction-reports/{}/{step}", path_id(&msg.id)), body);
        Box::pin(async move { super::recovery::read_report(&sent.await?).map_err(DictError::Unavailable) })
    }
}

/// An entry for one of pixgw's accounts, to register.
pub fn account_entry(
    ispb: &Ispb,
    key: &str,
    key_type: &str,
    account: u64,
    document: &str,
    name: &str,
    opened: chrono::DateTime<chrono::Utc>,
) -> Entry {
    Entry {
        key: key.to_owned(),
        key_type: key_type.to_owned(),
        participant: ispb.clone(),
        branch: None,
        account_number: account.to_string(),
        account_type: "TRAN".into(),
        opening_date: opened,
        owner_type: super::dict::owner_type_of(document).into(),
        tax_id: document.to_owned(),
        name: name.chars().take(super::dict::OWNER_NAME_LEN_MAX).collect(),
        trade_name: None,
        creation_date: opened,
        key_ownership_date: opened,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cached_answer_is_read_until_its_max_age_and_not_after() {
        let opened = chrono::DateTime::from_timestamp(1_700_000_000, 0).unwrap();
        let ispb = Ispb::parse("1234ABCD").unwrap();
        let entry = account_entry(&ispb, "a@b.com", "EMAIL", 7, "52998224725", "Ana", opened);
        let cache = EntryCache::default();
        let t0 = Instant::now();
        assert!(cache.get("a@b.com", t0).is_none());
        let entry = Found { entry, signals: Default::default() };
        cache.put("a@b.com".into(), entry.clone(), t0 + Duration::from_secs(60), t0);
        assert_eq!(cache.get("a@b.com", t0 + Duration::from_secs(59)), Some(entry.clone()));
        assert!(cache.get("a@b.com", t0 + Duration::from_secs(60)).is_none(), "expired at max-age");
        // Clones share one cache: the client fills it, the handlers read it.
        let reader = cache.clone();
        cache.put("c@d.com".into(), entry, t0 + Duration::from_secs(5), t0);
        assert_eq!(reader.len(), 2);
    }

    #[test]
    fn a_full_cache_drops_what_expired_before_anything_fresh() {
        let opened = chrono::DateTime::from_timestamp(1_700_000_000, 0).unwrap();
        let ispb = Ispb::parse("1234ABCD").unwrap();
        let entry = Found {
            entry: account_entry(&ispb, "k", "EVP", 7, "52998224725", "Ana", opened),
            signals: Default::default(),
        };
        let cache = EntryCache::default();
        let t0 = Instant::now();
        for i in 0..CACHE_ENTRIES_MAX {
            // Every other entry has expired by t0 + 10 s.
            let age = if i % 2 == 0 { 5 } else { 60 };
            cache.put(format!("k{i}"), entry.clone(), t0 + Duration::from_secs(age), t0);
        }
        assert_eq!(cache.len(), CACHE_ENTRIES_MAX);
        let later = t0 + Duration::from_secs(10);
        cache.put("new".into(), entry, later + Duration::from_secs(60), later);
        assert_eq!(cache.len(), CACHE_ENTRIES_MAX / 2 + 1);
        assert!(cache.get("k1", later).is_some() && cache.get("new", later).is_some());
    }

    #[test]
    fn cache_control_caches_for_max_age_and_never_when_told_not_to() {
        assert_eq!(max_age("private, max-age=60"), Some(Duration::from_secs(60)));
        assert_eq!(max_age("max-age=0"), None);
        assert_eq!(max_age("no-store"), None);
        assert_eq!(max_age("max-age=60, no-cache"), None);
        assert_eq!(max_age("private"), None);
    }

    #[test]
    fn a_persons_typos_empty_its_bucket_here_and_it_refills_two_a_minute() {
        let mut b = Buckets::default();
        let t0 = Instant::now();
        let docs = KeyGroup::Documents;
        for _ in 0..5 {
            assert!(b.admit("52998224725", docs, t0).is_ok());
            b.charge("52998224725", docs, false, t0);
        }
        let wait = b.admit("52998224725", docs, t0).unwrap_err();
        assert_eq!(wait, Duration::from_secs(30), "one token at two a minute");
        assert!(
            b.admit("52998224725", KeyGroup::EmailPhone, t0).is_ok(),
            "e-mail and phone keys: another bucket"
        );
        assert!(b.admit("11222333000181", docs, t0).is_ok(), "a company's bucket is its own");
        assert!(b.admit("52998224725", docs, t0 + Duration::from_secs(30)).is_ok());
        // Hits cost one: a company looks up 1,000 keys before it waits.
        for _ in 0..1000 {
            assert!(b.admit("11222333000181", docs, t0).is_ok());
            b.charge("11222333000181", docs, true, t0);
        }
        assert!(b.admit("11222333000181", docs, t0).is_err());
        // A payment gives a company two tokens back, a person one.
        b.paid("11222333000181", docs, t0);
        assert!(b.admit("11222333000181", docs, t0).is_ok());
    }

    #[test]
    fn keys_fall_in_the_dicts_two_user_buckets() {
        assert_eq!(key_group("ana@example.com"), KeyGroup::EmailPhone);
        assert_eq!(key_group("+5561988880000"), KeyGroup::EmailPhone);
        for k in ["52998224725", "11222333000181", "123e4567-e89b-12d3-a456-426614174000"] {
            assert_eq!(key_group(k), KeyGroup::Documents, "{k}");
        }
    }

    #[test]
    fn the_participants_bucket_follows_its_category_and_a_miss_costs_it_three() {
        assert_eq!(participant_policy('A'), Some((50_000.0, 25_000.0)));
        assert_eq!(participant_policy('H'), Some((50.0, 2.0)));
        assert_eq!(participant_policy('I'), None);
        let t0 = Instant::now();
        let mut b = Buckets::new(Some('H'), t0);
        // 50 tokens: 16 misses (48) by many payers leave 2, and then one more empties it.
        for i in 0..17 {
            let payer = format!("{:011}", i);
            assert!(b.admit(&payer, KeyGroup::Documents, t0).is_ok(), "{i}");
            b.charge(&payer, KeyGroup::Documents, false, t0);
        }
        let wait = b.admit("99999999999", KeyGroup::Documents, t0).unwrap_err();
        assert_eq!(wait, Duration::from_secs(60), "two tokens to a token at two a minute");
        // A payment gives one back: one brings it to zero, a second to a token.
        b.paid("00000000000", KeyGroup::Documents, t0);
        assert!(b.admit("99999999999", KeyGroup::Documents, t0).is_err());
        b.paid("00000000001", KeyGroup::Documents, t0);
        assert!(b.admit("99999999999", KeyGroup::Documents, t0).is_ok());
    }

    #[test]
    fn a_429_of_the_dict_empties_the_payers_bucket_here() {
        let t0 = Instant::now();
        let mut b = Buckets::default();
        assert!(b.admit("52998224725", KeyGroup::EmailPhone, t0).is_ok());
        assert_eq!(b.exhausted("52998224725", KeyGroup::EmailPhone, t0), Duration::from_secs(30));
        assert!(b.admit("52998224725", KeyGroup::EmailPhone, t0).is_err());
        assert!(b.admit("52998224725", KeyGroup::Documents, t0).is_ok());
    }
}
