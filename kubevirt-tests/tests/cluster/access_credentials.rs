//! Access credentials through the guest agent: SSH keys from a Secret land in root's
//! `authorized_keys` and a password Secret sets root's password, both through the test guest's
//! qemu-ga; the VMI reports `AccessCredentialsSynchronized` and an `AccessCredentialsSyncSuccess`
//! event.

use std::time::Duration;

use super::support::{Cleanup, console_until, example, get, kubectl_ok, kubectl_stdin, wait_for, wait_for_phase};

const SECRETS: &str = "\
apiVersion: v1
kind: Secret
metadata: {name: e2e-agent-keys, namespace: default}
stringData:
  authorized: |
    ssh-ed25519 AAAAagentkeyone one@e2e
    ssh-ed25519 AAAAagentkeytwo two@e2e
---
apiVersion: v1
kind: Secret
metadata: {name: e2e-agent-password, namespace: default}
stringData: {root: Secr3t-pw}
";

fn synchronized(name: &str) -> Option<String> {
    let vmi = get("vmi", name, "default")?;
    vmi["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "AccessCredentialsSynchronized")
        .map(|c| c["status"].as_str().unwrap_or_default().to_owned())
}

#[test]
#[ignore = "needs the test cluster: make cluster"]
fn ssh_keys_and_a_password_reach_the_guest_through_its_agent() {
    let mut cleanup = Cleanup::new();
    cleanup.track("secret", "e2e-agent-keys");
    cleanup.track("secret", "e2e-agent-password");
    kubectl_ok(&[
        "delete",
        "secret/e2e-agent-keys",
        "secret/e2e-agent-password",
        "--ignore-not-found",
    ]);
    let created = kubectl_stdin(&["create", "-f", "-"], SECRETS);
    assert!(created.status.success(), "{}", String::from_utf8_lossy(&created.stderr));
    let manifest = example("vmi-testguest.yaml", "e2e-agent").replace(
        "  volumes:\n",
        "  accessCredentials:\n    - sshPublicKey:\n        source: {secret: {secretName: e2e-agent-keys}}\n        propagationMethod: {qemuGuestAgent: {users: [root]}}\n    - userPassword:\n        source: {secret: {secretName: e2e-agent-password}}\n        propagationMethod: {qemuGuestAgent: {}}\n  volumes:\n",
    );
    cleanup.apply("vmi", "e2e-agent", &manifest);
    wait_for_phase("e2e-agent", "Running", Duration::from_secs(120));
    wait_for("AccessCredentialsSynchronized=True", Duration::from_secs(120), || {
        (synchronized("e2e-agent").as_deref() == Some("True")).then_some(())
    });
    let output = console_until(
        "e2e-agent",
        "\ncat /root/.ssh/authorized_keys; grep '^root:' /etc/shadow | cut -c1-8; echo AGENT-$((40+2))",
        "AGENT-42",
        Duration::from_secs(60),
    );
    for expected in [
        "ssh-ed25519 AAAAagentkeyone one@e2e",
        "ssh-ed25519 AAAAagentkeytwo two@e2e",
        "root:$",
    ] {
        assert!(
            output.contains(expected),
            "expected {expected:?} in the guest: {output}"
        );
    }
    let events = kubectl_ok(&[
        "get",
        "events",
        "--field-selector",
        "involvedObject.name=e2e-agent,reason=AccessCredentialsSyncSuccess",
        "-o",
        "name",
    ]);
    assert!(!events.trim().is_empty(), "an AccessCredentialsSyncSuccess event");
}
