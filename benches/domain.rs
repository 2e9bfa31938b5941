//! Criterion benches of the hot domain paths: token verification (every authenticated
//! request), amount parsing and document validation (every payment body), the whole
//! cash-out body check, the ledger's decide-and-apply of a debit (every cash-out in the
//! account actor), and BR Code parsing and generation (QR cash-outs, charges).
//!
//! Run: `cargo bench --bench domain`. Figures go to docs/benchmarks.md.

use std::hint::black_box;

use chrono::Utc;
use criterion::{criterion_group, criterion_main, Criterion};
use pixgw::auth::tokens::TokenKeys;
use pixgw::domain::certificate::Fingerprint;
use pixgw::domain::document::TaxId;
use pixgw::domain::ids::{AccountId, ClientId};
use pixgw::domain::money::Money;
use uuid::Uuid;

fn tokens(c: &mut Criterion) {
    let keys = TokenKeys::new(b"0123456789abcdef0123456789abcdef");
    let now = Utc::now();
    let (Some(id), Some(client)) = (AccountId::new(1), ClientId::from_uuid(Uuid::new_v4())) else {
        return;
    };
    let fp = Fingerprint::from_digest(&[9u8; 32]);
    let Ok(token) = keys.issue(id, client, &fp, now, Uuid::new_v4()) else {
        return;
    };
    c.bench_function("token_verify", |b| b.iter(|| keys.verify(black_box(&token), now)));
    c.bench_function("token_issue", |b| b.iter(|| keys.issue(id, client, &fp, now, Uuid::nil())));
}

fn parsing(c: &mut Criterion) {
    c.bench_function("money_parse", |b| b.iter(|| Money::parse(black_box("12345.67"))));
    c.bench_function("tax_id_parse_cnpj", |b| b.iter(|| TaxId::parse(black_box("11222333000181"))));
}

fn cash_out(c: &mut Criterion) {
    let body = r#"{"value": 10.50, "externalId": "bench-1", "description": "rent", "details": {"key": "ana@example.com", "keyType": "EMAIL", "name": "Ana", "document": "52998224725"}}"#;
    c.bench_function("cash_out_body_check", |b| {
        b.iter(|| {
            let obj: serde_json::Map<String, serde_json::Value> =
                serde_json::from_str(black_box(body)).unwrap_or_default();
            pixgw::http::pix::read_cash_out(&obj).is_ok()
        })
    });
    c.bench_function("cash_out_body_no_member_twice", |b| {
        b.iter(|| pixgw::http::body::no_member_twice(black_box(body.as_bytes())).is_ok())
    });
    let (Ok(opening), Ok(value)) = (Money::parse("1000000"), Money::parse("0.01")) else { return };
    let limits = pixgw::domain::account::Limits::default();
    let now = Utc::now();
    c.bench_function("ledger_debit_decide_apply", |b| {
        b.iter_batched(
            || pixgw::domain::ledger::Ledger::opening(opening),
            |mut ledger| {
                let req = pixgw::domain::ledger::DebitRequest {
                    local_id: 1,
                    external_id: Some("bench".into()),
                    idempotency: None,
                    value,
                    fee: Money::ZERO,
                    hold: true,
                    limited: pixgw::domain::ledger::Limited::All,
                    now,
                    stored: pixgw::domain::ledger::StoredKeys::default(),
                };
                let mut draft = ledger.draft();
                let accepted = draft.debit(&req, &limits).is_ok();
                let change = draft.finish();
                if let (true, Ok(change)) = (accepted, change) {
                    ledger.apply(change);
                }
                ledger
            },
            criterion::BatchSize::SmallInput,
        )
    });
}

fn brcode(c: &mut Criterion) {
    use pixgw::domain::brcode::{generate, parse, BrCodeSpec};
    let spec = BrCodeSpec {
        single_use: false,
        key: "123e4567-e12b-12d1-a456-426655440000".into(),
        info: Some("order 7".into()),
        amount: Money::parse("25.00").ok(),
        merchant_name: "Acme Comercio".into(),
        merchant_city: "Sao Paulo".into(),
        txid: Some("abc123def456".into()),
    };
    let code = generate(&spec);
    c.bench_function("brcode_generate", |b| b.iter(|| generate(black_box(&spec))));
    c.bench_function("brcode_parse", |b| b.iter(|| parse(black_box(&code))));
}

criterion_group!(benches, tokens, parsing, cash_out, brcode);
criterion_main!(benches);
