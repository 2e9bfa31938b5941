//! The SPI rail: the central bank's instant payment system (ISO 20022 messages exchanged
//! over the ICOM HTTP interface, signed by the Pix security manual's profile) and the DICT.
//!
//! # Layout
//! - `xml`: the small XML tree messages are read into (quick-xml's tokenizer underneath),
//!   and the escaping the message writers use.
//! - `c14n`: exclusive canonicalisation, over that tree.
//! - `pki`: keys and certificates, RSA-SHA256.
//! - `dsig`: the signature profiles of the SPI and the DICT: sign and verify.
//! - `message`: the catalogue's messages (pacs.008, pacs.002, pacs.004, admi.002).
//! - `icom`: the ICOM protocol (paths, multipart, gzip) and the participant's client.
//! - `sent`: what was sent, kept so every resend posts the same bytes and a refusal can be
//!   placed (the original's, or a repeat's).
//! - `dict`: the DICT's XML bodies (entries, refund requests); `claims`: those of claims;
//!   `recovery`: those of MED 2.0 (funds recoveries, infraction reports, events).
//! - `simulator`: `pixgw spi-sim`, the rails on one machine.

pub mod c14n;
pub mod claims;
pub mod dict;
#[cfg(test)]
pub mod dict_schema;
pub mod directory;
pub mod dsig;
pub mod fraud;
pub mod http1;
pub mod icom;
pub mod message;
pub mod outgoing;
pub mod payload_reader;
pub mod pki;
pub mod rail;
pub mod recovery;
pub mod sent;
pub mod settings;
pub mod simulator;
pub mod sync;
pub mod tax_registry;
pub mod xml;
