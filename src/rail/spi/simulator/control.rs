//! The simulator's control routes (plain HTTP, JSON, for loopback only): what a test or a
//! person does to the simulated rail from outside.
//!
//! | route | what |
//! |---|---|
//! | `POST /sim/pix` | the virtual payer pays `{to: key}` (looked up in the DICT), `{toAccount: {ispb, number, document, branch?, type?}}`, or both (the key named beside the account as written, not looked up) `amount` (a decimal string), optionally `txId`, `payerName`, `payerDocument`, `remittance`: answers `{endToEndId}` |
//! | `POST /sim/return` | the receiver of a payment made to a virtual participant returns `{endToEndId, amount, reason?}` (MD06 unless BE08 or FR01): answers `{returnId}` |
//! | `GET /sim/payments/{id}` | a payment or return: payer, receiver, amount, stage, reason |
//! | `POST /sim/refund-requests` | the payer's participant of a settled payment asks for it back through the DICT (MED): `{endToEndId, amount, reason?: FRAUD \| OPERATION_FLAW, details?}`, answers `{id}` |
//! | `GET /sim/refund-requests/{id}` | a refund request: its status, and once closed its analysis and `refundTransactionId` |
//! | `POST /sim/funds-recoveries` | the payer's institution (virtual) of a settled payment opens a funds recovery of it: `{endToEndId, situationType?}`, answers `{id, status}`; it asks for the refund once the recovery is analysed |
//! | `GET /sim/funds-recoveries/{id}` | a funds recovery (MED 2.0): its status, reporter, root payment, situation and details, how many payments it traced, and its infraction reports with their hop, amount, status and analysis |
//! | `PUT /sim/tax-records/{ni}`, `GET /sim/tax-records` | the tax authority's CPF register (`POST /token`, `GET /consulta-cpf-df/v2/cpf/{ni}`, simulator::tax): a record `{nome, codigo?, nomeSocial?}` put in; how many records it holds and answered |
//! | `GET /sim/messages/{msgId}` | every posting of a message id a participant made: `{postings, distinctBodies, resourceIds}` (a resend of the same bytes is one more posting, no more bodies) |
//! | `GET /sim/participants` | every participant's settlement account |
//! | `PUT /sim/participants/{ispb}/behaviour` | a virtual receiver's behaviour: `{"accept": true}`, `{"reject": "AC06"}` or `{"silent": true}` |
//! | `GET /sim/stats` | counters of messages received, sent and refused, of streams refused (over the limit), closed (`DELETE`), expired (unread too long) and open now, and reads refused during an outage; real receivers' answer times (`answers`: count, p50, p99, max in ms, and SPI timeouts) |
//! | `POST /sim/load` | the virtual payer pays `{to: key}` `count` times, `perSecond`, `amount` each (open loop) |
//! | `PUT /sim/icom` | an outage of ICOM: `{"sends": true}` makes sending answer 503, `{"reads": true}` reading, `{"dict": true}` the DICT's key lookups (503 with `Retry-After`); `{}` ends it |
//! | `PUT /sim/faults` | faults ICOM plays on the next posts, each a count: `{"answer408": n}` (stores nothing), `{"answer429HttpDate": n}` (stores nothing; `Retry-After` an HTTP date), `{"answer502AfterStoring": n}` (stores and carries out, then answers 502); and at a steady rate, one event in n, `{"every": {post408, post429, post500, postReset (stored, then the connection drops), read408, read429, read500, readDropped (delivered, answer lost), duplicate (a message queued twice), lateStatus with lateMs (a pacs.002 held back)}}`, counted in `/sim/stats` `faultsPlayed` |
//! | `POST /sim/inject` | delivers to real participant `to` a message it did not ask for (a fault of the rails): `{"pacs002": {endToEndId, status: ACSC \| ACCC \| RJCT, reason?}}`, `{"admi002": {reference, reason}}` (both signed by the SPI), or `{"unreadable": "text"}` (the text as it is, unsigned); answers `{msgId}`, or `{resourceId}` for text |

use std::time::Instant;

use actix_web::{web, HttpResponse};
use chrono::Utc;
use serde::Deserialize;
use serde_json::json;

use super::core::Behaviour;
use super::{Sim, VIRTUAL_PAYER};
use crate::domain::money::Money;
use crate::rail::spi::message::{
    end_to_end_id, msg_id, AccountType, Body, CreditTransfer, Instrument, Ispb, Message, Priority, Purpose,
    Return, ReturnReason, UserAccount,
};

pub fn routes(cfg: &mut web::ServiceConfig) {
    super::tax::routes(cfg);
    cfg.route("/sim/pix", web::post().to(pix))
        .route("/sim/return", web::post().to(ret))
        .route("/sim/payments/{id}", web::get().to(payment))
        .route("/sim/refund-requests", web::post().to(request_refund))
        .route("/sim/refund-requests/{id}", web::get().to(refund_request))
        .route("/sim/messages/{msg_id}", web::get().to(postings))
        .route("/sim/participants", web::get().to(participants))
        .route("/sim/participants/{ispb}/behaviour", web::put().to(behaviour))
        .route("/sim/stats", web::get().to(stats))
        .route("/sim/inject", web::post().to(inject))
        .route("/sim/icom", web::put().to(outage))
        .route("/sim/faults", web::put().to(faults))
        .route("/sim/load", web::post().to(load))
        .route("/sim/claims", web::post().to(super::claims::control_open))
        .route("/sim/claims/settings", web::put().to(super::claims::control_settings))
        .route("/sim/claims/{id}", web::get().to(super::claims::control_get))
        .route("/sim/claims/{id}/{step}", web::post().to(super::claims::control_step))
        .route("/sim/clock", web::put().to(super::claims::control_clock))
        .route("/sim/dict/entries/{key}", web::put().to(super::sync::control_put_entry))
        .route("/sim/dict/entries/{key}", web::get().to(super::sync::control_get_entry))
        .route("/sim/dict/entries/{key}", web::delete().to(super::sync::control_delete_entry))
        .route("/sim/dict/sync", web::get().to(super::sync::control_stats))
        .route("/sim/dict/seed", web::post().to(super::sync::control_seed))
        .route("/sim/fraud-markers", web::post().to(super::fraud::control_mark))
        .route("/sim/funds-recoveries/{id}", web::get().to(super::recovery::control_view))
        .route("/sim/funds-recoveries", web::post().to(super::recovery::control_create))
        .route("/healthz", web::get().to(|| async { HttpResponse::Ok().body("ok") }));
}

fn bad(why: impl Into<String>) -> HttpResponse {
    HttpResponse::BadRequest().json(json!({"error": why.into()}))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ToAccount {
    ispb: String,
    number: String,
    document: String,
    branch: Option<String>,
    #[serde(rename = "type")]
    kind: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PixRequest {
    to: Option<String>,
    to_account: Option<ToAccount>,
    amount: String,
    tx_id: Option<String>,
    payer_name: Option<String>,
    payer_document: Option<String>,
    remittance: Option<String>,
}

fn random(n: usize) -> Vec<u8> {
    let mut b = vec![0u8; n];
    let _ = getrandom::fill(&mut b);
    b
}

async fn pix(body: web::Json<PixRequest>, sim: web::Data<Sim>) -> HttpResponse {
    match pay(&sim, body.into_inner()) {
        Ok(e2e) => HttpResponse::Created().json(json!({"endToEndId": e2e})),
        Err((404, why)) => HttpResponse::NotFound().json(json!({"error": why})),
        Err((_, why)) => bad(why),
    }
}

/// The virtual payer pays: answers the payment's end-to-end id.
fn pay(sim: &Sim, r: PixRequest) -> Result<String, (u16, String)> {
    let bad = |why: &str| (400, why.to_owned());
    let amount = Money::parse(&r.amount)
        .ok()
        .filter(|m| !m.is_zero())
        .ok_or_else(|| bad("amount must be a positive decimal with at most 2 places"))?;
    let (creditor_document, creditor_account, proxy) = match (&r.to, &r.to_account) {
        (Some(key), None) => {
            let d = sim.directory.lock().unwrap_or_else(|p| p.into_inner());
            let e = d.lookup(key).ok_or((404, "no such key in the DICT".to_owned()))?;
            let kind = AccountType::parse(&e.account_type).unwrap_or(AccountType::Current);
            let account = UserAccount {
                ispb: e.participant.clone(),
                branch: e.branch.clone(),
                number: e.account_number.clone(),
                kind,
            };
            (e.tax_id.clone(), account, Some(key.clone()))
        }
        (None, Some(a)) => {
            let ispb = Ispb::parse(&a.ispb).ok_or_else(|| bad("toAccount.ispb is not an ISPB"))?;
            let kind = a.kind.as_deref().and_then(AccountType::parse).unwrap_or(AccountType::Payment);
            (
                a.document.clone(),
                UserAccount { ispb, branch: a.branch.clone(), number: a.number.clone(), kind },
                None,
            )
        }
        // A message naming a key and an account as written, the key not looked up: what a
        // faulty or forged payment carries, for a receiver's checks.
        (Some(key), Some(a)) => {
            let ispb = Ispb::parse(&a.ispb).ok_or_else(|| bad("toAccount.ispb is not an ISPB"))?;
            let kind = a.kind.as_deref().and_then(AccountType::parse).unwrap_or(AccountType::Payment);
            (
                a.document.clone(),
                UserAccount { ispb, branch: a.branch.clone(), number: a.number.clone(), kind },
                Some(key.clone()),
            )
        }
        (None, None) => return Err(bad("give to (a key), toAccount, or both")),
    };
    let instrument = match (&r.tx_id, &proxy) {
        (Some(t), _) if t.len() > 25 => Instrument::DynamicQr,
        (Some(_), _) => Instrument::StaticQr,
        (None, Some(_)) => Instrument::Key,
        (None, None) => Instrument::Manual,
    };
    let payer = Ispb::parse(VIRTUAL_PAYER).ok_or_else(|| bad("the virtual payer's ISPB"))?;
    let now = Utc::now();
    let e2e = end_to_end_id('E', &payer, now, &random(11));
    let tx = CreditTransfer {
        end_to_end_id: e2e.clone(),
        tx_id: r.tx_id,
        amount,
        accepted_at: now,
        instrument,
        initiator: None,
        debtor_name: r.payer_name.unwrap_or_else(|| "Pagador Simulado".into()),
        debtor_document: r.payer_document.unwrap_or_else(|| "11144477735".into()),
        debtor_account: UserAccount {
            ispb: payer.clone(),
            branch: Some("1".into()),
            number: "9999".into(),
            kind: AccountType::Current,
        },
        creditor_document,
        creditor_account,
        proxy,
        purpose: Purpose::Payment,
        remittance: r.remittance,
    };
    let m = Message::new(
        payer.clone(),
        Ispb::spi(),
        msg_id(&payer, &random(23)),
        now,
        Body::CreditTransfers { priority: Priority::Immediate, txs: vec![tx] },
    );
    let out = sim.engine.lock().unwrap_or_else(|p| p.into_inner()).receive(&payer, m, Instant::now(), now);
    sim.dispatch(out);
    Ok(e2e)
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct LoadRequest {
    to: String,
    count: u64,
    per_second: f64,
    amount: String,
}

/// The virtual payer pays `to` `count` times, `perSecond`, each one due at its own instant
/// (an open loop: a late one does not delay the next).
async fn load(body: web::Json<LoadRequest>, sim: web::Data<Sim>) -> HttpResponse {
    let r = body.into_inner();
    if r.count == 0 || !(r.per_second > 0.0 && r.per_second <= 10_000.0) {
        return bad("count must be positive and perSecond between 0 and 10000");
    }
    let sim = sim.into_inner();
    actix_web::rt::spawn(async move {
        let start = tokio::time::Instant::now();
        for i in 0..r.count {
            tokio::time::sleep_until(start + std::time::Duration::from_secs_f64(i as f64 / r.per_second))
                .await;
            let req = PixRequest {
                to: Some(r.to.clone()),
                to_account: None,
                amount: r.amount.clone(),
                tx_id: None,
                payer_name: None,
                payer_document: None,
                remittance: None,
            };
            if let Err((_, why)) = pay(&sim, req) {
                tracing::error!(why, "a payment of the load was not made");
            }
        }
    });
    HttpResponse::Accepted().json(json!({"count": r.count, "perSecond": r.per_second}))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RefundAsked {
    end_to_end_id: String,
    amount: String,
    reason: Option<String>,
    details: Option<String>,
}

/// The payer's participant of a settled payment asks, through the DICT, for it back (MED).
async fn request_refund(body: web::Json<RefundAsked>, sim: web::Data<Sim>) -> HttpResponse {
    use crate::rail::spi::dict::{Refund, REFUND_REASONS};
    let r = body.into_inner();
    let Some(amount) = Money::parse_two_places(&r.amount) else { return bad("amount") };
    let reason = r.reason.unwrap_or_else(|| "FRAUD".into());
    if !REFUND_REASONS.contains(&reason.as_str()) {
        return bad("reason must be FRAUD or OPERATION_FLAW");
    }
    let original = sim.engine.lock().unwrap_or_else(|p| p.into_inner()).payment(&r.end_to_end_id).cloned();
    let Some(original) = original.filter(|p| !p.is_return && p.stage == super::core::Stage::Settled) else {
        return HttpResponse::NotFound().json(json!({"error": "no settled payment with this end-to-end id"}));
    };
    if i128::from(amount.cents()) > original.cents {
        return bad("amount is more than the payment");
    }
    let now = Utc::now();
    let refund = Refund {
        id: uuid::Uuid::new_v4().to_string(),
        transaction_id: r.end_to_end_id,
        reason,
        amount,
        details: r.details,
        status: "OPEN".into(),
        contested: original.receiver,
        requesting: original.payer,
        created: now,
        modified: now,
        analysis_result: None,
        analysis_details: None,
        refund_transaction_id: None,
        funds_recovery_id: None,
    };
    let id = refund.id.clone();
    sim.refunds.lock().unwrap_or_else(|p| p.into_inner()).push(refund);
    HttpResponse::Created().json(json!({"id": id}))
}

async fn refund_request(id: web::Path<String>, sim: web::Data<Sim>) -> HttpResponse {
    let refunds = sim.refunds.lock().unwrap_or_else(|p| p.into_inner());
    match refunds.iter().find(|r| r.id == *id) {
        Some(r) => HttpResponse::Ok().json(json!({
            "id": r.id, "endToEndId": r.transaction_id, "reason": r.reason, "amount": r.amount.to_cents_string(),
            "status": r.status, "contested": r.contested, "requesting": r.requesting,
            "analysisResult": r.analysis_result, "analysisDetails": r.analysis_details,
            "refundTransactionId": r.refund_transaction_id,
            // How many lists of refund requests the DICT has answered, of any participant.
            "listsServed": sim.refund_lists.load(std::sync::atomic::Ordering::Relaxed),
        })),
        None => HttpResponse::NotFound().json(json!({"error": "no such refund request"})),
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ReturnRequest {
    end_to_end_id: String,
    amount: String,
    reason: Option<String>,
}

async fn ret(body: web::Json<ReturnRequest>, sim: web::Data<Sim>) -> HttpResponse {
    let r = body.into_inner();
    let Some(amount) = Money::parse(&r.amount).ok().filter(|m| !m.is_zero()) else { return bad("amount") };
    let reason = match r.reason.as_deref().map(ReturnReason::parse) {
        None => ReturnReason::Requested,
        Some(Some(reason)) => reason,
        Some(None) => return bad("reason must be MD06, BE08, FR01 or SL02"),
    };
    let original = sim.engine.lock().unwrap_or_else(|p| p.into_inner()).payment(&r.end_to_end_id).cloned();
    let Some(original) = original else {
        return HttpResponse::NotFound().json(json!({"error": "no such payment"}));
    };
    let (Some(receiver), Some(payer)) = (Ispb::parse(&original.receiver), Ispb::parse(&original.payer))
    else {
        return bad("the payment's participants");
    };
    let now = Utc::now();
    let rtr = end_to_end_id('D', &receiver, now, &random(11));
    let m = Message::new(
        receiver.clone(),
        Ispb::spi(),
        msg_id(&receiver, &random(23)),
        now,
        Body::Returns(vec![Return {
            return_id: rtr.clone(),
            original_end_to_end_id: r.end_to_end_id,
            amount,
            priority_immediate: true,
            reason,
            additional_info: None,
            remittance: None,
            original_debtor_agent: payer,
            original_creditor_agent: receiver.clone(),
        }]),
    );
    let out = sim.engine.lock().unwrap_or_else(|p| p.into_inner()).receive(&receiver, m, Instant::now(), now);
    sim.dispatch(out);
    HttpResponse::Created().json(json!({"returnId": rtr}))
}

async fn payment(id: web::Path<String>, sim: web::Data<Sim>) -> HttpResponse {
    match sim.engine.lock().unwrap_or_else(|p| p.into_inner()).payment(&id) {
        Some(p) => HttpResponse::Ok().json(p),
        None => HttpResponse::NotFound().json(json!({"error": "no such payment"})),
    }
}

async fn postings(msg_id: web::Path<String>, sim: web::Data<Sim>) -> HttpResponse {
    let postings = sim.postings.lock().unwrap_or_else(|p| p.into_inner());
    match postings.get(msg_id.as_str()) {
        Some(p) => HttpResponse::Ok().json(json!({
            "postings": p.resource_ids.len(),
            "distinctBodies": p.bodies.len(),
            "resourceIds": p.resource_ids,
        })),
        None => HttpResponse::NotFound().json(json!({"error": "no message was posted with that id"})),
    }
}

async fn participants(sim: web::Data<Sim>) -> HttpResponse {
    // What waits in each real participant's streams: queued, and delivered unconfirmed.
    let queues: std::collections::HashMap<String, (usize, usize)> = sim
        .queues
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
        .map(|(i, q)| (i.to_string(), (q.pending.len(), q.streams.values().map(|(d, _)| d.len()).sum())))
        .collect();
    let engine = sim.engine.lock().unwrap_or_else(|p| p.into_inner());
    let mut list: Vec<_> = engine
        .participants()
        .map(|(ispb, p)| {
            json!({
                "ispb": ispb.as_str(),
                "name": p.name,
                "virtual": p.virtual_behaviour.is_some(),
                // Centavos as a decimal string, exact.
                "balance": Money::from_cents(u64::try_from(p.balance).unwrap_or(0)).map(|m| m.to_cents_string()),
                "balanceCents": p.balance.to_string(),
                "paid": p.paid,
                "received": p.received,
                "queued": queues.get(ispb.as_str()).map(|q| q.0),
                "unconfirmed": queues.get(ispb.as_str()).map(|q| q.1),
            })
        })
        .collect();
    list.sort_by(|a, b| a["ispb"].as_str().cmp(&b["ispb"].as_str()));
    HttpResponse::Ok().json(json!({"participants": list, "totalCents": engine.total().to_string()}))
}

#[derive(Deserialize)]
struct BehaviourRequest {
    accept: Option<bool>,
    reject: Option<String>,
    silent: Option<bool>,
}

async fn behaviour(
    ispb: web::Path<String>,
    body: web::Json<BehaviourRequest>,
    sim: web::Data<Sim>,
) -> HttpResponse {
    let Some(ispb) = Ispb::parse(&ispb) else { return bad("not an ISPB") };
    let b = match (body.accept, body.reject.clone(), body.silent) {
        (Some(true), None, None) => Behaviour::AcceptAll,
        (None, Some(code), None) => Behaviour::Reject(code),
        (None, None, Some(true)) => Behaviour::Silent,
        _ => return bad("give one of accept, reject or silent"),
    };
    if sim.engine.lock().unwrap_or_else(|p| p.into_inner()).set_behaviour(&ispb, b) {
        HttpResponse::NoContent().finish()
    } else {
        HttpResponse::NotFound().json(json!({"error": "no such virtual participant"}))
    }
}

async fn outage(body: web::Json<super::Outage>, sim: web::Data<Sim>) -> HttpResponse {
    *sim.outage.lock().unwrap_or_else(|p| p.into_inner()) = body.into_inner();
    HttpResponse::NoContent().finish()
}

async fn faults(body: web::Json<super::Faults>, sim: web::Data<Sim>) -> HttpResponse {
    *sim.faults.lock().unwrap_or_else(|p| p.into_inner()) = body.into_inner();
    HttpResponse::NoContent().finish()
}

async fn stats(sim: web::Data<Sim>) -> HttpResponse {
    let answers = sim.engine.lock().unwrap_or_else(|p| p.into_inner()).answers();
    let mut stats =
        serde_json::to_value(sim.stats.lock().unwrap_or_else(|p| p.into_inner()).clone()).unwrap_or_default();
    stats["answers"] = serde_json::to_value(answers).unwrap_or_default();
    let open: usize =
        sim.queues.lock().unwrap_or_else(|p| p.into_inner()).values().map(|q| q.streams.len()).sum();
    stats["streamsOpen"] = json!(open);
    HttpResponse::Ok().json(stats)
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct InjectedStatus {
    end_to_end_id: String,
    status: String,
    reason: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct InjectedReject {
    reference: String,
    reason: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct InjectRequest {
    /// The real participant it goes to; the first named when absent.
    to: Option<String>,
    pacs002: Option<InjectedStatus>,
    admi002: Option<InjectedReject>,
    unreadable: Option<String>,
}

/// Delivers a message the participant did not ask for: a status or an admi.002 the SPI
/// signs, or text as it is.
async fn inject(body: web::Json<InjectRequest>, sim: web::Data<Sim>) -> HttpResponse {
    use crate::rail::spi::message::{Reject, StatusReport, TxStatus};
    let r = body.into_inner();
    let to = match r.to.as_deref().map(Ispb::parse) {
        Some(Some(i)) => i,
        Some(None) => return bad("to is not an ISPB"),
        None => match sim.signing_certs.keys().min() {
            Some(i) => i.clone(),
            None => return bad("no real participant"),
        },
    };
    let now = Utc::now();
    let message_body = match (r.pacs002, r.admi002, r.unreadable) {
        (Some(p), None, None) => {
            let Some(status) = TxStatus::parse(&p.status) else {
                return bad("status must be ACSC, ACCC or RJCT");
            };
            Body::Statuses(vec![StatusReport {
                original_instruction_id: p.end_to_end_id.clone(),
                original_end_to_end_id: p.end_to_end_id,
                status,
                reason: p.reason,
                additional_info: None,
                settled_at: (status != TxStatus::Rejected).then_some(now),
            }])
        }
        (None, Some(a), None) => Body::Reject(Reject {
            reference: a.reference,
            reason: a.reason,
            rejected_at: Some(now),
            location: None,
            description: Some("injected by the simulator's control routes".into()),
        }),
        (None, None, Some(text)) => {
            let resource_id = super::resource_id();
            let mut queues = sim.queues.lock().unwrap_or_else(|p| p.into_inner());
            let q = queues.entry(to).or_default();
            q.pending.push_back(super::Delivery {
                resource_id: resource_id.clone(),
                body: actix_web::web::Bytes::from(text),
            });
            q.notify.notify_waiters();
            return HttpResponse::Created().json(json!({"resourceId": resource_id}));
        }
        _ => return bad("give exactly one of pacs002, admi002 and unreadable"),
    };
    let id = msg_id(&Ispb::spi(), &random(23));
    let message = Message::new(Ispb::spi(), to.clone(), id.clone(), now, message_body);
    sim.dispatch(vec![super::core::Outgoing { to, message }]);
    HttpResponse::Created().json(json!({"msgId": id}))
}
