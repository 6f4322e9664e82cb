//! Guest-facing rules of upstream's VMI admitter: probes, SEV launch security, the pod's DNS
//! settings and access credentials.

use super::{Cause, CauseType, cause};
use crate::v1::{ClusterConfig, Probe, VirtualMachineInstanceSpec};

const DNS_POLICIES: [&str; 5] = ["ClusterFirstWithHostNet", "ClusterFirst", "Default", "None", ""];

fn check_probe(probe: Option<&Probe>, field: &str, pod_network: bool, causes: &mut Vec<Cause>) {
    let Some(probe) = probe else { return };
    let handlers = [
        probe.http_get.is_some(),
        probe.tcp_socket.is_some(),
        probe.exec.is_some(),
        probe.guest_agent_ping.is_some(),
    ];
    match handlers.iter().filter(|h| **h).count() {
        0 => causes.push(cause(
            CauseType::Required,
            field.to_owned(),
            format!("either {field}.tcpSocket, {field}.exec or {field}.httpGet must be set if a {field} is specified"),
        )),
        1 => {}
        _ => causes.push(cause(
            CauseType::Invalid,
            field.to_owned(),
            format!("{field} must have exactly one probe type set"),
        )),
    }
    if !pod_network {
        for (set, what) in [
            (probe.http_get.is_some(), "httpGet"),
            (probe.tcp_socket.is_some(), "tcpSocket"),
        ] {
            if set {
                let f = format!("{field}.{what}");
                causes.push(cause(
                    CauseType::Invalid,
                    f.clone(),
                    format!("{f} is only allowed if the Pod Network is attached"),
                ));
            }
        }
    }
}

fn check_launch_security(
    spec: &VirtualMachineInstanceSpec,
    base: &str,
    config: &ClusterConfig,
    causes: &mut Vec<Cause>,
) {
    let Some(sev) = spec.domain.launch_security.as_ref().and_then(|l| l.sev.as_ref()) else {
        return;
    };
    let field = format!("{base}.launchSecurity");
    let mut refuse = |message: String| causes.push(cause(CauseType::Invalid, field.clone(), message));
    if !config.is_feature_gate_enabled("WorkloadEncryptionSEV") {
        refuse("WorkloadEncryptionSEV feature gate is not enabled in kubevirt-config".to_owned());
        return;
    }
    let efi = spec
        .domain
        .firmware
        .as_ref()
        .and_then(|f| f.bootloader.as_ref())
        .and_then(|b| b.efi.as_ref());
    match efi {
        None => refuse("SEV requires OVMF (UEFI)".to_owned()),
        Some(efi) if efi.secure_boot != Some(false) => refuse("SEV does not work along with SecureBoot".to_owned()),
        Some(_) => {}
    }
    if sev.attestation.is_some() && spec.start_strategy.as_deref() != Some("Paused") {
        refuse("SEV attestation requires VMI StartStrategy 'Paused'".to_owned());
    }
    for iface in spec.domain.devices.interfaces.iter().filter(|i| i.boot_order.is_some()) {
        refuse(format!("SEV does not work with bootable NICs: {}", iface.name));
    }
}

fn check_dns(spec: &VirtualMachineInstanceSpec, base: &str, causes: &mut Vec<Cause>) {
    let policy = spec.dns_policy.as_deref().unwrap_or("");
    if !DNS_POLICIES.contains(&policy) {
        causes.push(cause(
            CauseType::NotSupported,
            format!("{base}.dnsPolicy"),
            format!("DNSPolicy: {policy} is not supported, valid values: [ClusterFirstWithHostNet ClusterFirst Default None ]"),
        ));
    }
    let config = spec.dns_config.as_ref();
    let nameservers = config.and_then(|c| c.nameservers.clone()).unwrap_or_default();
    if policy == "None" {
        if config.is_none() {
            causes.push(cause(
                CauseType::Required,
                format!("{base}.dnsConfig"),
                "must provide `dnsConfig` when `dnsPolicy` is None".to_owned(),
            ));
            return;
        }
        if nameservers.is_empty() {
            causes.push(cause(
                CauseType::Required,
                "nameservers".to_owned(),
                "must provide at least one DNS nameserver when `dnsPolicy` is None".to_owned(),
            ));
            return;
        }
    }
    let Some(config) = config else { return };
    if nameservers.len() > 3 {
        causes.push(cause(
            CauseType::Invalid,
            "nameservers".to_owned(),
            format!("must not have more than 3 nameservers: [{}]", nameservers.join(" ")),
        ));
    }
    for ns in nameservers.iter().filter(|ns| ns.parse::<std::net::IpAddr>().is_err()) {
        causes.push(cause(
            CauseType::Invalid,
            "nameservers".to_owned(),
            format!("must be valid IP address: {ns}"),
        ));
    }
    let searches = config.searches.clone().unwrap_or_default();
    if searches.len() > 6 {
        causes.push(cause(
            CauseType::Invalid,
            "searchDomains".to_owned(),
            "must not have more than 6 search paths".to_owned(),
        ));
    }
    if searches.join(" ").len() > 256 {
        causes.push(cause(
            CauseType::Invalid,
            "searchDomains".to_owned(),
            "must not have more than 256 characters (including spaces) in the search list".to_owned(),
        ));
    }
    for option in config.options.iter().flatten() {
        if option.name.as_deref().is_none_or(str::is_empty) {
            causes.push(cause(
                CauseType::Invalid,
                "options".to_owned(),
                "Option.Name must not be empty".to_owned(),
            ));
        }
    }
}

fn check_access_credentials(spec: &VirtualMachineInstanceSpec, base: &str, causes: &mut Vec<Cause>) {
    let has_nocloud = spec.volumes.iter().any(|v| v.cloud_init_no_cloud.is_some());
    let has_config_drive = spec.volumes.iter().any(|v| v.cloud_init_config_drive.is_some());
    for (i, credential) in spec.access_credentials.iter().enumerate() {
        let here = format!("{base}.accessCredentials[{i}]");
        let mut kinds = 0;
        if let Some(ssh) = &credential.ssh_public_key {
            kinds += 1;
            let method = ssh.propagation_method.clone().unwrap_or_default();
            let mut methods = 0;
            for (name, used, exists) in [
                ("noCloud", method.no_cloud.is_some(), has_nocloud),
                ("configDrive", method.config_drive.is_some(), has_config_drive),
            ] {
                if used {
                    methods += 1;
                    if !exists {
                        causes.push(cause(
                            CauseType::Invalid,
                            format!("{here}.sshPublicKey.propagationMethod"),
                            format!(
                                "{here} requires a {name} volume to exist when the {name} propagationMethod is in use."
                            ),
                        ));
                    }
                }
            }
            if let Some(agent) = &method.qemu_guest_agent {
                methods += 1;
                if agent.users.is_empty() {
                    causes.push(cause(
                        CauseType::Invalid,
                        format!("{here}.sshPublicKey.propagationMethod.qemuGuestAgent.users"),
                        format!("{here} requires at least one user to be present in the users list"),
                    ));
                }
            }
            check_credential_source(ssh.source.as_ref(), methods, &here, "sshPublicKey", causes);
        }
        if let Some(password) = &credential.user_password {
            kinds += 1;
            let methods = usize::from(
                password
                    .propagation_method
                    .as_ref()
                    .is_some_and(|m| m.qemu_guest_agent.is_some()),
            );
            check_credential_source(password.source.as_ref(), methods, &here, "userPassword", causes);
        }
        if kinds != 1 {
            causes.push(cause(
                CauseType::Invalid,
                here.clone(),
                format!("{here} must have exactly one access credential type set"),
            ));
        }
    }
}

/// Every credential has one source and exactly one propagation method.
fn check_credential_source(
    source: Option<&crate::v1::CredentialSource>,
    methods: usize,
    here: &str,
    kind: &str,
    causes: &mut Vec<Cause>,
) {
    if source.and_then(|s| s.secret.as_ref()).is_none() {
        causes.push(cause(
            CauseType::Invalid,
            format!("{here}.{kind}.source"),
            format!("{here} must have exactly one source set"),
        ));
    }
    if methods != 1 {
        causes.push(cause(
            CauseType::Invalid,
            format!("{here}.{kind}.propagationMethod"),
            format!("{here} must have exactly one propagationMethod set"),
        ));
    }
}

pub(super) fn check_guest(
    spec: &VirtualMachineInstanceSpec,
    base: &str,
    config: &ClusterConfig,
    causes: &mut Vec<Cause>,
) {
    let pod_network = spec.networks.iter().any(|n| n.pod.is_some());
    check_probe(
        spec.readiness_probe.as_ref(),
        &format!("{base}.readinessProbe"),
        pod_network,
        causes,
    );
    check_probe(
        spec.liveness_probe.as_ref(),
        &format!("{base}.livenessProbe"),
        pod_network,
        causes,
    );
    check_launch_security(spec, base, config, causes);
    check_dns(spec, base, causes);
    check_access_credentials(spec, base, causes);
}
