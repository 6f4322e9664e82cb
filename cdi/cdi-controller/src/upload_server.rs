//! The upload server of a claim, as upstream's upload controller makes it (`makeUploadPodSpec`,
//! `makeUploadServiceSpec`, `ensureCertSecret`): the pod `cdi-upload-<claim>` owned by the claim,
//! restarted `OnFailure`, with the claim at `/data` (or `/dev/cdi-block-volume`), its scratch
//! claim at `/scratch`, its certificate Secret at `/etc/tls`, a startup probe on `/healthz`,
//! and a headless Service of the same name that cdi-uploadproxy reaches it by. Pure: the
//! certificate is issued when the step is applied.

use std::collections::BTreeMap;

use cdi_api::importer_env as env;
use cdi_api::upload::{self, env as upload_env};
use k8s_openapi::api::core::v1::{
    Container, ContainerPort, HTTPGetAction, Pod, Probe, Secret, SecretVolumeSource, Service, ServicePort, ServiceSpec,
    Volume, VolumeDevice,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::importer_pod::{
    CDI_LABEL, DATA_VOLUME, PodFrame, PodSettings, SCRATCH_VOLUME, claim_pod, claim_volume, mount, restricted_context,
    value,
};

/// The container's name (upstream's).
pub const CONTAINER: &str = "cdi-upload-server";
/// The component label's value (upstream's `cdi-upload-server`).
pub const COMPONENT: &str = "cdi-upload-server";
/// The label naming the upload server's Service, which selects the pod by it (upstream's).
pub const SERVICE_LABEL: &str = "service";
/// The label with the target claim's uid (upstream's).
pub const UPLOAD_TARGET_LABEL: &str = "cdi.kubevirt.io/uploadTarget";
/// The annotation on objects the upload controller made (upstream's).
pub const CREATED_BY_UPLOAD: &str = "cdi.kubevirt.io/storage.createdByUploadController";
/// The certificates' volume (upstream's `tls-config`).
pub const CERT_VOLUME: &str = "tls-config";
/// How long the server may take to answer `/healthz` before the kubelet restarts it (its
/// startup probe's failures, one a second).
const STARTUP_SECONDS: i32 = 300;

/// Everything the upload server is made from.
#[derive(Clone, Debug, PartialEq)]
pub struct UploadServerArgs {
    /// The claim's name.
    pub claim: String,
    /// Its namespace.
    pub namespace: String,
    /// Its uid (the owner of what is made here).
    pub claim_uid: String,
    /// Whether the claim is a block volume.
    pub block: bool,
    /// The claim's requested size, as its quantity is written.
    pub image_size: String,
    /// The filesystem overhead for this claim's class.
    pub filesystem_overhead: String,
    /// `spec.preallocation`, or CDIConfig's default.
    pub preallocation: bool,
    /// The scratch claim (none for a clone: its data comes raw).
    pub scratch_claim: Option<String>,
    /// The common name the client's certificate must have: cdi-uploadproxy's, or a clone's source
    /// pod's.
    pub client_name: String,
    /// When the server gives up waiting for an upload (RFC 3339): before its certificate is due.
    pub deadline: String,
    /// The DataVolume's `serviceAccountName`.
    pub service_account: Option<String>,
    /// The pod's image and the settings every CDI pod has.
    pub pod: PodSettings,
}

/// The upload server's objects: the Secret's certificate is issued for the Service's DNS names
/// when the step is applied.
#[derive(Clone, Debug, PartialEq)]
pub struct UploadServer {
    /// The pod.
    pub pod: Pod,
    /// Its Service.
    pub service: Service,
    /// The names its serving certificate is for.
    pub dns_names: Vec<String>,
}

fn labels(args: &UploadServerArgs) -> BTreeMap<String, String> {
    BTreeMap::from([
        (CDI_LABEL.0.to_owned(), CDI_LABEL.1.to_owned()),
        ("cdi.kubevirt.io".to_owned(), COMPONENT.to_owned()),
    ])
    .into_iter()
    .chain(std::iter::once((
        SERVICE_LABEL.to_owned(),
        upload::service_name(&args.claim),
    )))
    .collect()
}

fn claim_owner(args: &UploadServerArgs) -> OwnerReference {
    OwnerReference {
        api_version: "v1".to_owned(),
        kind: "PersistentVolumeClaim".to_owned(),
        name: args.claim.clone(),
        uid: args.claim_uid.clone(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

fn container(args: &UploadServerArgs) -> Container {
    let mut vars = vec![
        value(upload_env::TLS_KEY_FILE, upload::SERVER_KEY_FILE),
        value(upload_env::TLS_CERT_FILE, upload::SERVER_CERT_FILE),
        value(upload_env::CLIENT_CERT_FILE, upload::CLIENT_CA_FILE),
        value(env::FILESYSTEM_OVERHEAD, &args.filesystem_overhead),
        value(upload_env::IMAGE_SIZE, &args.image_size),
        value(upload_env::CLIENT_NAME, &args.client_name),
        value(env::PREALLOCATION, args.preallocation.to_string()),
        value(upload_env::DEADLINE, &args.deadline),
    ];
    let mut mounts = vec![mount(CERT_VOLUME, upload::CERT_DIR)];
    let mut devices = Vec::new();
    if args.block {
        devices.push(VolumeDevice {
            name: DATA_VOLUME.to_owned(),
            device_path: env::BLOCK_DEVICE.to_owned(),
        });
        vars.push(value(upload_env::DESTINATION, env::BLOCK_DEVICE));
    } else {
        mounts.push(mount(DATA_VOLUME, env::DATA_DIR));
    }
    if args.scratch_claim.is_some() {
        mounts.push(mount(SCRATCH_VOLUME, env::SCRATCH_DIR));
    }
    Container {
        name: CONTAINER.to_owned(),
        image: Some(args.pod.image.clone()),
        image_pull_policy: Some(args.pod.pull_policy.clone()),
        env: Some(vars),
        ports: Some(vec![ContainerPort {
            name: Some("upload".to_owned()),
            container_port: i32::from(upload::PORT),
            protocol: Some("TCP".to_owned()),
            ..ContainerPort::default()
        }]),
        // Ready once `/healthz` answers: looked at every second until then, and not after (a
        // container with no readiness probe is ready once started). Upstream's readiness probe
        // waits 2 s, then looks every 5 s, so a server not listening at its first look (a busy
        // node) was ready 5 s later.
        startup_probe: Some(Probe {
            http_get: Some(HTTPGetAction {
                path: Some(upload::HEALTHZ_PATH.to_owned()),
                port: IntOrString::Int(i32::from(upload::PORT)),
                scheme: Some("HTTPS".to_owned()),
                ..HTTPGetAction::default()
            }),
            period_seconds: Some(1),
            failure_threshold: Some(STARTUP_SECONDS),
            ..Probe::default()
        }),
        termination_message_policy: Some("FallbackToLogsOnError".to_owned()),
        volume_mounts: Some(mounts),
        volume_devices: (!devices.is_empty()).then_some(devices),
        resources: args.pod.resources.clone(),
        security_context: Some(restricted_context()),
        ..Container::default()
    }
}

/// The upload server's pod and Service.
#[must_use]
pub fn render(args: &UploadServerArgs) -> UploadServer {
    let name = upload::pod_name(&args.claim);
    let service_name = upload::service_name(&args.claim);
    let mut pod_labels = labels(args);
    pod_labels.insert(UPLOAD_TARGET_LABEL.to_owned(), args.claim_uid.clone());
    let mut volumes = vec![
        Volume {
            name: CERT_VOLUME.to_owned(),
            secret: Some(SecretVolumeSource {
                secret_name: Some(name.clone()),
                ..SecretVolumeSource::default()
            }),
            ..Volume::default()
        },
        claim_volume(DATA_VOLUME, &args.claim),
    ];
    volumes.extend(
        args.scratch_claim
            .as_deref()
            .map(|scratch| claim_volume(SCRATCH_VOLUME, scratch)),
    );
    let pod = claim_pod(
        &PodFrame {
            name: name.clone(),
            namespace: args.namespace.clone(),
            annotations: BTreeMap::from([(CREATED_BY_UPLOAD.to_owned(), "yes".to_owned())]),
            labels: pod_labels,
            claim: args.claim.clone(),
            claim_uid: args.claim_uid.clone(),
            priority_class: args.pod.priority_class.clone(),
            service_account: args.service_account.clone(),
            image_pull_secrets: args.pod.image_pull_secrets.clone(),
            placement: args.pod.placement.clone(),
        },
        container(args),
        volumes,
    );
    let meta = ObjectMeta {
        name: Some(service_name.clone()),
        namespace: Some(args.namespace.clone()),
        annotations: Some(BTreeMap::from([(CREATED_BY_UPLOAD.to_owned(), "yes".to_owned())])),
        labels: Some(BTreeMap::from([
            (CDI_LABEL.0.to_owned(), CDI_LABEL.1.to_owned()),
            ("cdi.kubevirt.io".to_owned(), COMPONENT.to_owned()),
        ])),
        owner_references: Some(vec![claim_owner(args)]),
        ..ObjectMeta::default()
    };
    let service = Service {
        metadata: meta,
        spec: Some(ServiceSpec {
            cluster_ip: Some("None".to_owned()),
            ports: Some(vec![ServicePort {
                protocol: Some("TCP".to_owned()),
                port: i32::from(upload::PORT),
                target_port: Some(IntOrString::Int(i32::from(upload::PORT))),
                ..ServicePort::default()
            }]),
            selector: Some(BTreeMap::from([(SERVICE_LABEL.to_owned(), service_name.clone())])),
            ..ServiceSpec::default()
        }),
        status: None,
    };
    let dns_names = vec![
        format!("{service_name}.{}.svc", args.namespace),
        format!("{service_name}.{}.svc.cluster.local", args.namespace),
    ];
    UploadServer {
        pod,
        service,
        dns_names,
    }
}

/// The pod's certificate Secret (`tls.crt`, `tls.key`, and `ca.crt`, the CA that signs the
/// proxy's client certificate), owned by the claim.
#[must_use]
pub fn certificate_secret(pod: &Pod, cert: &str, key: &str, client_ca: &str) -> Secret {
    let data = [("tls.crt", cert), ("tls.key", key), ("ca.crt", client_ca)]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), k8s_openapi::ByteString(v.as_bytes().to_vec())))
        .collect();
    Secret {
        metadata: ObjectMeta {
            name: pod.metadata.name.clone(),
            namespace: pod.metadata.namespace.clone(),
            annotations: Some(BTreeMap::from([(CREATED_BY_UPLOAD.to_owned(), "yes".to_owned())])),
            labels: Some(BTreeMap::from([
                (CDI_LABEL.0.to_owned(), CDI_LABEL.1.to_owned()),
                ("cdi.kubevirt.io".to_owned(), COMPONENT.to_owned()),
            ])),
            owner_references: pod.metadata.owner_references.clone(),
            ..ObjectMeta::default()
        },
        data: Some(data),
        ..Secret::default()
    }
}

#[cfg(test)]
mod tests;
