//! Who the launcher pod's processes run as. A VMI whose `status.runtimeUser` is not 0 (every VMI
//! admitted while the `Root` feature gate is off) gets an unprivileged pod, as upstream renders it:
//! uid and gid 107, `runAsNonRoot`, no privilege escalation, every capability dropped except
//! `NET_BIND_SERVICE`, and the runtime's default seccomp profile. virt-handler does what needs
//! privilege before the launcher needs it (docs/security.md). A VMI with runtime user 0 keeps the
//! root pod.

use k8s_openapi::api::core::v1::{Capabilities, PodSecurityContext, SeccompProfile, SecurityContext};
use kubevirt_api::v1::VirtualMachineInstance;
use kubevirt_api::well_known::NON_ROOT_UID;

/// The group the pod's volumes are given to, root pod or not.
const FS_GROUP: i64 = NON_ROOT_UID as i64;

/// The pod's security context.
#[must_use]
pub fn pod_security_context(vmi: &VirtualMachineInstance) -> PodSecurityContext {
    if !vmi.is_non_root() {
        return PodSecurityContext {
            run_as_user: Some(0),
            fs_group: Some(FS_GROUP),
            ..PodSecurityContext::default()
        };
    }
    let user = i64::from(vmi.runtime_user());
    PodSecurityContext {
        run_as_user: Some(user),
        run_as_group: Some(user),
        run_as_non_root: Some(true),
        fs_group: Some(FS_GROUP),
        seccomp_profile: Some(SeccompProfile {
            type_: "RuntimeDefault".to_owned(),
            ..SeccompProfile::default()
        }),
        ..PodSecurityContext::default()
    }
}

/// The `compute` container's: unprivileged with only `NET_BIND_SERVICE`, or root with
/// `NET_BIND_SERVICE` and `SYS_NICE`.
#[must_use]
pub fn compute_security_context(vmi: &VirtualMachineInstance) -> SecurityContext {
    if !vmi.is_non_root() {
        return SecurityContext {
            run_as_user: Some(0),
            run_as_non_root: Some(false),
            capabilities: Some(Capabilities {
                add: Some(vec!["NET_BIND_SERVICE".to_owned(), "SYS_NICE".to_owned()]),
                ..Capabilities::default()
            }),
            ..SecurityContext::default()
        };
    }
    SecurityContext {
        capabilities: Some(Capabilities {
            add: Some(vec!["NET_BIND_SERVICE".to_owned()]),
            drop: Some(vec!["ALL".to_owned()]),
        }),
        ..unprivileged(vmi)
    }
}

/// The containerDisk sidecars' and init containers': unprivileged with no capability at all in an
/// unprivileged pod, the runtime's defaults in a root pod.
#[must_use]
pub fn helper_security_context(vmi: &VirtualMachineInstance) -> Option<SecurityContext> {
    vmi.is_non_root().then(|| SecurityContext {
        capabilities: Some(Capabilities {
            add: None,
            drop: Some(vec!["ALL".to_owned()]),
        }),
        ..unprivileged(vmi)
    })
}

fn unprivileged(vmi: &VirtualMachineInstance) -> SecurityContext {
    let user = i64::from(vmi.runtime_user());
    SecurityContext {
        run_as_user: Some(user),
        run_as_group: Some(user),
        run_as_non_root: Some(true),
        allow_privilege_escalation: Some(false),
        ..SecurityContext::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vmi(runtime_user: Option<u64>) -> VirtualMachineInstance {
        let mut vmi: VirtualMachineInstance = serde_json::from_value(serde_json::json!({
            "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
            "metadata": {"name": "v"}, "spec": {"domain": {"devices": {}}}
        }))
        .expect("vmi");
        vmi.status = Some(kubevirt_api::v1::VirtualMachineInstanceStatus {
            runtime_user,
            ..Default::default()
        });
        vmi
    }

    #[test]
    fn a_non_root_vmi_gets_an_unprivileged_pod() {
        let vmi = vmi(Some(107));
        let pod = pod_security_context(&vmi);
        assert_eq!(
            (pod.run_as_user, pod.run_as_group, pod.fs_group),
            (Some(107), Some(107), Some(107))
        );
        assert_eq!(pod.run_as_non_root, Some(true));
        assert_eq!(pod.seccomp_profile.map(|p| p.type_).as_deref(), Some("RuntimeDefault"));
        let compute = compute_security_context(&vmi);
        assert_eq!((compute.run_as_user, compute.run_as_group), (Some(107), Some(107)));
        assert_eq!(compute.run_as_non_root, Some(true));
        assert_eq!(compute.allow_privilege_escalation, Some(false));
        let caps = compute.capabilities.expect("capabilities");
        assert_eq!(caps.add, Some(vec!["NET_BIND_SERVICE".to_owned()]));
        assert_eq!(caps.drop, Some(vec!["ALL".to_owned()]));
        let helper = helper_security_context(&vmi).expect("a helper context");
        assert_eq!(helper.run_as_user, Some(107));
        assert_eq!(helper.allow_privilege_escalation, Some(false));
        assert_eq!(helper.capabilities.and_then(|c| c.add), None);
    }

    /// Admitted while the Root gate was on, rendered after it was turned off: refused by name.
    #[test]
    fn an_unprivileged_pod_is_not_rendered_for_realtime_vcpus() {
        let mut realtime = vmi(Some(107));
        realtime.metadata.uid = Some("u".to_owned());
        realtime.spec.domain.cpu = Some(serde_json::from_value(serde_json::json!({"realtime": {}})).expect("cpu"));
        let refused = super::super::render_launcher_pod(
            &realtime,
            &super::super::PodConfig::new("image"),
            &crate::claims::ClaimModes::default(),
        )
        .expect_err("refused");
        assert!(refused.to_string().contains("spec.domain.cpu.realtime"), "{refused}");
        realtime.status = None;
        assert!(
            super::super::render_launcher_pod(
                &realtime,
                &super::super::PodConfig::new("image"),
                &crate::claims::ClaimModes::default()
            )
            .is_ok()
        );
    }

    #[test]
    fn runtime_user_0_or_none_keeps_the_root_pod() {
        for runtime_user in [Some(0), None] {
            let vmi = vmi(runtime_user);
            let pod = pod_security_context(&vmi);
            assert_eq!(
                (pod.run_as_user, pod.fs_group, pod.run_as_non_root),
                (Some(0), Some(107), None)
            );
            assert_eq!(pod.seccomp_profile, None);
            let compute = compute_security_context(&vmi);
            assert_eq!(compute.run_as_user, Some(0));
            assert_eq!(
                compute.capabilities.and_then(|c| c.add),
                Some(vec!["NET_BIND_SERVICE".to_owned(), "SYS_NICE".to_owned()])
            );
            assert_eq!(helper_security_context(&vmi), None);
        }
    }
}
