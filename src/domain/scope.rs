//! The OAuth scopes of the API Pix, and the one each of its routes requires.
//!
//! The central bank's specification (release 2.9.0) secures every route of the API Pix with
//! one scope: `{family}.read` for a `GET`, `{family}.write` for a change, the family being
//! the route's first path segment (`/cob/{txid}` is `cob`), but for the locations, whose
//! scopes are `payloadlocation` and `payloadlocationrec`. A token asked for with `scope`
//! carries those it names and nothing else; a token asked for without one carries every
//! scope, as tokens always did here, so clients that never name a scope keep working.
//! Routes outside the API Pix (family A, the sandbox, the payer's routes) take no scope.
//!
//! Pure: text in, sets and names out.

/// The scopes, in the order a set is written.
pub const SCOPE_NAMES: [&str; 24] = [
    "cob.write",
    "cob.read",
    "cobv.write",
    "cobv.read",
    "lotecobv.write",
    "lotecobv.read",
    "pix.write",
    "pix.read",
    "webhook.write",
    "webhook.read",
    "payloadlocation.write",
    "payloadlocation.read",
    "rec.write",
    "rec.read",
    "solicrec.write",
    "solicrec.read",
    "cobr.write",
    "cobr.read",
    "webhookrec.write",
    "webhookrec.read",
    "webhookcobr.write",
    "webhookcobr.read",
    "payloadlocationrec.write",
    "payloadlocationrec.read",
];

/// What a request lacking each scope is told, in [`SCOPE_NAMES`]' order.
const LACKING: [&str; 24] = [
    "the access token's scope does not include cob.write, which this route requires",
    "the access token's scope does not include cob.read, which this route requires",
    "the access token's scope does not include cobv.write, which this route requires",
    "the access token's scope does not include cobv.read, which this route requires",
    "the access token's scope does not include lotecobv.write, which this route requires",
    "the access token's scope does not include lotecobv.read, which this route requires",
    "the access token's scope does not include pix.write, which this route requires",
    "the access token's scope does not include pix.read, which this route requires",
    "the access token's scope does not include webhook.write, which this route requires",
    "the access token's scope does not include webhook.read, which this route requires",
    "the access token's scope does not include payloadlocation.write, which this route requires",
    "the access token's scope does not include payloadlocation.read, which this route requires",
    "the access token's scope does not include rec.write, which this route requires",
    "the access token's scope does not include rec.read, which this route requires",
    "the access token's scope does not include solicrec.write, which this route requires",
    "the access token's scope does not include solicrec.read, which this route requires",
    "the access token's scope does not include cobr.write, which this route requires",
    "the access token's scope does not include cobr.read, which this route requires",
    "the access token's scope does not include webhookrec.write, which this route requires",
    "the access token's scope does not include webhookrec.read, which this route requires",
    "the access token's scope does not include webhookcobr.write, which this route requires",
    "the access token's scope does not include webhookcobr.read, which this route requires",
    "the access token's scope does not include payloadlocationrec.write, which this route requires",
    "the access token's scope does not include payloadlocationrec.read, which this route requires",
];

/// Characters of a token request's `scope` (every scope once, with spaces, is 330).
pub const SCOPE_TEXT_LEN_MAX: usize = 512;

/// A set of scopes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scopes(u32);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScopeError {
    #[error("must name at least one scope")]
    Empty,
    #[error("must have at most {SCOPE_TEXT_LEN_MAX} characters")]
    TooLong,
    #[error("names {0:?}, which is not a scope of the API Pix")]
    Unknown(String),
}

impl Scopes {
    /// Every scope: a token asked for without `scope`.
    pub const ALL: Scopes = Scopes((1 << SCOPE_NAMES.len()) - 1);

    /// Reads a space-separated list (RFC 6749 section 3.3); a scope named twice counts once.
    pub fn parse(text: &str) -> Result<Scopes, ScopeError> {
        if text.len() > SCOPE_TEXT_LEN_MAX {
            return Err(ScopeError::TooLong);
        }
        let mut bits = 0u32;
        for name in text.split(' ').filter(|n| !n.is_empty()) {
            let i = SCOPE_NAMES
                .iter()
                .position(|s| *s == name)
                .ok_or_else(|| ScopeError::Unknown(name.into()))?;
            bits |= 1 << i;
        }
        if bits == 0 {
            return Err(ScopeError::Empty);
        }
        Ok(Scopes(bits))
    }

    pub fn allows(self, scope: &str) -> bool {
        SCOPE_NAMES.iter().position(|s| *s == scope).is_some_and(|i| self.0 & (1 << i) != 0)
    }

    /// The set as a token's `scope` writes it: its names in [`SCOPE_NAMES`]' order.
    pub fn to_text(self) -> String {
        let names: Vec<&str> =
            SCOPE_NAMES.iter().enumerate().filter(|(i, _)| self.0 & (1 << i) != 0).map(|(_, n)| *n).collect();
        names.join(" ")
    }
}

/// What a request is told when its token lacks `scope`.
pub fn lacking(scope: &str) -> &'static str {
    SCOPE_NAMES
        .iter()
        .position(|s| *s == scope)
        .map_or("the access token's scope does not allow this route", |i| LACKING[i])
}

/// The scope a request to `path` with `method` requires: `None` for a route outside the
/// API Pix.
pub fn required(method: &str, path: &str) -> Option<&'static str> {
    let family = path.strip_prefix('/')?.split('/').next()?;
    let read = method.eq_ignore_ascii_case("GET") || method.eq_ignore_ascii_case("HEAD");
    let family = match family {
        "loc" => "payloadlocation",
        "locrec" => "payloadlocationrec",
        other => other,
    };
    let access = if read { ".read" } else { ".write" };
    // Compared in place: every authenticated request asks, so nothing is allocated.
    SCOPE_NAMES.iter().find(|s| s.strip_suffix(access) == Some(family)).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_of_known_scopes_is_a_set_and_anything_else_is_refused() {
        let s = Scopes::parse("cob.read  rec.write cob.read").unwrap();
        assert!(s.allows("cob.read") && s.allows("rec.write"));
        assert!(!s.allows("cob.write") && !s.allows("rec.read") && !s.allows("nonsense"));
        assert_eq!(s.to_text(), "cob.read rec.write");
        assert_eq!(Scopes::parse(&s.to_text()), Ok(s));
        assert_eq!(Scopes::parse(""), Err(ScopeError::Empty));
        assert_eq!(Scopes::parse("   "), Err(ScopeError::Empty));
        assert_eq!(Scopes::parse("cob.read cob.delete"), Err(ScopeError::Unknown("cob.delete".into())));
        assert_eq!(Scopes::parse("COB.READ"), Err(ScopeError::Unknown("COB.READ".into())), "case counts");
        let all = SCOPE_NAMES.join(" ");
        assert_eq!(Scopes::parse(&all), Ok(Scopes::ALL));
        assert_eq!(Scopes::ALL.to_text(), all);
        assert!(all.len() <= SCOPE_TEXT_LEN_MAX);
        let at_max = format!("cob.read{}", " ".repeat(SCOPE_TEXT_LEN_MAX - 8));
        assert!(Scopes::parse(&at_max).is_ok());
        assert_eq!(Scopes::parse(&format!("{at_max} ")), Err(ScopeError::TooLong));
    }

    #[test]
    fn a_route_of_the_api_pix_requires_its_familys_read_or_write_scope_and_no_other_route_any() {
        assert_eq!(required("GET", "/cob/abc"), Some("cob.read"));
        assert_eq!(required("PUT", "/cob/abc"), Some("cob.write"));
        assert_eq!(required("DELETE", "/locrec/3/idRec"), Some("payloadlocationrec.write"));
        assert_eq!(required("GET", "/loc"), Some("payloadlocation.read"));
        assert_eq!(required("POST", "/cobr/t/retentativa/2026-12-01"), Some("cobr.write"));
        assert_eq!(required("PATCH", "/solicrec/SC1"), Some("solicrec.write"));
        for (i, name) in SCOPE_NAMES.iter().enumerate() {
            assert!(lacking(name).ends_with(&format!(" {name}, which this route requires")), "{i}");
        }
        for outside in ["/api/pix/cash-out", "/sandbox/pay", "/dict/pix", "/qr/rec/x", "/", ""] {
            assert_eq!(required("POST", outside), None, "{outside}");
        }
    }
}
