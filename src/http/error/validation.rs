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
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Violation {
        Violation { field: field.into(), message: message.into(), kind: ViolationKind::Other }
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
