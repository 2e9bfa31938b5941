//! Who holds a PIX key, asked before a payment to it: the port the HTTP layer uses, so that
//! a route never knows which rail runs.
//!
//! A sandbox account asks the simulator's directory. A live account asks the rail the
//! server runs: the simulator's directory too (`--rail sim`); nobody (`--rail none`, a closed
//! wallet: only keys of this gateway's accounts, which the route resolves itself, can be
//! paid); or the DICT (`--rail spi`), with the payer's document and the end-to-end id the
//! payment will carry, as its API asks.
//!
//! The two kinds of "no": the simulator lets an unknown key through and its bank rejects
//! the payment later (`ORDER_REJECTED`, as the sandbox always did); the DICT's "not found"
//! refuses the payment before anything is debited.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};

use super::sim::directory::Directory;
use super::spi::directory::{DictClient, DictError, EntryCache, Lookup};
use crate::domain::ids::AccountId;
use crate::domain::pix_key::DirectoryKey;
use crate::domain::transaction::{end_to_end_id, gateway_ispb, BankInfo, RailDetails};

/// A key's holder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Payee {
    pub name: String,
    pub document: String,
    pub ispb: String,
    pub bank: Option<BankInfo>,
    /// What the payment's messages need of the payee (on the SPI rail).
    pub rail: Option<RailDetails>,
}

/// What the directory of the account's rail says of a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    Found(Box<Payee>),
    /// Unknown to the simulator: the payment goes on, and its bank rejects it.
    Unknown,
    /// Not in the DICT: the payment is refused before any debit.
    NotFound,
    /// This rail pays nobody outside this gateway (a closed wallet).
    Closed,
    /// The risk rule refuses a payment to this payee (domain::risk), with its reason.
    Refused(&'static str),
}

/// Why a lookup gave no answer (the payment is refused, nothing debited).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LookupError {
    #[error("too many key lookups; retry after {0:?}")]
    RateLimited(Duration),
    #[error("the key directory is unavailable: {0}")]
    Unavailable(String),
}

/// A key to register for an account of this gateway, and who holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registration {
    /// The key; empty for an EVP the directory makes.
    pub key: String,
    /// CPF, CNPJ, EMAIL, PHONE or EVP.
    pub key_type: String,
    pub account: AccountId,
    pub holder_document: String,
    pub holder_name: String,
    pub opened: DateTime<Utc>,
    /// How many keys the account had registered before this one (names the request, so a
    /// registration tried again after a failure is the same request to the directory).
    pub nth: usize,
}

/// Why a key was not registered or removed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegistrationError {
    /// The directory refused it (its reason).
    #[error("the directory refused: {0}")]
    Refused(String),
    #[error("the key directory is unavailable: {0}")]
    Unavailable(String),
}

/// The reasons a participant may give the DICT for deleting an entry (API 2.12.1,
/// `deleteEntry`); `USER_REQUESTED` unless the operator says otherwise.
pub const DELETE_REASONS: [&str; 5] =
    ["USER_REQUESTED", "ACCOUNT_CLOSURE", "RECONCILIATION", "FRAUD", "RFB_VALIDATION"];

/// Why the DICT did not take a request of ours (a claim or a step of one, a fraud mark).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DictAskError {
    /// Claims, fraud marks: only the DICT (`--rail spi`) has them.
    #[error("this needs the DICT (--rail spi)")]
    NoDict,
    /// The DICT has no such claim, or (opening one) no entry for the key.
    #[error("the DICT has no such claim or key")]
    NotFound,
    /// The DICT refused it (its problem type and title).
    #[error("the DICT refused: {0}")]
    Refused(String),
    #[error("the key directory is unavailable: {0}")]
    Unavailable(String),
}

impl From<DictError> for DictAskError {
    fn from(e: DictError) -> Self {
        match e {
            DictError::NotFound => DictAskError::NotFound,
            DictError::Refused(why) => DictAskError::Refused(why),
            other => DictAskError::Unavailable(other.to_string()),
        }
    }
}

/// Takes a step of a claim at the DICT through `client`; a completion carries the
/// `RequestId` its claim always has ([`super::spi::claims::completion_request_id`]).
pub async fn take_claim_step(
    client: &actix::Addr<DictClient>,
    id: &str,
    step: crate::domain::claim::Step,
) -> Result<crate::domain::claim::Seen, DictAskError> {
    let ispb = super::spi::message::Ispb::parse(gateway_ispb())
        .ok_or_else(|| DictAskError::Unavailable("the ISPB".into()))?;
    let request_id = super::spi::claims::completion_request_id(&ispb, id);
    let take = super::spi::directory::TakeStep { id: id.to_owned(), step, request_id };
    match client.send(take).await {
        Ok(answer) => Ok(answer?.seen()),
        Err(e) => Err(DictAskError::Unavailable(e.to_string())),
    }
}

/// The live accounts' directory.
#[derive(Clone)]
pub enum Live {
    Sim,
    Closed,
    Dict {
        client: actix::Addr<DictClient>,
        /// Read first: a fresh answer needs no trip to the client's thread.
        cache: EntryCache,
        payer_document: Arc<dyn Fn(AccountId) -> Option<String> + Send + Sync>,
        /// The tax authority's CPF register, when configured.
        tax: Option<super::spi::tax_registry::TaxRegistry>,
    },
}

/// Why the tax authority's register keeps a holder's key out of the DICT.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HolderRefused {
    #[error("the holder's CPF is {} at the tax authority: it may not have keys", .0.name())]
    Irregular(crate::domain::tax_record::Situation),
    #[error("the holder's name is not the tax authority's record ({0}): rename the account first")]
    NameNotTheRecords(String),
    #[error("the holder's CPF is not in the tax authority's register")]
    NotInRegister,
    #[error("the tax authority's register is unavailable: {0}")]
    Unavailable(String),
}

/// The directories of a server.
#[derive(Clone)]
pub struct Keys {
    pub sim: Arc<Directory>,
    pub live: Live,
}

impl Keys {
    /// The rail live accounts pay on, as `--rail` names it.
    pub fn rail_name(&self) -> &'static str {
        match self.live {
            Live::Sim => "sim",
            Live::Closed => "none",
            Live::Dict { .. } => "spi",
        }
    }

    /// The end-to-end id a payment must carry from the moment it is decided, when the
    /// account's rail needs it before (the DICT lookup names it).
    pub fn payment_id(&self, sandbox: bool, now: DateTime<Utc>) -> Option<String> {
        if sandbox || !matches!(self.live, Live::Dict { .. }) {
            return None;
        }
        let mut random = [0u8; 16];
        getrandom::fill(&mut random).ok()?;
        Some(end_to_end_id('E', gateway_ispb(), now, &random))
    }

    fn in_simulator(&self, key: &DirectoryKey) -> Answer {
        match self.sim.lookup(key) {
            Some(e) => Answer::Found(Box::new(Payee {
                name: e.name.clone(),
                document: e.document.clone(),
                ispb: e.ispb.clone(),
                bank: self.sim.bank_of(e),
                rail: None,
            })),
            None => Answer::Unknown,
        }
    }

    /// Registers a key of a live account in its rail's directory (the DICT, with a signed
    /// request); the simulator's directory needs nothing registered (an EVP gets a fresh
    /// key). Answers the key as registered, and its CID at the DICT with the `RequestId` it
    /// is computed under.
    pub async fn register(
        &self,
        r: Registration,
    ) -> Result<(String, Option<(String, uuid::Uuid)>), RegistrationError> {
        match &self.live {
            Live::Sim | Live::Closed => {
                Ok((if r.key.is_empty() { uuid::Uuid::new_v4().to_string() } else { r.key }, None))
            }
            Live::Dict { client, .. } => {
                let ispb = super::spi::message::Ispb::parse(gateway_ispb())
                    .ok_or_else(|| RegistrationError::Unavailable("the ISPB".into()))?;
                let request_id =
                    super::spi::dict::request_id_of(&ispb, r.account.get(), &r.key_type, &r.key, r.nth);
                let entry = super::spi::directory::account_entry(
                    &ispb,
                    &r.key,
                    &r.key_type,
                    r.account.get(),
                    &r.holder_document,
                    &r.holder_name,
                    r.opened,
                );
                match client.send(super::spi::directory::Register(entry, request_id)).await {
                    Ok(Ok(e)) => {
                        let cid = super::spi::sync::cid_of(&e, &request_id);
                        Ok((e.key, Some((cid, request_id))))
                    }
                    Ok(Err(DictError::Refused(why))) => Err(RegistrationError::Refused(why)),
                    Ok(Err(e)) => Err(RegistrationError::Unavailable(e.to_string())),
                    Err(e) => Err(RegistrationError::Unavailable(e.to_string())),
                }
            }
        }
    }

    /// The tax authority's word on a holder before a key of theirs goes into the DICT
    /// (domain::tax_record): nothing to say without a register, for a CNPJ, or when the CPF
    /// may hold keys under this name.
    pub async fn holder_check(&self, document: &str, name: &str) -> Result<(), HolderRefused> {
        let Live::Dict { tax: Some(tax), .. } = &self.live else { return Ok(()) };
        if document.len() != 11 {
            return Ok(());
        }
        use crate::domain::tax_record::{check, Check};
        match tax.record(document).await {
            Ok(Some(record)) => match check(name, &record) {
                Check::Matches => Ok(()),
                Check::Rename(n) => Err(HolderRefused::NameNotTheRecords(n)),
                Check::Irregular(s) => Err(HolderRefused::Irregular(s)),
            },
            Ok(None) => Err(HolderRefused::NotInRegister),
            Err(e) => Err(HolderRefused::Unavailable(e)),
        }
    }

    /// The creator's change of a funds recovery at the DICT (its situation, details and
    /// contact, as `r` has them); answers the recovery as the DICT now has it.
    pub async fn update_recovery(
        &self,
        r: super::spi::recovery::FundsRecovery,
    ) -> Result<super::spi::recovery::FundsRecovery, DictAskError> {
        let Live::Dict { client, .. } = &self.live else { return Err(DictAskError::NoDict) };
        let asked = super::spi::directory::UpdateRecovery { recovery: r };
        client.send(asked).await.map_err(|e| DictAskError::Unavailable(e.to_string()))?.map_err(Into::into)
    }

    /// Opens a claim at the DICT for `r`'s key, to come to `r`'s account; answers the claim
    /// as the DICT made it.
    pub async fn open_claim(
        &self,
        claim_type: crate::domain::claim::ClaimType,
        r: Registration,
    ) -> Result<crate::domain::claim::Seen, DictAskError> {
        let Live::Dict { client, .. } = &self.live else { return Err(DictAskError::NoDict) };
        let ispb = super::spi::message::Ispb::parse(gateway_ispb())
            .ok_or_else(|| DictAskError::Unavailable("the ISPB".into()))?;
        let claimer = super::spi::directory::account_entry(
            &ispb,
            &r.key,
            &r.key_type,
            r.account.get(),
            &r.holder_document,
            &r.holder_name,
            r.opened,
        );
        let create = super::spi::directory::CreateClaim { claim_type, claimer };
        match client.send(create).await {
            Ok(answer) => Ok(answer?.seen()),
            Err(e) => Err(DictAskError::Unavailable(e.to_string())),
        }
    }

    /// Cancels one of our funds recoveries at the DICT; answers what the DICT now says of it.
    pub async fn cancel_recovery(&self, id: &str) -> Result<crate::domain::recovery::Seen, DictAskError> {
        let Live::Dict { client, .. } = &self.live else { return Err(DictAskError::NoDict) };
        let step = super::spi::directory::StepRecovery {
            id: id.to_owned(),
            step: super::spi::directory::RecoveryStep::Cancel,
        };
        let r = client.send(step).await.map_err(|e| DictAskError::Unavailable(e.to_string()))??;
        let status = crate::domain::recovery::RecoveryStatus::parse(&r.status)
            .ok_or_else(|| DictAskError::Unavailable(format!("the DICT answered status {}", r.status)))?;
        Ok(crate::domain::recovery::Seen { dict_id: Some(r.id), status, traced: None })
    }

    /// Takes a step of a claim at the DICT; answers the claim as it now is.
    pub async fn claim_step(
        &self,
        id: &str,
        step: crate::domain::claim::Step,
    ) -> Result<crate::domain::claim::Seen, DictAskError> {
        let Live::Dict { client, .. } = &self.live else { return Err(DictAskError::NoDict) };
        take_claim_step(client, id, step).await
    }

    /// Marks a person (and one of its keys) for fraud at the DICT; `reference` names the
    /// mark, so the same mark asked again is the same request.
    pub async fn mark_fraud(
        &self,
        marker: super::spi::fraud::FraudMarker,
        reference: &str,
    ) -> Result<super::spi::fraud::FraudMarker, DictAskError> {
        let Live::Dict { client, .. } = &self.live else { return Err(DictAskError::NoDict) };
        let ispb = super::spi::message::Ispb::parse(gateway_ispb())
            .ok_or_else(|| DictAskError::Unavailable("the ISPB".into()))?;
        let request_id = super::spi::dict::request_id_of(&ispb, 0, "FRAUD_MARKER", reference, 0);
        match client.send(super::spi::directory::MarkFraud { marker, request_id }).await {
            Ok(answer) => Ok(answer?),
            Err(e) => Err(DictAskError::Unavailable(e.to_string())),
        }
    }

    /// Cancels a fraud mark of ours at the DICT.
    pub async fn cancel_fraud_mark(&self, id: &str) -> Result<super::spi::fraud::FraudMarker, DictAskError> {
        let Live::Dict { client, .. } = &self.live else { return Err(DictAskError::NoDict) };
        match client.send(super::spi::directory::CancelFraudMark { id: id.to_owned() }).await {
            Ok(answer) => Ok(answer?),
            Err(e) => Err(DictAskError::Unavailable(e.to_string())),
        }
    }

    /// A person's fraud marks at the DICT (and of one of its keys, when named).
    pub async fn fraud_marks(
        &self,
        tax_id: &str,
        key: Option<&str>,
    ) -> Result<Vec<super::spi::fraud::FraudMarker>, DictAskError> {
        let Live::Dict { client, .. } = &self.live else { return Err(DictAskError::NoDict) };
        let list =
            super::spi::directory::FraudMarks { tax_id: tax_id.to_owned(), key: key.map(str::to_owned) };
        match client.send(list).await {
            Ok(answer) => Ok(answer?),
            Err(e) => Err(DictAskError::Unavailable(e.to_string())),
        }
    }

    /// Removes a key of a live account from its rail's directory, for one of
    /// [`DELETE_REASONS`].
    pub async fn remove(&self, key: &str, reason: &str) -> Result<(), RegistrationError> {
        match &self.live {
            Live::Sim | Live::Closed => Ok(()),
            Live::Dict { client, .. } => {
                let remove = super::spi::directory::Remove { key: key.to_owned(), reason: reason.to_owned() };
                match client.send(remove).await {
                    Ok(Ok(())) | Ok(Err(DictError::NotFound)) => Ok(()),
                    Ok(Err(DictError::Refused(why))) => Err(RegistrationError::Refused(why)),
                    Ok(Err(e)) => Err(RegistrationError::Unavailable(e.to_string())),
                    Err(e) => Err(RegistrationError::Unavailable(e.to_string())),
                }
            }
        }
    }

    /// Who holds `key`, for a payment of account `payer` (identified by `end_to_end_id`
    /// on the SPI rail).
    pub async fn payee(
        &self,
        sandbox: bool,
        payer: AccountId,
        key: &DirectoryKey,
        end_to_end_id: Option<&str>,
    ) -> Result<Answer, LookupError> {
        if sandbox {
            return Ok(self.in_simulator(key));
        }
        match &self.live {
            Live::Sim => Ok(self.in_simulator(key)),
            Live::Closed => Ok(Answer::Closed),
            Live::Dict { client, cache, payer_document, .. } => {
                let found = match cache.get(&key.key, std::time::Instant::now()) {
                    Some(e) => Ok(Ok(e)),
                    None => {
                        let payer_document = payer_document(payer)
                            .ok_or_else(|| LookupError::Unavailable("the payer's document".into()))?;
                        let lookup = Lookup {
                            key: key.key.clone(),
                            payer_document,
                            end_to_end_id: end_to_end_id.unwrap_or_default().to_owned(),
                        };
                        client.send(lookup).await
                    }
                };
                match found {
                    Ok(Ok(super::spi::directory::Found { entry: e, signals })) => {
                        let verdict = crate::domain::risk::assess(&signals);
                        metrics::counter!("pixgw_dict_risk_verdicts_total", "verdict" => verdict.name())
                            .increment(1);
                        let flag = match verdict {
                            crate::domain::risk::Verdict::Refuse(why) => {
                                tracing::warn!(target: "pixgw::risk", account = payer.get(), key = key.key, why, "a payment to a key marked for fraud was refused");
                                return Ok(Answer::Refused(why));
                            }
                            crate::domain::risk::Verdict::Flag(why) => {
                                tracing::warn!(target: "pixgw::risk", account = payer.get(), key = key.key, why, "a payment goes to a key with fraud signals");
                                Some(why)
                            }
                            crate::domain::risk::Verdict::Pass => None,
                        };
                        Ok(Answer::Found(Box::new(Payee {
                            name: e.name.clone(),
                            document: e.tax_id.clone(),
                            ispb: e.participant.to_string(),
                            bank: Some(BankInfo {
                                ispb: e.participant.to_string(),
                                name: self
                                    .sim
                                    .institution(e.participant.as_str())
                                    .map_or_else(|| format!("ISPB {}", e.participant), |i| i.name.clone()),
                                code: self
                                    .sim
                                    .institution(e.participant.as_str())
                                    .map(|i| i.code.clone())
                                    .unwrap_or_default(),
                                branch: e.branch.clone(),
                                account_number: Some(e.account_number.clone()),
                            }),
                            rail: Some(RailDetails {
                                instrument: None,
                                creditor_document: Some(e.tax_id.clone()),
                                creditor_account_type: Some(e.account_type.clone()),
                                reason: None,
                                risk: flag.map(str::to_owned),
                            }),
                        })))
                    }
                    Ok(Err(DictError::NotFound)) => Ok(Answer::NotFound),
                    Ok(Err(DictError::RateLimited(d))) => Err(LookupError::RateLimited(d)),
                    Ok(Err(e)) => Err(LookupError::Unavailable(e.to_string())),
                    Err(e) => Err(LookupError::Unavailable(e.to_string())),
                }
            }
        }
    }
}
