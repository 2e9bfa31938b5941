//! The registry of account actors: account id -> address, actors started on first use on
//! one of the arbiters (one per core), restarted from storage if they stopped.
//!
//! Its lock guards only the address map, for a lookup, never across an await and never
//! around a balance: the debits themselves are serialized by each actor's mailbox.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use actix::{Actor, Addr, Arbiter, ArbiterHandle};

use super::actor::{AccountActor, Deps};
use super::messages::{SettingsChanged, Tick};
use crate::domain::account::AccountSettings;
use crate::domain::ids::AccountId;
use crate::store::RepoError;

#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    #[error("account not found")]
    NotFound,
    #[error(transparent)]
    Repo(#[from] RepoError),
}

/// How often live actors are asked whether they are idle (an idle actor stops within
/// `ACCOUNT_IDLE_STOP_SECONDS` plus this).
pub const IDLE_SWEEP_EVERY: std::time::Duration = std::time::Duration::from_secs(30);

/// Inserts between two sweeps of stopped actors' addresses.
const PRUNE_EVERY_INSERTS: usize = 1024;

pub struct Registry {
    deps: Arc<Deps>,
    arbiters: Vec<ArbiterHandle>,
    actors: RwLock<HashMap<AccountId, Addr<AccountActor>>>,
}

impl Registry {
    /// Starts `arbiters` arbiter threads for the actors.
    pub fn new(deps: Arc<Deps>, arbiters: usize) -> Registry {
        let arbiters = (0..arbiters.max(1)).map(|_| Arbiter::new().handle()).collect();
        Registry { deps, arbiters, actors: RwLock::new(HashMap::new()) }
    }

    pub fn deps(&self) -> &Arc<Deps> {
        &self.deps
    }

    /// The live actor of an account, started if needed.
    pub fn get(&self, id: AccountId) -> Result<Addr<AccountActor>, RegistryError> {
        {
            let map = self.actors.read().unwrap_or_else(|p| p.into_inner());
            if let Some(addr) = map.get(&id).filter(|a| a.connected()) {
                return Ok(addr.clone());
            }
        }
        let mut map = self.actors.write().unwrap_or_else(|p| p.into_inner());
        if let Some(addr) = map.get(&id).filter(|a| a.connected()) {
            return Ok(addr.clone());
        }
        let account = self.deps.repo.account(id)?.ok_or(RegistryError::NotFound)?;
        let arbiter = &self.arbiters[(id.get() % self.arbiters.len() as u64) as usize];
        let deps = Arc::clone(&self.deps);
        let addr = AccountActor::start_in_arbiter(arbiter, move |_| AccountActor::load(account, deps));
        map.insert(id, addr.clone());
        // Stopped (idle) actors leave their address behind: sweep now and then, so the map
        // holds about as many entries as there are live actors.
        if map.len() % PRUNE_EVERY_INSERTS == 0 {
            map.retain(|_, a| a.connected());
        }
        Ok(addr)
    }

    /// Forgets the addresses of stopped actors and counts the live ones (a gauge for
    /// /metrics).
    pub fn live_count(&self) -> usize {
        let mut map = self.actors.write().unwrap_or_else(|p| p.into_inner());
        map.retain(|_, a| a.connected());
        map.len()
    }

    fn live(&self) -> Vec<Addr<AccountActor>> {
        let map = self.actors.read().unwrap_or_else(|p| p.into_inner());
        map.values().filter(|a| a.connected()).cloned().collect()
    }

    /// Asks every live actor to act on the current time (expire what is due, stop if idle)
    /// without waiting: the idle stop's only driver, run every [`IDLE_SWEEP_EVERY`].
    pub fn sweep(&self) {
        for addr in self.live() {
            addr.do_send(Tick);
        }
        let mut map = self.actors.write().unwrap_or_else(|p| p.into_inner());
        map.retain(|_, a| a.connected());
    }

    /// Lets every live actor act on the current time, and waits until they have.
    pub async fn tick_all(&self) {
        for addr in self.live() {
            let _ = addr.send(Tick).await;
        }
    }

    /// Tells a live actor its settings changed (a stopped one reads them when it starts).
    pub fn settings_changed(&self, id: AccountId, settings: AccountSettings) {
        let map = self.actors.read().unwrap_or_else(|p| p.into_inner());
        if let Some(addr) = map.get(&id) {
            addr.do_send(SettingsChanged(settings));
        }
    }

    /// Tells a live actor its holder was renamed (a stopped one reads it when it starts).
    pub fn name_changed(&self, id: AccountId, name: String) {
        let map = self.actors.read().unwrap_or_else(|p| p.into_inner());
        if let Some(addr) = map.get(&id) {
            addr.do_send(super::messages::NameChanged(name));
        }
    }

    /// Tells a live actor its receiving key changed (a stopped one reads it when it starts).
    pub fn receiving_key_changed(&self, id: AccountId, key: String) {
        let map = self.actors.read().unwrap_or_else(|p| p.into_inner());
        if let Some(addr) = map.get(&id) {
            addr.do_send(super::messages::ReceivingKeyChanged(key));
        }
    }
}
