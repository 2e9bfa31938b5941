//! `pixgw homologation dict-functional`: a replay of the DICT functional test of the central
//! bank's homologation (IN BCB 508/2024), compressed from its hour to minutes, against a
//! running pixgw on the SPI rail (its admin API) and a DICT that plays the central bank's
//! side (`pixgw spi-sim`'s control routes). Each step runs what the participant must show
//! and records its evidence (ids, counts, times) in a report a participant could hand in:
//!
//! 1. `preload`: keys registered beforehand (1,000 by default), five per account;
//! 2. `key-types`: every key type registered (CPF, CNPJ, PHONE, EMAIL, EVP) and looked up
//!    through the participant's own DICT client, each answering the account it names;
//! 3. `sync`: a sync verification of every key type answered OK (read from the node's
//!    `pixgw_dict_sync_checks_total`);
//! 4. `claim-answered`: a claim another institution opens against one of our keys is
//!    acknowledged within a minute;
//! 5. `claim-as-donor`: that claim confirmed by the operator and completed by the claimer:
//!    the key leaves the account;
//! 6. `claim-as-claimer`: a key held at another institution claimed for an account,
//!    confirmed by the donor and completed by the gateway: the key arrives;
//! 7. `infraction`: a funds recovery another institution opens against a payment we
//!    received: the case blocks it, the operator agrees, the money goes back, the recovery
//!    completes;
//! 8. `refund-fraud` and `refund-operational`: MED refund requests for both reasons,
//!    approved, each returned and closed `TOTALLY_ACCEPTED`.
//!
//! A step that does not reach its end within [`STEP_WAIT_MAX`] fails with what it saw; the
//! run goes on to the next (each step sets up what it needs).

use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::{json, Value};

use crate::domain::document::{cnpj_of, cpf_of};
use crate::rail::spi::directory::{DictClient, EntryCache, Lookup};
use crate::rail::spi::settings::SpiSettings;

/// How long a step waits for what it expects.
pub const STEP_WAIT_MAX: Duration = Duration::from_secs(120);
/// The most keys a run registers beforehand.
pub const PRELOAD_KEYS_MAX: usize = 100_000;
/// Keys per account in the preload: what the DICT allows a natural person's account.
pub const KEYS_PER_ACCOUNT: usize = 5;
/// The longest a claim against us may wait for its acknowledgement.
pub const CLAIM_ANSWER_MAX: Duration = Duration::from_secs(60);
/// How often a step looks again.
const POLL_EVERY: Duration = Duration::from_millis(100);

/// What a run is pointed at.
pub struct Functional {
    /// The node's base URL and admin token.
    pub server: String,
    pub admin_token: String,
    /// The simulator's control routes (the central bank's and the other institutions' side).
    pub sim_control: String,
    /// The node's `[spi]` settings (its DICT client, for the lookups).
    pub settings: SpiSettings,
    pub preload_keys: usize,
}

/// One step's outcome and evidence.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Step {
    pub name: &'static str,
    pub passed: bool,
    pub seconds: f64,
    pub evidence: Value,
}

/// A run's report.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FunctionalReport {
    pub participant: String,
    pub started_at: String,
    pub elapsed_seconds: f64,
    pub steps: Vec<Step>,
    pub passed: bool,
}

struct Run {
    http: awc::Client,
    f: Functional,
    dict: actix::Addr<DictClient>,
    ispb: String,
    nth: u64,
}

type Outcome = Result<Value, String>;

impl Run {
    async fn call(
        &self,
        method: &str,
        url: String,
        token: Option<&str>,
        body: Option<Value>,
    ) -> Result<(u16, Value), String> {
        let method: actix_web::http::Method = method.parse().map_err(|_| format!("method {method}"))?;
        let mut req = self.http.request(method, &url).timeout(Duration::from_secs(30));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        let sent = match body {
            Some(b) => req.send_json(&b).await,
            None => req.send().await,
        };
        let mut res = sent.map_err(|e| format!("{url}: {e}"))?;
        let status = res.status().as_u16();
        let bytes = res.body().limit(8 << 20).await.map_err(|e| format!("{url}: {e}"))?;
        Ok((status, serde_json::from_slice(&bytes).unwrap_or(Value::Null)))
    }

    async fn admin(&self, method: &str, path: &str, body: Option<Value>) -> Result<(u16, Value), String> {
        let token = self.f.admin_token.clone();
        self.call(method, format!("{}{path}", self.f.server), Some(&token), body).await
    }

    async fn sim(&self, method: &str, path: &str, body: Option<Value>) -> Result<(u16, Value), String> {
        self.call(method, format!("{}{path}", self.f.sim_control), None, body).await
    }

    /// Asks until `ready` answers something, up to [`STEP_WAIT_MAX`].
    async fn until<F, Fut>(&self, what: &str, mut ready: F) -> Outcome
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<Option<Value>, String>>,
    {
        let deadline = Instant::now() + STEP_WAIT_MAX;
        loop {
            if let Some(v) = ready().await? {
                return Ok(v);
            }
            if Instant::now() > deadline {
                return Err(format!("{what}: not within {} s", STEP_WAIT_MAX.as_secs()));
            }
            actix_web::rt::time::sleep(POLL_EVERY).await;
        }
    }

    /// A live account for `document`: its id.
    async fn account(&mut self, name: &str, document: &str) -> Result<u64, String> {
        let (s, b) = self
            .admin(
                "POST",
                "/admin/accounts",
                Some(json!({"name": name, "document": document, "sandbox": false})),
            )
            .await?;
        b["accountId"]
            .as_u64()
            .filter(|_| s == 201)
            .ok_or_else(|| format!("an account for {document}: {s} {b}"))
    }

    /// Registers a key (`key` none: an EVP); answers the key as registered.
    async fn key(&self, account: u64, key_type: &str, key: Option<&str>) -> Result<String, String> {
        let mut body = json!({"keyType": key_type, "receiving": false});
        if let Some(k) = key {
            body["key"] = json!(k);
        }
        let (s, b) = self.admin("POST", &format!("/admin/accounts/{account}/keys"), Some(body)).await?;
        if s != 201 || b["directory"] != "DICT" {
            return Err(format!("a {key_type} key of account {account}: {s} {b}"));
        }
        b["key"].as_str().map(str::to_owned).ok_or_else(|| format!("no key in {b}"))
    }

    fn fresh(&mut self) -> u64 {
        self.nth += 1;
        self.nth
    }

    async fn keys_of(&self, account: u64) -> Result<Vec<String>, String> {
        let (s, b) = self.admin("GET", &format!("/admin/accounts/{account}/keys"), None).await?;
        if s != 200 {
            return Err(format!("keys of {account}: {s} {b}"));
        }
        let list = b["keys"].as_array().or_else(|| b["data"].as_array()).or_else(|| b.as_array()).cloned();
        Ok(list.unwrap_or_default().iter().filter_map(|k| k["key"].as_str().map(str::to_owned)).collect())
    }

    async fn preload(&mut self) -> Outcome {
        let n = self.f.preload_keys;
        let mut registered = 0;
        let mut accounts = 0;
        while registered < n {
            let nth = self.fresh();
            let account = self.account(&format!("Homologacao {nth}"), &cpf_of(700_000_000 + nth)).await?;
            accounts += 1;
            for _ in 0..KEYS_PER_ACCOUNT.min(n - registered) {
                self.key(account, "EVP", None).await?;
                registered += 1;
            }
        }
        Ok(json!({"keysRegistered": registered, "accounts": accounts}))
    }

    async fn key_types(&mut self) -> Outcome {
        let nth = self.fresh();
        let person_doc = cpf_of(710_000_000 + nth);
        let person = self.account("Pessoa Homologacao", &person_doc).await?;
        let company_doc = cnpj_of(710_000_000_000 + nth);
        let company = self.account("Empresa Homologacao", &company_doc).await?;
        let mut keys = vec![
            ("CPF", person, self.key(person, "CPF", Some(&person_doc)).await?),
            ("CNPJ", company, self.key(company, "CNPJ", Some(&company_doc)).await?),
            (
                "EMAIL",
                person,
                self.key(person, "EMAIL", Some(&format!("homologacao{nth}@pixgw.example"))).await?,
            ),
            (
                "PHONE",
                person,
                self.key(person, "PHONE", Some(&format!("+55619{:08}", nth % 100_000_000))).await?,
            ),
        ];
        keys.push(("EVP", person, self.key(person, "EVP", None).await?));
        let mut looked = Vec::new();
        for (i, (key_type, account, key)) in keys.iter().enumerate() {
            let mut random = [0u8; 16];
            let _ = getrandom::fill(&mut random);
            let e2e = crate::domain::transaction::end_to_end_id('E', &self.ispb, chrono::Utc::now(), &random);
            let payer = cpf_of(720_000_000 + nth * 10 + i as u64);
            let found = self
                .dict
                .send(Lookup { key: key.clone(), payer_document: payer, end_to_end_id: e2e })
                .await
                .map_err(|e| e.to_string())?
                .map_err(|e| format!("looking {key} up: {e}"))?;
            let names = found.entry.participant.as_str() == self.ispb
                && found.entry.account_number == account.to_string();
            if !names {
                return Err(format!(
                    "{key} names {} {}",
                    found.entry.participant, found.entry.account_number
                ));
            }
            looked.push(json!({"keyType": key_type, "key": key, "account": account}));
        }
        Ok(json!({"registeredAndLookedUp": looked}))
    }

    /// The node's count of OK sync checks per key type.
    async fn sync_oks(&self) -> Result<std::collections::HashMap<String, u64>, String> {
        let url = format!("{}/metrics", self.f.server);
        let mut res = self.http.get(&url).send().await.map_err(|e| format!("{url}: {e}"))?;
        let body = res.body().limit(16 << 20).await.map_err(|e| format!("{url}: {e}"))?;
        let text = String::from_utf8_lossy(&body);
        let mut out = std::collections::HashMap::new();
        for line in text.lines().filter(|l| l.starts_with("pixgw_dict_sync_checks_total{")) {
            if !line.contains("result=\"ok\"") {
                continue;
            }
            let Some(kt) = line.split("key_type=\"").nth(1).and_then(|r| r.split('"').next()) else {
                continue;
            };
            let n = line.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
            out.insert(kt.to_owned(), n as u64);
        }
        Ok(out)
    }

    async fn sync(&mut self) -> Outcome {
        let before = self.sync_oks().await?;
        let types = crate::rail::spi::dict::KEY_TYPES;
        let after = self
            .until("an OK sync verification of every key type", || async {
                let now = self.sync_oks().await?;
                let all = types
                    .iter()
                    .all(|t| now.get(*t).copied().unwrap_or(0) > before.get(*t).copied().unwrap_or(0));
                Ok(all.then(|| json!(now)))
            })
            .await?;
        Ok(json!({"okVerifications": after}))
    }

    /// An account with an e-mail key, for a claim against it: (account, key).
    async fn donor(&mut self) -> Result<(u64, String), String> {
        let nth = self.fresh();
        let account = self.account("Doadora Homologacao", &cpf_of(730_000_000 + nth)).await?;
        let key = self.key(account, "EMAIL", Some(&format!("doadora{nth}@pixgw.example"))).await?;
        Ok((account, key))
    }

    async fn claim_answered(&mut self) -> Result<(Value, u64, String, String), String> {
        let (account, key) = self.donor().await?;
        let t = Instant::now();
        let (s, c) =
            self.sim("POST", "/sim/claims", Some(json!({"key": key, "type": "PORTABILITY"}))).await?;
        let id = c["id"]
            .as_str()
            .filter(|_| s == 201)
            .ok_or_else(|| format!("a claim of {key}: {s} {c}"))?
            .to_owned();
        let seen = self
            .until("the claim acknowledged", || async {
                let (_, c) = self.sim("GET", &format!("/sim/claims/{id}"), None).await?;
                Ok((c["status"] == "WAITING_RESOLUTION").then_some(c))
            })
            .await?;
        let took = t.elapsed();
        if took > CLAIM_ANSWER_MAX {
            return Err(format!("acknowledged after {} s", took.as_secs()));
        }
        Ok((
            json!({"claim": id, "key": key, "acknowledgedInSeconds": took.as_secs_f64(), "status": seen["status"]}),
            account,
            key,
            id,
        ))
    }

    async fn claim_as_donor(&mut self, account: u64, key: &str, id: &str) -> Outcome {
        // The node's copy moves with its own poller's answer: confirm once it has the
        // acknowledgement the DICT shows (its rules are checked against that copy first).
        self.until("the node's copy acknowledged", || async {
            let (_, list) = self.admin("GET", &format!("/admin/accounts/{account}/claims"), None).await?;
            let copy = list["data"].as_array().and_then(|l| l.iter().find(|c| c["id"] == id).cloned());
            Ok(copy.filter(|c| c["status"] == "WAITING_RESOLUTION"))
        })
        .await?;
        let (s, b) = self
            .admin(
                "POST",
                &format!("/admin/accounts/{account}/claims/{id}/confirm"),
                Some(json!({"reason": "USER_REQUESTED"})),
            )
            .await?;
        if s != 200 {
            return Err(format!("confirming {id}: {s} {b}"));
        }
        let done = self
            .until("the claim completed", || async {
                let (_, c) = self.sim("GET", &format!("/sim/claims/{id}"), None).await?;
                Ok((c["status"] == "COMPLETED").then_some(c))
            })
            .await?;
        if self.keys_of(account).await?.iter().any(|k| k == key) {
            return Err(format!("{key} is still account {account}'s"));
        }
        Ok(json!({"claim": id, "key": key, "status": done["status"], "keyLeftAccount": account}))
    }

    async fn claim_as_claimer(&mut self) -> Outcome {
        let nth = self.fresh();
        let document = cpf_of(740_000_000 + nth);
        let account = self.account("Reivindicante Homologacao", &document).await?;
        let key = format!("reivindicada{nth}@pixgw.example");
        let entry = json!({"keyType": "EMAIL", "participant": crate::rail::spi::simulator::VIRTUAL_RECEIVER, "account": "123456", "taxId": document, "name": "Reivindicante Homologacao"});
        let (s, b) = self.sim("PUT", &format!("/sim/dict/entries/{key}"), Some(entry)).await?;
        if !(200..300).contains(&s) {
            return Err(format!("a key at the other institution: {s} {b}"));
        }
        let (s, c) = self
            .admin(
                "POST",
                &format!("/admin/accounts/{account}/claims"),
                Some(json!({"key": key, "type": "PORTABILITY"})),
            )
            .await?;
        let id = c["id"]
            .as_str()
            .filter(|_| s == 201)
            .ok_or_else(|| format!("claiming {key}: {s} {c}"))?
            .to_owned();
        self.until("the key arrived", || async {
            let arrived = self.keys_of(account).await?.iter().any(|k| k == &key);
            Ok(arrived.then_some(Value::Null))
        })
        .await?;
        let (_, c) = self.sim("GET", &format!("/sim/claims/{id}"), None).await?;
        if c["status"] != "COMPLETED" {
            return Err(format!("claim {id} is {}", c["status"]));
        }
        Ok(json!({"claim": id, "key": key, "status": "COMPLETED", "keyArrivedAt": account}))
    }

    /// A live account paid `amount` by the simulator's payer: (account, end-to-end id).
    async fn paid(&mut self, name: &str, amount: &str) -> Result<(u64, String), String> {
        let nth = self.fresh();
        let document = cpf_of(750_000_000 + nth);
        let account = self.account(name, &document).await?;
        let body = json!({"toAccount": {"ispb": self.ispb, "number": account.to_string(), "document": document}, "amount": amount});
        let (s, b) = self.sim("POST", "/sim/pix", Some(body)).await?;
        let e2e = b["endToEndId"]
            .as_str()
            .filter(|_| s == 201)
            .ok_or_else(|| format!("paying {account}: {s} {b}"))?
            .to_owned();
        self.until("the payment settled", || async {
            let (_, p) = self.sim("GET", &format!("/sim/payments/{e2e}"), None).await?;
            Ok((p["stage"] == "SETTLED").then_some(Value::Null))
        })
        .await?;
        Ok((account, e2e))
    }

    /// Waits for the account's MED case that `pick` picks, then analyses it approved.
    async fn approve_case(&self, account: u64, what: &str, pick: impl Fn(&Value) -> bool) -> Outcome {
        let case = self
            .until(what, || async {
                let (_, list) = self.admin("GET", &format!("/admin/accounts/{account}/med"), None).await?;
                Ok(list["data"].as_array().and_then(|l| l.iter().find(|m| pick(m)).cloned()))
            })
            .await?;
        let path = format!("/admin/accounts/{account}/med/{}/analysis", case["id"]);
        let (s, b) =
            self.admin("POST", &path, Some(json!({"result": "APPROVED", "details": "homologation"}))).await?;
        if s != 200 {
            return Err(format!("analysing case {}: {s} {b}", case["id"]));
        }
        Ok(case)
    }

    async fn infraction(&mut self) -> Outcome {
        let (account, e2e) = self.paid("Recebedora Infracao", "250.00").await?;
        let (s, r) = self.sim("POST", "/sim/funds-recoveries", Some(json!({"endToEndId": e2e}))).await?;
        let id = r["id"]
            .as_str()
            .filter(|_| s == 201)
            .ok_or_else(|| format!("a recovery of {e2e}: {s} {r}"))?
            .to_owned();
        let case = self
            .approve_case(account, "the infraction's case", |m| m["fundsRecoveryId"] == id.as_str())
            .await?;
        let done = self
            .until("the recovery completed", || async {
                let (_, v) = self.sim("GET", &format!("/sim/funds-recoveries/{id}"), None).await?;
                Ok((v["status"] == "COMPLETED").then_some(v))
            })
            .await?;
        Ok(
            json!({"fundsRecovery": id, "payment": e2e, "case": case["id"], "blocked": case["blockedAmount"], "reports": done["reports"], "status": done["status"]}),
        )
    }

    async fn refund(&mut self, reason: &'static str) -> Outcome {
        let (account, e2e) = self.paid("Recebedora Devolucao", "40.00").await?;
        let body = json!({"endToEndId": e2e, "amount": "40.00", "reason": reason, "details": "homologacao"});
        let (s, r) = self.sim("POST", "/sim/refund-requests", Some(body)).await?;
        let id = r["id"]
            .as_str()
            .filter(|_| s == 201)
            .ok_or_else(|| format!("a refund request of {e2e}: {s} {r}"))?
            .to_owned();
        self.approve_case(account, "the refund request's case", |m| m["dictRefundId"] == id.as_str()).await?;
        let closed = self
            .until("the refund request closed", || async {
                let (_, v) = self.sim("GET", &format!("/sim/refund-requests/{id}"), None).await?;
                Ok((v["status"] == "CLOSED").then_some(v))
            })
            .await?;
        if closed["analysisResult"] != "TOTALLY_ACCEPTED" {
            return Err(format!("closed {}", closed["analysisResult"]));
        }
        Ok(
            json!({"refundRequest": id, "reason": reason, "payment": e2e, "analysisResult": closed["analysisResult"], "refundTransactionId": closed["refundTransactionId"]}),
        )
    }
}

fn step(name: &'static str, started: Instant, outcome: Outcome) -> Step {
    let (passed, evidence) = match outcome {
        Ok(v) => (true, v),
        Err(e) => (false, json!({"error": e})),
    };
    Step { name, passed, seconds: started.elapsed().as_secs_f64(), evidence }
}

/// Runs every step and reports.
pub async fn dict_functional(f: Functional) -> FunctionalReport {
    use actix::Actor;
    let ispb = f.settings.ispb.to_string();
    let dict = DictClient::new(f.settings.clone(), EntryCache::default()).start();
    let started_at = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let run_started = Instant::now();
    // Documents and keys of a run are its own: another run against the same node and DICT
    // starts elsewhere.
    let mut random = [0u8; 4];
    let _ = getrandom::fill(&mut random);
    let nth = u64::from(u32::from_le_bytes(random) % 90_000) * 1_000;
    let mut run = Run { http: awc::Client::default(), f, dict, ispb: ispb.clone(), nth };
    let mut steps = Vec::new();
    let t = Instant::now();
    let r = run.preload().await;
    steps.push(step("preload", t, r));
    let t = Instant::now();
    let r = run.key_types().await;
    steps.push(step("key-types", t, r));
    let t = Instant::now();
    let r = run.sync().await;
    steps.push(step("sync", t, r));
    let t = Instant::now();
    match run.claim_answered().await {
        Ok((evidence, account, key, id)) => {
            steps.push(step("claim-answered", t, Ok(evidence)));
            let t = Instant::now();
            let r = run.claim_as_donor(account, &key, &id).await;
            steps.push(step("claim-as-donor", t, r));
        }
        Err(e) => {
            steps.push(step("claim-answered", t, Err(e.clone())));
            steps.push(step("claim-as-donor", Instant::now(), Err(format!("no claim to answer: {e}"))));
        }
    }
    let t = Instant::now();
    let r = run.claim_as_claimer().await;
    steps.push(step("claim-as-claimer", t, r));
    let t = Instant::now();
    let r = run.infraction().await;
    steps.push(step("infraction", t, r));
    let t = Instant::now();
    let r = run.refund("FRAUD").await;
    steps.push(step("refund-fraud", t, r));
    let t = Instant::now();
    let r = run.refund("OPERATION_FLAW").await;
    steps.push(step("refund-operational", t, r));
    let passed = steps.iter().all(|s| s.passed);
    FunctionalReport {
        participant: ispb,
        started_at,
        elapsed_seconds: run_started.elapsed().as_secs_f64(),
        steps,
        passed,
    }
}
