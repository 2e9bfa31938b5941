//! Reading JSON request bodies field by field, so a client hears about every invalid field
//! at once (one message per field) instead of the first serde error.

use actix_web::http::header;
use actix_web::HttpRequest;
use serde_json::{Map, Value};

use super::error::{Violation, ViolationKind};
use crate::domain::money::Money;

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
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(BodyError::NotObject),
        Err(e) => Err(BodyError::NotJson(e.to_string())),
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

    /// An amount written as a JSON number, exactly as written: at least 0.01, at most two
    /// decimals (decisions.md §2).
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
            Some(_) => fail(self, "must be a number"),
        }
    }

    /// A CPF or CNPJ: digits only, with valid check digits.
    pub fn document(&mut self, field: &str, required: bool) -> Option<crate::domain::document::TaxId> {
        let s = self.string(field, required)?;
        match crate::domain::document::TaxId::parse(s) {
            Ok(t) => Some(t),
            Err(e) => {
                self.fail(field, format!("must be a CPF (11 digits) or CNPJ (14 digits): {e}"));
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
}
