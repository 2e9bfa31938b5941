//! Criterion benches of the hot domain paths: token verification (every authenticated
//! request), amount parsing and document validation (every payment body).
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

criterion_group!(benches, tokens, parsing);
criterion_main!(benches);
