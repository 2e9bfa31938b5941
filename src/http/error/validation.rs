//! Violations: what a body reader reports of each invalid field, and the `errorCode` a
//! list of them earns in family A.

use serde::Serialize;
use utoipa::ToSchema;

/// What rule a violation breaks, for the `errorCode` of interface.md "Codes".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ViolationKind {
    Amount,
    Key,
    #[default]
    Other,
}

/// One offending field of a request body.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct Violation {
    pub field: String,
    pub message: String,
    #[serde(skip)]
    pub kind: ViolationKind,
}

impl Violation {
    /// A violation of `field`. Its text is the field then the message, so a message that
    /// begins by naming the field again (a domain error's own text, such as "amount must
    /// not exceed ...") has that name taken off here, the one place every violation is made:
    /// no text reads "amount amount ...".
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Violation {
        let field = field.into();
        let mut message = message.into();
        let name = field_name(&field);
        if let Some(rest) = message.strip_prefix(name).and_then(|r| r.strip_prefix(' ')) {
            if !name.is_empty() {
                message = rest.to_owned();
            }
        }
        Violation { field, message, kind: ViolationKind::Other }
    }

    pub fn of_kind(mut self, kind: ViolationKind) -> Violation {
        self.kind = kind;
        self
    }

    /// The one-line text of family A validation messages: `"field message"`.
    pub fn text(&self) -> String {
        format!("{} {}", self.field, self.message)
    }
}

/// The last name of a field's path: `dataInicial` of `calendario.dataInicial`, `headers`
/// of `headers[0]`.
fn field_name(field: &str) -> &str {
    let last = field.rsplit('.').next().unwrap_or(field);
    last.split('[').next().unwrap_or(last)
}

/// `PIX_INVALID_AMOUNT` or `PIX_INVALID_PIX_KEY` when every violation is of that kind.
pub fn error_code(v: &[Violation]) -> Option<&'static str> {
    let all = |k| !v.is_empty() && v.iter().all(|x| x.kind == k);
    if all(ViolationKind::Amount) {
        Some("PIX_INVALID_AMOUNT")
    } else if all(ViolationKind::Key) {
        Some("PIX_INVALID_PIX_KEY")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_that_names_its_field_again_has_the_name_taken_off() {
        assert_eq!(Violation::new("amount", "amount must not exceed 10").text(), "amount must not exceed 10");
        assert_eq!(
            Violation::new("calendario.dataInicial", "dataInicial is before today").text(),
            "calendario.dataInicial is before today"
        );
        assert_eq!(Violation::new("headers[0].key", "key is reserved").text(), "headers[0].key is reserved");
        // Only a whole leading word that is the name.
        assert_eq!(Violation::new("amount", "amounts differ").text(), "amount amounts differ");
        assert_eq!(Violation::new("value", "must be positive").message, "must be positive");
    }

    /// Every field and message written as literals at a violation's making, in the code.
    fn literal_violations() -> Vec<(String, String, String)> {
        fn walk(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
            for e in std::fs::read_dir(dir).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    walk(&p, out);
                } else if p.extension().is_some_and(|x| x == "rs") {
                    out.push(p);
                }
            }
        }
        /// The string literal at the start of `s` (after spaces), if one is there.
        fn literal(s: &str) -> Option<(String, &str)> {
            let s = s.trim_start();
            let body = s.strip_prefix('"')?;
            let mut out = String::new();
            let mut chars = body.char_indices();
            while let Some((i, c)) = chars.next() {
                match c {
                    '"' => return Some((out, &body[i + 1..])),
                    '\\' => match chars.next() {
                        Some((_, '\n')) => {
                            // A continued line: the next line's leading spaces are not text.
                            while chars.clone().next().is_some_and(|(_, c)| c == ' ') {
                                chars.next();
                            }
                        }
                        Some((_, c)) => out.push(c),
                        None => return None,
                    },
                    c => out.push(c),
                }
            }
            None
        }
        let mut files = Vec::new();
        walk(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src"), &mut files);
        let mut found = Vec::new();
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap();
            for opener in ["Violation::new(", ".fail(", ".fail_as("] {
                for (at, _) in text.match_indices(opener) {
                    let rest = &text[at + opener.len()..];
                    let Some((field, rest)) = literal(rest) else { continue };
                    let Some(rest) = rest.trim_start().strip_prefix(',') else { continue };
                    let Some((message, _)) = literal(rest) else { continue };
                    found.push((file.display().to_string(), field, message));
                }
            }
        }
        found
    }

    #[test]
    fn every_violation_message_in_the_code_reads_as_its_field_then_what_is_wrong_with_it() {
        let found = literal_violations();
        assert!(found.len() > 100, "the scan found only {} violations", found.len());
        let mut bad = Vec::new();
        for (file, field, message) in found {
            let v = Violation::new(field.as_str(), message.as_str());
            let first = v.message.split_whitespace().next().unwrap_or_default();
            // A predicate of the field ("must ...", "is ...", "has ..."): never a sentence of
            // its own ("this route takes ...") nor the field's name again.
            let predicate = first.chars().next().is_some_and(|c| c.is_ascii_lowercase())
                && !["this", "the", "a", "an"].contains(&first)
                && first != field_name(&field);
            if !predicate {
                bad.push(format!("{file}: {:?}", v.text()));
            }
        }
        assert!(
            bad.is_empty(),
            "violations that do not read as their field then what is wrong:\n{}",
            bad.join("\n")
        );
    }
}
