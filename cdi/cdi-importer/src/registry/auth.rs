//! Meeting a registry's 401: a Bearer token from the challenge's realm (with the secret's
//! credentials when given), or Basic auth.

use base64::Engine as _;

use super::{Answer, Client, DOCUMENT_LIMIT, RegistryError, registry_errors};
use crate::http_source::{self, HttpSource};

/// A token service's answer (either field, as registries differ).
#[derive(serde::Deserialize)]
struct Token {
    #[serde(default)]
    token: Option<String>,
    #[serde(default)]
    access_token: Option<String>,
}

/// The parameters of a `WWW-Authenticate` challenge: its scheme and `key="value"` pairs.
pub(super) fn challenge(header: &str) -> (String, Vec<(String, String)>) {
    let (scheme, rest) = header.trim().split_once(' ').unwrap_or((header.trim(), ""));
    let mut params = Vec::new();
    let mut rest = rest.trim();
    while let Some((key, after)) = rest.split_once('=') {
        let key = key.trim().trim_start_matches(',').trim().to_ascii_lowercase();
        let (value, remaining) = if let Some(quoted) = after.strip_prefix('"') {
            let end = quoted.find('"').unwrap_or(quoted.len());
            (quoted[..end].to_owned(), quoted.get(end + 1..).unwrap_or(""))
        } else {
            let end = after.find(',').unwrap_or(after.len());
            (after[..end].trim().to_owned(), &after[end..])
        };
        params.push((key, value));
        rest = remaining.trim_start_matches([',', ' ']);
    }
    (scheme.to_ascii_lowercase(), params)
}

pub(super) fn percent_encode(value: &str) -> String {
    value
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

impl Client {
    fn authorize(&self, authorization: String) {
        if let Ok(mut current) = self.authorization.lock() {
            *current = Some(authorization);
        }
    }

    /// Meets a 401's challenge: sets the Authorization the registry asked for.
    pub(super) async fn authenticate(&self, answer: &Answer) -> Result<(), RegistryError> {
        let credentials = self.credentials.as_ref();
        let registry = self.reference.registry.clone();
        let auth_error = |reason: String| RegistryError::Auth {
            registry: registry.clone(),
            reason,
        };
        let header = answer
            .headers
            .get(hyper::header::WWW_AUTHENTICATE)
            .and_then(|h| h.to_str().ok())
            .ok_or_else(|| auth_error("HTTP 401 without a challenge".to_owned()))?;
        let (scheme, params) = challenge(header);
        let param = |name: &str| params.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
        match scheme.as_str() {
            "basic" => {
                let (user, password) = credentials.ok_or_else(|| {
                    auth_error("the registry wants credentials: set the source's secretRef".to_owned())
                })?;
                let token = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
                self.authorize(format!("Basic {token}"));
                Ok(())
            }
            "bearer" => {
                let realm =
                    param("realm").ok_or_else(|| auth_error("a Bearer challenge without a realm".to_owned()))?;
                let scope = format!("repository:{}:pull", self.reference.repository);
                let mut query = vec![format!("scope={}", percent_encode(&scope))];
                if let Some(service) = param("service") {
                    query.insert(0, format!("service={}", percent_encode(&service)));
                }
                let separator = if realm.contains('?') { '&' } else { '?' };
                let source = HttpSource {
                    url: format!("{realm}{separator}{}", query.join("&")),
                    basic_auth: credentials.cloned(),
                    ..self.template.clone()
                };
                let answer = http_source::get(&source, &self.tls).await?;
                let status = answer.status;
                let body = answer.bytes(DOCUMENT_LIMIT).await?;
                if !status.is_success() {
                    return Err(auth_error(format!(
                        "the token service {realm} answered HTTP {status}{}",
                        registry_errors(&body)
                    )));
                }
                let token: Token = serde_json::from_slice(&body)
                    .map_err(|e| auth_error(format!("the token service's answer: {e}")))?;
                let token = token
                    .token
                    .or(token.access_token)
                    .filter(|t| !t.is_empty())
                    .ok_or_else(|| auth_error("the token service gave no token".to_owned()))?;
                self.authorize(format!("Bearer {token}"));
                Ok(())
            }
            other => Err(auth_error(format!("unknown challenge scheme {other:?}"))),
        }
    }
}
