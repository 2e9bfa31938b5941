//! Authentication primitives: client secrets, client certificates, access tokens, and the
//! sealing of secrets at rest.
//!
//! These are the cryptographic pieces; the order in which the token endpoint applies them
//! (and the error each failure maps to) lives in `http::token`.

pub mod admin_tokens;
pub mod certs;
pub mod sealing;
pub mod secrets;
pub mod tokens;
