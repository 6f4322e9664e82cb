//! The admission webhooks: which path does what, and one entry point that turns an AdmissionReview
//! body into its answer. Pure apart from the clock reading and UUID source passed in, so the whole
//! corpus is tested without a server.

mod eviction;
mod infer;
pub mod lookup;
mod migration;
mod migration_policy;
mod mutate;
pub use mutate::vm_firmware_uuid;
pub mod review;
mod validate;
mod vm_instancetypes;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kubevirt_api::v1::ClusterConfig;
use kubevirt_api::validation::{Cause, CauseType};
use serde::de::DeserializeOwned;
use serde_json::value::RawValue;

pub use review::{AdmissionResponse, ReviewAnswer, decode_review};

/// The service accounts whose changes to VMI status and reserved labels are trusted.
pub const KUBEVIRT_SERVICE_ACCOUNTS: [&str; 3] = ["kubevirt-apiserver", "kubevirt-handler", "kubevirt-controller"];

/// One webhook virt-api serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Webhook {
    /// `/virtualmachineinstances-mutate`: defaults for new VMIs.
    VmiMutate,
    /// `/virtualmachines-mutate`: defaults for VMs.
    VmMutate,
    /// `/virtualmachineinstances-validate-create`.
    VmiValidateCreate,
    /// `/virtualmachineinstances-validate-update`.
    VmiValidateUpdate,
    /// `/virtualmachines-validate`.
    VmValidate,
    /// `/migration-mutate-create`: the VMI label and the finalizer of a new migration.
    MigrationMutateCreate,
    /// `/migration-validate-create`.
    MigrationValidateCreate,
    /// `/migration-validate-update`.
    MigrationValidateUpdate,
    /// `/launcher-eviction-validate`: an eviction of a launcher pod becomes a migration.
    PodEviction,
    /// `/migration-policy-validate-create`: a `MigrationPolicy` on create and update.
    MigrationPolicyValidate,
}

impl Webhook {
    /// Every webhook.
    pub const ALL: [Self; 10] = [
        Self::VmiMutate,
        Self::VmMutate,
        Self::VmiValidateCreate,
        Self::VmiValidateUpdate,
        Self::VmValidate,
        Self::MigrationMutateCreate,
        Self::MigrationValidateCreate,
        Self::MigrationValidateUpdate,
        Self::PodEviction,
        Self::MigrationPolicyValidate,
    ];

    /// The path virt-api serves it on (upstream's paths).
    #[must_use]
    pub fn path(self) -> &'static str {
        match self {
            Self::VmiMutate => "/virtualmachineinstances-mutate",
            Self::VmMutate => "/virtualmachines-mutate",
            Self::VmiValidateCreate => "/virtualmachineinstances-validate-create",
            Self::VmiValidateUpdate => "/virtualmachineinstances-validate-update",
            Self::VmValidate => "/virtualmachines-validate",
            Self::MigrationMutateCreate => "/migration-mutate-create",
            Self::MigrationValidateCreate => "/migration-validate-create",
            Self::MigrationValidateUpdate => "/migration-validate-update",
            Self::PodEviction => "/launcher-eviction-validate",
            Self::MigrationPolicyValidate => "/migration-policy-validate-create",
        }
    }

    /// The API group and resource it is registered for.
    fn resource(self) -> (&'static str, &'static str) {
        match self {
            Self::VmiMutate | Self::VmiValidateCreate | Self::VmiValidateUpdate => {
                (kubevirt_api::v1::GROUP, "virtualmachineinstances")
            }
            Self::VmMutate | Self::VmValidate => (kubevirt_api::v1::GROUP, "virtualmachines"),
            Self::MigrationMutateCreate | Self::MigrationValidateCreate | Self::MigrationValidateUpdate => {
                (kubevirt_api::v1::GROUP, "virtualmachineinstancemigrations")
            }
            Self::PodEviction => ("", "pods"),
            Self::MigrationPolicyValidate => (kubevirt_api::migrations::GROUP, "migrationpolicies"),
        }
    }
}

/// What the webhooks need besides the request.
#[derive(Clone, Debug)]
pub struct AdmissionContext {
    /// The cluster configuration (the KubeVirt CR), with defaults.
    pub config: ClusterConfig,
    /// The namespace KubeVirt is installed in; its service accounts are trusted.
    pub install_namespace: String,
}

impl AdmissionContext {
    /// Whether `username` is one of KubeVirt's own service accounts.
    #[must_use]
    pub fn is_kubevirt_service_account(&self, username: &str) -> bool {
        username
            .strip_prefix("system:serviceaccount:")
            .and_then(|rest| rest.split_once(':'))
            .is_some_and(|(ns, name)| ns == self.install_namespace && KUBEVIRT_SERVICE_ACCOUNTS.contains(&name))
    }
}

/// Answers one review body. Never fails: an undecodable body is answered with a 400 status.
/// The VM webhooks read instance types, preferences and volumes through `lookup`.
pub async fn admit(
    webhook: Webhook,
    body: &[u8],
    ctx: &AdmissionContext,
    now: Time,
    new_uuid: &(dyn Fn() -> String + Sync),
    lookup: &impl lookup::AdmissionLookup,
) -> ReviewAnswer {
    let request = match decode_review(body) {
        Ok(request) => request,
        Err(err) => return AdmissionResponse::error("", err.to_string()).into_review(),
    };
    let uid = request.uid.as_str();
    let (group, resource) = webhook.resource();
    if request.resource.group != group || request.resource.resource != resource {
        return AdmissionResponse::error(uid, format!("expect resource to be '{resource}'")).into_review();
    }
    let response = match webhook {
        Webhook::VmiMutate => mutate::vmi(&request, ctx, now, new_uuid),
        Webhook::VmMutate => mutate::vm(&request, ctx, lookup).await,
        Webhook::VmiValidateCreate => validate::vmi_create(&request, ctx),
        Webhook::VmiValidateUpdate => validate::vmi_update(&request, ctx),
        Webhook::VmValidate => validate::vm(&request, ctx, lookup).await,
        Webhook::MigrationMutateCreate => migration::mutate(&request),
        Webhook::MigrationValidateCreate => migration::validate_create(&request, ctx, lookup).await,
        Webhook::MigrationValidateUpdate => migration::validate_update(&request),
        Webhook::PodEviction => eviction::validate(&request, ctx, lookup).await,
        Webhook::MigrationPolicyValidate => migration_policy::validate(&request),
    };
    response
        .unwrap_or_else(|rejection| rejection.into_response(uid))
        .into_review()
}

/// The `response` of `webhook` to the review `body`, as JSON, with `config` and KubeVirt in
/// namespace `kubevirt`, the epoch as now and the fake cluster's lookups: for the webhooks' tests.
#[cfg(test)]
pub(crate) async fn answer_with_fake(
    webhook: Webhook,
    body: &[u8],
    config: ClusterConfig,
    cluster: &crate::backends::FakeSubresourceCluster,
) -> serde_json::Value {
    let ctx = AdmissionContext {
        config,
        install_namespace: "kubevirt".to_owned(),
    };
    let now = Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH);
    let answer = admit(webhook, body, &ctx, now, &|| "uuid".to_owned(), cluster).await;
    serde_json::to_value(answer).map_or(serde_json::Value::Null, |v| v["response"].clone())
}

/// Resolves a VM's `inferFromVolume` matchers into names, as the mutating webhook does (for
/// expand-spec, which may be given a VM that was never stored); the message of a failure.
pub(crate) async fn infer_matchers(
    vm: &mut kubevirt_api::v1::VirtualMachine,
    lookup: &impl lookup::AdmissionLookup,
) -> Result<(), String> {
    let message = |r: Rejection| match r {
        Rejection::Error(message) => message,
        Rejection::Invalid(causes) => causes
            .iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect::<Vec<_>>()
            .join(", "),
    };
    vm_instancetypes::infer_instancetype(vm, lookup)
        .await
        .map_err(message)?;
    vm_instancetypes::infer_preference(vm, lookup).await.map_err(message)
}

/// Why a request is turned down before or instead of its rules.
#[derive(Debug)]
pub(crate) enum Rejection {
    /// The object does not decode: 422 with the field that failed.
    Invalid(Vec<Cause>),
    /// The request is unusable: 400.
    Error(String),
}

impl Rejection {
    fn into_response(self, uid: &str) -> AdmissionResponse {
        match self {
            Self::Invalid(causes) => AdmissionResponse::deny(uid, &causes),
            Self::Error(message) => AdmissionResponse::error(uid, message),
        }
    }
}

/// Decodes `object` as `T`, naming the field that does not fit.
pub(crate) fn decode_object<T: DeserializeOwned>(object: Option<&RawValue>, what: &str) -> Result<T, Rejection> {
    let Some(raw) = object else {
        return Err(Rejection::Error(format!("the request carries no {what}")));
    };
    let mut de = serde_json::Deserializer::from_str(raw.get());
    serde_path_to_error::deserialize(&mut de).map_err(|err| {
        let path = err.path().to_string();
        let field = if path == "." { String::new() } else { path };
        Rejection::Invalid(vec![Cause {
            kind: CauseType::Invalid,
            message: format!("{}: {}", if field.is_empty() { what } else { &field }, err.inner()),
            field,
        }])
    })
}
