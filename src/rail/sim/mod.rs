//! The simulated PIX network: the key directory and the settling bank (interface.md "Running the server").
//! It is the only provider for now; nothing here touches the network.

pub mod bank;
pub mod directory;

pub use crate::domain::transaction::gateway_ispb;
