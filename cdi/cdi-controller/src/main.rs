//! cdi-controller: fills DataVolumes' claims by import (`http`, `registry` and `blank` sources),
//! upload and host-assisted clone (`pvc`). Wiring only: the upload path's CAs and token key, made
//! by cdi-operator, read at start ([`cdi_controller::cdi_pki::kube::load`]), then a kube-rs
//! controller over DataVolumes,
//! their claims and their pods, each pass [`cdi_controller::import_reconciler::reconcile`].

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use cdi_api::{CDIConfig, DataSource, DataVolume};
use cdi_controller::cdi_pki::{self, SharedPki};
use cdi_controller::cluster_api::kube::KubeCdiApi;
use cdi_controller::import_plan::ImporterSettings;
use cdi_controller::import_progress::HttpsMetrics;
use cdi_controller::import_reconciler::{self, Next, bare_claim};
use cdi_controller::importer_pod::CDI_LABEL;
use cdi_controller::{config_status, data_source_status};
use clap::Parser;
use futures::{FutureExt as _, StreamExt as _};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::{WatchStreamExt as _, watcher};
use kube::{Api, Client};
use tokio_util::sync::CancellationToken;

/// A pass that failed is tried again after this long.
const RETRY: Duration = Duration::from_secs(5);
/// A DataVolume still on its way is looked at again after this long even without an event (it
/// may wait on a class, a profile or a scratch claim, which are not watched).
const LOOK_AGAIN: Duration = Duration::from_secs(10);
/// A DataVolume whose importer runs is looked at again after this long, for its progress
/// (upstream's 2 s).
const SOON: Duration = Duration::from_secs(2);
/// How far clocks may disagree when a clone token's lifetime is checked.
const TOKEN_LEEWAY_SECONDS: i64 = 60;

#[derive(Debug, Parser)]
#[command(about = "CDI's controller: DataVolumes into claims filled by importer pods")]
struct Args {
    /// The importer image (upstream's IMPORTER_IMAGE).
    #[arg(long, env = "IMPORTER_IMAGE")]
    importer_image: String,
    /// The upload server image (upstream's UPLOADSERVER_IMAGE).
    #[arg(long, env = "UPLOADSERVER_IMAGE")]
    uploadserver_image: String,
    /// The clone source image (upstream's CLONER_IMAGE).
    #[arg(long, env = "CLONER_IMAGE")]
    cloner_image: String,
    /// CDI's namespace, where the upload path's certificates are kept.
    #[arg(long, env = "CDI_NAMESPACE", default_value = "cdi")]
    namespace: String,
    /// The importer pods' pull policy (upstream's PULL_POLICY).
    #[arg(long, env = "PULL_POLICY", default_value = "IfNotPresent")]
    pull_policy: String,
    /// The CDI CR's `workload` as JSON, where importer, upload server and clone source pods run
    /// (set by cdi-operator).
    #[arg(long, env = "WORKLOAD_PLACEMENT", default_value = "{}")]
    workload_placement: String,
    /// Log verbosity, upstream's -v.
    #[arg(short = 'v', default_value_t = 1)]
    verbosity: u8,
}

struct Context {
    api: KubeCdiApi,
    settings: ImporterSettings,
    certificates: Arc<SharedPki>,
}

async fn reconcile(
    data_volume: Arc<DataVolume>,
    context: Arc<Context>,
) -> Result<Action, cdi_controller::cluster_api::ApiError> {
    let now = kubevirt_api::clock::whole_seconds_now();
    let namespace = data_volume.metadata.namespace.as_deref().unwrap_or_default();
    let name = data_volume.metadata.name.as_deref().unwrap_or_default();
    let metrics = HttpsMetrics::default();
    // Boxed: a pass's future is large (the pod and claim it reads), and kube's loop keeps many.
    let pass = Box::pin(import_reconciler::reconcile(
        &context.api,
        &metrics,
        context.certificates.as_ref(),
        namespace,
        name,
        &context.settings,
        &now,
    ));
    Ok(action(pass.await?))
}

/// When a pass's object is looked at again.
fn action(next: Next) -> Action {
    match next {
        Next::LookAgain => Action::requeue(LOOK_AGAIN),
        Next::Soon => Action::requeue(SOON),
        Next::Rest => Action::await_change(),
    }
}

#[expect(clippy::needless_pass_by_value, reason = "the signature of kube's error policy")]
fn retry(data_volume: Arc<DataVolume>, error: &cdi_controller::cluster_api::ApiError, _: Arc<Context>) -> Action {
    tracing::warn!(
        namespace = data_volume.metadata.namespace.as_deref().unwrap_or_default(),
        name = data_volume.metadata.name.as_deref().unwrap_or_default(),
        error = %kubevirt_api::error_report::one_line(error),
        "the pass failed; trying again"
    );
    Action::requeue(RETRY)
}

async fn release_claim(
    claim: Arc<PersistentVolumeClaim>,
    context: Arc<Context>,
) -> Result<Action, cdi_controller::cluster_api::ApiError> {
    let namespace = claim.metadata.namespace.as_deref().unwrap_or_default();
    let name = claim.metadata.name.as_deref().unwrap_or_default();
    import_reconciler::release_claim(&context.api, namespace, name).await?;
    Ok(Action::await_change())
}

#[expect(clippy::needless_pass_by_value, reason = "the signature of kube's error policy")]
fn retry_claim(
    claim: Arc<PersistentVolumeClaim>,
    error: &cdi_controller::cluster_api::ApiError,
    _: Arc<Context>,
) -> Action {
    claim_retry(&claim, error, "releasing the claim failed; trying again")
}

/// Logs a claim's failed pass, and tries it again after [`RETRY`].
fn claim_retry(claim: &PersistentVolumeClaim, error: &cdi_controller::cluster_api::ApiError, what: &str) -> Action {
    tracing::warn!(
        namespace = claim.metadata.namespace.as_deref().unwrap_or_default(),
        name = claim.metadata.name.as_deref().unwrap_or_default(),
        error = %kubevirt_api::error_report::one_line(error),
        "{what}"
    );
    Action::requeue(RETRY)
}

/// A pass of the import and upload populators over a claim a user made: only a claim that names
/// a VolumeImportSource or a VolumeUploadSource is read again.
async fn populate_claim(
    claim: Arc<PersistentVolumeClaim>,
    context: Arc<Context>,
) -> Result<Action, cdi_controller::cluster_api::ApiError> {
    if !bare_claim::names_population_source(&claim) {
        return Ok(Action::await_change());
    }
    let now = kubevirt_api::clock::whole_seconds_now();
    let namespace = claim.metadata.namespace.as_deref().unwrap_or_default();
    let name = claim.metadata.name.as_deref().unwrap_or_default();
    let metrics = HttpsMetrics::default();
    let pass = Box::pin(bare_claim::reconcile(
        &context.api,
        &metrics,
        context.certificates.as_ref(),
        (namespace, name),
        &context.settings,
        &now,
    ));
    Ok(action(pass.await?))
}

#[expect(clippy::needless_pass_by_value, reason = "the signature of kube's error policy")]
fn retry_populated_claim(
    claim: Arc<PersistentVolumeClaim>,
    error: &cdi_controller::cluster_api::ApiError,
    _: Arc<Context>,
) -> Action {
    claim_retry(&claim, error, "the populator's pass failed; trying again")
}

/// The DataVolume (or, for the populators, the claim) a CDI pod works for: its claim's, which
/// has the DataVolume's name; a clone's source pod, in the source's namespace, names its target
/// claim in an annotation.
fn owner_of_pod<K: kube::Resource<DynamicType = ()>>(pod: Pod) -> Option<ObjectRef<K>> {
    if let Some((namespace, name)) = pod
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(cdi_controller::clone_source::OWNER_REF))
        .and_then(|target| target.split_once('/'))
    {
        return Some(ObjectRef::new(name).within(namespace));
    }
    let claim = pod
        .metadata
        .owner_references?
        .into_iter()
        .find(|o| o.kind == "PersistentVolumeClaim" && o.controller == Some(true))?;
    Some(ObjectRef::new(&claim.name).within(pod.metadata.namespace.as_deref()?))
}

/// The DataVolume of a prime claim (or, for the populators, the target claim): its owner,
/// the target claim, has the DataVolume's name.
fn target_of_prime<K: kube::Resource<DynamicType = ()>>(claim: PersistentVolumeClaim) -> Option<ObjectRef<K>> {
    let target = claim
        .metadata
        .owner_references?
        .into_iter()
        .find(|o| o.kind == "PersistentVolumeClaim" && o.controller == Some(true))?;
    Some(ObjectRef::new(&target.name).within(claim.metadata.namespace.as_deref()?))
}

/// The import and upload populators' loop, keyed by claims: it fills the claims users make with
/// a `dataSourceRef` to a VolumeImportSource or a VolumeUploadSource; its prime's pods and the
/// prime itself are mapped to the target.
fn populators(
    client: Client,
    ours: &str,
    context: Arc<Context>,
    stop: CancellationToken,
) -> impl std::future::Future<Output = ()> {
    Controller::new(
        Api::<PersistentVolumeClaim>::all(client.clone()),
        watcher::Config::default(),
    )
    .watches(
        Api::<Pod>::all(client.clone()),
        watcher::Config::default().labels(ours),
        owner_of_pod,
    )
    .watches(
        Api::<PersistentVolumeClaim>::all(client),
        watcher::Config::default().labels(ours),
        target_of_prime,
    )
    .graceful_shutdown_on(async move { stop.cancelled().await })
    .run(populate_claim, retry_populated_claim, context)
    .for_each(|_| async {})
}

async fn run(args: Args) -> anyhow::Result<()> {
    let client = Client::try_default().await.context("connecting to the API server")?;
    let stop = control_loop::process::stop_on_signals().context("listening for signals")?;
    let placement: cdi_api::cdi::NodePlacement = serde_json::from_str(&args.workload_placement).with_context(|| {
        format!(
            "WORKLOAD_PLACEMENT {:?} is not a node placement",
            args.workload_placement
        )
    })?;
    let certificates = cdi_pki::kube::load(&client, &args.namespace)
        .await
        .with_context(|| format!("reading CDI's certificates in namespace {}", args.namespace))?;
    let context = Arc::new(Context {
        api: KubeCdiApi::new(client.clone()),
        settings: ImporterSettings {
            image: args.importer_image,
            upload_image: args.uploadserver_image,
            pull_policy: args.pull_policy,
            placement,
            cloner_image: args.cloner_image,
            clone_tokens: Some(cdi_token::Validator::new(
                &certificates.token_public_key,
                cdi_token::UPLOAD_ISSUER,
                TOKEN_LEEWAY_SECONDS,
            )),
            ..ImporterSettings::default()
        },
        certificates: Arc::new(SharedPki::new(certificates)),
    });
    let ours = format!("{}={}", CDI_LABEL.0, CDI_LABEL.1);
    let (client_for_config, stop_for_config) = (client.clone(), stop.clone());
    let (client_for_sources, stop_for_sources) = (client.clone(), stop.clone());
    tracing::info!("cdi-controller started");
    let data_volumes = Controller::new(Api::<DataVolume>::all(client.clone()), watcher::Config::default())
        .owns(
            Api::<PersistentVolumeClaim>::all(client.clone()),
            watcher::Config::default(),
        )
        .watches(
            Api::<Pod>::all(client.clone()),
            watcher::Config::default().labels(&ours),
            owner_of_pod,
        )
        .watches(
            Api::<PersistentVolumeClaim>::all(client.clone()),
            watcher::Config::default().labels(&ours),
            target_of_prime,
        )
        .graceful_shutdown_on({
            let stop = stop.clone();
            async move { stop.cancelled().await }
        })
        .run(reconcile, retry, Arc::clone(&context))
        .for_each(|_| async {});
    // Keyed by claims: a claim whose DataVolume is gone is no longer reached through it.
    let claims = Controller::new(
        Api::<PersistentVolumeClaim>::all(client.clone()),
        watcher::Config::default().labels(&ours),
    )
    .graceful_shutdown_on({
        let stop = stop.clone();
        async move { stop.cancelled().await }
    })
    .run(release_claim, retry_claim, Arc::clone(&context))
    .for_each(|_| async {});
    let populated_claims = populators(client.clone(), &ours, Arc::clone(&context), stop);
    let data_sources = Controller::new(Api::<DataSource>::all(client_for_sources), watcher::Config::default())
        .graceful_shutdown_on(async move { stop_for_sources.cancelled().await })
        .run(reconcile_data_source, retry_data_source, Arc::clone(&context))
        .for_each(|_| async {});
    let keep_cas = cdi_pki::kube::keep(
        client_for_config.clone(),
        args.namespace.clone(),
        Arc::clone(&context.certificates),
        stop_for_config.clone(),
    );
    futures::join!(
        data_volumes,
        claims,
        populated_claims,
        data_sources,
        keep_config(&context.api, client_for_config, stop_for_config),
        keep_cas
    );
    tracing::info!("cdi-controller stopped");
    Ok(())
}

/// A DataSource is looked at again after this long when it is Ready (its claim may go), and
/// after [`LOOK_AGAIN`] when it is not (its claim or DataVolume may come): claims and DataVolumes
/// are not mapped back to the DataSources that name them.
const READY_SOURCE_AGAIN: Duration = Duration::from_secs(60);

async fn reconcile_data_source(
    data_source: Arc<DataSource>,
    context: Arc<Context>,
) -> Result<Action, cdi_controller::cluster_api::ApiError> {
    let now = kubevirt_api::clock::whole_seconds_now();
    let namespace = data_source.metadata.namespace.as_deref().unwrap_or_default();
    let name = data_source.metadata.name.as_deref().unwrap_or_default();
    let ready = data_source_status::reconcile(&context.api, namespace, name, &now).await?;
    Ok(Action::requeue(if ready { READY_SOURCE_AGAIN } else { LOOK_AGAIN }))
}

#[expect(clippy::needless_pass_by_value, reason = "the signature of kube's error policy")]
fn retry_data_source(
    data_source: Arc<DataSource>,
    error: &cdi_controller::cluster_api::ApiError,
    _: Arc<Context>,
) -> Action {
    tracing::warn!(
        namespace = data_source.metadata.namespace.as_deref().unwrap_or_default(),
        name = data_source.metadata.name.as_deref().unwrap_or_default(),
        error = %kubevirt_api::error_report::one_line(error),
        "the DataSource's pass failed; trying again"
    );
    Action::requeue(RETRY)
}

/// Keeps CDIConfig `config` and its status ([`config_status::reconcile`]): a pass at start, then
/// one after each change of the config or of a StorageClass (changes that arrive together make
/// one pass), until `stop`.
async fn keep_config(api: &KubeCdiApi, client: Client, stop: CancellationToken) {
    let configs = watcher::watcher(Api::<CDIConfig>::all(client.clone()), watcher::Config::default())
        .default_backoff()
        .map(drop);
    let classes = watcher::watcher(Api::<StorageClass>::all(client), watcher::Config::default())
        .default_backoff()
        .map(drop);
    let mut changes = std::pin::pin!(futures::stream::select(configs, classes));
    loop {
        if let Err(error) = config_status::reconcile(api).await {
            tracing::warn!(error = %kubevirt_api::error_report::one_line(&error), "keeping CDIConfig failed; trying again");
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(RETRY) => continue,
            }
        }
        tokio::select! {
            () = stop.cancelled() => return,
            change = changes.next() => if change.is_none() { return },
        }
        while changes.next().now_or_never().flatten().is_some() {}
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    let verbosity = args.verbosity;
    control_loop::process::main("cdi-controller", verbosity, run(args))
}
