//! `spec.domain.launchSecurity`: confidential computing (AMD SEV, SEV-SNP, Intel TDX).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::EmptyObject;

/// `spec.domain.launchSecurity`. At most one technology is set.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LaunchSecurity {
    /// AMD Secure Encrypted Virtualization.
    pub sev: Option<Sev>,
    /// AMD SEV with Secure Nested Paging.
    pub snp: Option<SevSnp>,
    /// Intel Trust Domain Extensions, written `tdx: {}`.
    pub tdx: Option<EmptyObject>,
}

/// `spec.domain.launchSecurity.sev`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Sev {
    /// Guest policy bits.
    pub policy: Option<SevPolicy>,
    /// Request remote attestation.
    pub attestation: Option<EmptyObject>,
    /// Session parameters, base64.
    pub session: Option<String>,
    /// Guest owner's Diffie-Hellman certificate, base64.
    pub dh_cert: Option<String>,
}

/// `spec.domain.launchSecurity.sev.policy`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SevPolicy {
    /// SEV-ES: encrypt the CPU register state too.
    pub encrypted_state: Option<bool>,
}

/// `spec.domain.launchSecurity.snp`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SevSnp {
    /// Guest policy, as libvirt takes it.
    pub policy: Option<String>,
    /// Use the VCEK to sign the attestation report.
    pub vcek: Option<String>,
    /// Whether an author key is in the ID block.
    pub author_key: Option<String>,
    /// Measure the kernel hashes.
    pub kernel_hashes: Option<String>,
    /// C-bit position.
    pub cbitpos: Option<String>,
    /// ID block, base64.
    pub id_block: Option<String>,
    /// ID authentication, base64.
    pub id_auth: Option<String>,
    /// Physical address bits lost to encryption.
    pub reduced_phys_bits: Option<String>,
}
