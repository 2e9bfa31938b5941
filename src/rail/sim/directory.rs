//! The key directory: who holds each PIX key, at which institution. Loaded from
//! `data/dict.json` (embedded in the binary; `PIXGW_DICT_FILE` reads another file).

use std::collections::HashMap;

use serde::Deserialize;
use sha2::{Digest, Sha256};

use crate::domain::pix_key::{DirectoryKey, DirectoryKeyType};
use crate::domain::transaction::BankInfo;

/// The directory shipped with the repository.
pub const EMBEDDED_DICT: &str = include_str!("../../../data/dict.json");

#[derive(Debug, Clone, Deserialize)]
pub struct Institution {
    pub ispb: String,
    pub name: String,
    pub code: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    pub key: String,
    pub key_type: DirectoryKeyType,
    pub name: String,
    pub document: String,
    pub ispb: String,
    pub account_branch: Option<String>,
    pub account_number: Option<String>,
}

#[derive(Deserialize)]
struct File {
    institutions: Vec<Institution>,
    keys: Vec<Entry>,
}

#[derive(Debug)]
pub struct Directory {
    institutions: HashMap<String, Institution>,
    keys: HashMap<String, Entry>,
    /// Keys in file order, for resolving dynamic codes deterministically.
    order: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum DirectoryError {
    #[error("the key directory is not valid JSON: {0}")]
    Json(String),
    #[error("the key directory is inconsistent: {0}")]
    Inconsistent(String),
}

impl Directory {
    pub fn from_json(text: &str) -> Result<Directory, DirectoryError> {
        let file: File = serde_json::from_str(text).map_err(|e| DirectoryError::Json(e.to_string()))?;
        let institutions: HashMap<String, Institution> =
            file.institutions.into_iter().map(|i| (i.ispb.clone(), i)).collect();
        let mut keys = HashMap::new();
        let mut order = Vec::new();
        for e in file.keys {
            if !institutions.contains_key(&e.ispb) {
                return Err(DirectoryError::Inconsistent(format!("{} names unknown ISPB {}", e.key, e.ispb)));
            }
            order.push(e.key.clone());
            if keys.insert(e.key.clone(), e).is_some() {
                return Err(DirectoryError::Inconsistent("a key appears twice".into()));
            }
        }
        if keys.is_empty() {
            return Err(DirectoryError::Inconsistent("no keys".into()));
        }
        Ok(Directory { institutions, keys, order })
    }

    pub fn embedded() -> Result<Directory, DirectoryError> {
        Directory::from_json(EMBEDDED_DICT)
    }

    pub fn lookup(&self, key: &DirectoryKey) -> Option<&Entry> {
        self.keys.get(&key.key).filter(|e| e.key_type == key.key_type)
    }

    pub fn institution(&self, ispb: &str) -> Option<&Institution> {
        self.institutions.get(ispb)
    }

    /// The bank data of an entry, as transactions record it.
    pub fn bank_of(&self, e: &Entry) -> Option<BankInfo> {
        self.institution(&e.ispb).map(|i| BankInfo {
            ispb: i.ispb.clone(),
            name: i.name.clone(),
            code: i.code.clone(),
            branch: e.account_branch.clone(),
            account_number: e.account_number.clone(),
        })
    }

    /// A dynamic BR Code (a URL, no key) resolved to a payee: the same URL always gives the
    /// same entry, and nothing is fetched from the network.
    pub fn resolve_url(&self, url: &str) -> Option<&Entry> {
        let digest = Sha256::digest(url.as_bytes());
        let n = u64::from_be_bytes(digest[..8].try_into().ok()?);
        let idx = usize::try_from(n % self.order.len() as u64).ok()?;
        self.keys.get(&self.order[idx])
    }

    /// Every institution: (ISPB, name).
    pub fn institution_list(&self) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> =
            self.institutions.values().map(|i| (i.ispb.clone(), i.name.clone())).collect();
        out.sort();
        out
    }

    /// Every entry, in file order.
    pub fn entries(&self) -> impl Iterator<Item = &Entry> {
        self.order.iter().filter_map(|k| self.keys.get(k))
    }

    /// The keys of one type, in file order (tests and the load tool pick payees here).
    pub fn keys_of_type(&self, t: DirectoryKeyType) -> Vec<String> {
        self.order.iter().filter(|k| self.keys.get(*k).is_some_and(|e| e.key_type == t)).cloned().collect()
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::document::TaxId;
    use crate::domain::pix_key::parse_directory_key;

    #[test]
    fn the_shipped_directory_has_at_least_30_valid_keys_of_each_type() {
        let d = Directory::embedded().unwrap();
        for t in [
            DirectoryKeyType::Cpf,
            DirectoryKeyType::Cnpj,
            DirectoryKeyType::Email,
            DirectoryKeyType::Phone,
            DirectoryKeyType::Evp,
        ] {
            let of_type: Vec<&Entry> = d.keys.values().filter(|e| e.key_type == t).collect();
            assert!(of_type.len() >= 30, "{t:?}");
            for e in of_type {
                // Every key parses as its type and every holder document is valid.
                assert_eq!(parse_directory_key(&e.key).map(|k| k.key_type), Ok(t), "{}", e.key);
                assert!(TaxId::parse(&e.document).is_ok(), "{}", e.document);
                assert!(d.bank_of(e).is_some());
            }
        }
        assert!(d.institutions.len() >= 3);
    }

    #[test]
    fn a_url_always_resolves_to_the_same_entry() {
        let d = Directory::embedded().unwrap();
        let a = d.resolve_url("pix.example.com/qr/1").map(|e| e.key.clone());
        assert_eq!(a, d.resolve_url("pix.example.com/qr/1").map(|e| e.key.clone()));
        assert!(a.is_some());
    }

    #[test]
    fn an_inconsistent_file_is_refused() {
        let bad = r#"{"institutions": [], "keys": [{"key": "x@y.io", "keyType": "EMAIL", "name": "X", "document": "52998224725", "ispb": "1"}]}"#;
        assert!(Directory::from_json(bad).is_err());
        assert!(Directory::from_json("{").is_err());
    }
}
