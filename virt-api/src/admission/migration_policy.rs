//! The `MigrationPolicy` webhook (`migration-policy-validator.kubevirt.io` on create and update),
//! upstream's checks and messages ([`kubevirt_api::migrations::validate`]): no negative completion
//! timeout or bandwidth, and what kubevirt-rs cannot honour refused by name.

use kubevirt_api::migrations::MigrationPolicy;

use super::review::{AdmissionRequest, AdmissionResponse};
use super::{Rejection, decode_object};

/// `/migration-policy-validate-create`.
pub(super) fn validate(request: &AdmissionRequest) -> Result<AdmissionResponse, Rejection> {
    let policy: MigrationPolicy = decode_object(request.object.as_deref(), "object")?;
    let causes = kubevirt_api::migrations::validate(&policy.spec);
    Ok(if causes.is_empty() {
        AdmissionResponse::allow(&request.uid)
    } else {
        AdmissionResponse::deny(&request.uid, &causes)
    })
}

#[cfg(test)]
mod tests {
    use super::super::{Webhook, answer_with_fake};
    use crate::backends::FakeSubresourceCluster;
    use kubevirt_api::v1::ClusterConfig;

    fn review(spec: &serde_json::Value) -> Vec<u8> {
        serde_json::to_vec(&serde_json::json!({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {
                "uid": "req-1", "operation": "CREATE",
                "resource": {"group": "migrations.kubevirt.io", "version": "v1alpha1", "resource": "migrationpolicies"},
                "object": {"apiVersion": "migrations.kubevirt.io/v1alpha1", "kind": "MigrationPolicy",
                           "metadata": {"name": "p"}, "spec": spec}
            }
        }))
        .expect("review")
    }

    async fn answer(spec: serde_json::Value) -> serde_json::Value {
        let cluster = FakeSubresourceCluster::default();
        answer_with_fake(
            Webhook::MigrationPolicyValidate,
            &review(&spec),
            ClusterConfig::default(),
            &cluster,
        )
        .await
    }

    #[tokio::test]
    async fn a_policy_is_admitted_unless_a_value_is_negative() {
        let fine = answer(serde_json::json!({"selectors": {"namespaceSelector": {"team": "a"}},
            "bandwidthPerMigration": "64Mi", "completionTimeoutPerGiB": 0, "allowPostCopy": true,
            "maxDowntimeMs": 300}))
        .await;
        assert_eq!(fine["allowed"], true, "{fine}");
        let refused = answer(serde_json::json!({"selectors": {},
            "bandwidthPerMigration": "-1Mi", "completionTimeoutPerGiB": -5}))
        .await;
        assert_eq!(refused["allowed"], false, "{refused}");
        assert_eq!(refused["status"]["code"], 422, "{refused}");
        let causes = &refused["status"]["details"]["causes"];
        assert_eq!(causes[0]["field"], "spec.completionTimeoutPerGiB", "{refused}");
        assert_eq!(causes[0]["message"], "must not be negative", "{refused}");
        assert_eq!(causes[1]["field"], "spec.bandwidthPerMigration", "{refused}");
    }

    #[tokio::test]
    async fn paused_mode_is_refused_by_name() {
        let refused = answer(serde_json::json!({"selectors": {}, "allowWorkloadDisruption": true,
            "allowPostCopy": false}))
        .await;
        assert_eq!(refused["allowed"], false, "{refused}");
        assert_eq!(
            refused["status"]["details"]["causes"][0]["field"], "spec.allowWorkloadDisruption",
            "{refused}"
        );
    }
}
