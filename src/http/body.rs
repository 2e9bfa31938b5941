//! Reading JSON request bodies field by field, so a client hears about every invalid field
//! at once (one message per field) instead of the first serde error.

use actix_web::body::{BoxBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::{header, StatusCode};
use actix_web::middleware::Next;
use actix_web::{HttpMessage, HttpRequest, HttpResponse};
use futures_util::StreamExt;
use serde_json::{Map, Value};
use std::future::Future;

use super::error::{Violation, ViolationKind};
use crate::config::{BODY_TIMEOUT_MS_DEFAULT, REQUEST_BODY_BYTES_MAX};
use crate::domain::money::Money;

/// Reads the whole request body before routing, within the server's body deadline: a
/// client whose headers arrived but whose body trickles (or never comes) is answered 408
/// and its connection closed, instead of holding a connection and a file descriptor for
/// as long as it likes. A body over [`REQUEST_BODY_BYTES_MAX`] is 413 as soon as it is
/// seen. The deadline is real time: it is about the network, not the business clock.
pub async fn read_within_deadline(
    mut req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    // An Idempotency-Key on a route that takes none is refused once the body is read (so
    // the connection stays usable), before anything runs.
    use super::idempotency::{gate, refusal, Gate};
    let key = gate(&req);
    // A request that announces no body (most reads, a DELETE) has nothing to wait for.
    let headers = req.headers();
    if !headers.contains_key(header::CONTENT_LENGTH) && !headers.contains_key(header::TRANSFER_ENCODING) {
        return match key {
            Gate::Honour => super::idempotency::idempotency(req, next, actix_web::web::Bytes::new()).await,
            Gate::Refuse => Ok(refusal(req)),
            Gate::Pass => Ok(next.call(req).await?.map_into_boxed_body()),
        };
    }
    let deadline = req
        .app_data::<actix_web::web::Data<super::AppState>>()
        .map_or(std::time::Duration::from_millis(BODY_TIMEOUT_MS_DEFAULT), |s| s.body_timeout);
    let mut payload = req.take_payload();
    let refused = match read_body(&mut payload, deadline).await {
        Ok(Ok(body)) => {
            // A client's write with an Idempotency-Key goes through its record first.
            match key {
                Gate::Honour => return super::idempotency::idempotency(req, next, body).await,
                Gate::Refuse => return Ok(refusal(req)),
                Gate::Pass => {}
            }
            req.set_payload(actix_web::dev::Payload::from(body));
            return Ok(next.call(req).await?.map_into_boxed_body());
        }
        Ok(Err(status)) => status,
        Err(_) => StatusCode::REQUEST_TIMEOUT,
    };
    // The rest of the body is never read, so the connection cannot carry another request.
    // The request's payload goes with the response, unread (and the error envelope moves it
    // into the final body, `hold_unread`): the HTTP/1 dispatcher closes a connection whose
    // payload is still wanted and unfinished once the response's last byte is written, but
    // drains a chunked one whose payload was dropped, for as long as the client trickles
    // it (a 408 then kept its connection open).
    let mut res = HttpResponse::build(refused).insert_header((header::CONNECTION, "close")).finish();
    res.head_mut().set_connection_type(actix_web::http::ConnectionType::Close);
    res.extensions_mut().insert(UnreadBody { _payload: payload });
    Ok(req.into_response(res))
}

/// The whole body, or why not (413, 400), or the deadline's elapsing.
async fn read_body(
    payload: &mut actix_web::dev::Payload,
    deadline: std::time::Duration,
) -> Result<Result<actix_web::web::Bytes, StatusCode>, tokio::time::error::Elapsed> {
    let read = async {
        // Most bodies arrive in one chunk: kept as it is, without a copy.
        let Some(first) = payload.next().await else { return Ok(actix_web::web::Bytes::new()) };
        let first = first.map_err(|_| StatusCode::BAD_REQUEST)?;
        let mut body: Option<actix_web::web::BytesMut> = None;
        while let Some(chunk) = payload.next().await {
            let chunk = chunk.map_err(|_| StatusCode::BAD_REQUEST)?;
            let b = body.get_or_insert_with(|| actix_web::web::BytesMut::from(&first[..]));
            if b.len() + chunk.len() > REQUEST_BODY_BYTES_MAX {
                return Err(StatusCode::PAYLOAD_TOO_LARGE);
            }
            b.extend_from_slice(&chunk);
        }
        if first.len() > REQUEST_BODY_BYTES_MAX {
            return Err(StatusCode::PAYLOAD_TOO_LARGE);
        }
        Ok(body.map_or(first, actix_web::web::BytesMut::freeze))
    };
    // A body that came with the headers is ready at the first poll: no timer is set for it.
    let mut read = std::pin::pin!(read);
    let ready = std::future::poll_fn(|cx| std::task::Poll::Ready(read.as_mut().poll(cx))).await;
    match ready {
        std::task::Poll::Ready(r) => Ok(r),
        std::task::Poll::Pending => tokio::time::timeout(deadline, read).await,
    }
}

/// A request body refused before it ended, kept alive until its refusal is written.
struct UnreadBody {
    _payload: actix_web::dev::Payload,
}

/// A response body that holds a refused request's unread body until it has been written.
struct HoldingBody {
    inner: BoxBody,
    _unread: UnreadBody,
}

impl MessageBody for HoldingBody {
    type Error = <BoxBody as MessageBody>::Error;

    fn size(&self) -> actix_web::body::BodySize {
        self.inner.size()
    }

    fn poll_next(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<actix_web::web::Bytes, Self::Error>>> {
        std::pin::Pin::new(&mut self.get_mut().inner).poll_next(cx)
    }
}

/// Moves a refused request's unread body, which [`read_within_deadline`] leaves in the
/// response's extensions, into the response's body: the body is the last thing of a response
/// the dispatcher lets go of, after its last byte is written, so the connection is closed
/// rather than drained. Whoever builds the final body of an error response calls this.
pub fn hold_unread(mut res: HttpResponse) -> HttpResponse {
    let unread = res.extensions_mut().remove::<UnreadBody>();
    match unread {
        None => res,
        Some(unread) => res.map_body(|_, body| BoxBody::new(HoldingBody { inner: body, _unread: unread })),
    }
}

/// Why a body is not a JSON object.
#[derive(Debug, Clone, PartialEq)]
pub enum BodyError {
    ContentType,
    NotJson(String),
    NotObject,
}

impl BodyError {
    pub fn violation(&self) -> Violation {
        match self {
            BodyError::ContentType => Violation::new("Content-Type", "must be application/json"),
            BodyError::NotJson(e) => Violation::new("body", format!("is not valid JSON ({e})")),
            BodyError::NotObject => Violation::new("body", "must be a JSON object"),
        }
    }
}

/// The body as a JSON object, after checking the content type.
pub fn json_object(req: &HttpRequest, body: &[u8]) -> Result<Map<String, Value>, BodyError> {
    let is_json = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|m| m.trim().eq_ignore_ascii_case("application/json"));
    if !is_json {
        return Err(BodyError::ContentType);
    }
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(map)) => {
            // serde_json keeps the last of two members with one name; a proxy or a client
            // library that keeps the first would see another request (another amount).
            no_member_twice(body).map_err(BodyError::NotJson)?;
            Ok(map)
        }
        Ok(_) => Err(BodyError::NotObject),
        Err(e) => Err(BodyError::NotJson(e.to_string())),
    }
}

/// Fails, saying which, when an object of a JSON text names a member twice (anywhere in it).
pub fn no_member_twice(body: &[u8]) -> Result<(), String> {
    serde_json::from_slice::<NoDuplicates>(body).map(|_| ()).map_err(|e| e.to_string())
}

/// Walks a JSON text and fails on an object that names a member twice (anywhere in it).
/// Names are compared decoded, so `"a"` and `"\u0061"` are the same name.
struct NoDuplicates;

impl<'de> serde::Deserialize<'de> for NoDuplicates {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(NoDuplicatesVisitor)
    }
}

struct NoDuplicatesVisitor;

/// A member name, borrowed from the body when it has no escapes.
struct Name<'de>(std::borrow::Cow<'de, str>);

impl<'de> serde::Deserialize<'de> for Name<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Name<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a member name")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Name<'de>, E> {
                Ok(Name(std::borrow::Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Name<'de>, E> {
                Ok(Name(std::borrow::Cow::Owned(v.to_owned())))
            }
        }
        d.deserialize_str(V)
    }
}

impl<'de> serde::de::Visitor<'de> for NoDuplicatesVisitor {
    type Value = NoDuplicates;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("JSON")
    }

    fn visit_bool<E>(self, _: bool) -> Result<NoDuplicates, E> {
        Ok(NoDuplicates)
    }
    fn visit_i64<E>(self, _: i64) -> Result<NoDuplicates, E> {
        Ok(NoDuplicates)
    }
    fn visit_u64<E>(self, _: u64) -> Result<NoDuplicates, E> {
        Ok(NoDuplicates)
    }
    fn visit_f64<E>(self, _: f64) -> Result<NoDuplicates, E> {
        Ok(NoDuplicates)
    }
    fn visit_str<E>(self, _: &str) -> Result<NoDuplicates, E> {
        Ok(NoDuplicates)
    }
    fn visit_unit<E>(self) -> Result<NoDuplicates, E> {
        Ok(NoDuplicates)
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<NoDuplicates, A::Error> {
        while seq.next_element::<NoDuplicates>()?.is_some() {}
        Ok(NoDuplicates)
    }

    // With arbitrary_precision a number arrives as a one-member map too; it has one name.
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<NoDuplicates, A::Error> {
        // Request objects have a handful of members: a list beats a hash set, and names
        // without escapes are borrowed from the body, not copied.
        let mut seen: Vec<std::borrow::Cow<'de, str>> = Vec::new();
        while let Some(Name(name)) = map.next_key::<Name<'de>>()? {
            map.next_value::<NoDuplicates>()?;
            if seen.contains(&name) {
                return Err(serde::de::Error::custom(format!("the member \"{name}\" appears twice")));
            }
            seen.push(name);
        }
        Ok(NoDuplicates)
    }
}

/// The body as a JSON object, or the 400 validation error that says why not.
pub fn request_object(req: &HttpRequest, body: &[u8]) -> Result<Map<String, Value>, super::error::ApiError> {
    json_object(req, body).map_err(|e| super::error::ApiError::Validation(vec![e.violation()]))
}

/// Collects the violations of one object's fields. `prefix` names nested objects
/// (`limits.daily`).
pub struct Fields<'a> {
    obj: &'a Map<String, Value>,
    prefix: String,
    pub violations: Vec<Violation>,
}

impl<'a> Fields<'a> {
    pub fn new(obj: &'a Map<String, Value>) -> Fields<'a> {
        Fields { obj, prefix: String::new(), violations: Vec::new() }
    }

    /// Fields of an object inside an array, named `prefix` + field (`splits[2].value`).
    pub fn nested(obj: &'a Map<String, Value>, prefix: String) -> Fields<'a> {
        Fields { obj, prefix, violations: Vec::new() }
    }

    fn name(&self, field: &str) -> String {
        format!("{}{field}", self.prefix)
    }

    /// What names this object's fields (`valor.desconto.`), empty at the top.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// A member as sent, for the few fields that take more than one JSON type.
    pub fn raw(&self, field: &str) -> Option<&'a Value> {
        self.obj.get(field)
    }

    pub fn fail(&mut self, field: &str, message: impl Into<String>) {
        self.fail_as(field, message, ViolationKind::Other);
    }

    pub fn fail_as(&mut self, field: &str, message: impl Into<String>, kind: ViolationKind) {
        let name = self.name(field);
        self.violations.push(Violation::new(name, message).of_kind(kind));
    }

    /// A required string of 1 to `max` characters (after trimming, which is kept out of
    /// the value).
    pub fn text(&mut self, field: &str, required: bool, max: usize) -> Option<&'a str> {
        let s = self.string(field, required)?;
        if s.trim().is_empty() {
            if required {
                self.fail(field, "must not be empty");
            }
            return None;
        }
        if s.chars().count() > max {
            self.fail(field, format!("must have at most {max} characters"));
            return None;
        }
        Some(s)
    }

    /// A client's externalId: 1 to [`EXTERNAL_ID_LEN_MAX`] characters, not beginning with
    /// the prefix of the debits Pix Automático makes on the account's behalf (so no request
    /// can take the externalId of a debit before it is made).
    pub fn external_id(&mut self, field: &str, required: bool) -> Option<&'a str> {
        use crate::domain::cobr::DEBIT_EXTERNAL_ID_PREFIX;
        let id = self.text(field, required, crate::domain::transaction::EXTERNAL_ID_LEN_MAX)?;
        if id.starts_with(crate::domain::decide::OPERATOR_EXTERNAL_ID_PREFIX) {
            self.fail(
                field,
                format!(
                    "must not begin with {}, kept for the operator's moves",
                    crate::domain::decide::OPERATOR_EXTERNAL_ID_PREFIX
                ),
            );
            return None;
        }
        if id.starts_with(DEBIT_EXTERNAL_ID_PREFIX) {
            self.fail(
                field,
                format!("must not begin with {DEBIT_EXTERNAL_ID_PREFIX}, kept for Pix Automático's debits"),
            );
            return None;
        }
        Some(id)
    }

    /// An amount written as a JSON number, exactly as written: at least 0.01, at most two
    /// decimals (interface.md "Money").
    pub fn amount(&mut self, field: &str, required: bool) -> Option<Money> {
        let fail = |f: &mut Self, m: &str| {
            f.fail_as(field, m.to_owned(), ViolationKind::Amount);
            None
        };
        match self.obj.get(field) {
            None | Some(Value::Null) => {
                if required {
                    return fail(self, "is required");
                }
                None
            }
            Some(Value::Number(n)) => match Money::parse(&n.to_string()) {
                Ok(m) if m < Money::parse("0.01").unwrap_or(Money::ZERO) => {
                    fail(self, "must be at least 0.01")
                }
                Ok(m) => Some(m),
                Err(crate::domain::money::MoneyError::TooManyDecimals) => {
                    fail(self, "must have at most 2 decimal places")
                }
                Err(crate::domain::money::MoneyError::Negative) => fail(self, "must be at least 0.01"),
                Err(e) => fail(self, &e.to_string()),
            },
            Some(Value::String(_)) => fail(self, "must be a JSON number such as 10.50, not a string"),
            Some(_) => fail(self, "must be a number"),
        }
    }

    /// A CPF or CNPJ: digits only, with valid check digits.
    pub fn document(&mut self, field: &str, required: bool) -> Option<crate::domain::document::TaxId> {
        let s = self.string(field, required)?;
        match crate::domain::document::TaxId::parse(s) {
            Ok(t) => Some(t),
            Err(e) => {
                self.fail(field, format!("must be a CPF (11 digits) or CNPJ (14 characters): {e}"));
                None
            }
        }
    }

    /// Refuses members not in `known`, so a typo is not silently ignored.
    pub fn only(&mut self, known: &[&str]) {
        let unknown: Vec<String> =
            self.obj.keys().filter(|k| !known.contains(&k.as_str())).cloned().collect();
        for k in unknown {
            self.fail(&k, "is not a known field");
        }
    }

    pub fn string(&mut self, field: &str, required: bool) -> Option<&'a str> {
        match self.obj.get(field) {
            None | Some(Value::Null) => {
                if required {
                    self.fail(field, "is required");
                }
                None
            }
            Some(Value::String(s)) => Some(s.as_str()),
            Some(_) => {
                self.fail(field, "must be a string");
                None
            }
        }
    }

    pub fn boolean(&mut self, field: &str) -> Option<bool> {
        match self.obj.get(field) {
            None | Some(Value::Null) => None,
            Some(Value::Bool(b)) => Some(*b),
            Some(_) => {
                self.fail(field, "must be a boolean");
                None
            }
        }
    }

    /// A date written `YYYY-MM-DD`.
    pub fn date(&mut self, field: &str, required: bool) -> Option<chrono::NaiveDate> {
        let text = self.string(field, required)?;
        let parsed = chrono::NaiveDate::parse_from_str(text, "%Y-%m-%d").ok().filter(|_| text.len() == 10);
        if parsed.is_none() {
            self.fail(field, "must be a date, YYYY-MM-DD");
        }
        parsed
    }

    /// An amount written as a decimal string (admin API and family B).
    pub fn money_string(&mut self, field: &str) -> Option<Money> {
        let text = self.string(field, false)?;
        match Money::parse(text) {
            Ok(m) => Some(m),
            Err(e) => {
                self.fail(field, e.to_string());
                None
            }
        }
    }

    /// A non-negative integer not above `max`.
    pub fn integer(&mut self, field: &str, min: u64, max: u64) -> Option<u64> {
        match self.obj.get(field) {
            None | Some(Value::Null) => None,
            Some(Value::Number(n)) => match n.as_u64().filter(|v| (min..=max).contains(v)) {
                Some(v) => Some(v),
                None => {
                    self.fail(field, format!("must be an integer from {min} to {max}"));
                    None
                }
            },
            Some(_) => {
                self.fail(field, "must be a number");
                None
            }
        }
    }

    /// A nested object, read with its own `Fields` whose violations join ours.
    pub fn object<T>(&mut self, field: &str, read: impl FnOnce(&mut Fields<'a>) -> T) -> Option<T> {
        match self.obj.get(field) {
            None | Some(Value::Null) => None,
            Some(Value::Object(inner)) => {
                let mut nested =
                    Fields { obj: inner, prefix: self.name(&format!("{field}.")), violations: vec![] };
                let out = read(&mut nested);
                self.violations.append(&mut nested.violations);
                Some(out)
            }
            Some(_) => {
                self.fail(field, "must be an object");
                None
            }
        }
    }
}

/// A positive integer query parameter within `range`.
pub fn int_param(
    q: &std::collections::HashMap<String, String>,
    name: &str,
    range: std::ops::RangeInclusive<u32>,
    default: u32,
    violations: &mut Vec<Violation>,
) -> u32 {
    match q.get(name).map(|v| v.parse::<u32>()) {
        None => default,
        Some(Ok(n)) if range.contains(&n) => n,
        Some(_) => {
            let max = if *range.end() == u32::MAX { String::new() } else { format!(" to {}", range.end()) };
            violations.push(Violation::new(name, format!("must be an integer from {}{max}", range.start())));
            default
        }
    }
}

/// Refuses query parameters the route does not know (a misspelt filter would otherwise
/// silently list everything).
pub fn known_params(
    q: &std::collections::HashMap<String, String>,
    known: &[&str],
    violations: &mut Vec<Violation>,
) {
    let mut unknown: Vec<&String> = q.keys().filter(|k| !known.contains(&k.as_str())).collect();
    unknown.sort();
    for k in unknown {
        violations.push(Violation::new(
            k.as_str(),
            format!("is not a parameter of this route; known: {}", known.join(", ")),
        ));
    }
}

/// What the unit tests of the body readers share.
#[cfg(test)]
pub mod testing {
    use serde_json::{Map, Value};

    use crate::http::error::{ApiError, Family};

    /// A body as a route reads it: the JSON text parsed, numbers kept as written.
    pub fn object(text: &str) -> Map<String, Value> {
        match serde_json::from_str(text) {
            Ok(Value::Object(m)) => m,
            other => panic!("not a JSON object: {other:?}"),
        }
    }

    /// The `(field, text)` of each violation of a validation error, after checking it is
    /// one: a 400 `HTTP_ERROR` in family A.
    pub fn violations(e: ApiError) -> Vec<(String, String)> {
        let parts = e.parts(Family::Extended);
        assert_eq!((parts.status.as_u16(), parts.code), (400, "HTTP_ERROR"), "{e:?}");
        match e {
            ApiError::Validation(v) => v.iter().map(|x| (x.field.clone(), x.text())).collect(),
            other => panic!("not a validation error: {other:?}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => Map::new(),
        }
    }

    /// A client's externalId is 1 to 100 characters and never one of Pix Automático's
    /// debits' (`pixauto:`), which no request may take before the debit is made.
    #[test]
    fn an_external_id_may_not_take_the_prefix_of_pix_automaticos_debits() {
        let max = crate::domain::transaction::EXTERNAL_ID_LEN_MAX;
        for (id, ok) in [
            ("order-1".to_owned(), true),
            ("x".repeat(max), true),
            ("x".repeat(max + 1), false),
            ("pixauto:RR99999999202611260000000000a:t:1".to_owned(), false),
            ("PIXAUTO:anything".to_owned(), true),
            ("my-pixauto:1".to_owned(), true),
        ] {
            let o = obj(json!({"externalId": id}));
            let mut f = Fields::new(&o);
            assert_eq!(f.external_id("externalId", true).is_some(), ok, "{id}");
            assert_eq!(f.violations.is_empty(), ok, "{id}");
        }
    }

    #[test]
    fn every_bad_field_is_reported() {
        let o = obj(json!({"a": 1, "b": "x", "n": {"m": "1.005"}, "zz": true}));
        let mut f = Fields::new(&o);
        f.only(&["a", "b", "c", "n"]);
        assert_eq!(f.string("a", true), None);
        assert_eq!(f.string("b", true), Some("x"));
        assert_eq!(f.string("c", true), None);
        f.object("n", |n| n.money_string("m"));
        let texts: Vec<String> = f.violations.iter().map(Violation::text).collect();
        assert_eq!(
            texts,
            vec![
                "zz is not a known field",
                "a must be a string",
                "c is required",
                "n.m must have at most 2 decimal places"
            ]
        );
    }

    #[test]
    fn integers_are_bounded() {
        let o = obj(json!({"x": 5, "y": -1, "z": 1.5, "w": "3"}));
        let mut f = Fields::new(&o);
        assert_eq!(f.integer("x", 1, 5), Some(5));
        assert_eq!(f.integer("y", 0, 5), None);
        assert_eq!(f.integer("z", 0, 5), None);
        assert_eq!(f.integer("w", 0, 5), None);
        assert_eq!(f.violations.len(), 3);
    }

    #[test]
    fn a_member_named_twice_anywhere_is_not_json_we_accept() {
        let req = actix_web::test::TestRequest::default()
            .insert_header((header::CONTENT_TYPE, "application/json"))
            .to_http_request();
        let read = |text: &str| json_object(&req, text.as_bytes());
        for twice in [
            r#"{"value": 0.01, "value": 0.02}"#,
            r#"{"value": 1, "v\u0061lue": 2}"#,
            r#"{"details": {"key": "a", "key": "b"}}"#,
            r#"{"splits": [{"x": 1}, {"y": 1, "y": 2}]}"#,
        ] {
            match read(twice) {
                Err(BodyError::NotJson(e)) => assert!(e.contains("appears twice"), "{twice}: {e}"),
                other => panic!("{twice}: {other:?}"),
            }
        }
        // The same name in sibling objects, and numbers of any precision, are fine.
        let ok = read(r#"{"a": {"k": 1}, "b": {"k": 2.005}, "c": [{"k": 1}, {"k": 1e400}]}"#).unwrap();
        assert_eq!(ok.len(), 3);
        assert_eq!(ok["b"]["k"].to_string(), "2.005");
    }
}
