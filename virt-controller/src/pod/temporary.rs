//! The temporary pod of a VMI whose claims wait for their first consumer (upstream's
//! `RenderLaunchManifestNoVm`): the launcher pod itself, so that the scheduler places it, and so
//! binds the claims, where the launcher pod will run; marked
//! `kubevirt.io/ephemeral-provisioning`, and its compute container only prints the launcher's
//! version and ends. The VMI controller deletes it once the claims no longer wait.

use k8s_openapi::api::core::v1::Pod;
use kubevirt_api::well_known::annotations;

/// `launcher`, made the temporary pod.
#[must_use]
pub fn temporary(mut launcher: Pod) -> Pod {
    launcher
        .metadata
        .annotations
        .get_or_insert_default()
        .insert(annotations::EPHEMERAL_PROVISIONING.to_owned(), "true".to_owned());
    if let Some(spec) = launcher.spec.as_mut() {
        for container in spec.containers.iter_mut().filter(|c| c.name == "compute") {
            container.command = Some(vec!["/usr/bin/virt-launcher".to_owned(), "--version".to_owned()]);
            container.args = None;
            container.readiness_probe = None;
            container.liveness_probe = None;
            container.startup_probe = None;
        }
    }
    launcher
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{Container, PodSpec, Probe};

    use super::*;

    #[test]
    fn the_launcher_pod_is_marked_and_its_compute_container_only_ends() {
        let launcher = Pod {
            spec: Some(PodSpec {
                containers: vec![
                    Container {
                        name: "compute".to_owned(),
                        command: Some(vec!["/usr/bin/virt-launcher".to_owned()]),
                        args: Some(vec!["--qemu-timeout".to_owned()]),
                        readiness_probe: Some(Probe::default()),
                        ..Container::default()
                    },
                    Container {
                        name: "guest-console-log".to_owned(),
                        args: Some(vec!["--serial".to_owned()]),
                        ..Container::default()
                    },
                ],
                node_selector: Some([("disk".to_owned(), "fast".to_owned())].into()),
                ..PodSpec::default()
            }),
            ..Pod::default()
        };
        let pod = temporary(launcher.clone());
        assert_eq!(
            pod.metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get("kubevirt.io/ephemeral-provisioning"))
                .map(String::as_str),
            Some("true")
        );
        let spec = pod.spec.expect("spec");
        let compute = &spec.containers[0];
        assert_eq!(
            compute.command.as_deref(),
            Some(&["/usr/bin/virt-launcher".to_owned(), "--version".to_owned()][..])
        );
        assert_eq!((compute.args.clone(), compute.readiness_probe.clone()), (None, None));
        let launcher_spec = launcher.spec.expect("spec");
        assert_eq!(
            spec.containers[1], launcher_spec.containers[1],
            "other containers as they are"
        );
        assert_eq!(
            spec.node_selector, launcher_spec.node_selector,
            "placed as the launcher pod"
        );
    }
}
