//! cdi-operator: wiring only. A kube-rs controller over `CDI` CRs (cluster-scoped) and every
//! object the operator makes; each pass is [`cdi_operator::reconciler::reconcile`].

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;
use cdi_api::CDI;
use cdi_operator::reconciler;
use cdi_operator::render::{Images, MANAGED_BY, Settings};
use clap::Parser;
use futures::StreamExt as _;
use k8s_openapi::api::admissionregistration::v1::{MutatingWebhookConfiguration, ValidatingWebhookConfiguration};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Api, Client, Resource};
use operator_kit::controller;
use operator_kit::objects::ObjectsError;
use operator_kit::objects::kube::KubeObjects;

#[derive(Debug, Parser)]
#[command(about = "CDI's operator: a CDI CR into CDI's CRDs, components and certificates")]
struct Args {
    /// The namespace the operator and CDI run in.
    #[arg(long, env = "OPERATOR_NAMESPACE")]
    namespace: String,
    /// cdi-controller's image (upstream's CONTROLLER_IMAGE).
    #[arg(long, env = "CONTROLLER_IMAGE")]
    controller_image: String,
    /// cdi-apiserver's image.
    #[arg(long, env = "APISERVER_IMAGE")]
    apiserver_image: String,
    /// cdi-uploadproxy's image.
    #[arg(long, env = "UPLOADPROXY_IMAGE")]
    uploadproxy_image: String,
    /// The importer's image.
    #[arg(long, env = "IMPORTER_IMAGE")]
    importer_image: String,
    /// The upload server's image.
    #[arg(long, env = "UPLOADSERVER_IMAGE")]
    uploadserver_image: String,
    /// The clone source's image.
    #[arg(long, env = "CLONER_IMAGE")]
    cloner_image: String,
    /// The version installed (the CR's versions).
    #[arg(long, env = "OPERATOR_VERSION", default_value = env!("CARGO_PKG_VERSION"))]
    version: String,
    /// Log verbosity, upstream's -v.
    #[arg(short = 'v', default_value_t = 1)]
    verbosity: u8,
}

struct Context {
    objects: KubeObjects,
    settings: Settings,
}

async fn reconcile(cr: Arc<CDI>, context: Arc<Context>) -> Result<Action, ObjectsError> {
    let now = kubevirt_api::clock::whole_seconds_now();
    let next = reconciler::reconcile(&context.objects, &cr, &context.settings, &now).await?;
    Ok(controller::action(next, now.0.as_second()))
}

async fn run(args: Args) -> anyhow::Result<()> {
    let client = Client::try_default().await.context("connecting to the API server")?;
    let stop = control_loop::process::stop_on_signals().context("listening for signals")?;
    let context = Arc::new(Context {
        objects: KubeObjects::new(client.clone(), "cdi-operator"),
        settings: Settings {
            namespace: args.namespace.clone(),
            version: args.version,
            images: Images {
                controller: args.controller_image,
                apiserver: args.apiserver_image,
                uploadproxy: args.uploadproxy_image,
                importer: args.importer_image,
                uploadserver: args.uploadserver_image,
                cloner: args.cloner_image,
            },
        },
    });
    tracing::info!(namespace = args.namespace, "cdi-operator started");
    // Every object it makes is watched, so that one changed or deleted by hand is put back. Their
    // owner is cluster-scoped, so kube's `owns` (which looks the owner up in the object's
    // namespace) cannot map them: `owner` does.
    let ours = watcher::Config::default().labels(&format!("{}={}", MANAGED_BY.0, MANAGED_BY.1));
    let ns = args.namespace.as_str();
    let c = || client.clone();
    Controller::new(Api::<CDI>::all(c()), watcher::Config::default())
        .with_config(kube::runtime::controller::Config::default().debounce(controller::DEBOUNCE))
        .watches(Api::<Deployment>::namespaced(c(), ns), ours.clone(), owner)
        .watches(Api::<Service>::namespaced(c(), ns), ours.clone(), owner)
        .watches(Api::<ServiceAccount>::namespaced(c(), ns), ours.clone(), owner)
        .watches(Api::<Secret>::namespaced(c(), ns), ours.clone(), owner)
        .watches(Api::<ConfigMap>::namespaced(c(), ns), ours.clone(), owner)
        .watches(Api::<Role>::namespaced(c(), ns), ours.clone(), owner)
        .watches(Api::<RoleBinding>::namespaced(c(), ns), ours.clone(), owner)
        // cdi-apiserver's binding to read the aggregation layer's CA.
        .watches(Api::<RoleBinding>::namespaced(c(), "kube-system"), ours.clone(), owner)
        .watches(Api::<ClusterRole>::all(c()), ours.clone(), owner)
        .watches(Api::<ClusterRoleBinding>::all(c()), ours.clone(), owner)
        .watches(Api::<APIService>::all(c()), ours.clone(), owner)
        .watches(Api::<MutatingWebhookConfiguration>::all(c()), ours.clone(), owner)
        .watches(Api::<ValidatingWebhookConfiguration>::all(c()), ours.clone(), owner)
        .watches(Api::<CustomResourceDefinition>::all(c()), ours, owner)
        .graceful_shutdown_on(async move { stop.cancelled().await })
        .run(reconcile, controller::retry, context)
        .for_each(|_| async {})
        .await;
    tracing::info!("cdi-operator stopped");
    Ok(())
}

/// The CR an object it made belongs to.
#[expect(clippy::needless_pass_by_value, reason = "the signature of kube's mappers")]
fn owner<K: Resource>(object: K) -> Option<ObjectRef<CDI>> {
    reconciler::owner_of(object.meta()).map(|name| ObjectRef::new(&name))
}

fn main() -> ExitCode {
    let args = Args::parse();
    let verbosity = args.verbosity;
    control_loop::process::main("cdi-operator", verbosity, run(args))
}
