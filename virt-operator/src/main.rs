//! virt-operator: wiring only. A kube-rs controller over the `KubeVirt` CRs of its namespace and
//! the objects it makes for them; each pass is [`virt_operator::reconciler::reconcile`].

use std::future::Future;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;
use clap::Parser;
use control_loop::tls::{CertSource, server_tls};
use futures::{Stream, StreamExt as _};
use k8s_openapi::api::admissionregistration::v1::{MutatingWebhookConfiguration, ValidatingWebhookConfiguration};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use kube::api::{ApiResource, DynamicObject};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::{WatchStreamExt as _, watcher};
use kube::{Api, Client, Resource};
use kubevirt_api::v1::KubeVirt;
use operator_kit::objects::ObjectsError;
use operator_kit::objects::kube::KubeObjects;
use tokio_util::sync::CancellationToken;
use virt_operator::common_instancetypes;
use virt_operator::kube_cluster::{KubeCluster, follow_certificate};
use virt_operator::reconciler;
use virt_operator::render::{self, MANAGED_BY, Settings};
use virt_operator::{validator, webhook};

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
    /// The address the webhook listens on.
    #[arg(long, default_value = "0.0.0.0")]
    listen: std::net::IpAddr,
    /// The webhook's port (upstream's `webhooks` port).
    #[arg(long, default_value_t = validator::PORT)]
    webhook_port: u16,
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
    let next = reconciler::reconcile(&context.objects, &cr, &context.settings, &now).await?;
    Ok(operator_kit::controller::action(next, now.0.as_second()))
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
    let webhook = webhook(&args, &client, &stop).await?;
    let context = Arc::new(Context {
        objects: KubeObjects::new(client.clone(), "virt-operator"),
        settings,
    });
    // Every object it makes is watched, so that one changed or deleted by hand is put back; they
    // carry its managed-by label, and `owner` maps each to its CR.
    let ours = watcher::Config::default().labels(&format!("{}={}", MANAGED_BY.0, MANAGED_BY.1));
    let [instancetypes, preferences] = common_instancetypes::resources();
    let here = |client: &Client| Api::<Deployment>::namespaced(client.clone(), &namespace);
    let controller = Controller::new(
        Api::<KubeVirt>::namespaced(client.clone(), &namespace),
        watcher::Config::default(),
    )
    .with_config(kube::runtime::controller::Config::default().debounce(operator_kit::controller::DEBOUNCE))
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
    // The common instance types' CRDs come with the install: until they are served these watches
    // fail and back off on their own, without holding up the other watches.
    .reconcile_all_on(futures::stream::select(
        changes(&client, &instancetypes, ours.clone()),
        changes(&client, &preferences, ours.clone()),
    ))
    .watches(
        Api::<CustomResourceDefinition>::all(client.clone()),
        ours.clone(),
        owner,
    )
    .watches(
        Api::<Secret>::namespaced(client.clone(), &namespace),
        ours.clone(),
        owner,
    )
    .watches(Api::<ConfigMap>::namespaced(client, &namespace), ours, owner)
    .graceful_shutdown_on(async move { stop.cancelled().await })
    .run(reconcile, operator_kit::controller::retry, context)
    .for_each(|_| async {});
    tokio::join!(controller, webhook);
    tracing::info!("virt-operator stopped");
    Ok(())
}

/// The webhook's server and what keeps its certificate, to run beside the controller until
/// `stop`. It serves a self-signed certificate until the operator's own is in its Secret.
async fn webhook(
    args: &Args,
    client: &Client,
    stop: &CancellationToken,
) -> anyhow::Result<impl Future<Output = ()> + use<>> {
    let tls = server_tls(&CertSource::SelfSigned {
        names: vec!["fallback.certificate.kubevirt.io".to_owned()],
    })
    .context("the webhook's fallback certificate")?;
    let held = tls
        .held
        .clone()
        .context("the webhook's certificate is held in memory")?;
    let address = SocketAddr::new(args.listen, args.webhook_port);
    let listener = tokio::net::TcpListener::bind(address)
        .await
        .with_context(|| format!("listening on {address}"))?;
    let serve = webhook::serve(
        listener,
        tls.config,
        Arc::new(KubeCluster(client.clone())),
        stop.clone(),
    );
    let certificate = follow_certificate(client.clone(), args.namespace.clone(), held, stop.clone());
    Ok(async move {
        tokio::join!(serve, certificate);
    })
}

/// A signal on every change of an object of `resource` that `selector` picks; the watch's errors
/// (the kind not served yet) are retried with its own backoff and not passed on.
fn changes(
    client: &Client,
    resource: &ApiResource,
    selector: watcher::Config,
) -> impl Stream<Item = ()> + Send + use<> {
    watcher(Api::<DynamicObject>::all_with(client.clone(), resource), selector)
        .default_backoff()
        .touched_objects()
        .filter_map(|change| std::future::ready(change.ok().map(|_| ())))
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
