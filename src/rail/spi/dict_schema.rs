//! Every DICT body pixgw writes (its client's requests and `pixgw spi-sim`'s answers),
//! checked against the DICT API 2.12.1's own schemas (`data/dict/openapi-2.12.1.json`): each
//! element is a property of its schema (through `$ref` and `allOf`), every required property
//! is there (the signature apart: it is added when the body is signed), a list holds the
//! items its schema names, and a value is of its type, in its enum, and a date-time where
//! the schema says so.
//!
//! The document contradicts itself twice, and the checker reads it as its properties say: a
//! name `required` but declared nowhere (`KeyStatistics` and `PersonStatistics` require
//! `SPI` and declare `Spi`; `ListFraudMarkersResponse` requires `Total` and declares no
//! `Total`) is allowed and not required.

use serde_json::{Map, Value};

use super::xml::{Document, Element};

/// The API document's component schemas.
pub struct Schemas(Map<String, Value>);

impl Schemas {
    pub fn load() -> Schemas {
        let doc: Value =
            serde_json::from_str(include_str!("../../../data/dict/openapi-2.12.1.json")).unwrap();
        Schemas(doc["components"]["schemas"].as_object().unwrap().clone())
    }

    /// The schema with its `$ref` followed and its `allOf` merged: properties and required
    /// names gathered, other keys taken from the first part that has them.
    fn resolve(&self, s: &Value) -> Value {
        if let Some(r) = s["$ref"].as_str() {
            let name = r.rsplit('/').next().unwrap_or(r);
            let mut out = self.resolve(&self.0[name]);
            out["refName"] = Value::String(name.to_owned());
            return out;
        }
        let Some(parts) = s["allOf"].as_array() else { return s.clone() };
        let mut out = serde_json::json!({});
        let mut properties = Map::new();
        let mut required = Vec::new();
        for p in parts.iter().map(|p| self.resolve(p)).chain(std::iter::once(s.clone())) {
            if let Some(props) = p["properties"].as_object() {
                properties.extend(props.clone());
            }
            required.extend(p["required"].as_array().cloned().unwrap_or_default());
            for (k, v) in p.as_object().into_iter().flatten() {
                if !matches!(k.as_str(), "properties" | "required" | "allOf") && out.get(k).is_none() {
                    out[k.as_str()] = v.clone();
                }
            }
        }
        if !properties.is_empty() {
            out["properties"] = Value::Object(properties);
        }
        out["required"] = Value::Array(required);
        out
    }

    /// What is wrong with a body whose root is a schema of the API.
    pub fn check_body(&self, text: &str) -> Vec<String> {
        let doc = match Document::parse(text.as_bytes()) {
            Ok(d) => d,
            Err(e) => return vec![format!("not XML: {e}")],
        };
        let root = doc.root.local.to_string();
        if !self.0.contains_key(&root) {
            return vec![format!("{root} is no schema of the API")];
        }
        let mut errors = Vec::new();
        let schema = serde_json::json!({"$ref": format!("#/components/schemas/{root}")});
        self.check(&doc.root, &schema, &root, &mut errors);
        errors
    }

    fn check(&self, e: &Element, schema: &Value, path: &str, errors: &mut Vec<String>) {
        let s = self.resolve(schema);
        let children: Vec<&Element> = e.elements().collect();
        if let Some(props) = s["properties"].as_object() {
            let required: Vec<&str> =
                s["required"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
            for c in &children {
                let name = c.local.to_string();
                let here = format!("{path}/{name}");
                let Some(prop) = props.get(&name) else {
                    if !required.contains(&name.as_str()) {
                        errors.push(format!("{here}: not a property of its schema"));
                    }
                    continue;
                };
                let p = self.resolve(prop);
                if p["type"] == "array" {
                    let items = &prop_items(prop, &p);
                    let item = self.resolve(items);
                    let item_name =
                        item["xml"]["name"].as_str().or_else(|| item["refName"].as_str()).map(str::to_owned);
                    for g in c.elements() {
                        if let Some(n) = &item_name {
                            if &*g.local != n.as_str() {
                                errors.push(format!("{here}/{}: the list holds {n}", g.local));
                                continue;
                            }
                        }
                        self.check(g, items, &format!("{here}/{}", g.local), errors);
                    }
                } else {
                    self.check(c, prop, &here, errors);
                }
            }
            for r in required.iter().filter(|r| props.contains_key(**r)) {
                if *r != "Signature" && !children.iter().any(|c| &*c.local == *r) {
                    errors.push(format!("{path}: required {r} is missing"));
                }
            }
            return;
        }
        if s["type"] == "object" {
            // An object whose properties the API leaves open (the signature).
            return;
        }
        if !children.is_empty() {
            errors.push(format!("{path}: a value, not elements"));
            return;
        }
        let text = e.text();
        let text = text.trim();
        if let Some(values) = s["enum"].as_array() {
            if !values.iter().any(|v| v.as_str() == Some(text)) {
                errors.push(format!("{path}: {text} is not one of {values:?}"));
            }
        }
        let fine = match s["type"].as_str() {
            Some("integer") => text.parse::<i64>().is_ok(),
            Some("number") => text.parse::<f64>().is_ok(),
            Some("boolean") => text == "true" || text == "false",
            _ => true,
        };
        if !fine {
            errors.push(format!("{path}: {text} is not a {}", s["type"]));
        }
        if s["format"] == "date-time" && chrono::DateTime::parse_from_rfc3339(text).is_err() {
            errors.push(format!("{path}: {text} is not a date-time"));
        }
        if let Some(max) = s["maxLength"].as_u64() {
            if text.chars().count() as u64 > max {
                errors.push(format!("{path}: longer than {max}"));
            }
        }
    }
}

/// A list's item schema (kept unresolved, so its name is known).
fn prop_items(prop: &Value, resolved: &Value) -> Value {
    if prop["items"].is_object() {
        return prop["items"].clone();
    }
    resolved["items"].clone()
}

#[cfg(test)]
mod tests {
    use chrono::{DateTime, Utc};

    use super::*;
    use crate::domain::claim::{ClaimType, Reason, Step};
    use crate::domain::money::Money;
    use crate::rail::spi::dict::{Entry, Refund};
    use crate::rail::spi::message::Ispb;
    use crate::rail::spi::recovery::*;

    fn at() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-11-28T10:00:00Z").unwrap().with_timezone(&Utc)
    }

    fn entry() -> Entry {
        Entry {
            key: "ana@example.com".into(),
            key_type: "EMAIL".into(),
            participant: Ispb::parse("1234ABCD").unwrap(),
            branch: Some("1".into()),
            account_number: "42".into(),
            account_type: "TRAN".into(),
            opening_date: at(),
            owner_type: "NATURAL_PERSON".into(),
            tax_id: "52998224725".into(),
            name: "Ana & Cia".into(),
            trade_name: None,
            creation_date: at(),
            key_ownership_date: at(),
        }
    }

    fn refund() -> Refund {
        Refund {
            id: "91d65e98-97c0-4b0f-b577-73625da1f9fc".into(),
            transaction_id: "E9999901012341234123412345678900".into(),
            reason: "FRAUD".into(),
            amount: Money::parse_two_places("100.00").unwrap(),
            details: Some("golpe".into()),
            status: "CLOSED".into(),
            contested: "99999011".into(),
            requesting: "99999010".into(),
            created: at(),
            modified: at(),
            analysis_result: Some("TOTALLY_ACCEPTED".into()),
            analysis_details: None,
            refund_transaction_id: Some("D9999901012341234123412345678900".into()),
            funds_recovery_id: Some("ca1b9c01-ff9e-4a58-90ab-d31512e15ce0".into()),
        }
    }

    /// Every body pixgw's DICT client writes, and every answer spi-sim's DICT writes.
    fn bodies() -> Vec<String> {
        use crate::rail::spi::{claims, dict, fraud, sync};
        let ispb = Ispb::parse("1234ABCD").unwrap();
        let rid = uuid::Uuid::nil();
        let e = entry();
        let mut out = vec![
            dict::create_request(&e, "USER_REQUESTED", &rid),
            dict::delete_request(&e.key, &ispb, "USER_REQUESTED"),
            dict::update_request(&e, "RFB_VALIDATION"),
            dict::entry_response("UpdateEntryResponse", &e, "c", at()),
            dict::entry_response("GetEntryResponse", &e, "c", at()),
            dict::entry_response("CreateEntryResponse", &e, "c", at()),
            dict::delete_response(&e.key, "c", at()),
            dict::close_refund_request(
                &refund().id,
                &ispb,
                "TOTALLY_ACCEPTED",
                Some("ok"),
                Some("D9999901012341234123412345678900"),
            ),
            dict::list_refunds_response(&[refund()], false, "c", at()),
            dict::close_refund_response(&refund(), "c", at()),
            claims::create_request(ClaimType::Portability, &e),
            claims::list_response(
                &[claims::DictClaim::asked(ClaimType::Portability, e.clone())],
                false,
                "c",
                at(),
            ),
            sync::verification_request(&ispb, "EMAIL", &"0".repeat(64)),
            sync::cid_file_request(&ispb, "EMAIL"),
            sync::entry_by_cid_response(&"0".repeat(64), &e, &rid, "c", at()),
            fraud::cancel_request(&ispb, "91d65e98-97c0-4b0f-b577-73625da1f9fc"),
        ];
        let claim = claims::DictClaim::asked(ClaimType::Portability, e.clone());
        for root in ["CreateClaimResponse", "GetClaimResponse"] {
            out.push(claims::claim_response(root, &claim, None, "c", at()));
        }
        let stats = format!(
            "{}{}</GetEntryResponse>",
            fraud::write_statistics("KeyStatistics", &crate::domain::risk::Counters::default(), 1, at()),
            fraud::write_statistics("OwnerStatistics", &crate::domain::risk::Counters::default(), 2, at())
        );
        out.push(
            dict::entry_response("GetEntryResponse", &e, "c", at()).replace("</GetEntryResponse>", &stats),
        );
        let event = sync::CidEvent { kind: "ADDED".into(), cid: "0".repeat(64), at: at() };
        let window = sync::CidWindow {
            start: at(),
            end: at(),
            vsync_start: "0".repeat(64),
            vsync_end: "0".repeat(64),
        };
        out.push(sync::cid_events_response("1234ABCD", "EMAIL", &[event], &window, false, "c", at()));
        out.push(sync::verification_response(&ispb, "EMAIL", &"0".repeat(64), 7, true, "c", at()));
        let file = sync::CidFile {
            id: 3,
            status: "AVAILABLE".into(),
            participant: "1234ABCD".into(),
            key_type: "EMAIL".into(),
            requested: at(),
            url: Some("https://dict.example/cids/3".into()),
            bytes: Some(64),
            sha256: Some("0".repeat(64)),
        };
        for root in ["CreateCidSetFileResponse", "GetCidSetFileResponse"] {
            out.push(sync::cid_file_response(root, &file, "c", at()));
        }
        let mark = fraud::FraudMarker {
            tax_id: "52998224725".into(),
            key: Some("ana@example.com".into()),
            fraud_type: "MULE_ACCOUNT".into(),
            id: "91d65e98-97c0-4b0f-b577-73625da1f9fc".into(),
            status: "REGISTERED".into(),
            created: at(),
            modified: at(),
        };
        out.push(fraud::create_request(&ispb, &mark, &rid));
        for root in ["CreateFraudMarkerResponse", "CancelFraudMarkerResponse"] {
            out.push(fraud::marker_response(root, &mark, "c", at()));
        }
        out.push(fraud::list_response(&[mark], "c", at()));
        for step in [
            Step::Acknowledge,
            Step::Confirm(Reason::UserRequested),
            Step::Cancel(Reason::Fraud),
            Step::Complete,
        ] {
            out.push(claims::step_request(step, "5a0a5b8e-8f3f-4c4c-9b4d-2f1b5e2c9a11", &ispb, &rid));
        }
        let r = FundsRecovery {
            id: "ca1b9c01-ff9e-4a58-90ab-d31512e15ce0".into(),
            root_transaction_id: "E9999901012341234123412345678900".into(),
            situation_type: "SCAM".into(),
            details: Some("QR falso".into()),
            email: "abc@pix.br".into(),
            phone: "+5561988887777".into(),
            status: "AWAITING_ANALYSIS".into(),
            reporter: "99999010".into(),
            created: at(),
            modified: at(),
        };
        let graph = TrackingGraph {
            recovery_id: r.id.clone(),
            root_transaction_id: r.root_transaction_id.clone(),
            created: at(),
            parameters: GRAPH_MAX,
            accounts: vec![GraphAccount { id: 1, owner_id: 1, participant: "99999010".into() }],
            transactions: vec![GraphTransaction {
                id: r.root_transaction_id.clone(),
                debtor_account: 1,
                creditor_account: 1,
                amount: Money::parse_two_places("10.00").unwrap(),
                refundable: Money::parse_two_places("10.00").unwrap(),
                settled: at(),
            }],
        };
        let report = InfractionReport {
            id: "91d65e98-97c0-4b0f-b577-73625da1f9fc".into(),
            transaction_id: r.root_transaction_id.clone(),
            situation_type: "SCAM".into(),
            details: None,
            recovery_id: Some(r.id.clone()),
            status: "CLOSED".into(),
            reporter: "99999010".into(),
            counterparty: "99999011".into(),
            analysis_result: Some("AGREED".into()),
            analysis_details: Some("ok".into()),
            fraud_marker_id: None,
            amount: Some(Money::parse_two_places("10.00").unwrap()),
            created: at(),
            modified: at(),
        };
        let event = EventNotification {
            id: 1,
            event: "FUNDS_RECOVERY_ANALYSED".into(),
            entity_id: r.id.clone(),
            at: at(),
            participant: "99999010".into(),
        };
        out.extend([
            create_request(&ispb, &r, &GRAPH_MAX),
            step_request("RefundFundsRecoveryRequest", &ispb, &r.id),
            step_request("CancelFundsRecoveryRequest", &ispb, &r.id),
            update_request(&ispb, &r),
            recovery_response("UpdateFundsRecoveryResponse", &r, None, "c", at()),
            recovery_response("CreateFundsRecoveryResponse", &r, Some(&graph), "c", at()),
            recovery_response("GetFundsRecoveryResponse", &r, None, "c", at()),
            recovery_response("RefundFundsRecoveryResponse", &r, None, "c", at()),
            list_reports_response(std::slice::from_ref(&report), false, "c", at()),
            acknowledge_request(&ispb, &report.id),
            close_request(&ispb, &report.id, true, "MULE_ACCOUNT", Some("ok")),
            close_request(&ispb, &report.id, false, "", None),
            report_response("CloseInfractionReportResponse", &report, "c", at()),
            events_response(&[event], "1", false, "c", at()),
        ]);
        out
    }

    #[test]
    fn every_dict_body_pixgw_writes_follows_the_apis_schemas() {
        let schemas = Schemas::load();
        let mut wrong = Vec::new();
        for body in bodies() {
            let errors = schemas.check_body(&body);
            if !errors.is_empty() {
                wrong.push(format!("{}\n  {}", &body[..body.len().min(160)], errors.join("\n  ")));
            }
        }
        assert!(wrong.is_empty(), "{} bodies break the API's schemas:\n{}", wrong.len(), wrong.join("\n"));
    }

    #[test]
    fn the_checker_finds_what_breaks_a_schema() {
        let schemas = Schemas::load();
        let unknown = "<DeleteEntryRequest><Key>k</Key><Participant>1234ABCD</Participant><Reason>USER_REQUESTED</Reason><Extra>1</Extra></DeleteEntryRequest>";
        assert!(
            schemas.check_body(unknown).iter().any(|e| e.contains("Extra")),
            "{:?}",
            schemas.check_body(unknown)
        );
        let missing = "<DeleteEntryRequest><Key>k</Key><Reason>USER_REQUESTED</Reason></DeleteEntryRequest>";
        assert!(schemas.check_body(missing).iter().any(|e| e.contains("required Participant")));
        let bad_enum = "<DeleteEntryRequest><Key>k</Key><Participant>1234ABCD</Participant><Reason>BECAUSE</Reason></DeleteEntryRequest>";
        assert!(schemas.check_body(bad_enum).iter().any(|e| e.contains("BECAUSE")));
        assert!(!schemas.check_body("<NoSuchThing/>").is_empty());
        // Nested: an enum two levels down, an element the contact does not have, a list's
        // item of another name, a number that is not one.
        let nested = "<CreateFundsRecoveryRequest><Participant>1234ABCD</Participant><FundsRecovery><RootTransactionId>E1</RootTransactionId><SituationType>BAD</SituationType><ContactInformation><Email>a@b.br</Email><Phone>+55</Phone><Fax>1</Fax></ContactInformation></FundsRecovery><TrackingGraphParameters><MaxHops>two</MaxHops></TrackingGraphParameters></CreateFundsRecoveryRequest>";
        let errors = schemas.check_body(nested);
        for expected in ["BAD", "Fax", "two"] {
            assert!(errors.iter().any(|e| e.contains(expected)), "{expected}: {errors:?}");
        }
        let list = "<ListInfractionReportsResponse><ResponseTime>2026-11-28T10:00:00Z</ResponseTime><CorrelationId>c</CorrelationId><InfractionReports><Report/></InfractionReports></ListInfractionReportsResponse>";
        assert!(
            schemas.check_body(list).iter().any(|e| e.contains("the list holds InfractionReport")),
            "{:?}",
            schemas.check_body(list)
        );
    }
}
