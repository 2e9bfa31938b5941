//! BR Code: the EMV QR Code Merchant-Presented payload of PIX (TLV fields, CRC16).
//!
//! [`parse`] reads a copy-and-paste code: it must start with `000201`, have 50 to 500
//! characters, be well-formed TLV (two-digit id, two-digit length, exactly that many
//! characters, or UTF-8 bytes where a code holds accents: both readings are tried), end with field 63 holding the CRC16/CCITT-FALSE of everything before its
//! value (a wrong CRC is an invalid code), and carry a merchant account template (ids 26 to
//! 51) whose GUI is `br.gov.bcb.pix` (any case) with a key (01) or a URL (25).
//! [`generate`] is its inverse; a property test checks that the two agree.

use std::collections::BTreeMap;

use super::money::Money;

pub const BRCODE_LEN_MIN: usize = 50;
pub const BRCODE_LEN_MAX: usize = 500;
pub const MERCHANT_NAME_LEN_MAX: usize = 25;
pub const MERCHANT_CITY_LEN_MAX: usize = 15;
pub const TXID_LEN_MAX: usize = 25;
pub const PIX_GUI: &str = "br.gov.bcb.pix";

/// CRC16/CCITT-FALSE: polynomial 0x1021, initial value 0xFFFF, no reflection, no xorout.
pub fn crc16(data: &[u8]) -> u16 {
    let mut crc: u16 = 0xFFFF;
    for &byte in data {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 { (crc << 1) ^ 0x1021 } else { crc << 1 };
        }
    }
    crc
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BrCodeError {
    #[error("must have 50 to 500 characters")]
    Length,
    #[error("must begin with 000201")]
    Prefix,
    #[error("is not well-formed EMV (field lengths do not match)")]
    Tlv,
    #[error("must end with a CRC16 field (6304)")]
    MissingCrc,
    #[error("has a CRC that does not match its content")]
    Crc,
    #[error("is not a PIX code (no br.gov.bcb.pix merchant account)")]
    NotPix,
    #[error("has neither a PIX key nor a URL")]
    NoKeyOrUrl,
    #[error("has an invalid amount")]
    Amount,
    #[error("is not in BRL (currency 986)")]
    Currency,
    #[error("lacks the merchant name or city")]
    Merchant,
    #[error("carries no recurrence (no template 80 with a br.gov.bcb.pix location)")]
    NoRecurrence,
}

/// What a PIX BR Code says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrCode {
    /// Field 01: 11 reusable, 12 single use; absent means reusable.
    pub point_of_initiation: Option<String>,
    pub key: Option<String>,
    pub url: Option<String>,
    pub info: Option<String>,
    pub amount: Option<Money>,
    pub merchant_name: String,
    pub merchant_city: String,
    pub txid: Option<String>,
}

/// What a field's length counts. The EMV specification has ASCII only, where the two agree;
/// codes issued in the wild with accents in the merchant's name or city count characters
/// (most apps) or UTF-8 bytes (some), so both readings are tried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unit {
    Bytes,
    Chars,
}

/// Splits a TLV string into (id, value) pairs, in order, lengths counted in `unit`.
fn tlv(s: &str, unit: Unit) -> Result<Vec<(u8, &str)>, BrCodeError> {
    let mut out = Vec::new();
    let mut rest = s;
    while !rest.is_empty() {
        let head = rest.get(..4).ok_or(BrCodeError::Tlv)?;
        if !head.bytes().all(|b| b.is_ascii_digit()) {
            return Err(BrCodeError::Tlv);
        }
        let id: u8 = head[..2].parse().map_err(|_| BrCodeError::Tlv)?;
        let len: usize = head[2..].parse().map_err(|_| BrCodeError::Tlv)?;
        let bytes = match unit {
            Unit::Bytes => len,
            // The byte offset after `len` characters (the end of the text counts as one).
            Unit::Chars => {
                let body = &rest[4..];
                body.char_indices()
                    .map(|(i, _)| i)
                    .chain(std::iter::once(body.len()))
                    .nth(len)
                    .ok_or(BrCodeError::Tlv)?
            }
        };
        let value = rest.get(4..4 + bytes).ok_or(BrCodeError::Tlv)?;
        out.push((id, value));
        rest = &rest[4 + bytes..];
    }
    Ok(out)
}

/// Reads a code. Its CRC is over its UTF-8 bytes; field lengths may count bytes or
/// characters (see [`Unit`]): a code is accepted when its CRC verifies and its fields parse
/// under either reading, bytes first.
pub fn parse(code: &str) -> Result<BrCode, BrCodeError> {
    match parse_as(code, Unit::Bytes) {
        // When both fail, the reading that got past the TLV says more (a wrong CRC, say).
        Err(e) if !code.is_ascii() => {
            parse_as(code, Unit::Chars).map_err(|c| if e == BrCodeError::Tlv { c } else { e })
        }
        read => read,
    }
}

/// The location of the recurrence a code carries in its template 80 (Pix Automático's
/// journeys 2 to 4), read under the same checks as [`parse`]; the code need not be payable
/// (journey 2's names no key).
pub fn recurrence_location(code: &str) -> Result<String, BrCodeError> {
    match recurrence_location_as(code, Unit::Bytes) {
        Err(e) if !code.is_ascii() => {
            recurrence_location_as(code, Unit::Chars).map_err(|c| if e == BrCodeError::Tlv { c } else { e })
        }
        read => read,
    }
}

fn recurrence_location_as(code: &str, unit: Unit) -> Result<String, BrCodeError> {
    let top = checked_fields(code, unit)?;
    let template = tlv(top.get(&80).ok_or(BrCodeError::NoRecurrence)?, unit)?;
    if !template.iter().any(|(id, v)| *id == 0 && v.eq_ignore_ascii_case(PIX_GUI)) {
        return Err(BrCodeError::NoRecurrence);
    }
    template
        .into_iter()
        .find(|(id, v)| *id == 25 && !v.is_empty())
        .map(|(_, v)| v.to_owned())
        .ok_or(BrCodeError::NoRecurrence)
}

/// A code's top-level fields by id, once its length, characters, prefix, TLV structure and
/// CRC are checked and no id repeats.
fn checked_fields(code: &str, unit: Unit) -> Result<BTreeMap<u8, &str>, BrCodeError> {
    let chars = code.chars().count();
    if !(BRCODE_LEN_MIN..=BRCODE_LEN_MAX).contains(&chars) || code.len() > 2 * BRCODE_LEN_MAX {
        return Err(BrCodeError::Length);
    }
    if code.chars().any(char::is_control) {
        return Err(BrCodeError::Tlv);
    }
    if !code.starts_with("000201") {
        return Err(BrCodeError::Prefix);
    }
    let fields = tlv(code, unit)?;
    match fields.last() {
        Some((63, v)) if v.len() == 4 => {}
        _ => return Err(BrCodeError::MissingCrc),
    }
    let (body, crc_text) = code.split_at(code.len() - 4);
    let expected = format!("{:04X}", crc16(body.as_bytes()));
    if !crc_text.eq_ignore_ascii_case(&expected) {
        return Err(BrCodeError::Crc);
    }
    let mut top: BTreeMap<u8, &str> = BTreeMap::new();
    for (id, v) in fields {
        if top.insert(id, v).is_some() {
            return Err(BrCodeError::Tlv);
        }
    }
    Ok(top)
}

fn parse_as(code: &str, unit: Unit) -> Result<BrCode, BrCodeError> {
    let top = checked_fields(code, unit)?;
    let pix = (26..=51)
        .filter_map(|id| top.get(&id))
        .map(|v| tlv(v, unit))
        .collect::<Result<Vec<_>, _>>()?
        .into_iter()
        .find(|sub| sub.iter().any(|(id, v)| *id == 0 && v.eq_ignore_ascii_case(PIX_GUI)))
        .ok_or(BrCodeError::NotPix)?;
    let sub = |want: u8| pix.iter().find(|(id, _)| *id == want).map(|(_, v)| (*v).to_owned());
    let (key, url, info) = (sub(1), sub(25), sub(2));
    if key.is_none() && url.is_none() {
        return Err(BrCodeError::NoKeyOrUrl);
    }
    if top.get(&53).is_some_and(|c| *c != "986") {
        return Err(BrCodeError::Currency);
    }
    let amount = match top.get(&54) {
        None => None,
        Some(text) => {
            let ok = !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit() || b == b'.');
            let m = if ok { Money::parse(text).ok() } else { None };
            Some(m.filter(|m| !m.is_zero()).ok_or(BrCodeError::Amount)?)
        }
    };
    let merchant_name = top.get(&59).ok_or(BrCodeError::Merchant)?.to_string();
    let merchant_city = top.get(&60).ok_or(BrCodeError::Merchant)?.to_string();
    let txid = match top.get(&62) {
        None => None,
        Some(v) => tlv(v, unit)?.into_iter().find(|(id, _)| *id == 5).map(|(_, v)| v.to_owned()),
    };
    Ok(BrCode {
        point_of_initiation: top.get(&1).map(|s| s.to_string()),
        key,
        url,
        info,
        amount,
        merchant_name,
        merchant_city,
        txid,
    })
}

/// Folds Portuguese accents to ASCII and drops what is left outside printable ASCII, so
/// names fit the EMV character set.
pub fn fold_ascii(s: &str) -> String {
    s.chars()
        .filter_map(|c| {
            let folded = match c {
                'á' | 'à' | 'â' | 'ã' | 'ä' => 'a',
                'Á' | 'À' | 'Â' | 'Ã' | 'Ä' => 'A',
                'é' | 'è' | 'ê' | 'ë' => 'e',
                'É' | 'È' | 'Ê' | 'Ë' => 'E',
                'í' | 'ì' | 'î' | 'ï' => 'i',
                'Í' | 'Ì' | 'Î' | 'Ï' => 'I',
                'ó' | 'ò' | 'ô' | 'õ' | 'ö' => 'o',
                'Ó' | 'Ò' | 'Ô' | 'Õ' | 'Ö' => 'O',
                'ú' | 'ù' | 'û' | 'ü' => 'u',
                'Ú' | 'Ù' | 'Û' | 'Ü' => 'U',
                'ç' => 'c',
                'Ç' => 'C',
                'ñ' => 'n',
                'Ñ' => 'N',
                c => c,
            };
            (folded.is_ascii() && !folded.is_ascii_control()).then_some(folded)
        })
        .collect()
}

fn field(id: u8, value: &str) -> String {
    format!("{id:02}{:02}{value}", value.len())
}

/// The fields of a code to generate. Name and city are folded to ASCII and cut to their
/// limits; the txid keeps its alphanumeric characters up to 25.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrCodeSpec {
    pub single_use: bool,
    pub key: String,
    pub info: Option<String>,
    pub amount: Option<Money>,
    pub merchant_name: String,
    pub merchant_city: String,
    pub txid: Option<String>,
}

pub fn generate(spec: &BrCodeSpec) -> String {
    let cut = |s: String, n: usize| s.chars().take(n).collect::<String>();
    let mut account = field(0, PIX_GUI) + &field(1, &spec.key);
    if let Some(info) = spec.info.as_ref().filter(|i| !i.is_empty()) {
        // The merchant account template holds at most 99 characters.
        let room = 99usize.saturating_sub(account.len() + 4);
        account += &field(2, &cut(fold_ascii(info), room));
    }
    let mut out = field(0, "01");
    if spec.single_use {
        out += &field(1, "12");
    }
    out += &field(26, &account);
    out += &field(52, "0000");
    out += &field(53, "986");
    if let Some(a) = spec.amount {
        out += &field(54, &a.to_cents_string());
    }
    out += &field(58, "BR");
    out += &field(59, &cut(fold_ascii(&spec.merchant_name), MERCHANT_NAME_LEN_MAX));
    out += &field(60, &cut(fold_ascii(&spec.merchant_city), MERCHANT_CITY_LEN_MAX));
    let txid: String = spec
        .txid
        .as_deref()
        .unwrap_or("***")
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '*')
        .take(TXID_LEN_MAX)
        .collect();
    out += &field(62, &field(5, if txid.is_empty() { "***" } else { &txid }));
    out += "6304";
    let crc = crc16(out.as_bytes());
    out + &format!("{crc:04X}")
}

/// A dynamic code: single use (field 01 = 12), its merchant account holding the charge's
/// payload location (sub-field 25) instead of a key, no amount (the payload says it, and a
/// cobv's changes by the day) and the txid field `***`, as the BR Code manual asks of a code
/// whose charge lives at a location.
pub fn generate_dynamic(location: &str, merchant_name: &str, merchant_city: &str) -> String {
    let head = field(0, "01") + &field(1, "12") + &field(26, &(field(0, PIX_GUI) + &field(25, location)));
    located(head, merchant_name, merchant_city)
}

/// The code of Pix Automático's journey 2: it carries only a recurrence's location (in the
/// template of ID 80, as the arrangement places it), no key and no amount, so no payment
/// can be made with it; the payer's institution reads the recurrence there. EMV requires
/// at least one merchant account template (IDs 02 to 51), so a template 26 with the Pix GUI
/// alone comes first, as BR Code readers expect.
pub fn generate_recurrence(location: &str, merchant_name: &str, merchant_city: &str) -> String {
    let head = field(0, "01")
        + &field(26, &field(0, PIX_GUI))
        + &field(80, &(field(0, PIX_GUI) + &field(25, location)));
    located(head, merchant_name, merchant_city)
}

/// The composite code of Pix Automático's journeys 3 and 4: a charge's own code (a cob's or
/// a cobv's, static or dynamic) with the recurrence's location added in template 80, under a
/// new CRC. Paid, it pays the charge as its own code would; the payer's institution reads
/// the recurrence at the location. `None` when `charge_code` does not end in a CRC field.
pub fn generate_composite(charge_code: &str, rec_location: &str) -> Option<String> {
    let crc_at = charge_code.len().checked_sub(8)?;
    let body = charge_code.get(..crc_at)?;
    if charge_code.get(crc_at..crc_at + 4)? != "6304" {
        return None;
    }
    let mut out = body.to_owned() + &field(80, &(field(0, PIX_GUI) + &field(25, rec_location)));
    out += "6304";
    let crc = crc16(out.as_bytes());
    Some(out + &format!("{crc:04X}"))
}

/// A code whose template `head` names a location: no amount, the merchant, the txid field
/// `***`, and the CRC.
fn located(head: String, merchant_name: &str, merchant_city: &str) -> String {
    let cut = |s: String, n: usize| s.chars().take(n).collect::<String>();
    let mut out = head;
    out += &field(52, "0000");
    out += &field(53, "986");
    out += &field(58, "BR");
    out += &field(59, &cut(fold_ascii(merchant_name), MERCHANT_NAME_LEN_MAX));
    out += &field(60, &cut(fold_ascii(merchant_city), MERCHANT_CITY_LEN_MAX));
    out += &field(62, &field(5, "***"));
    out += "6304";
    let crc = crc16(out.as_bytes());
    out + &format!("{crc:04X}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn crc16_ccitt_false_check_value() {
        assert_eq!(crc16(b"123456789"), 0x29B1);
    }

    #[test]
    fn a_dynamic_code_carries_its_location_and_no_key_or_amount_under_a_valid_crc() {
        let location = "pix.example.com/qr/AbCdEfGhIjKlMnOpQrStUvWxYz0";
        let code = generate_dynamic(location, "Loja São João", "São Paulo");
        let read = parse(&code).unwrap();
        assert_eq!(read.url.as_deref(), Some(location));
        assert_eq!(read.point_of_initiation.as_deref(), Some("12"));
        assert_eq!((read.key, read.amount), (None, None));
        assert_eq!(read.txid.as_deref(), Some("***"));
        assert_eq!(
            (read.merchant_name.as_str(), read.merchant_city.as_str()),
            ("Loja Sao Joao", "Sao Paulo")
        );
    }

    #[test]
    fn a_recurrence_code_carries_its_location_in_field_80_under_a_valid_crc() {
        let code = generate_recurrence("qr.example/rec/abc", "Loja São João", "Recife");
        let body = &code[..code.len() - 4];
        assert_eq!(&code[code.len() - 4..], format!("{:04X}", crc16(body.as_bytes())));
        assert!(code.contains("80400014br.gov.bcb.pix2518qr.example/rec/abc"), "{code}");
        assert!(code.contains("5913Loja Sao Joao"), "{code}");
        assert!(
            code.starts_with("00020126180014br.gov.bcb.pix8040"),
            "a merchant account template (26, the GUI alone) before 80, as EMV requires: {code}"
        );
        assert!(parse(&code).is_err(), "no key: nothing to pay with it");
        assert_eq!(recurrence_location(&code).as_deref(), Ok("qr.example/rec/abc"));
    }

    #[test]
    fn the_recurrences_location_is_read_from_template_80_alone_under_the_codes_checks() {
        let charge = generate(&sample());
        assert_eq!(recurrence_location(&charge), Err(BrCodeError::NoRecurrence), "a charge's code alone");
        let composite = generate_composite(&charge, "qr.example/rec/abc").unwrap();
        assert_eq!(recurrence_location(&composite).as_deref(), Ok("qr.example/rec/abc"));
        let mut broken = composite.clone();
        broken.replace_range(broken.len() - 4.., "0000");
        assert_eq!(recurrence_location(&broken), Err(BrCodeError::Crc));
        // A template 80 of another arrangement, or one with no location, is not a recurrence.
        for template in ["0010br.gov.xyz2503a/b", "0014br.gov.bcb.pix"] {
            let mut out = charge[..charge.len() - 8].to_owned() + &field(80, template) + "6304";
            out += &format!("{:04X}", crc16(out.as_bytes()));
            assert_eq!(recurrence_location(&out), Err(BrCodeError::NoRecurrence), "{out}");
        }
    }

    #[test]
    fn a_composite_code_pays_its_charge_and_carries_the_recurrences_location() {
        let charge = generate(&sample());
        let composite = generate_composite(&charge, "qr.example/rec/abc").unwrap();
        let body = &composite[..composite.len() - 4];
        assert_eq!(&composite[composite.len() - 4..], format!("{:04X}", crc16(body.as_bytes())));
        assert!(composite.contains("80400014br.gov.bcb.pix2518qr.example/rec/abc6304"), "{composite}");
        let (a, b) = (parse(&charge).unwrap(), parse(&composite).unwrap());
        assert_eq!(
            (a.key, a.amount, a.txid),
            (b.key, b.amount, b.txid),
            "it pays what the charge's code pays"
        );
        assert_eq!(generate_composite("not a code", "x"), None);
    }

    fn sample() -> BrCodeSpec {
        BrCodeSpec {
            single_use: true,
            key: "3f2b8c1e-9d4a-4e6b-8a7c-1d2e3f4a5b6c".into(),
            info: None,
            amount: Money::parse("10.50").ok(),
            merchant_name: "José da Conceição".into(),
            merchant_city: "São Paulo".into(),
            txid: Some("abc123".into()),
        }
    }

    #[test]
    fn a_generated_code_parses_back() {
        let code = generate(&sample());
        let p = parse(&code).unwrap();
        assert_eq!(p.key.as_deref(), Some("3f2b8c1e-9d4a-4e6b-8a7c-1d2e3f4a5b6c"));
        assert_eq!(p.amount, Money::parse("10.50").ok());
        assert_eq!(p.merchant_name, "Jose da Conceicao");
        assert_eq!(p.merchant_city, "Sao Paulo");
        assert_eq!(p.txid.as_deref(), Some("abc123"));
        assert_eq!(p.point_of_initiation.as_deref(), Some("12"));
    }

    #[test]
    fn a_known_public_code_parses() {
        // The example static code of the BCB manual (key 123e4567-..., no amount).
        let body = "00020126580014br.gov.bcb.pix0136123e4567-e12b-12d1-a456-4266554400005204000053039865802BR5913Fulano de Tal6008BRASILIA62070503***6304";
        let code = format!("{body}{:04X}", crc16(body.as_bytes()));
        let p = parse(&code).unwrap();
        assert_eq!(p.key.as_deref(), Some("123e4567-e12b-12d1-a456-426655440000"));
        assert_eq!(p.amount, None);
        assert_eq!(p.merchant_city, "BRASILIA");
    }

    #[test]
    fn a_wrong_crc_is_invalid() {
        let code = generate(&sample());
        let (body, crc) = code.split_at(code.len() - 4);
        let wrong = format!("{body}{:04X}", u16::from_str_radix(crc, 16).unwrap() ^ 1);
        assert_eq!(parse(&wrong), Err(BrCodeError::Crc));
        // The CRC is accepted in lower case too.
        assert!(parse(&format!("{body}{}", crc.to_lowercase())).is_ok());
    }

    /// A code as an app writes it with accents: lengths counted by `len`, CRC over UTF-8.
    fn accented(len: fn(&str) -> usize) -> String {
        let f = |id: u8, v: &str| format!("{id:02}{:02}{v}", len(v));
        let account = f(0, "br.gov.bcb.pix") + &f(1, "ana@example.com");
        let body = f(0, "01")
            + &f(26, &account)
            + &f(52, "0000")
            + &f(53, "986")
            + &f(54, "12.34")
            + &f(58, "BR")
            + &f(59, "JOSÉ CONCEIÇÃO")
            + &f(60, "SÃO PAULO")
            + &f(62, &f(5, "pedido42"))
            + "6304";
        format!("{body}{:04X}", crc16(body.as_bytes()))
    }

    #[test]
    fn codes_with_accents_parse_with_lengths_in_characters_or_in_bytes() {
        for code in [accented(|v| v.chars().count()), accented(str::len)] {
            let p = parse(&code).unwrap_or_else(|e| panic!("{code}: {e}"));
            assert_eq!((p.merchant_name.as_str(), p.merchant_city.as_str()), ("JOSÉ CONCEIÇÃO", "SÃO PAULO"));
            assert_eq!(p.key.as_deref(), Some("ana@example.com"));
            assert_eq!(p.amount.map(|a| a.to_cents_string()), Some("12.34".into()));
            assert_eq!(p.txid.as_deref(), Some("pedido42"));
        }
        // The CRC still decides.
        let code = accented(|v| v.chars().count());
        let (body, crc) = code.split_at(code.len() - 4);
        let wrong = format!("{body}{:04X}", u16::from_str_radix(crc, 16).unwrap() ^ 1);
        assert_eq!(parse(&wrong), Err(BrCodeError::Crc));
        // Lengths that fit neither reading are not well-formed.
        let off = accented(|v| v.len() + 1);
        assert!(parse(&off).is_err());
        // Control characters are never accepted.
        let body = format!("{}\u{7}", &code[..code.len() - 8]);
        assert!(parse(&body).is_err());
    }

    #[test]
    fn structural_errors() {
        let good = generate(&sample());
        assert_eq!(parse(&good[..40]), Err(BrCodeError::Length));
        assert_eq!(parse(&"0".repeat(501)), Err(BrCodeError::Length));
        assert_eq!(parse(&format!("000202{}", &good[6..])), Err(BrCodeError::Prefix));
        let truncated = format!("{}99", &good[..good.len() - 8]);
        assert!(parse(&truncated).is_err());
        let not_pix = good.replace("br.gov.bcb.pix", "br.gov.bcb.xxx");
        let body = &not_pix[..not_pix.len() - 4];
        let resigned = format!("{body}{:04X}", crc16(body.as_bytes()));
        assert_eq!(parse(&resigned), Err(BrCodeError::NotPix));
    }

    #[test]
    fn the_gui_is_matched_in_any_case_and_a_url_is_enough() {
        let account = field(0, "BR.GOV.BCB.PIX") + &field(25, "pix.example.com/qr/v2/abc");
        let body = field(0, "01")
            + &field(26, &account)
            + &field(52, "0000")
            + &field(53, "986")
            + &field(58, "BR")
            + &field(59, "Loja")
            + &field(60, "Recife")
            + "6304";
        let code = format!("{body}{:04X}", crc16(body.as_bytes()));
        let p = parse(&code).unwrap();
        assert_eq!(p.key, None);
        assert_eq!(p.url.as_deref(), Some("pix.example.com/qr/v2/abc"));
    }

    #[test]
    fn a_crc_whose_hex_starts_with_zero_keeps_its_leading_zero() {
        // Search txids until the CRC is below 0x1000, then check the text has 4 digits.
        let mut spec = sample();
        for i in 0..100_000 {
            spec.txid = Some(format!("t{i}"));
            let code = generate(&spec);
            let crc = &code[code.len() - 4..];
            if crc.starts_with('0') {
                assert_eq!(crc.len(), 4);
                assert!(parse(&code).is_ok());
                return;
            }
        }
        unreachable!("no CRC with a leading zero in 100000 codes");
    }

    proptest! {
        #[test]
        fn everything_generated_parses_back_to_the_same_fields(
            cents in 1u64..10_000_000_000,
            name in "[A-Za-zÀ-ú ]{1,40}",
            city in "[A-Za-z ]{1,30}",
            txid in "[A-Za-z0-9]{1,30}",
            with_amount in any::<bool>(),
        ) {
            let amount = Money::try_from(rust_decimal::Decimal::new(cents as i64, 2)).ok().filter(|_| with_amount);
            let spec = BrCodeSpec {
                single_use: true,
                key: "pix@example.com".into(),
                info: None,
                amount,
                merchant_name: name.clone(),
                merchant_city: city.clone(),
                txid: Some(txid.clone()),
            };
            let code = generate(&spec);
            let p = parse(&code).unwrap();
            prop_assert_eq!(p.key.as_deref(), Some("pix@example.com"));
            prop_assert_eq!(p.amount, amount);
            let folded: String = fold_ascii(&name).chars().take(MERCHANT_NAME_LEN_MAX).collect();
            prop_assert_eq!(p.merchant_name, folded);
            prop_assert_eq!(p.txid, Some(txid.chars().take(TXID_LEN_MAX).collect::<String>()));
        }

        #[test]
        fn any_text_is_answered_without_a_panic(prefix in "000201[0-9]{0,8}", rest in "\\PC{0,300}") {
            let _ = parse(&format!("{prefix}{rest}"));
        }

        #[test]
        fn an_accented_name_reads_back_whichever_way_its_length_was_counted(
            name in "[A-Za-zÀ-ú ]{1,25}",
            by_chars in any::<bool>(),
        ) {
            let len = |v: &str| if by_chars { v.chars().count() } else { v.len() };
            let f = |id: u8, v: &str| format!("{id:02}{:02}{v}", len(v));
            let account = f(0, "br.gov.bcb.pix") + &f(1, "ana@example.com");
            let body = f(0, "01") + &f(26, &account) + &f(52, "0000") + &f(53, "986") + &f(58, "BR")
                + &f(59, &name) + &f(60, "SÃO PAULO") + &f(62, &f(5, "***")) + "6304";
            // Byte lengths over 99 do not fit the two digits; such a code cannot be written.
            prop_assume!(name.len() <= 99);
            let code = format!("{body}{:04X}", crc16(body.as_bytes()));
            let p = parse(&code).unwrap();
            prop_assert_eq!(p.merchant_name, name);
        }
    }
}
