//! What the API Pix lists of family B share (`GET /cob`, `GET /pix`): a creation range of
//! at most [`LIST_DAYS_MAX`] days, the debtor's or payer's document, pages counted from 0,
//! and the `parametros` that echo them.

use std::collections::HashMap;

use serde_json::{json, Value};

use super::error::Violation;
use super::iso;
use crate::domain::document::TaxId;

/// Items of a page of an API Pix list (`GET /cob`, `GET /pix`), at most, and by default.
pub const LIST_PAGE_SIZE_MAX: u32 = 1000;
pub const LIST_PAGE_SIZE_DEFAULT: u32 = 100;
/// Days between `inicio` and `fim` of a list, at most: a list reads the account's payments of
/// the range one by one.
pub const LIST_DAYS_MAX: i64 = 31;

/// What every API Pix list reads: a creation range, the debtor's or payer's document,
/// and the page (from 0).
#[derive(Debug, Clone, PartialEq)]
pub struct ListWindow {
    pub inicio: chrono::DateTime<chrono::Utc>,
    pub fim: chrono::DateTime<chrono::Utc>,
    /// `("cpf" | "cnpj", document)`.
    pub document: Option<(&'static str, String)>,
    pub page: u32,
    pub size: u32,
}

impl ListWindow {
    /// Items to skip and to take.
    pub fn skip_take(&self) -> (usize, usize) {
        let skip = usize::try_from(u64::from(self.page) * u64::from(self.size)).unwrap_or(usize::MAX);
        (skip, usize::try_from(self.size).unwrap_or(usize::MAX))
    }

    /// `parametros` of the answer: the window as read, with the page's counts.
    pub fn parametros(&self, total: usize) -> Value {
        let total = u64::try_from(total).unwrap_or(u64::MAX);
        let mut p = json!({
            "inicio": iso(self.inicio),
            "fim": iso(self.fim),
            "paginacao": {
                "paginaAtual": self.page,
                "itensPorPagina": self.size,
                "quantidadeDePaginas": total.div_ceil(u64::from(self.size)),
                "quantidadeTotalDeItens": total,
            },
        });
        if let Some((name, d)) = &self.document {
            p[*name] = json!(d);
        }
        p
    }
}

/// Reads the window of an API Pix list, adding what is wrong to `v`.
pub fn read_list_window(q: &HashMap<String, String>, v: &mut Vec<Violation>) -> Option<ListWindow> {
    use super::body::int_param;
    let mut instant = |name: &str| match q.get(name).map(|t| chrono::DateTime::parse_from_rfc3339(t)) {
        Some(Ok(t)) => Some(t.with_timezone(&chrono::Utc)),
        Some(Err(_)) => {
            v.push(Violation::new(name, "must be an RFC 3339 date-time"));
            None
        }
        None => {
            v.push(Violation::new(name, "is required"));
            None
        }
    };
    let (inicio, fim) = (instant("inicio"), instant("fim"));
    if let (Some(a), Some(b)) = (inicio, fim) {
        if b < a {
            v.push(Violation::new("fim", "must not be before inicio"));
        } else if b - a > chrono::Duration::days(LIST_DAYS_MAX) {
            v.push(Violation::new("fim", format!("must be at most {LIST_DAYS_MAX} days after inicio")));
        }
    }
    let mut document = None;
    for (name, len) in [("cpf", 11), ("cnpj", 14)] {
        if let Some(d) = q.get(name) {
            match TaxId::parse(d) {
                Ok(t) if d.len() == len => document = Some((name, t.to_string())),
                _ => v.push(Violation::new(name, format!("must be a valid {}", name.to_uppercase()))),
            }
        }
    }
    if q.contains_key("cpf") && q.contains_key("cnpj") {
        v.push(Violation::new("cnpj", "cannot be given with cpf"));
    }
    let page = int_param(q, "paginacao.paginaAtual", 0..=u32::MAX, 0, v);
    let size = int_param(q, "paginacao.itensPorPagina", 1..=LIST_PAGE_SIZE_MAX, LIST_PAGE_SIZE_DEFAULT, v);
    Some(ListWindow { inicio: inicio?, fim: fim?, document, page, size })
}
