//! `spec.accessCredentials`: SSH public keys and user passwords that KubeVirt puts into the guest
//! from Secrets, through cloud-init or the QEMU guest agent.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::EmptyObject;

/// One entry of `spec.accessCredentials`. Exactly one of the two kinds is set.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AccessCredential {
    /// SSH public keys for the guest's users.
    pub ssh_public_key: Option<SshPublicKeyAccessCredential>,
    /// Passwords for the guest's users.
    pub user_password: Option<UserPasswordAccessCredential>,
}

/// `accessCredentials[].sshPublicKey`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SshPublicKeyAccessCredential {
    /// Where the keys come from.
    pub source: Option<CredentialSource>,
    /// How they reach the guest.
    pub propagation_method: Option<SshPropagationMethod>,
}

/// `accessCredentials[].userPassword`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UserPasswordAccessCredential {
    /// Where the passwords come from.
    pub source: Option<CredentialSource>,
    /// How they reach the guest.
    pub propagation_method: Option<PasswordPropagationMethod>,
}

/// `…source`: a Secret in the VMI's namespace.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CredentialSource {
    /// The Secret.
    pub secret: Option<CredentialSecret>,
}

/// `…source.secret`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CredentialSecret {
    /// Name of the Secret: for SSH keys every value is a key; for passwords every key is a user
    /// name and its value the password.
    pub secret_name: String,
}

/// `sshPublicKey.propagationMethod`. Exactly one is set.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SshPropagationMethod {
    /// Into the cloud-init ConfigDrive metadata, written `configDrive: {}`.
    pub config_drive: Option<EmptyObject>,
    /// Into the cloud-init NoCloud metadata, written `noCloud: {}`.
    pub no_cloud: Option<EmptyObject>,
    /// Through the guest agent into each user's `authorized_keys`.
    pub qemu_guest_agent: Option<GuestAgentUsers>,
}

/// `sshPublicKey.propagationMethod.qemuGuestAgent`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GuestAgentUsers {
    /// Guest users whose `authorized_keys` receive the keys.
    #[serde(default)]
    pub users: Vec<String>,
}

/// `userPassword.propagationMethod`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PasswordPropagationMethod {
    /// Through the guest agent, written `qemuGuestAgent: {}`.
    pub qemu_guest_agent: Option<EmptyObject>,
}

impl AccessCredential {
    /// The Secret this credential reads, if it names one.
    #[must_use]
    pub fn secret_name(&self) -> Option<&str> {
        let source = match (&self.ssh_public_key, &self.user_password) {
            (Some(ssh), _) => ssh.source.as_ref(),
            (None, Some(password)) => password.source.as_ref(),
            (None, None) => None,
        };
        source
            .and_then(|s| s.secret.as_ref())
            .map(|s| s.secret_name.as_str())
            .filter(|n| !n.is_empty())
    }
}
