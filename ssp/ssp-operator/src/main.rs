//! ssp-operator: wiring only. A kube-rs controller over `SSP` CRs (namespaced) and the objects
//! it makes for them; each pass is [`ssp_operator::reconciler::reconcile`].

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;
use clap::Parser;
use futures::StreamExt as _;
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service, ServiceAccount};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Api, Client, Resource};
use operator_kit::controller;
use operator_kit::objects::ObjectsError;
use operator_kit::objects::kube::KubeObjects;
use ssp_operator::api::SSP;
use ssp_operator::reconciler;
use ssp_operator::render::{self, MANAGED_BY, Settings};

#[derive(Debug, Parser)]
#[command(about = "SSP's operator: SSP CRs into the template validator and its webhook")]
struct Args {
    /// The template validator's image (upstream's VALIDATOR_IMAGE).
    #[arg(long, env = "VALIDATOR_IMAGE")]
    validator_image: String,
    /// The version installed (upstream's OPERATOR_VERSION).
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

async fn reconcile(cr: Arc<SSP>, context: Arc<Context>) -> Result<Action, ObjectsError> {
    let now = kubevirt_api::clock::whole_seconds_now();
    let next = reconciler::reconcile(&context.objects, &cr, &context.settings, &now).await?;
    Ok(controller::action(next, now.0.as_second()))
}

async fn run(args: Args) -> anyhow::Result<()> {
    let client = Client::try_default().await.context("connecting to the API server")?;
    let stop = control_loop::process::stop_on_signals().context("listening for signals")?;
    let context = Arc::new(Context {
        objects: KubeObjects::new(client.clone(), "ssp-operator"),
        settings: Settings {
            validator_image: args.validator_image,
            version: args.version,
        },
    });
    tracing::info!("ssp-operator started");
    // Every object it makes is watched, so that one changed or deleted by hand is put back; they
    // carry its managed-by label, and `owner` maps each to its SSP (the cluster-scoped ones by
    // their primary-resource annotation).
    let ours = watcher::Config::default().labels(&format!("{}={}", MANAGED_BY.0, MANAGED_BY.1));
    Controller::new(Api::<SSP>::all(client.clone()), watcher::Config::default())
        .with_config(kube::runtime::controller::Config::default().debounce(controller::DEBOUNCE))
        .watches(Api::<Deployment>::all(client.clone()), ours.clone(), owner)
        .watches(Api::<Service>::all(client.clone()), ours.clone(), owner)
        .watches(Api::<ServiceAccount>::all(client.clone()), ours.clone(), owner)
        .watches(Api::<Secret>::all(client.clone()), ours.clone(), owner)
        .watches(Api::<ConfigMap>::all(client.clone()), ours.clone(), owner)
        .watches(Api::<PodDisruptionBudget>::all(client.clone()), ours.clone(), owner)
        .watches(Api::<ClusterRole>::all(client.clone()), ours.clone(), owner)
        .watches(Api::<ClusterRoleBinding>::all(client.clone()), ours.clone(), owner)
        .watches(Api::<ValidatingWebhookConfiguration>::all(client), ours, owner)
        .graceful_shutdown_on(async move { stop.cancelled().await })
        .run(reconcile, controller::retry, context)
        .for_each(|_| async {})
        .await;
    tracing::info!("ssp-operator stopped");
    Ok(())
}

/// The SSP an object it made belongs to.
#[expect(clippy::needless_pass_by_value, reason = "the signature of kube's mappers")]
fn owner<K: Resource>(object: K) -> Option<ObjectRef<SSP>> {
    render::owner_of(object.meta()).map(|(namespace, name)| ObjectRef::new(&name).within(&namespace))
}

fn main() -> ExitCode {
    let args = Args::parse();
    let verbosity = args.verbosity;
    control_loop::process::main("ssp-operator", verbosity, run(args))
}
