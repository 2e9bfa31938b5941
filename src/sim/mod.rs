//! The simulated PIX network: the key directory and the settling bank (decisions.md §1).
//! It is the only provider for now; nothing here touches the network.

pub mod bank;
pub mod directory;

/// The ISPB this gateway uses in the end-to-end ids it creates.
pub const GATEWAY_ISPB: &str = "99999999";
