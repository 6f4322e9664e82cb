//! virt-operator: wiring only. A kube-rs controller over the `KubeVirt` CRs of its namespace and
//! the objects it makes for them; each pass is [`virt_operator::reconciler::reconcile`].

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use clap::Parser;
use futures::StreamExt as _;
use k8s_openapi::api::admissionregistration::v1::{MutatingWebhookConfiguration, ValidatingWebhookConfiguration};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::{Service, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use kube::runtime::controller::{self, Action, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Api, Client, Resource};
use kubevirt_api::v1::KubeVirt;
use operator_kit::objects::ObjectsError;
use operator_kit::objects::kube::KubeObjects;
use virt_operator::reconciler::{self, Next};
use virt_operator::render::{self, MANAGED_BY, Settings};

/// A pass that failed is tried again after this long.
const RETRY: Duration = Duration::from_secs(5);
/// A CR still rolling out is looked at again after this long even without an event.
const LOOK_AGAIN: Duration = Duration::from_secs(5);

#[derive(Debug, Parser)]
#[command(about = "virt-operator: KubeVirt CRs into virt-api, virt-controller and virt-handler")]
struct Args {
    /// The namespace it runs in and deploys to (the downward API's).
    #[arg(long, env = "POD_NAMESPACE")]
    namespace: String,
    /// Its own image: the components' registry and tag when the CR names none (upstream's
    /// VIRT_OPERATOR_IMAGE).
    #[arg(long, env = "VIRT_OPERATOR_IMAGE")]
    image: String,
    /// The version it reports (upstream's operatorVersion).
    #[arg(long, env = "KUBEVIRT_VERSION", default_value = env!("CARGO_PKG_VERSION"))]
    version: String,
    /// Log verbosity, upstream's -v.
    #[arg(short = 'v', default_value_t = 1)]
    verbosity: u8,
}

struct Context {
    objects: KubeObjects,
    settings: Settings,
}

async fn reconcile(cr: Arc<KubeVirt>, context: Arc<Context>) -> Result<Action, ObjectsError> {
    let now = kubevirt_api::clock::whole_seconds_now();
    Ok(
        match reconciler::reconcile(&context.objects, &cr, &context.settings, &now).await? {
            Next::Rest => Action::await_change(),
            Next::LookAgain => Action::requeue(LOOK_AGAIN),
        },
    )
}

#[expect(clippy::needless_pass_by_value, reason = "the signature of kube's error policy")]
fn retry(cr: Arc<KubeVirt>, error: &ObjectsError, _: Arc<Context>) -> Action {
    tracing::warn!(
        name = cr.metadata.name.as_deref().unwrap_or_default(),
        error = %kubevirt_api::error_report::one_line(error),
        "the pass failed; trying again"
    );
    Action::requeue(RETRY)
}

async fn run(args: Args) -> anyhow::Result<()> {
    let client = Client::try_default().await.context("connecting to the API server")?;
    let stop = control_loop::process::stop_on_signals().context("listening for signals")?;
    let settings = Settings::from_image(&args.namespace, &args.version, &args.image);
    tracing::info!(
        namespace = settings.namespace,
        registry = settings.registry,
        tag = settings.tag,
        "virt-operator started"
    );
    let namespace = args.namespace.clone();
    let context = Arc::new(Context {
        objects: KubeObjects::new(client.clone(), "virt-operator"),
        settings,
    });
    // Every object it makes is watched, so that one changed or deleted by hand is put back; they
    // carry its managed-by label, and `owner` maps each to its CR.
    let ours = watcher::Config::default().labels(&format!("{}={}", MANAGED_BY.0, MANAGED_BY.1));
    let here = |client: &Client| Api::<Deployment>::namespaced(client.clone(), &namespace);
    // A workload's status changes in bursts while its pods start: one pass per second at most.
    Controller::new(
        Api::<KubeVirt>::namespaced(client.clone(), &namespace),
        watcher::Config::default(),
    )
    .with_config(controller::Config::default().debounce(Duration::from_secs(1)))
    .watches(here(&client), ours.clone(), owner)
    .watches(
        Api::<DaemonSet>::namespaced(client.clone(), &namespace),
        ours.clone(),
        owner,
    )
    .watches(
        Api::<Service>::namespaced(client.clone(), &namespace),
        ours.clone(),
        owner,
    )
    .watches(
        Api::<ServiceAccount>::namespaced(client.clone(), &namespace),
        ours.clone(),
        owner,
    )
    .watches(Api::<Role>::all(client.clone()), ours.clone(), owner)
    .watches(Api::<RoleBinding>::all(client.clone()), ours.clone(), owner)
    .watches(Api::<ClusterRole>::all(client.clone()), ours.clone(), owner)
    .watches(Api::<ClusterRoleBinding>::all(client.clone()), ours.clone(), owner)
    .watches(Api::<APIService>::all(client.clone()), ours.clone(), owner)
    .watches(
        Api::<MutatingWebhookConfiguration>::all(client.clone()),
        ours.clone(),
        owner,
    )
    .watches(
        Api::<ValidatingWebhookConfiguration>::all(client.clone()),
        ours.clone(),
        owner,
    )
    .watches(Api::<PriorityClass>::all(client.clone()), ours.clone(), owner)
    .watches(Api::<CustomResourceDefinition>::all(client), ours, owner)
    .graceful_shutdown_on(async move { stop.cancelled().await })
    .run(reconcile, retry, context)
    .for_each(|_| async {})
    .await;
    tracing::info!("virt-operator stopped");
    Ok(())
}

/// The KubeVirt CR an object it made belongs to.
#[expect(clippy::needless_pass_by_value, reason = "the signature of kube's mappers")]
fn owner<K: Resource>(object: K) -> Option<ObjectRef<KubeVirt>> {
    render::owner_of(object.meta()).map(|(namespace, name)| ObjectRef::new(&name).within(&namespace))
}

fn main() -> ExitCode {
    let args = Args::parse();
    let verbosity = args.verbosity;
    control_loop::process::main("virt-operator", verbosity, run(args))
}
