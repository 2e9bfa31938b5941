//! How money moves: the rail a payment travels on.
//!
//! - `spi`: the central bank's rails, to their published specifications: ISO 20022
//!   messages over ICOM, their XML signatures, and the DICT.

pub mod spi;
