//! The simulated PIX network: the key directory and the settling bank (decisions.md §1).
//! It is the only provider for now; nothing here touches the network.

pub mod bank;
pub mod directory;

pub use crate::domain::transaction::GATEWAY_ISPB;
