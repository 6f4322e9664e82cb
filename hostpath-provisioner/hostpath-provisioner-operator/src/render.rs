//! What a `HostPathProvisioner` becomes, decided without the API server: the CSI driver's
//! DaemonSet `hostpath-provisioner-csi` (the driver and external-provisioner on every node the
//! CR's `workload` allows, a host directory per storage pool), the `CSIDriver`, and the RBAC of
//! their service account, with upstream's names and labels. Each object is controlled by the CR,
//! so deleting the CR removes them all.

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::api::storage::v1::CSIDriver;
use operator_kit::objects::{Desired, ObjectsError, owned_by};
use serde_json::{Value, json};

use crate::api::HostPathProvisioner;

/// The CSI driver's name.
pub const DRIVER_NAME: &str = "kubevirt.io.hostpath-provisioner";
/// The CSI DaemonSet's name.
pub const DAEMON_SET: &str = "hostpath-provisioner-csi";
/// The CSI pods' service account, and the name of its roles.
pub const SERVICE_ACCOUNT: &str = "hostpath-provisioner-admin-csi";
/// The label every object and pod carries (upstream's selector).
pub const APP_LABEL: (&str, &str) = ("k8s-app", "hostpath-provisioner");
/// Where the kubelet finds the driver's socket (upstream's fixed path).
const KUBELET_SOCKET_DIR: &str = "/var/lib/kubelet/plugins/csi-hostpath";

/// How the operator was started.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Settings {
    /// The namespace the operator and the CSI pods run in.
    pub namespace: String,
    /// The CSI driver's image (upstream's `CSI_PROVISIONER_IMAGE`).
    pub driver_image: String,
    /// external-provisioner's image (upstream's `CSI_SIG_STORAGE_PROVISIONER_IMAGE`).
    pub provisioner_image: String,
    /// The version installed, the driver's `--version`.
    pub version: String,
    /// The containers' `--v` (upstream's `VERBOSITY`).
    pub verbosity: String,
}

/// Why a CR cannot be rendered.
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    /// The CR has no uid yet, so nothing can name it as owner.
    #[error("the HostPathProvisioner {0} has no uid")]
    NoUid(String),
    /// An object did not take its type's shape.
    #[error(transparent)]
    Object(#[from] ObjectsError),
}

/// Every object the CR wants, in the order they are applied: RBAC before the pods that use it.
///
/// # Errors
/// [`RenderError`].
pub fn render(cr: &HostPathProvisioner, settings: &Settings) -> Result<Vec<Desired>, RenderError> {
    let owner = owned_by(cr).ok_or_else(|| RenderError::NoUid(cr.metadata.name.clone().unwrap_or_default()))?;
    let owner = serde_json::to_value(owner).map_err(|source| ObjectsError::Convert {
        what: "the owner reference".to_owned(),
        source,
    })?;
    let namespace = settings.namespace.as_str();
    let metadata = |name: &str, namespaced: bool| {
        let mut meta = json!({
            "name": name,
            "labels": labels(),
            "ownerReferences": [owner.clone()],
        });
        if namespaced {
            meta["namespace"] = json!(namespace);
        }
        meta
    };
    let subjects = json!([{ "kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": namespace }]);
    Ok(vec![
        Desired::from_json::<ServiceAccount>(json!({ "metadata": metadata(SERVICE_ACCOUNT, true) }))?,
        Desired::from_json::<ClusterRole>(
            json!({ "metadata": metadata(SERVICE_ACCOUNT, false), "rules": cluster_rules() }),
        )?,
        Desired::from_json::<ClusterRoleBinding>(json!({
            "metadata": metadata(SERVICE_ACCOUNT, false),
            "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": SERVICE_ACCOUNT },
            "subjects": subjects,
        }))?,
        Desired::from_json::<Role>(json!({ "metadata": metadata(SERVICE_ACCOUNT, true), "rules": namespace_rules() }))?,
        Desired::from_json::<RoleBinding>(json!({
            "metadata": metadata(SERVICE_ACCOUNT, true),
            "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": SERVICE_ACCOUNT },
            "subjects": subjects,
        }))?,
        Desired::from_json::<CSIDriver>(json!({
            "metadata": metadata(DRIVER_NAME, false),
            // No attach step, the pod's identity on mount, per-node capacity for scheduling, and
            // the volume's group set by the kubelet (upstream's; only persistent volumes: the
            // driver makes no inline ephemeral ones).
            "spec": {
                "attachRequired": false,
                "podInfoOnMount": true,
                "storageCapacity": true,
                "requiresRepublish": false,
                "fsGroupPolicy": "File",
                "volumeLifecycleModes": ["Persistent"],
            },
        }))?,
        daemon_set(cr, settings, &metadata(DAEMON_SET, true))?,
    ])
}

fn labels() -> Value {
    json!({
        APP_LABEL.0: APP_LABEL.1,
        "app.kubernetes.io/managed-by": "hostpath-provisioner-operator",
        "app.kubernetes.io/component": "storage",
    })
}

/// What each node's external-provisioner needs cluster-wide: the volumes it makes for its node's
/// claims, the classes, the nodes' topology and events.
fn cluster_rules() -> Value {
    json!([
        { "apiGroups": [""], "resources": ["persistentvolumes"], "verbs": ["get", "list", "watch", "create", "delete", "patch"] },
        { "apiGroups": [""], "resources": ["persistentvolumeclaims"], "verbs": ["get", "list", "watch", "update"] },
        { "apiGroups": ["storage.k8s.io"], "resources": ["storageclasses", "csinodes"], "verbs": ["get", "list", "watch"] },
        { "apiGroups": [""], "resources": ["events"], "verbs": ["list", "watch", "create", "patch", "update"] },
        { "apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"] },
        { "apiGroups": ["storage.k8s.io"], "resources": ["volumeattachments"], "verbs": ["get", "list", "watch"] },
        { "apiGroups": ["storage.k8s.io"], "resources": ["volumeattributesclasses"], "verbs": ["get", "list", "watch"] },
    ])
}

/// In the namespace: leader leases, the CSIStorageCapacity objects that tell the scheduler each
/// node's free space, and the pod and DaemonSet those objects are owned through.
fn namespace_rules() -> Value {
    json!([
        { "apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "update", "create"] },
        { "apiGroups": ["storage.k8s.io"], "resources": ["csistoragecapacities"], "verbs": ["get", "list", "watch", "delete", "update", "create"] },
        { "apiGroups": [""], "resources": ["pods"], "verbs": ["get"] },
        { "apiGroups": ["apps"], "resources": ["daemonsets"], "verbs": ["get"] },
    ])
}

/// The host volume a pool is mounted from, and where the driver sees it (upstream's
/// `<pool>-data-dir`; a pool's name is at most 50 characters, so the name fits in 63).
fn pool_volume(pool: &str) -> String {
    format!("{pool}-data-dir")
}

fn daemon_set(cr: &HostPathProvisioner, settings: &Settings, metadata: &Value) -> Result<Desired, ObjectsError> {
    let (containers, volumes) = pod_parts(cr, settings);
    let mut daemon_set: DaemonSet = {
        let value = json!({
            "metadata": metadata,
            "spec": {
                "selector": { "matchLabels": { APP_LABEL.0: APP_LABEL.1 } },
                "updateStrategy": { "type": "RollingUpdate", "rollingUpdate": { "maxUnavailable": "10%", "maxSurge": 0 } },
                "template": {
                    "metadata": { "labels": labels() },
                    "spec": {
                        "serviceAccountName": SERVICE_ACCOUNT,
                        "containers": containers,
                        "volumes": volumes,
                    },
                },
            },
        });
        serde_json::from_value(value).map_err(|source| ObjectsError::Convert {
            what: format!("DaemonSet {DAEMON_SET}"),
            source,
        })?
    };
    if let Some(pod) = daemon_set.spec.as_mut().and_then(|s| s.template.spec.as_mut()) {
        cr.spec.workload.place(pod);
    }
    Desired::from_typed(&daemon_set)
}

/// The CSI pod's two containers (the driver, external-provisioner) and its host volumes.
fn pod_parts(cr: &HostPathProvisioner, settings: &Settings) -> (Value, Value) {
    let pools = &cr.spec.storage_pools;
    // The driver's --datadir: each pool's directory as the container sees it, from `/`.
    let datadir: Vec<Value> = pools
        .iter()
        .map(|p| json!({ "name": p.name, "path": format!("{}/csi", pool_volume(&p.name)), "shared": false }))
        .collect();
    let pool_mounts: Vec<Value> = pools
        .iter()
        .map(|p| json!({ "name": pool_volume(&p.name), "mountPath": format!("/{}", pool_volume(&p.name)), "mountPropagation": "HostToContainer" }))
        .collect();
    let pool_volumes: Vec<Value> = pools
        .iter()
        .map(|p| json!({ "name": pool_volume(&p.name), "hostPath": { "path": p.path, "type": "DirectoryOrCreate" } }))
        .collect();
    let node_name = json!({ "name": "NODE_NAME", "valueFrom": { "fieldRef": { "fieldPath": "spec.nodeName" } } });
    let mut driver_mounts = vec![
        json!({ "name": "plugins-dir", "mountPath": "/var/lib/kubelet/plugins", "mountPropagation": "Bidirectional" }),
        json!({ "name": "mountpoint-dir", "mountPath": "/var/lib/kubelet/pods", "mountPropagation": "Bidirectional" }),
        json!({ "name": "socket-dir", "mountPath": "/csi" }),
        json!({ "name": "registration-dir", "mountPath": "/registration" }),
    ];
    driver_mounts.extend(pool_mounts);
    let mut volumes = vec![
        json!({ "name": "socket-dir", "hostPath": { "path": KUBELET_SOCKET_DIR, "type": "DirectoryOrCreate" } }),
        json!({ "name": "mountpoint-dir", "hostPath": { "path": "/var/lib/kubelet/pods", "type": "DirectoryOrCreate" } }),
        json!({ "name": "registration-dir", "hostPath": { "path": "/var/lib/kubelet/plugins_registry", "type": "Directory" } }),
        json!({ "name": "plugins-dir", "hostPath": { "path": "/var/lib/kubelet/plugins", "type": "Directory" } }),
    ];
    volumes.extend(pool_volumes);
    let verbosity = format!("--v={}", settings.verbosity);
    let mut driver = json!({
        "name": "hostpath-provisioner",
        "image": settings.driver_image,
        // The driver registers itself with the kubelet (upstream's node-driver-registrar sidecar's
        // job; docs/compatibility.md).
        "args": [
            format!("--drivername={DRIVER_NAME}"),
            verbosity,
            "--endpoint=$(CSI_ENDPOINT)",
            "--nodeid=$(NODE_NAME)",
            "--version=$(VERSION)",
            "--datadir=$(PV_DIR)",
            format!("--kubelet-registration-path={KUBELET_SOCKET_DIR}/csi.sock"),
            "--registration-dir=/registration",
        ],
        "env": [
            { "name": "CSI_ENDPOINT", "value": "unix:///csi/csi.sock" },
            node_name,
            { "name": "PV_DIR", "value": Value::Array(datadir).to_string() },
            { "name": "VERSION", "value": settings.version },
        ],
        "securityContext": { "privileged": true },
        "resources": { "requests": { "cpu": "10m", "memory": "16Mi" } },
        "volumeMounts": driver_mounts,
    });
    let mut provisioner = json!({
        "name": "csi-provisioner",
        "image": settings.provisioner_image,
        "args": [
            verbosity,
            "--csi-address=/csi/csi.sock",
            "--feature-gates=Topology=true",
            "--enable-capacity=true",
            "--capacity-for-immediate-binding=true",
            "--extra-create-metadata=true",
            "--immediate-topology=false",
            "--strict-topology=true",
            "--node-deployment=true",
        ],
        "env": [
            { "name": "NAMESPACE", "valueFrom": { "fieldRef": { "fieldPath": "metadata.namespace" } } },
            { "name": "POD_NAME", "valueFrom": { "fieldRef": { "fieldPath": "metadata.name" } } },
            node_name,
        ],
        "securityContext": { "privileged": true },
        "resources": { "requests": { "cpu": "10m", "memory": "32Mi" } },
        "volumeMounts": [{ "name": "socket-dir", "mountPath": "/csi" }],
    });
    if let Some(policy) = &cr.spec.image_pull_policy {
        driver["imagePullPolicy"] = json!(policy);
        provisioner["imagePullPolicy"] = json!(policy);
    }
    (json!([driver, provisioner]), Value::Array(volumes))
}
