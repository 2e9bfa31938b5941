//! On-us credits: what a payment between two accounts of this gateway owes its payee,
//! written with the payer's settlement and deleted once the payee carried it out; and the
//! payments in from the SPI an account accepted, until the SPI settles or rejects them.

use crate::domain::decide::{Incoming, OnUsCredit};

use super::{parse_json, Repo, RepoError};

use crate::store::keys;

impl Repo {
    /// A credit owed to an account of this gateway that its payee has not carried out yet.
    pub fn on_us_credit(&self, end_to_end_id: &str) -> Result<Option<OnUsCredit>, RepoError> {
        self.get_json(&keys::on_us(end_to_end_id))
    }

    /// Every credit not carried out yet (delivered again at start).
    pub fn on_us_credits(&self) -> Result<Vec<OnUsCredit>, RepoError> {
        self.store.scan_prefix(keys::ON_US)?.into_iter().map(|(k, v)| parse_json(&k, &v)).collect()
    }

    /// A payment or return in from the SPI that its account accepted and the SPI has not
    /// settled or rejected yet.
    pub fn incoming(&self, id: &str) -> Result<Option<Incoming>, RepoError> {
        self.get_json(&keys::incoming(id))
    }

    /// Every payment or return in still waiting for the SPI (the reconciliation read).
    pub fn incoming_all(&self) -> Result<Vec<Incoming>, RepoError> {
        self.store.scan_prefix(keys::INCOMING)?.into_iter().map(|(k, v)| parse_json(&k, &v)).collect()
    }
}
