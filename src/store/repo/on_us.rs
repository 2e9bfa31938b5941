//! On-us credits: what a payment between two accounts of this gateway owes its payee,
//! written with the payer's settlement and deleted once the payee carried it out; and the
//! payments in from the SPI an account accepted, until the SPI settles or rejects them; and
//! what the rail read and could not apply (unmatched rail items).

use crate::domain::decide::{Incoming, OnUsCredit};

use super::{parse_json, to_json, Batch, Repo, RepoError};

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

    /// Records an unmatched rail item durably; the same message again is the same item
    /// (its first reading is kept). Answers whether it was new.
    pub async fn put_unmatched(&self, item: &crate::rail::Unmatched) -> Result<bool, RepoError> {
        let key = keys::unmatched(&item.digest);
        if self.store.get(&key)?.is_some() {
            return Ok(false);
        }
        let mut b = Batch::default();
        b.put(key, to_json(item)?);
        self.commit_async(b).await?;
        Ok(true)
    }

    /// An unmatched rail item by its digest.
    pub fn unmatched_item(&self, digest: &str) -> Result<Option<crate::rail::Unmatched>, RepoError> {
        self.get_json(&keys::unmatched(digest))
    }

    /// An operator's resolution of a rail item.
    pub fn resolution(&self, id: &str) -> Result<Option<crate::domain::resolution::Resolution>, RepoError> {
        self.get_json(&keys::rail_resolution(id))
    }

    /// Every resolution, oldest proposal first.
    pub fn resolutions(&self) -> Result<Vec<crate::domain::resolution::Resolution>, RepoError> {
        let mut all: Vec<crate::domain::resolution::Resolution> = self
            .store
            .scan_prefix(keys::RAIL_RESOLUTIONS)?
            .into_iter()
            .map(|(k, v)| parse_json(&k, &v))
            .collect::<Result<_, _>>()?;
        all.sort_by(|a, b| a.proposed_at.cmp(&b.proposed_at).then_with(|| a.id.cmp(&b.id)));
        Ok(all)
    }

    /// Stores a resolution, and with it (one durable write) the unmatched item it closes.
    pub async fn put_resolution(
        &self,
        r: &crate::domain::resolution::Resolution,
        closes: Option<&crate::rail::Unmatched>,
    ) -> Result<(), RepoError> {
        let mut b = Batch::default();
        b.put(keys::rail_resolution(&r.id), to_json(r)?);
        if let Some(item) = closes {
            b.put(keys::unmatched(&item.digest), to_json(item)?);
        }
        self.commit_async(b).await
    }

    /// Every unmatched rail item, open or resolved, oldest reading first.
    pub fn unmatched_items(&self) -> Result<Vec<crate::rail::Unmatched>, RepoError> {
        let mut items: Vec<crate::rail::Unmatched> = self
            .store
            .scan_prefix(keys::UNMATCHED)?
            .into_iter()
            .map(|(k, v)| parse_json(&k, &v))
            .collect::<Result<_, _>>()?;
        items.sort_by(|a, b| a.read_at.cmp(&b.read_at).then_with(|| a.digest.cmp(&b.digest)));
        Ok(items)
    }
}

/// The SPI rail's record of what it sent, in this store.
impl crate::rail::spi::sent::SentLog for Repo {
    fn sent(
        &self,
        id: &str,
    ) -> Result<Option<crate::rail::spi::sent::SentMessage>, crate::rail::Unavailable> {
        self.get_json(&keys::spi_sent(id)).map_err(|e| crate::rail::Unavailable(e.to_string()))
    }

    fn taken(&self, id: &str) -> Result<Option<u32>, crate::rail::Unavailable> {
        self.get_json(&keys::spi_taken(id)).map_err(|e| crate::rail::Unavailable(e.to_string()))
    }

    fn posting_of(&self, resource_id: &str) -> Result<Option<(String, u32)>, crate::rail::Unavailable> {
        self.get_json(&keys::spi_resource(resource_id)).map_err(|e| crate::rail::Unavailable(e.to_string()))
    }

    fn keep(
        &self,
        m: crate::rail::spi::sent::SentMessage,
    ) -> futures_util::future::BoxFuture<'static, Result<(), crate::rail::Unavailable>> {
        let repo = self.clone();
        Box::pin(async move {
            let mut b = Batch::default();
            b.put(keys::spi_sent(&m.id), to_json(&m).map_err(|e| crate::rail::Unavailable(e.to_string()))?);
            repo.commit_async(b).await.map_err(|e| crate::rail::Unavailable(e.to_string()))
        })
    }

    fn posted(
        &self,
        postings: Vec<(String, u32, String)>,
    ) -> futures_util::future::BoxFuture<'static, Result<(), crate::rail::Unavailable>> {
        let repo = self.clone();
        Box::pin(async move {
            let unavailable = |e: RepoError| crate::rail::Unavailable(e.to_string());
            let mut b = Batch::default();
            for (id, attempt, resource_id) in postings {
                b.put(keys::spi_resource(&resource_id), to_json(&(&id, attempt)).map_err(unavailable)?);
                b.put(keys::spi_taken(&id), to_json(&attempt).map_err(unavailable)?);
            }
            repo.commit_async(b).await.map_err(unavailable)
        })
    }

    fn streams(&self) -> Result<Vec<(u64, String)>, crate::rail::Unavailable> {
        let unavailable = |e: String| crate::rail::Unavailable(e);
        let pairs = self.store.scan_prefix(keys::SPI_STREAMS).map_err(|e| unavailable(e.to_string()))?;
        let mut out = Vec::with_capacity(pairs.len());
        for (k, v) in pairs {
            let reader = std::str::from_utf8(&k[keys::SPI_STREAMS.len()..])
                .ok()
                .and_then(|n| n.parse::<u64>().ok())
                .ok_or_else(|| unavailable(format!("a stream key is not a number: {k:?}")))?;
            let next = String::from_utf8(v).map_err(|e| unavailable(e.to_string()))?;
            out.push((reader, next));
        }
        Ok(out)
    }

    fn stream_at(
        &self,
        reader: u64,
        next: Option<String>,
    ) -> futures_util::future::BoxFuture<'static, Result<(), crate::rail::Unavailable>> {
        let repo = self.clone();
        Box::pin(async move {
            let mut b = Batch::default();
            match next {
                Some(url) => b.put(keys::spi_stream(reader), url.into_bytes()),
                None => b.delete(keys::spi_stream(reader)),
            }
            repo.commit_async(b).await.map_err(|e| crate::rail::Unavailable(e.to_string()))
        })
    }
}
