//! hostpath-provisioner-operator: wiring only. A kube-rs controller over `HostPathProvisioner`
//! CRs (cluster-scoped) and the CSI DaemonSet in its namespace; each pass is
//! [`hostpath_provisioner_operator::reconciler::reconcile`].

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;
use clap::Parser;
use futures::StreamExt as _;
use hostpath_provisioner_operator::api::HostPathProvisioner;
use hostpath_provisioner_operator::reconciler;
use hostpath_provisioner_operator::render::{APP_LABEL, Settings};
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::api::storage::v1::CSIDriver;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Api, Client, Resource};
use operator_kit::controller;
use operator_kit::objects::ObjectsError;
use operator_kit::objects::kube::KubeObjects;

#[derive(Debug, Parser)]
#[command(about = "The hostpath provisioner's operator: HostPathProvisioner CRs into the CSI driver on every node")]
struct Args {
    /// The namespace the operator and the CSI pods run in (upstream's WATCH_NAMESPACE).
    #[arg(long, env = "WATCH_NAMESPACE")]
    namespace: String,
    /// The CSI driver's image (upstream's CSI_PROVISIONER_IMAGE).
    #[arg(long, env = "CSI_PROVISIONER_IMAGE")]
    driver_image: String,
    /// external-provisioner's image (upstream's CSI_SIG_STORAGE_PROVISIONER_IMAGE).
    #[arg(long, env = "CSI_SIG_STORAGE_PROVISIONER_IMAGE")]
    provisioner_image: String,
    /// The version installed (the driver's --version and the CR's versions).
    #[arg(long, env = "OPERATOR_VERSION", default_value = env!("CARGO_PKG_VERSION"))]
    version: String,
    /// The CSI containers' --v (upstream's VERBOSITY).
    #[arg(long, env = "VERBOSITY", default_value = "3")]
    csi_verbosity: String,
    /// The operator's own log verbosity, upstream's -v.
    #[arg(short = 'v', default_value_t = 1)]
    verbosity: u8,
}

struct Context {
    objects: KubeObjects,
    settings: Settings,
}

async fn reconcile(cr: Arc<HostPathProvisioner>, context: Arc<Context>) -> Result<Action, ObjectsError> {
    let now = kubevirt_api::clock::whole_seconds_now();
    let next = reconciler::reconcile(&context.objects, &cr, &context.settings, &now).await?;
    Ok(controller::action(next, now.0.as_second()))
}

async fn run(args: Args) -> anyhow::Result<()> {
    let client = Client::try_default().await.context("connecting to the API server")?;
    let stop = control_loop::process::stop_on_signals().context("listening for signals")?;
    let context = Arc::new(Context {
        objects: KubeObjects::new(client.clone(), "hostpath-provisioner-operator"),
        settings: Settings {
            namespace: args.namespace.clone(),
            driver_image: args.driver_image,
            provisioner_image: args.provisioner_image,
            version: args.version,
            verbosity: args.csi_verbosity,
        },
    });
    tracing::info!(namespace = args.namespace, "hostpath-provisioner-operator started");
    // Every object it makes is watched, so that one changed or deleted by hand is put back. They
    // carry the app label; the namespaced ones' owner is not namespaced, so kube's `owns` (which
    // looks the owner up in the object's namespace) cannot map them: `owner` does, cluster-wide.
    let ours = watcher::Config::default().labels(&format!("{}={}", APP_LABEL.0, APP_LABEL.1));
    let namespace = args.namespace.as_str();
    Controller::new(
        Api::<HostPathProvisioner>::all(client.clone()),
        watcher::Config::default(),
    )
    .with_config(kube::runtime::controller::Config::default().debounce(controller::DEBOUNCE))
    .watches(
        Api::<DaemonSet>::namespaced(client.clone(), namespace),
        ours.clone(),
        owner,
    )
    .watches(
        Api::<ServiceAccount>::namespaced(client.clone(), namespace),
        ours.clone(),
        owner,
    )
    .watches(Api::<Role>::namespaced(client.clone(), namespace), ours.clone(), owner)
    .watches(
        Api::<RoleBinding>::namespaced(client.clone(), namespace),
        ours.clone(),
        owner,
    )
    .watches(Api::<ClusterRole>::all(client.clone()), ours.clone(), owner)
    .watches(Api::<ClusterRoleBinding>::all(client.clone()), ours.clone(), owner)
    .watches(Api::<CSIDriver>::all(client), ours, owner)
    .graceful_shutdown_on(async move { stop.cancelled().await })
    .run(reconcile, controller::retry, context)
    .for_each(|_| async {})
    .await;
    tracing::info!("hostpath-provisioner-operator stopped");
    Ok(())
}

/// The CR an object it made belongs to.
#[expect(clippy::needless_pass_by_value, reason = "the signature of kube's mappers")]
fn owner<K: Resource>(object: K) -> Option<ObjectRef<HostPathProvisioner>> {
    reconciler::owner_of(object.meta()).map(|name| ObjectRef::new(&name))
}

fn main() -> ExitCode {
    let args = Args::parse();
    let verbosity = args.verbosity;
    control_loop::process::main("hostpath-provisioner-operator", verbosity, run(args))
}
