//! The tax authority's CPF register, read through its registry service (Serpro's "Consulta
//! CPF" API, version 2: `GET {url}/cpf/{ni}` with a bearer token that `POST {origin}/token`
//! gives for the contract's consumer key and secret, OAuth 2 client credentials). It answers
//! `{ni, nome, nomeSocial?, situacao: {codigo, descricao}, ...}`; 404 when the CPF is not in
//! the register. `pixgw spi-sim` serves the same two routes on its control port, with a
//! register its control routes fill.
//!
//! Only what the gateway checks is read (domain::tax_record): the name, the social name and
//! the situation's code. A token is kept until a minute before it expires, and asked for
//! again after a 401.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::domain::tax_record::{Situation, TaxRecord};

/// How long one request to the register may take.
pub const REGISTRY_TIMEOUT: Duration = Duration::from_secs(10);
/// A token is renewed this long before the register says it expires.
const TOKEN_MARGIN: Duration = Duration::from_secs(60);

/// Where the register is and the contract's credentials.
#[derive(Clone, PartialEq, Eq)]
pub struct RegistrySettings {
    /// The API's base, such as `https://gateway.apiserpro.serpro.gov.br/consulta-cpf-df/v2`.
    pub url: String,
    /// The consumer key and secret, as `key:secret`.
    pub credentials: String,
}

impl std::fmt::Debug for RegistrySettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegistrySettings").field("url", &self.url).finish_non_exhaustive()
    }
}

/// The token endpoint of a registry URL: `/token` at its origin.
pub fn token_url(url: &str) -> Option<String> {
    let (scheme, rest) = url.split_once("://")?;
    let host = rest.split('/').next().filter(|h| !h.is_empty())?;
    Some(format!("{scheme}://{host}/token"))
}

/// Reads a register's answer to `GET /cpf/{ni}`.
pub fn read_record(body: &[u8]) -> Result<TaxRecord, String> {
    let v: serde_json::Value =
        serde_json::from_slice(body).map_err(|e| format!("the register's answer is not JSON: {e}"))?;
    let name = v["nome"].as_str().map(str::trim).filter(|n| !n.is_empty()).ok_or("the answer has no nome")?;
    let code = v["situacao"]["codigo"].as_str().ok_or("the answer has no situacao.codigo")?;
    let situation =
        Situation::of_code(code).ok_or_else(|| format!("situacao.codigo {code:?} is not a code"))?;
    let social_name = v["nomeSocial"].as_str().map(str::trim).filter(|n| !n.is_empty()).map(str::to_owned);
    Ok(TaxRecord { name: name.to_owned(), social_name, situation })
}

/// A client of the register; clones share the token.
#[derive(Clone)]
pub struct TaxRegistry {
    settings: RegistrySettings,
    token: Arc<Mutex<Option<(String, Instant)>>>,
}

impl TaxRegistry {
    pub fn new(settings: RegistrySettings) -> TaxRegistry {
        TaxRegistry { settings, token: Arc::default() }
    }

    fn client() -> awc::Client {
        awc::Client::builder().timeout(REGISTRY_TIMEOUT).disable_redirects().finish()
    }

    async fn bearer(&self, fresh: bool) -> Result<String, String> {
        if !fresh {
            let held = self.token.lock().unwrap_or_else(|p| p.into_inner()).clone();
            if let Some((t, _)) = held.filter(|(_, until)| Instant::now() < *until) {
                return Ok(t);
            }
        }
        use base64::Engine;
        let url = token_url(&self.settings.url).ok_or("the registry URL has no origin")?;
        let basic = base64::engine::general_purpose::STANDARD.encode(self.settings.credentials.as_bytes());
        let mut res = Self::client()
            .post(url)
            .insert_header(("authorization", format!("Basic {basic}")))
            .insert_header(("content-type", "application/x-www-form-urlencoded"))
            .send_body("grant_type=client_credentials")
            .await
            .map_err(|e| format!("the register's token: {e}"))?;
        let body = res.body().await.map_err(|e| format!("the register's token: {e}"))?;
        if !res.status().is_success() {
            return Err(format!("the register refused the credentials ({})", res.status()));
        }
        let v: serde_json::Value =
            serde_json::from_slice(&body).map_err(|e| format!("the register's token is not JSON: {e}"))?;
        let token =
            v["access_token"].as_str().filter(|t| !t.is_empty()).ok_or("the answer has no access_token")?;
        let lasts = Duration::from_secs(v["expires_in"].as_u64().unwrap_or(0)).saturating_sub(TOKEN_MARGIN);
        *self.token.lock().unwrap_or_else(|p| p.into_inner()) =
            Some((token.to_owned(), Instant::now() + lasts));
        Ok(token.to_owned())
    }

    /// The register's record of `cpf` (11 digits); `None` when it has none.
    pub async fn record(&self, cpf: &str) -> Result<Option<TaxRecord>, String> {
        let url = format!("{}/cpf/{cpf}", self.settings.url);
        for fresh in [false, true] {
            let token = self.bearer(fresh).await?;
            let mut res = Self::client()
                .get(&url)
                .bearer_auth(token)
                .send()
                .await
                .map_err(|e| format!("the register: {e}"))?;
            let body = res.body().await.map_err(|e| format!("the register: {e}"))?;
            match res.status().as_u16() {
                // 206: a record with a field missing that the gateway does not read.
                200 | 206 => return read_record(&body).map(Some),
                404 => return Ok(None),
                401 if !fresh => continue,
                s => return Err(format!("the register answered {s}")),
            }
        }
        Err("the register refused a fresh token".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_endpoint_is_at_the_registrys_origin() {
        assert_eq!(
            token_url("https://gateway.apiserpro.serpro.gov.br/consulta-cpf-df/v2").as_deref(),
            Some("https://gateway.apiserpro.serpro.gov.br/token")
        );
        assert_eq!(token_url("http://127.0.0.1:9/cpf").as_deref(), Some("http://127.0.0.1:9/token"));
        assert_eq!(token_url("no-scheme"), None);
        assert_eq!(token_url("https:///x"), None);
    }

    #[test]
    fn a_record_reads_its_name_social_name_and_situation_and_a_bad_one_is_refused() {
        let ok = br#"{"ni":"40442820135","nome":"PESSOA FISICA DA SILVA","situacao":{"codigo":"4","descricao":"PENDENTE DE REGULARIZACAO"},"nascimento":"01051976","nomeSocial":" SOCIAL "}"#;
        let r = read_record(ok).unwrap();
        assert_eq!(r.name, "PESSOA FISICA DA SILVA");
        assert_eq!(
            (r.social_name.as_deref(), r.situation),
            (Some("SOCIAL"), Situation::PendingRegularisation)
        );
        for bad in [
            &br#"{"nome":"X","situacao":{"codigo":"7"}}"#[..],
            br#"{"nome":"","situacao":{"codigo":"0"}}"#,
            br#"{"nome":"X"}"#,
            b"<html/>",
        ] {
            assert!(read_record(bad).is_err(), "{}", String::from_utf8_lossy(bad));
        }
    }
}
