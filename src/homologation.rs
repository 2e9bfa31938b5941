//! `pixgw homologation dict-capacity`: the DICT capacity test of the central bank's
//! homologation (IN BCB 508/2024: distinct keys looked up at a steady pace, 1,000 in 60 s and
//! 10,000 in 10 minutes), run by this participant's own DICT client against a DICT (the real
//! one's homologation environment, or `pixgw spi-sim`'s), with the settings file a node on the
//! SPI rail reads. Each lookup is one distinct key for one distinct payer, paced evenly
//! over the window (open loop: a slow answer delays no later lookup), through the same client
//! the gateway's payments use, so its anti-scan buckets are the ones respected. The report
//! says how many lookups were made, found, missed, limited here or at the DICT, or failed,
//! the answer times, and whether the test passes: every lookup answered, none refused for
//! rate, within the window.

pub mod functional;

use std::time::{Duration, Instant};

use actix::prelude::*;
use serde::Serialize;

use crate::rail::spi::directory::{DictClient, DictError, EntryCache, Lookup};
use crate::rail::spi::settings::SpiSettings;

/// Lookups one run makes at most.
pub const LOOKUPS_MAX: usize = 1_000_000;

/// A capacity run's outcome.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CapacityReport {
    pub lookups: usize,
    pub window_seconds: f64,
    pub elapsed_seconds: f64,
    pub found: usize,
    pub not_found: usize,
    /// Refused for rate: by this participant's own mirror of the DICT's buckets, or by the
    /// DICT (429); `pixgw_dict_lookups_total{result}` tells which.
    pub rate_limited: usize,
    pub failed: usize,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    pub passed: bool,
}

/// The `i`-th distinct payer: a CPF-shaped document of its own (its per-user bucket is
/// charged once).
fn payer(i: usize) -> String {
    format!("{:011}", 10_000_000_000u64 + i as u64)
}

fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let at = ((sorted.len() as f64 - 1.0) * q).round() as usize;
    sorted[at.min(sorted.len() - 1)]
}

/// Looks `keys` up, one every `window / keys.len()`, and reports.
pub async fn dict_capacity(settings: SpiSettings, keys: Vec<String>, window: Duration) -> CapacityReport {
    let ispb = settings.ispb.to_string();
    let client = DictClient::new(settings, EntryCache::default()).start();
    let n = keys.len().min(LOOKUPS_MAX);
    let every = window.checked_div(u32::try_from(n.max(1)).unwrap_or(u32::MAX)).unwrap_or(Duration::ZERO);
    let started = Instant::now();
    let mut pending = Vec::with_capacity(n);
    for (i, key) in keys.into_iter().take(n).enumerate() {
        let due = started + every * u32::try_from(i).unwrap_or(u32::MAX);
        tokio::time::sleep_until(due.into()).await;
        let mut random = [0u8; 16];
        let _ = getrandom::fill(&mut random);
        let e2e = crate::domain::transaction::end_to_end_id('E', &ispb, chrono::Utc::now(), &random);
        let ask = client.send(Lookup { key, payer_document: payer(i), end_to_end_id: e2e });
        pending.push(actix_web::rt::spawn(async move {
            let t = Instant::now();
            let r = ask.await;
            (r, t.elapsed())
        }));
    }
    let mut report =
        CapacityReport { lookups: n, window_seconds: window.as_secs_f64(), ..Default::default() };
    let mut times = Vec::with_capacity(n);
    for p in pending {
        let Ok((r, took)) = p.await else {
            report.failed += 1;
            continue;
        };
        times.push(took.as_secs_f64() * 1000.0);
        match r {
            Ok(Ok(_)) => report.found += 1,
            Ok(Err(DictError::NotFound)) => report.not_found += 1,
            Ok(Err(DictError::RateLimited(_))) => report.rate_limited += 1,
            _ => report.failed += 1,
        }
    }
    report.elapsed_seconds = started.elapsed().as_secs_f64();
    times.sort_by(f64::total_cmp);
    report.p50_ms = quantile(&times, 0.5);
    report.p99_ms = quantile(&times, 0.99);
    report.max_ms = times.last().copied().unwrap_or(0.0);
    // Every lookup answered by the DICT, none refused for rate, the last one answered within
    // the window and a second's grace for its answer.
    report.passed = report.found + report.not_found == n
        && report.rate_limited + report.failed == 0
        && report.elapsed_seconds <= report.window_seconds + 1.0;
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payers_are_distinct_eleven_digit_documents_and_quantiles_read_the_sorted_times() {
        assert_eq!(payer(0), "10000000000");
        assert_eq!(payer(9_999), "10000009999");
        assert_ne!(payer(1), payer(2));
        let t = [1.0, 2.0, 3.0, 4.0, 100.0];
        assert_eq!((quantile(&t, 0.5), quantile(&t, 0.99), quantile(&[], 0.5)), (3.0, 100.0, 0.0));
    }
}
