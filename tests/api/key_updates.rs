//! Key updates when an account changes, end to end: the operator renames an account's
//! holder and the DICT's entries of its keys follow (`updateEntry`, `pixgw spi-sim` playing
//! the DICT). An entry a claim locks waits, through a kill -9, and goes once the claim ends;
//! the sync verification finds the two sides equal throughout.

use serde_json::{json, Value};

use crate::helpers::*;
use crate::spi::{eventually, live_account, metrics_text, Sim};

fn options(sim: &Sim) -> Options {
    Options {
        env: vec![
            ("PIXGW_CONFIG".into(), sim.config.display().to_string()),
            ("PIXGW_SPI_CLAIMS_POLL_MS".into(), "100".into()),
            ("PIXGW_SPI_SYNC_EVERY_MS".into(), "300".into()),
        ],
        ..Options::default()
    }
}

async fn dict_entry(sim: &Sim, key: &str) -> Value {
    let (s, e) = sim.get(&format!("/sim/dict/entries/{key}")).await;
    assert_eq!(s, 200, "{e}");
    e
}

async fn dict_name_becomes(sim: &Sim, key: &str, name: &str) -> Value {
    eventually(&format!("the DICT's entry of {key} named {name}"), || async {
        let e = dict_entry(sim, key).await;
        (e["name"] == name).then_some(e)
    })
    .await
}

async fn verifications(sim: &Sim) -> (u64, u64) {
    let (_, s) = sim.get("/sim/dict/sync").await;
    (s["verifications"].as_u64().unwrap(), s["nok"].as_u64().unwrap())
}

#[actix_rt::test]
async fn a_rename_updates_every_dict_entry_of_the_account_a_locked_one_after_its_claim_and_a_kill() {
    let sim = Sim::start(&[]);
    let opts = options(&sim);
    let mut app = spawn_with(opts.clone()).await;
    let (account, token) = live_account(&app, "Ana Lima").await;
    let phone = "+5511987650021";
    let (s, k) =
        app.admin("POST", &format!("/admin/accounts/{account}/keys"), Some(json!({"key": phone}))).await;
    assert_eq!(s, 201, "{k}");
    let (s, k) =
        app.admin("POST", &format!("/admin/accounts/{account}/keys"), Some(json!({"keyType": "EVP"}))).await;
    assert_eq!(s, 201, "{k}");
    let evp = k["key"].as_str().unwrap().to_owned();
    assert_eq!(dict_entry(&sim, phone).await["name"], "Ana Lima");
    let cid_before = dict_entry(&sim, &evp).await["cid"].clone();

    // Another bank claims the phone: the DICT locks its entry while the claim is open.
    let (s, c) =
        sim.post("/sim/claims", json!({"key": phone, "type": "OWNERSHIP", "taxId": "11144477735"})).await;
    assert!(s < 300, "{c}");
    let claim = c["id"].as_str().unwrap().to_owned();

    // Bad renames change nothing.
    let path = format!("/admin/accounts/{account}/name");
    for bad in
        [json!({}), json!({"name": ""}), json!({"name": "x".repeat(101)}), json!({"name": "Ana", "why": 1})]
    {
        let (s, b) = app.admin("PUT", &path, Some(bad.clone())).await;
        assert_extended(&b, 400, "HTTP_ERROR");
        assert_eq!(s, 400, "{bad}: {b}");
    }
    let (s, b) = app.admin("PUT", "/admin/accounts/999999/name", Some(json!({"name": "Ninguém"}))).await;
    assert_eq!(s, 404, "{b}");

    let (s, r) = app.admin("PUT", &path, Some(json!({"name": "Ana Lima Souza"}))).await;
    assert_eq!(s, 200, "{r}");
    assert_eq!(r, json!({"accountId": account, "name": "Ana Lima Souza", "dictUpdates": 2}));
    let (_, me) = app.get_with("/api/account", &token).await;
    assert_eq!(me["name"], "Ana Lima Souza", "{me}");
    // The same name again asks for nothing more.
    let (s, again) = app.admin("PUT", &path, Some(json!({"name": "Ana Lima Souza"}))).await;
    assert_eq!((s, &again["dictUpdates"]), (200, &json!(0)), "{again}");

    // The EVP's entry follows, under a new CID; the phone's waits for its claim.
    let updated = dict_name_becomes(&sim, &evp, "Ana Lima Souza").await;
    assert_ne!(updated["cid"], cid_before);
    // The gateway recorded the EVP's update done (it is not sent again after the kill).
    eventually("the EVP's update recorded", || async {
        let m = metrics_text(&app).await;
        m.contains("pixgw_dict_key_updates_total{outcome=\"updated\"} 1").then_some(())
    })
    .await;
    assert_eq!(dict_entry(&sim, phone).await["name"], "Ana Lima", "locked by the claim");

    // kill -9 while the phone's update waits; the claimer withdraws meanwhile.
    let mut child = app.take_child().unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(dict_entry(&sim, phone).await["name"], "Ana Lima");
    let (s, w) = sim.post(&format!("/sim/claims/{claim}/cancel"), json!({"reason": "USER_REQUESTED"})).await;
    assert_eq!((s, w["status"].as_str()), (200, Some("CANCELLED")), "{w}");
    app.start_again(&opts);

    let phone_entry = dict_name_becomes(&sim, phone, "Ana Lima Souza").await;
    assert_eq!(phone_entry["participant"], crate::spi::ISPB);
    // Both sides agree on every CID: later verifications find no difference, and none did
    // before (the gateway's CIDs moved with the DICT's).
    let (seen, _) = verifications(&sim).await;
    eventually("three more verifications", || async {
        let (now, _) = verifications(&sim).await;
        // A round verifies each of the five key types.
        (now >= seen + 15).then_some(())
    })
    .await;
    assert_eq!(verifications(&sim).await.1, 0, "no verification found a difference");
    let m = metrics_text(&app).await;
    assert!(
        m.contains("pixgw_dict_key_updates_total{outcome=\"updated\"} 1"),
        "after the restart, the phone's alone: {m}"
    );
    assert!(!m.contains("pixgw_dict_sync_repairs_total"), "nothing to repair: {m}");

    // Off the DICT a rename asks for no update.
    let plain = spawn_app().await;
    let (id, _, _, _) = plain.new_account("Loja").await;
    let (s, r) =
        plain.admin("PUT", &format!("/admin/accounts/{id}/name"), Some(json!({"name": "Loja Nova"}))).await;
    assert_eq!((s, &r["dictUpdates"]), (200, &json!(0)), "{r}");
}

/// A live account of `document` with a certificate and a token: (account id, token).
async fn holder(app: &TestApp, name: &str, document: &str) -> u64 {
    let (s, b) =
        app.admin("POST", "/admin/accounts", Some(json!({"name": name, "document": document}))).await;
    assert_eq!(s, 201, "{b}");
    b["accountId"].as_u64().unwrap()
}

async fn register(sim: &Sim, cpf: &str, record: Value) {
    let (s, r) = sim.put(&format!("/sim/tax-records/{cpf}"), record).await;
    assert_eq!(s, 200, "{r}");
}

#[actix_rt::test]
async fn the_tax_register_keeps_an_unknown_or_irregular_cpf_out_of_the_dict_renames_to_its_record_and_removes_keys_it_bars(
) {
    let sim = Sim::start(&[]);
    let secrets = tempfile::tempdir().unwrap();
    let credentials = secrets.path().join("tax-registry");
    std::fs::write(&credentials, "consumer-key:consumer-secret\n").unwrap();
    std::fs::set_permissions(&credentials, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let mut opts = options(&sim);
    opts.env.extend([
        ("PIXGW_SPI_TAX_REGISTRY_URL".into(), format!("{}/consulta-cpf-df/v2", sim.control)),
        ("PIXGW_SPI_TAX_REGISTRY_CREDENTIALS".into(), credentials.display().to_string()),
        ("PIXGW_SPI_TAX_CHECK_MS".into(), "300".into()),
    ]);
    let app = spawn_with(opts).await;
    let ana = holder(&app, "Ana Lima", "52998224725").await;
    let bruno = holder(&app, "Bruno Reis", "11144477735").await;
    let carla = holder(&app, "Carla Dias", "39053344705").await;
    register(&sim, "52998224725", json!({"nome": "ANA LIMA"})).await;
    register(&sim, "11144477735", json!({"nome": "BRUNO REIS", "codigo": "3"})).await;

    // Ana's name is the record's, written without accents or case: her key goes in.
    let key = "ana.lima@example.com";
    let (s, k) = app.admin("POST", &format!("/admin/accounts/{ana}/keys"), Some(json!({"key": key}))).await;
    assert_eq!(s, 201, "{k}");
    // A deceased holder's CPF and one the register does not hold get none, and the DICT
    // hears nothing of them.
    for (account, key, why) in
        [(bruno, "bruno@example.com", "deceased"), (carla, "carla@example.com", "not in the tax authority")]
    {
        let (s, b) =
            app.admin("POST", &format!("/admin/accounts/{account}/keys"), Some(json!({"key": key}))).await;
        assert_eq!(s, 409, "{b}");
        assert!(b["message"].as_str().unwrap().contains(why), "{b}");
        let (s, _) = sim.get(&format!("/sim/dict/entries/{key}")).await;
        assert_eq!(s, 404, "{key} is not in the DICT");
    }

    // The register now names Ana otherwise: the periodic check renames her account, and
    // the DICT's entry of her key follows.
    register(&sim, "52998224725", json!({"nome": "ANA LIMA SOUZA"})).await;
    dict_name_becomes(&sim, key, "ANA LIMA SOUZA").await;
    let (_, a) = app.admin("GET", &format!("/admin/accounts/{ana}"), None).await;
    assert_eq!(a["name"], "ANA LIMA SOUZA", "{a}");

    // Her CPF is suspended: her key leaves the DICT and the account.
    register(&sim, "52998224725", json!({"nome": "ANA LIMA SOUZA", "codigo": "2"})).await;
    eventually("the suspended holder's key removed", || async {
        let (s, _) = sim.get(&format!("/sim/dict/entries/{key}")).await;
        let (_, keys) = app.admin("GET", &format!("/admin/accounts/{ana}/keys"), None).await;
        (s == 404 && keys.as_array()?.is_empty()).then_some(())
    })
    .await;
    let m = metrics_text(&app).await;
    for outcome in ["renamed", "keys_removed"] {
        assert!(
            m.contains(&format!("pixgw_dict_tax_checks_total{{outcome=\"{outcome}\"}}")),
            "{outcome}: {m}"
        );
    }
    assert_eq!(verifications(&sim).await.1, 0, "the DICT and the gateway agreed throughout");
}
