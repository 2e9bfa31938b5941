//! The SPI rail: the central bank's instant payment system (ISO 20022 messages exchanged
//! over the ICOM HTTP interface, signed by the Pix security manual's profile) and the DICT.
//!
//! # Layout
//! - `xml`: the small XML tree messages are read into (quick-xml's tokenizer underneath),
//!   and the escaping the message writers use.
//! - `c14n`: exclusive canonicalisation, over that tree.
//! - `pki`: keys and certificates, RSA-SHA256.
//! - `dsig`: the signature profiles of the SPI and the DICT: sign and verify.

pub mod c14n;
pub mod dsig;
pub mod message;
pub mod pki;
pub mod xml;
