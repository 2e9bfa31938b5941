//! Requests made with an `Idempotency-Key`: one record per account and key, written
//! durably before the request runs (see `http::idempotency`).

use crate::domain::ids::AccountId;

use super::{to_json, Repo, RepoError};
use crate::store::records::*;

use crate::store::{keys, Batch};

impl Repo {
    /// The record of a request an account made with an `Idempotency-Key`.
    pub fn request_record(&self, id: AccountId, key: &str) -> Result<Option<RequestRecord>, RepoError> {
        self.get_json(&keys::request(id, key))
    }

    /// Writes it and waits until it is durable.
    pub async fn put_request_record(
        &self,
        id: AccountId,
        key: &str,
        r: &RequestRecord,
    ) -> Result<(), RepoError> {
        let mut b = Batch::default();
        b.put(keys::request(id, key), to_json(r)?);
        self.commit_async(b).await
    }

    /// Forgets it (the request did not happen), durably.
    pub async fn delete_request_record(&self, id: AccountId, key: &str) -> Result<(), RepoError> {
        let mut b = Batch::default();
        b.delete(keys::request(id, key));
        self.commit_async(b).await
    }
}
