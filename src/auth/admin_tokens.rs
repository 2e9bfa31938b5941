//! The operators' tokens: each has a name, which every admin request's audit line carries.
//!
//! They come from an owner-only file (`--admin-token-file`): one token per line as
//! `name token`, `#` starting a comment; a file that holds one bare token (the earlier
//! format) names it `admin`. The generated token of a sandbox's first start and
//! `--admin-token` are one token named `admin`. Only SHA-256 hashes are kept, and a
//! presented token is compared with every one of them in constant time, so the time taken
//! says nothing of which (or whether one) matched.

use super::secrets;

/// Characters of a token at least.
pub const ADMIN_TOKEN_LEN_MIN: usize = 16;
/// Characters of a token's name at most.
pub const ADMIN_TOKEN_NAME_LEN_MAX: usize = 64;
/// Tokens in one file at most.
pub const ADMIN_TOKENS_MAX: usize = 64;
/// The name of a token given alone (a bare token in the file, `--admin-token`, the
/// generated one).
pub const DEFAULT_NAME: &str = "admin";

/// The named tokens, by their hashes.
#[derive(Clone, PartialEq, Eq)]
pub struct AdminTokens {
    entries: Vec<(String, String)>,
}

impl std::fmt::Debug for AdminTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.names()).finish()
    }
}

fn name_ok(name: &str) -> bool {
    (1..=ADMIN_TOKEN_NAME_LEN_MAX).contains(&name.len())
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'@'))
}

impl AdminTokens {
    /// One token named [`DEFAULT_NAME`], by its hash.
    pub fn single_hash(hash: String) -> AdminTokens {
        AdminTokens { entries: vec![(DEFAULT_NAME.to_owned(), hash)] }
    }

    /// The tokens of a file's text; the reason when it breaks a rule (the message never
    /// quotes a token).
    pub fn parse(text: &str) -> Result<AdminTokens, String> {
        let lines: Vec<(usize, &str)> = text
            .lines()
            .enumerate()
            .map(|(i, l)| (i + 1, l.trim()))
            .filter(|(_, l)| !l.is_empty() && !l.starts_with('#'))
            .collect();
        if lines.is_empty() {
            return Err("it holds no token".into());
        }
        if lines.len() > ADMIN_TOKENS_MAX {
            return Err(format!("it holds more than {ADMIN_TOKENS_MAX} tokens"));
        }
        let mut entries: Vec<(String, String)> = Vec::new();
        let mut tokens: Vec<&str> = Vec::new();
        for (n, line) in &lines {
            let mut parts = line.split_whitespace();
            let (name, token) = match (parts.next(), parts.next(), parts.next()) {
                (Some(token), None, None) if lines.len() == 1 => (DEFAULT_NAME, token),
                (Some(name), Some(token), None) => (name, token),
                _ => return Err(format!("line {n} is not `name token`")),
            };
            if !name_ok(name) {
                return Err(format!(
                    "line {n}: a name is 1 to {ADMIN_TOKEN_NAME_LEN_MAX} letters, digits, '-', '_', '.' or '@'"
                ));
            }
            if token.len() < ADMIN_TOKEN_LEN_MIN {
                return Err(format!("line {n}: a token has at least {ADMIN_TOKEN_LEN_MIN} characters"));
            }
            if entries.iter().any(|(e, _)| e == name) {
                return Err(format!("line {n}: the name {name} is given twice"));
            }
            if tokens.contains(&token) {
                return Err(format!("line {n}: the same token is given twice"));
            }
            tokens.push(token);
            entries.push((name.to_owned(), secrets::hash_secret("", token)));
        }
        Ok(AdminTokens { entries })
    }

    /// The name of the token presented, if it is one of these. Every hash is compared, in
    /// constant time.
    pub fn name_of(&self, presented: &str) -> Option<&str> {
        let hash = secrets::hash_secret("", presented);
        let mut found = None;
        for (name, h) in &self.entries {
            if secrets::constant_time_eq(hash.as_bytes(), h.as_bytes()) && found.is_none() {
                found = Some(name.as_str());
            }
        }
        found
    }

    pub fn names(&self) -> Vec<&str> {
        self.entries.iter().map(|(n, _)| n.as_str()).collect()
    }

    /// The token a CLI command presents from a file: its first (or only) one.
    pub fn first_token(text: &str) -> Option<String> {
        let line = text.lines().map(str::trim).find(|l| !l.is_empty() && !l.starts_with('#'))?;
        let mut parts = line.split_whitespace();
        match (parts.next(), parts.next()) {
            (Some(token), None) => Some(token.to_owned()),
            (Some(_), Some(token)) => Some(token.to_owned()),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "alice-token-0123456789";
    const B: &str = "bob-token-012345678901";

    #[test]
    fn named_tokens_are_found_by_the_token_and_a_bare_one_is_named_admin() {
        let t = AdminTokens::parse(&format!("# operators\nalice {A}\n\nbob {B}\n")).unwrap();
        assert_eq!(t.names(), ["alice", "bob"]);
        assert_eq!(t.name_of(A), Some("alice"));
        assert_eq!(t.name_of(B), Some("bob"));
        assert_eq!(t.name_of("alice"), None);
        assert_eq!(t.name_of(""), None);
        let bare = AdminTokens::parse(&format!("  {A}\n")).unwrap();
        assert_eq!(bare.name_of(A), Some(DEFAULT_NAME));
        assert_eq!(AdminTokens::first_token(&format!("# x\nalice {A}\nbob {B}")).as_deref(), Some(A));
        assert_eq!(AdminTokens::first_token(&format!("{B}\n")).as_deref(), Some(B));
    }

    #[test]
    fn a_file_that_breaks_a_rule_is_refused_without_quoting_a_token() {
        let short = "short";
        for (text, why) in [
            (String::new(), "no token"),
            ("# only a comment".to_owned(), "no token"),
            (format!("alice {A}\n{B}"), "line 2"),
            (format!("alice {A} extra"), "line 1"),
            (format!("al ice {A}"), "line 1"),
            (format!("alice {short}"), "at least 16"),
            (format!("alice {A}\nalice {B}"), "given twice"),
            (format!("alice {A}\nbob {A}"), "same token"),
            (format!("{} {A}", "n".repeat(ADMIN_TOKEN_NAME_LEN_MAX + 1)), "a name is"),
            ((0..=ADMIN_TOKENS_MAX).map(|i| format!("n{i} token-{i:016}\n")).collect(), "more than"),
        ] {
            let e = AdminTokens::parse(&text).unwrap_err();
            assert!(e.contains(why), "{text:?}: {e}");
            assert!(!e.contains(A) && !e.contains(B), "{e}");
        }
    }
}
