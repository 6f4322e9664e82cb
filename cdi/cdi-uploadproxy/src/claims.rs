//! The claim an upload token names, as the proxy reads it: its annotations (whether it takes an
//! upload and whether its server is ready, its content type) and whether CDI's upload populator
//! fills it, in which case the upload goes to its prime claim ([`server_claim`]). [`KubeClaims`]
//! reads the API server; tests give their own.

use std::collections::BTreeMap;
use std::future::Future;

use cdi_api::volume_upload_source::PRIME_NAME;
use cdi_token::upload_request::{POD_PHASE, Refusal};
use k8s_openapi::api::core::v1::PersistentVolumeClaim;

/// What the proxy reads of a claim.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClaimRecord {
    /// Its annotations.
    pub annotations: BTreeMap<String, String>,
    /// Its `dataSourceRef` names a `VolumeUploadSource`: the upload populator fills it.
    pub upload_populated: bool,
}

/// A claim, or `None` when it is not there.
pub trait Claims: Send + Sync + 'static {
    /// The claim `namespace/name`.
    fn claim(
        &self,
        namespace: &str,
        name: &str,
    ) -> impl Future<Output = Result<Option<ClaimRecord>, kube::Error>> + Send;
}

/// The claims on the API server.
#[derive(Clone)]
pub struct KubeClaims(pub kube::Client);

impl std::fmt::Debug for KubeClaims {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeClaims").finish_non_exhaustive()
    }
}

impl Claims for KubeClaims {
    async fn claim(&self, namespace: &str, name: &str) -> Result<Option<ClaimRecord>, kube::Error> {
        let api: kube::Api<PersistentVolumeClaim> = kube::Api::namespaced(self.0.clone(), namespace);
        Ok(api.get_opt(name).await?.map(|claim| ClaimRecord {
            upload_populated: cdi_api::volume_upload_source::names_upload_source(&claim),
            annotations: claim.metadata.annotations.unwrap_or_default(),
        }))
    }
}

/// Where an upload into a claim the upload populator fills goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ServerClaim {
    /// To the upload server of this claim: the prime claim.
    Prime(String),
    /// Nowhere yet: the claim names no prime claim so far (upstream's proxy waits for one).
    NotYet(Refusal),
}

/// Where an upload into `target`, which the upload populator fills, goes (upstream's
/// `getPopulationPVC`): its prime claim's server, once it names one.
///
/// # Errors
/// A 503 [`Refusal`]: the upload is done already (the target shows the prime's finished server).
pub fn server_claim(name: &str, target: &ClaimRecord) -> Result<ServerClaim, Refusal> {
    if target.annotations.get(POD_PHASE).is_some_and(|p| p == "Succeeded") {
        return Err(Refusal {
            status: 503,
            body: format!("rejecting Upload Request for PVC {name} that already finished uploading"),
        });
    }
    Ok(match target.annotations.get(PRIME_NAME) {
        Some(prime) => ServerClaim::Prime(prime.clone()),
        None => ServerClaim::NotYet(Refusal {
            status: 503,
            body: format!("rejecting Upload Request for PVC {name} that is not ready yet"),
        }),
    })
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    fn record(annotations: &[(&str, &str)]) -> ClaimRecord {
        ClaimRecord {
            annotations: annotations
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            upload_populated: true,
        }
    }

    #[test]
    fn a_populated_claim_sends_its_uploads_to_its_prime_once_it_names_one() {
        assert_eq!(
            server_claim("disk", &record(&[(PRIME_NAME, "prime-u1")])),
            Ok(ServerClaim::Prime("prime-u1".to_owned()))
        );
        assert_eq!(
            server_claim("disk", &record(&[])),
            Ok(ServerClaim::NotYet(Refusal {
                status: 503,
                body: "rejecting Upload Request for PVC disk that is not ready yet".to_owned()
            }))
        );
        assert_eq!(
            server_claim("disk", &record(&[(PRIME_NAME, "prime-u1"), (POD_PHASE, "Succeeded")])),
            Err(Refusal {
                status: 503,
                body: "rejecting Upload Request for PVC disk that already finished uploading".to_owned()
            })
        );
    }
}
