//! Reading another institution's payload location: the compact JWS its dynamic QR code
//! leads to, and the charge its payload asks to be paid (the API Pix's `CobPayload` or
//! `CobVPayload`).
//!
//! This module splits the JWS and reads what it says; it verifies no signature and fetches
//! nothing (the rail does both, `rail::spi::payload_reader`), and takes `now` as an argument.
//! A payload is payable only when it says so plainly: status `ATIVA`, a cob not past
//! `criacao + expiracao`, an amount written as the API Pix writes it (`\d{1,10}\.\d{2}`), a
//! key and a txid of the API's shapes. Anything else (withdrawal and change charges among
//! them, which this gateway does not pay) is refused with the reason.

use base64::Engine;
use chrono::{DateTime, Utc};
use serde_json::Value;

use super::money::Money;

/// Bytes of a payload location's answer read at most.
pub const PAYLOAD_BYTES_MAX: usize = 64 * 1024;
/// Characters of a txid in a payload (the API Pix's cob and cobv txids).
pub const PAYLOAD_TXID_LEN_MIN: usize = 26;
pub const PAYLOAD_TXID_LEN_MAX: usize = 35;
/// Characters of a key in a payload.
pub const PAYLOAD_KEY_LEN_MAX: usize = 77;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PayloadError {
    #[error("could not be read: {0}")]
    Unreachable(String),
    #[error("is not a signed payload: {0}")]
    Malformed(String),
    #[error("is signed in a way the Pix security manual does not allow: {0}")]
    Signature(String),
    #[error("names a charge that can no longer be paid ({0})")]
    NotPayable(String),
    #[error("asks for a payment this gateway does not make: {0}")]
    Unsupported(&'static str),
}

/// The signature algorithms a payload may be signed with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JwsAlg {
    /// RSASSA-PKCS1-v1_5 with SHA-256 (the central bank's examples).
    Rs256,
    /// RSASSA-PSS with SHA-256.
    Ps256,
}

/// A compact JWS, split and decoded, its signature not yet verified.
#[derive(Debug, Clone, PartialEq)]
pub struct CompactJws {
    pub header: Value,
    pub payload: Value,
    /// What the signature covers: the first two parts as they were sent.
    pub signing_input: String,
    pub signature: Vec<u8>,
    pub alg: JwsAlg,
}

fn decode(part: &str, what: &str) -> Result<Vec<u8>, PayloadError> {
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(part)
        .map_err(|_| PayloadError::Malformed(format!("its {what} is not base64url")))
}

/// Splits a compact JWS (`header.payload.signature`) and reads its header and payload.
pub fn split_jws(text: &str) -> Result<CompactJws, PayloadError> {
    let text = text.trim();
    if text.len() > PAYLOAD_BYTES_MAX {
        return Err(PayloadError::Malformed("it is too large".into()));
    }
    let parts: Vec<&str> = text.split('.').collect();
    let [header, payload, signature] = parts.as_slice() else {
        return Err(PayloadError::Malformed("it is not three parts joined by dots".into()));
    };
    let json = |bytes: Vec<u8>, what: &str| -> Result<Value, PayloadError> {
        serde_json::from_slice::<Value>(&bytes)
            .ok()
            .filter(Value::is_object)
            .ok_or_else(|| PayloadError::Malformed(format!("its {what} is not a JSON object")))
    };
    let header_json = json(decode(header, "header")?, "header")?;
    let alg = match header_json["alg"].as_str() {
        Some("RS256") => JwsAlg::Rs256,
        Some("PS256") => JwsAlg::Ps256,
        Some(other) => return Err(PayloadError::Signature(format!("alg {other} is not RS256 or PS256"))),
        None => return Err(PayloadError::Signature("the header names no alg".into())),
    };
    // A header that asks the reader to understand extensions this reader does not know.
    if header_json.get("crit").is_some() {
        return Err(PayloadError::Signature("the header has crit extensions".into()));
    }
    Ok(CompactJws {
        payload: json(decode(payload, "payload")?, "payload")?,
        header: header_json,
        signing_input: format!("{header}.{payload}"),
        signature: decode(signature, "signature")?,
        alg,
    })
}

/// What a payload asks to be paid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DynamicCharge {
    pub txid: String,
    /// The key the payment goes to.
    pub key: String,
    /// What to pay: a cob's `valor.original`, a cobv's `valor.final` (priced for today).
    pub amount: Money,
    /// The payer may change the amount (`modalidadeAlteracao: 1`).
    pub amount_editable: bool,
    /// A charge with a due date.
    pub due_date: bool,
    pub revision: u64,
}

fn amount(text: Option<&str>, zero_ok: bool) -> Option<Money> {
    let text = text?;
    let (int, dec) = text.split_once('.')?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !(digits(int) && int.len() <= 10 && dec.len() == 2 && digits(dec)) {
        return None;
    }
    Money::parse(text).ok().filter(|m| zero_ok || !m.is_zero())
}

/// The charge a verified payload asks to be paid at `now`.
pub fn read_charge(payload: &Value, now: DateTime<Utc>) -> Result<DynamicCharge, PayloadError> {
    let bad = |what: &str| PayloadError::Malformed(format!("its payload has no valid {what}"));
    let status = payload["status"].as_str().ok_or_else(|| bad("status"))?;
    if status != "ATIVA" {
        return Err(PayloadError::NotPayable(format!("status {status}")));
    }
    let txid = payload["txid"].as_str().ok_or_else(|| bad("txid"))?;
    if !(PAYLOAD_TXID_LEN_MIN..=PAYLOAD_TXID_LEN_MAX).contains(&txid.len())
        || !txid.bytes().all(|b| b.is_ascii_alphanumeric())
    {
        return Err(bad("txid"));
    }
    let key = payload["chave"].as_str().filter(|k| !k.is_empty() && k.len() <= PAYLOAD_KEY_LEN_MAX);
    let key = key.ok_or_else(|| bad("chave"))?;
    let valor = &payload["valor"];
    if valor.get("retirada").is_some() {
        return Err(PayloadError::Unsupported("a withdrawal or change (Pix Saque, Pix Troco)"));
    }
    let revision = match &payload["revisao"] {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.parse().ok(),
        _ => None,
    }
    .ok_or_else(|| bad("revisao"))?;
    let calendario = &payload["calendario"];
    let due_date = calendario.get("dataDeVencimento").is_some();
    let (amount, editable) = if due_date {
        (self::amount(valor["final"].as_str(), false).ok_or_else(|| bad("valor.final"))?, false)
    } else {
        let editable = match &valor["modalidadeAlteracao"] {
            Value::Null => false,
            Value::Number(n) if n.as_u64() == Some(0) => false,
            Value::Number(n) if n.as_u64() == Some(1) => true,
            _ => return Err(bad("valor.modalidadeAlteracao")),
        };
        let created = calendario["criacao"]
            .as_str()
            .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
            .ok_or_else(|| bad("calendario.criacao"))?;
        let seconds = match &calendario["expiracao"] {
            Value::Number(n) => n.as_u64(),
            Value::String(s) => s.parse().ok(),
            _ => None,
        }
        .ok_or_else(|| bad("calendario.expiracao"))?;
        let ends = created.with_timezone(&Utc)
            + chrono::Duration::seconds(
                i64::try_from(seconds).unwrap_or(i64::MAX / 1000).min(i64::MAX / 1000),
            );
        if now >= ends {
            return Err(PayloadError::NotPayable("past its expiration".into()));
        }
        (self::amount(valor["original"].as_str(), editable).ok_or_else(|| bad("valor.original"))?, editable)
    };
    Ok(DynamicCharge {
        txid: txid.to_owned(),
        key: key.to_owned(),
        amount,
        amount_editable: editable,
        due_date,
        revision,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn b64(v: &Value) -> String {
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string())
    }

    fn now() -> DateTime<Utc> {
        "2026-11-26T12:00:00Z".parse().unwrap()
    }

    fn cob() -> Value {
        json!({
            "calendario": {"criacao": "2026-11-26T11:30:00Z", "apresentacao": "2026-11-26T11:59:00Z", "expiracao": 3600},
            "txid": "fc9a4366ff3d4964b5dbc6c91a8722d3",
            "revisao": 0,
            "status": "ATIVA",
            "valor": {"original": "500.00"},
            "chave": "7407c9c8-f78b-11ea-adc1-0242ac120002",
        })
    }

    #[test]
    fn a_compact_jws_splits_into_its_header_payload_and_signature() {
        let text = format!("{}.{}.{}", b64(&json!({"alg": "RS256", "kid": "k"})), b64(&cob()), "c2ln");
        let jws = split_jws(&text).unwrap();
        assert_eq!(jws.alg, JwsAlg::Rs256);
        assert_eq!(jws.header["kid"], "k");
        assert_eq!(jws.payload, cob());
        assert_eq!(jws.signature, b"sig");
        assert_eq!(jws.signing_input, text.rsplit_once('.').unwrap().0);
        let ps = format!("{}.{}.c2ln", b64(&json!({"alg": "PS256"})), b64(&cob()));
        assert_eq!(split_jws(&ps).unwrap().alg, JwsAlg::Ps256);
        for (bad, why) in [
            (format!("{}.{}", b64(&json!({"alg": "RS256"})), b64(&cob())), "three parts"),
            (format!("{}.{}.c2ln", b64(&json!({"alg": "none"})), b64(&cob())), "alg none"),
            (format!("{}.{}.c2ln", b64(&json!({"alg": "HS256"})), b64(&cob())), "alg HS256"),
            (format!("{}.{}.c2ln", b64(&json!({"kid": "k"})), b64(&cob())), "no alg"),
            (format!("{}.{}.c2ln", b64(&json!({"alg": "RS256", "crit": ["b64"]})), b64(&cob())), "crit"),
            (format!("{}.{}.c2ln", b64(&json!({"alg": "RS256"})), b64(&json!([1]))), "payload not an object"),
            (format!("{}.@@.c2ln", b64(&json!({"alg": "RS256"}))), "payload not base64url"),
            ("a".repeat(PAYLOAD_BYTES_MAX + 1), "too large"),
        ] {
            assert!(split_jws(&bad).is_err(), "{why}");
        }
    }

    #[test]
    fn a_cob_payload_is_payable_while_active_and_before_its_expiration() {
        let c = read_charge(&cob(), now()).unwrap();
        assert_eq!(c.txid, "fc9a4366ff3d4964b5dbc6c91a8722d3");
        assert_eq!(c.key, "7407c9c8-f78b-11ea-adc1-0242ac120002");
        assert_eq!(
            (c.amount.to_cents_string().as_str(), c.amount_editable, c.due_date),
            ("500.00", false, false)
        );
        // The API Pix's own example writes revisao and expiracao as strings.
        let mut v = cob();
        v["revisao"] = json!("3");
        v["calendario"]["expiracao"] = json!("3600");
        assert_eq!(read_charge(&v, now()).unwrap().revision, 3);
        // Expiry: the last second before it is payable, the second it ends is not.
        let at_end: DateTime<Utc> = "2026-11-26T12:30:00Z".parse().unwrap();
        assert!(read_charge(&cob(), at_end - chrono::Duration::seconds(1)).is_ok());
        assert!(matches!(read_charge(&cob(), at_end), Err(PayloadError::NotPayable(_))));
        let mut paid = cob();
        paid["status"] = json!("CONCLUIDA");
        assert!(matches!(read_charge(&paid, now()), Err(PayloadError::NotPayable(_))));
        // An amount the payer may change may be zero; a fixed one may not.
        let mut open = cob();
        open["valor"] = json!({"original": "0.00", "modalidadeAlteracao": 1});
        assert!(read_charge(&open, now()).unwrap().amount_editable);
        let mut zero = cob();
        zero["valor"] = json!({"original": "0.00"});
        assert!(read_charge(&zero, now()).is_err());
    }

    #[test]
    fn a_cobv_payload_is_paid_at_its_final_amount() {
        let v = json!({
            "calendario": {"criacao": "2026-11-01T00:00:00Z", "apresentacao": "2026-11-26T12:00:00Z", "dataDeVencimento": "2026-11-20", "validadeAposVencimento": 30},
            "txid": "fc9a4366ff3d4964b5dbc6c91a8722d3", "revisao": 3, "status": "ATIVA",
            "valor": {"original": "123.45", "multa": "15.00", "juros": "2.00", "final": "140.45"},
            "chave": "7407c9c8-f78b-11ea-adc1-0242ac120002",
        });
        let c = read_charge(&v, now()).unwrap();
        assert_eq!((c.amount.to_cents_string().as_str(), c.due_date, c.revision), ("140.45", true, 3));
    }

    #[test]
    fn a_payload_that_breaks_a_rule_is_refused_with_what_it_breaks() {
        let cases: Vec<(&str, Value)> = vec![
            ("status", json!(null)),
            ("txid", json!("short")),
            ("txid", json!("fc9a4366ff3d4964b5dbc6c91a8722d3-")),
            ("chave", json!("")),
            ("revisao", json!(-1)),
        ];
        for (field, value) in cases {
            let mut v = cob();
            v[field] = value;
            assert!(read_charge(&v, now()).is_err(), "{field}");
        }
        for valor in [
            json!({"original": "500"}),
            json!({"original": "500.0"}),
            json!({"original": 500}),
            json!({"original": "12345678901.00"}),
            json!({"original": "1.00", "modalidadeAlteracao": 2}),
        ] {
            let mut v = cob();
            v["valor"] = valor.clone();
            assert!(read_charge(&v, now()).is_err(), "{valor}");
        }
        let mut saque = cob();
        saque["valor"]["retirada"] = json!({"saque": {"valor": "10.00"}});
        assert!(matches!(read_charge(&saque, now()), Err(PayloadError::Unsupported(_))));
        let mut no_expiry = cob();
        no_expiry["calendario"]["expiracao"] = json!(null);
        assert!(read_charge(&no_expiry, now()).is_err());
    }
}
