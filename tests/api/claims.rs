//! DICT key claims, end to end: `pixgw spi-sim` plays the DICT and the other institution,
//! `pixgw serve --rail spi` its accounts' side. A key claimed from another bank comes to
//! the account; a key claimed away leaves it; the gateway's own steps (acknowledging at
//! once, the default outcome at the end of the resolution period, completing) are taken on
//! the server clock; a lost answer and a kill -9 move nothing twice.

use serde_json::{json, Value};

use crate::helpers::*;
use crate::receiver::Receiver;
use crate::spi::{eventually, live_account, Sim};

/// The poller's period in these tests (ms).
const POLL_MS: &str = "100";

fn options(sim: &Sim) -> Options {
    Options {
        env: vec![
            ("PIXGW_CONFIG".into(), sim.config.display().to_string()),
            ("PIXGW_SPI_CLAIMS_POLL_MS".into(), POLL_MS.into()),
            ("PIXGW_WEBHOOK_ALLOW_HTTP".into(), "1".into()),
            ("PIXGW_WEBHOOK_ALLOW_PRIVATE".into(), "1".into()),
        ],
        ..Options::default()
    }
}

/// The account's copy of claim `id` once `ready` holds for it.
async fn copy_when(
    app: &TestApp,
    token: &str,
    id: &str,
    what: &str,
    ready: impl Fn(&Value) -> bool,
) -> Value {
    eventually(what, || {
        let (app, token) = (app, token.to_owned());
        let ready = &ready;
        async move {
            let (s, c) = app.get_with(&format!("/api/dict/claims/{id}"), &token).await;
            (s == 200 && ready(&c)).then_some(c)
        }
    })
    .await
}

/// The account's copy of claim `id`, read by the operator (a client's token does not
/// outlive a move of the test clock by days), once `ready` holds for it.
async fn admin_copy_when(
    app: &TestApp,
    account: u64,
    id: &str,
    what: &str,
    ready: impl Fn(&Value) -> bool,
) -> Value {
    eventually(what, || {
        let ready = &ready;
        async move {
            let (s, list) = app.admin("GET", &format!("/admin/accounts/{account}/claims"), None).await;
            let c = list["data"].as_array()?.iter().find(|c| c["id"] == id)?.clone();
            (s == 200 && ready(&c)).then_some(c)
        }
    })
    .await
}

/// The simulator's claim once `ready` holds for it.
async fn sim_claim_when(sim: &Sim, id: &str, what: &str, ready: impl Fn(&Value) -> bool) -> Value {
    eventually(what, || {
        let ready = &ready;
        async move {
            let (s, c) = sim.get(&format!("/sim/claims/{id}")).await;
            (s == 200 && ready(&c)).then_some(c)
        }
    })
    .await
}

async fn keys_of(app: &TestApp, account: u64) -> Vec<String> {
    let (s, keys) = app.admin("GET", &format!("/admin/accounts/{account}/keys"), None).await;
    assert_eq!(s, 200, "{keys}");
    keys.as_array().unwrap().iter().map(|k| k["key"].as_str().unwrap().to_owned()).collect()
}

fn statuses(claim: &Value) -> Vec<String> {
    claim["history"].as_array().unwrap().iter().map(|h| h["status"].as_str().unwrap().to_owned()).collect()
}

/// A phone key registered for the account in the DICT.
async fn register_phone(app: &TestApp, account: u64, phone: &str) {
    let (s, k) =
        app.admin("POST", &format!("/admin/accounts/{account}/keys"), Some(json!({"key": phone}))).await;
    assert_eq!((s, k["directory"].as_str()), (201, Some("DICT")), "{k}");
}

#[actix_rt::test]
async fn a_key_claimed_from_another_bank_is_completed_by_the_gateway_and_comes_to_the_account_once() {
    let sim = Sim::start(&[]);
    // The DICT answers the completion's step and then loses the answer: the gateway takes
    // it again, under the same RequestId, and the key arrives once.
    // The other bank holds its answer until the test lets it go.
    let (s, _) =
        sim.put("/sim/claims/settings", json!({"answer500AfterStoring": 1, "donorAnswer": "ignore"})).await;
    assert_eq!(s, 200);
    let app = spawn_with(options(&sim)).await;
    let (account, token) = live_account(&app, "Portadora").await;
    let key = "aceita@spi-sim.pixgw";

    // Refused before the DICT is asked: an EVP, an ownership claim of an e-mail, nonsense.
    let open = |body: Value| {
        let (app, token) = (&app, token.clone());
        async move { send(app.client.post(app.url("/api/dict/claims")).bearer_auth(&token), Some(body)).await }
    };
    let (s, b) = open(json!({"keyType": "EVP"})).await;
    assert_eq!(s, 400, "{b}");
    let (s, b) = open(json!({"key": key, "type": "OWNERSHIP"})).await;
    assert_extended(&b, 409, "CLAIM_KEY_TYPE_INVALID");
    assert_eq!(s, 409);
    let (s, b) = open(json!({"key": key, "type": "THEFT"})).await;
    assert_eq!(s, 400, "{b}");

    // The key is the simulated receiver's, at another participant: a portability brings it.
    let (s, claim) = open(json!({"key": key})).await;
    assert_eq!(s, 201, "{claim}");
    assert_eq!(
        (claim["role"].as_str(), claim["type"].as_str()),
        (Some("CLAIMER"), Some("PORTABILITY")),
        "{claim}"
    );
    let id = claim["id"].as_str().unwrap().to_owned();
    // A second claim of the same key is the DICT's to refuse.
    let (s, b) = open(json!({"key": key})).await;
    assert_extended(&b, 409, "DICT_REFUSED");
    assert_eq!(s, 409);
    assert!(b.to_string().contains("ClaimAlreadyExistsForKey"), "{b}");

    // The other bank confirms; the gateway completes; the key is the account's.
    sim_claim_when(&sim, &id, "the other bank's acknowledgement", |c| c["status"] == "WAITING_RESOLUTION")
        .await;
    let (s, c) = sim.post(&format!("/sim/claims/{id}/confirm"), json!({})).await;
    assert_eq!((s, c["status"].as_str()), (200, Some("CONFIRMED")), "{c}");
    let done = copy_when(&app, &token, &id, "the completion", |c| c["status"] == "COMPLETED").await;
    assert_eq!(done["keyMoved"], true, "{done}");
    // The copy starts from what was first recorded: the route's answer (OPEN) or, when the
    // poller listed the claim first, the other bank's acknowledgement; it ends completed.
    let seen = statuses(&done);
    assert!(matches!(seen.first().map(String::as_str), Some("OPEN" | "WAITING_RESOLUTION")), "{done}");
    assert_eq!(&seen[seen.len() - 2..], ["CONFIRMED", "COMPLETED"], "{done}");
    let at_dict = sim_claim_when(&sim, &id, "the DICT's completion", |c| c["status"] == "COMPLETED").await;
    assert_eq!(at_dict["claimer"], crate::spi::ISPB);
    assert_eq!(keys_of(&app, account).await.iter().filter(|k| k.as_str() == key).count(), 1);
    // A payment to the key now reaches the account, on us.
    let (s, list) = app.get_with("/api/dict/claims?role=CLAIMER&status=COMPLETED", &token).await;
    assert_eq!((s, list["metadata"]["total"].as_u64()), (200, Some(1)), "{list}");
    let (s, b) = app.get_with("/api/dict/claims?status=LOST", &token).await;
    assert_eq!(s, 400, "{b}");
    // Another account sees none of it.
    let (_, other) = live_account(&app, "Outra").await;
    let (s, _) = app.get_with(&format!("/api/dict/claims/{id}"), &other).await;
    assert_eq!(s, 404);
}

#[actix_rt::test]
async fn a_claim_against_a_key_of_the_account_is_acknowledged_at_once_and_the_key_leaves_when_the_client_confirms(
) {
    let sim = Sim::start(&[]);
    let app = spawn_with(options(&sim)).await;
    let (account, token) = live_account(&app, "Doadora").await;
    let phone = "+5511987650001";
    register_phone(&app, account, phone).await;
    // The account hears of every step of its claims.
    let mut rx = Receiver::ok();
    let hook = json!({"url": rx.url, "eventType": "claim"});
    assert_eq!(app.post_raw("/api/webhooks", &token, &hook.to_string(), &[]).await.0, 201);

    // Another person claims the phone number at another bank.
    let (s, c) = sim
        .post(
            "/sim/claims",
            json!({"key": phone, "type": "OWNERSHIP", "taxId": "11144477735", "name": "Novo Dono"}),
        )
        .await;
    assert_eq!(s, 201, "{c}");
    let id = c["id"].as_str().unwrap().to_owned();
    assert_eq!(c["donor"], crate::spi::ISPB);
    // The gateway acknowledges it by itself, well within the minute the DICT allows.
    sim_claim_when(&sim, &id, "the acknowledgement", |c| c["status"] == "WAITING_RESOLUTION").await;
    let waiting = copy_when(&app, &token, &id, "the copy", |c| c["status"] == "WAITING_RESOLUTION").await;
    assert_eq!(
        (waiting["role"].as_str(), waiting["keyMoved"].as_bool()),
        (Some("DONOR"), Some(false)),
        "{waiting}"
    );
    assert!(keys_of(&app, account).await.contains(&phone.to_owned()));

    let step = |name: &str, body: Value| {
        let (app, token, path) = (&app, token.clone(), format!("/api/dict/claims/{id}/{name}"));
        async move { send(app.client.post(app.url(&path)).bearer_auth(&token), Some(body)).await }
    };
    // Not the donor's steps, or not its reasons.
    let (s, b) = step("complete", json!({})).await;
    assert_extended(&b, 409, "CLAIM_STEP_NOT_ALLOWED");
    assert_eq!(s, 409);
    let (s, b) = step("confirm", json!({"reason": "DEFAULT_OPERATION"})).await;
    assert_eq!(s, 400, "{b}");
    let (s, b) = step("cancel", json!({"reason": "USER_REQUESTED"})).await;
    assert_extended(&b, 409, "CLAIM_STEP_NOT_ALLOWED");
    assert_eq!(s, 409);
    let (s, b) = step("steal", json!({})).await;
    assert_eq!(s, 404, "{b}");

    // The client gives the number up: it leaves the account at once. The answer is the
    // claim as the account's copy has it now: confirmed, or completed already when the
    // claims poller recorded the claimer's completion first (the simulated claimer completes
    // at once).
    let (s, confirmed) = step("confirm", json!({"reason": "USER_REQUESTED"})).await;
    assert_eq!((s, confirmed["keyMoved"].as_bool()), (200, Some(true)), "{confirmed}");
    assert!(matches!(confirmed["status"].as_str(), Some("CONFIRMED" | "COMPLETED")), "{confirmed}");
    assert!(!keys_of(&app, account).await.contains(&phone.to_owned()));
    // The claimer completes at the DICT; the copy follows, and the key stays gone.
    let done = copy_when(&app, &token, &id, "the completion", |c| c["status"] == "COMPLETED").await;
    assert_eq!(statuses(&done), ["OPEN", "WAITING_RESOLUTION", "CONFIRMED", "COMPLETED"], "{done}");
    let (s, list) = app.admin("GET", &format!("/admin/accounts/{account}/claims?role=DONOR"), None).await;
    assert_eq!((s, list["metadata"]["total"].as_u64()), (200, Some(1)), "{list}");
    // One webhook a step, in order, each with the claim as the step left it.
    let mut events = Vec::new();
    for _ in 0..4 {
        let v = rx.next().await.json();
        assert_eq!(v["claim"]["id"], id.as_str(), "{v}");
        events.push((
            v["event"].as_str().unwrap().to_owned(),
            v["claim"]["status"].as_str().unwrap().to_owned(),
        ));
    }
    let want = [
        ("ClaimReceived", "OPEN"),
        ("ClaimWaitingResolution", "WAITING_RESOLUTION"),
        ("ClaimConfirmed", "CONFIRMED"),
        ("ClaimCompleted", "COMPLETED"),
    ];
    assert_eq!(events, want.map(|(e, s)| (e.to_owned(), s.to_owned())), "{events:?}");
}

#[actix_rt::test]
async fn at_the_end_of_the_resolution_period_an_unanswered_portability_is_cancelled_and_an_ownership_claim_confirmed(
) {
    let sim = Sim::start(&[]);
    let app = spawn_with(options(&sim)).await;
    let (account, token) = live_account(&app, "Silenciosa").await;
    let (kept, lost) = ("+5511987650002", "+5511987650003");
    register_phone(&app, account, kept).await;
    register_phone(&app, account, lost).await;
    // The same owner asks to move one number away; another person claims the other.
    let (_, p) = sim.post("/sim/claims", json!({"key": kept, "type": "PORTABILITY"})).await;
    let (_, o) =
        sim.post("/sim/claims", json!({"key": lost, "type": "OWNERSHIP", "taxId": "11144477735"})).await;
    let (p, o) = (p["id"].as_str().unwrap().to_owned(), o["id"].as_str().unwrap().to_owned());
    for id in [&p, &o] {
        copy_when(&app, &token, id, "the acknowledgement", |c| c["status"] == "WAITING_RESOLUTION").await;
    }
    // The client says nothing. A day before the end, nothing moves.
    sim.put("/sim/clock", json!({"advanceSeconds": 6 * 86_400})).await;
    app.advance(6 * 86_400).await;
    let early = admin_copy_when(&app, account, &o, "the copy", |_| true).await;
    assert_eq!(early["status"], "WAITING_RESOLUTION", "{early}");
    // At the end, the gateway takes the default outcome of each.
    sim.put("/sim/clock", json!({"advanceSeconds": 86_400 + 1})).await;
    app.advance(86_400 + 1).await;
    let cancelled =
        sim_claim_when(&sim, &p, "the portability's cancellation", |c| c["status"] == "CANCELLED").await;
    assert_eq!(
        (cancelled["cancelReason"].as_str(), cancelled["cancelledBy"].as_str()),
        (Some("DEFAULT_OPERATION"), Some("DONOR"))
    );
    let confirmed = sim_claim_when(&sim, &o, "the ownership claim's confirmation", |c| {
        c["confirmReason"] == "DEFAULT_OPERATION"
    })
    .await;
    assert!(matches!(confirmed["status"].as_str(), Some("CONFIRMED" | "COMPLETED")), "{confirmed}");
    admin_copy_when(&app, account, &o, "the key leaving", |c| c["keyMoved"] == true).await;
    admin_copy_when(&app, account, &p, "the cancellation's copy", |c| c["status"] == "CANCELLED").await;
    let keys = keys_of(&app, account).await;
    assert!(keys.contains(&kept.to_owned()) && !keys.contains(&lost.to_owned()), "{keys:?}");
}

#[actix_rt::test]
async fn a_claim_that_moves_while_the_gateway_is_killed_is_caught_up_once_after_the_restart() {
    let sim = Sim::start(&[]);
    let opts = options(&sim);
    let mut app = spawn_with(opts.clone()).await;
    let (account, token) = live_account(&app, "Interrompida").await;
    let phone = "+5511987650004";
    register_phone(&app, account, phone).await;
    let (_, c) =
        sim.post("/sim/claims", json!({"key": phone, "type": "OWNERSHIP", "taxId": "11144477735"})).await;
    let id = c["id"].as_str().unwrap().to_owned();
    copy_when(&app, &token, &id, "the acknowledgement", |c| c["status"] == "WAITING_RESOLUTION").await;

    // kill -9 in the middle of the claim; meanwhile the claimer withdraws it.
    let mut child = app.take_child().unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    let (s, w) = sim.post(&format!("/sim/claims/{id}/cancel"), json!({"reason": "USER_REQUESTED"})).await;
    assert_eq!((s, w["status"].as_str()), (200, Some("CANCELLED")), "{w}");
    app.start_again(&opts);

    let done = copy_when(&app, &token, &id, "the withdrawal", |c| c["status"] == "CANCELLED").await;
    assert_eq!(statuses(&done), ["OPEN", "WAITING_RESOLUTION", "CANCELLED"], "{done}");
    assert_eq!((done["cancelledBy"].as_str(), done["keyMoved"].as_bool()), (Some("CLAIMER"), Some(false)));
    assert!(keys_of(&app, account).await.contains(&phone.to_owned()), "the key stays");
    let (_, list) = app.get_with("/api/dict/claims", &token).await;
    assert_eq!(list["metadata"]["total"], 1, "one copy: {list}");
}
