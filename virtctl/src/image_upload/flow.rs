//! `virtctl image-upload`'s steps against the cluster, in upstream's order and with its messages:
//! the target found or made, the wait for its upload server (failing early on a claim that cannot
//! be provisioned), the upload proxy's URL, a token, the upload, the DataSource, and the wait for
//! CDI to finish writing.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Event, PersistentVolumeClaim};
use kube::api::{Api, ApiResource, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use super::changes::Changes;
use super::objects::{self, Wanted};
use super::transfer::{self, Sending, Tokens};
use super::{ImageUploadArgs, TargetKind, Upload};

/// How often the waits look at least (upstream's 2 s); a change of what they wait for is seen
/// at once ([`Changes`]).
const POLL: Duration = Duration::from_secs(2);
/// How long the wait for CDI to finish writing may take (upstream's 24 h).
const PROCESSING_TIMEOUT: Duration = Duration::from_secs(24 * 60 * 60);

fn resource(kind: &str, plural: &str) -> ApiResource {
    ApiResource {
        group: "cdi.kubevirt.io".to_owned(),
        version: "v1beta1".to_owned(),
        api_version: "cdi.kubevirt.io/v1beta1".to_owned(),
        kind: kind.to_owned(),
        plural: plural.to_owned(),
    }
}

fn api_error(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) => status.message.clone(),
        other => other.to_string(),
    }
}

fn is_not_found(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == 404)
}

/// The cluster the command talks to.
struct Cluster<'a> {
    client: &'a kube::Client,
    namespace: &'a str,
}

impl Cluster<'_> {
    fn claims(&self) -> Api<PersistentVolumeClaim> {
        Api::namespaced(self.client.clone(), self.namespace)
    }

    fn data_volumes(&self) -> Api<DynamicObject> {
        Api::namespaced_with(
            self.client.clone(),
            self.namespace,
            &resource("DataVolume", "datavolumes"),
        )
    }

    async fn claim(&self, name: &str) -> Result<PersistentVolumeClaim, kube::Error> {
        self.claims().get(name).await
    }

    /// Makes what the upload goes into.
    async fn create(&self, upload: &Upload, args: &ImageUploadArgs) -> Result<(), String> {
        let size = objects::size(upload)?;
        let access_mode = args.access_mode.as_deref().filter(|m| !m.is_empty());
        objects::access_mode(access_mode)?;
        let storage_class = args.storage_class.as_deref().filter(|c| !c.is_empty());
        if let Some(class) = storage_class {
            let classes: Api<k8s_openapi::api::storage::v1::StorageClass> = Api::all(self.client.clone());
            classes.get(class).await.map_err(|e| api_error(&e))?;
        }
        let wanted = Wanted {
            size: &size,
            storage_class,
            access_mode,
            force_bind: args.force_bind,
        };
        let params = PostParams::default();
        match upload.kind {
            TargetKind::DataVolume => {
                let object: DynamicObject =
                    serde_json::from_value(objects::data_volume(upload, self.namespace, wanted))
                        .map_err(|e| e.to_string())?;
                self.data_volumes()
                    .create(&params, &object)
                    .await
                    .map_err(|e| api_error(&e))?;
            }
            TargetKind::Claim => {
                let object: PersistentVolumeClaim =
                    serde_json::from_value(objects::claim(upload, self.namespace, wanted))
                        .map_err(|e| e.to_string())?;
                self.claims()
                    .create(&params, &object)
                    .await
                    .map_err(|e| api_error(&e))?;
            }
        }
        println!(
            "{} {}/{} created",
            objects::kind_name(upload.kind),
            self.namespace,
            upload.name
        );
        Ok(())
    }

    /// Checks an existing target, marking its claim as an upload target with `--no-create`.
    async fn reuse(&self, upload: &Upload, args: &ImageUploadArgs, claim: PersistentVolumeClaim) -> Result<(), String> {
        let annotations = claim.metadata.annotations.clone().unwrap_or_default();
        if upload.kind == TargetKind::DataVolume {
            match self.data_volumes().get(&upload.name).await {
                Ok(_) => {}
                Err(e) if is_not_found(&e) => {
                    return Err(objects::data_volume_missing(self.namespace, &upload.name, &annotations));
                }
                Err(e) => return Err(api_error(&e)),
            }
        }
        let name = claim.metadata.name.clone().unwrap_or_default();
        if objects::existing_claim(upload, &name, &annotations, args.no_create)? {
            let mut marked = claim;
            marked
                .metadata
                .annotations
                .get_or_insert_default()
                .insert(objects::UPLOAD_TARGET.to_owned(), String::new());
            self.claims()
                .replace(&name, &PostParams::default(), &marked)
                .await
                .map_err(|e| api_error(&e))?;
        }
        println!("Using existing PVC {}/{name}", self.namespace);
        Ok(())
    }

    /// Upstream's early failures while waiting: a claim that cannot be provisioned, a DataVolume
    /// whose claim is not valid.
    async fn event_errors(&self, upload: &Upload, claim_name: Option<&str>) -> Result<(), String> {
        let events: Api<Event> = Api::namespaced(self.client.clone(), self.namespace);
        let Ok(events) = events.list(&ListParams::default()).await else {
            return Ok(());
        };
        let claim_uid = match claim_name {
            Some(name) => self
                .claims()
                .get_opt(name)
                .await
                .ok()
                .flatten()
                .and_then(|c| c.metadata.uid),
            None => None,
        };
        let dv_uid = self
            .data_volumes()
            .get_opt(&upload.name)
            .await
            .ok()
            .flatten()
            .and_then(|d| d.metadata.uid);
        for event in events {
            let about = event.involved_object.uid.as_deref();
            let reason = event.reason.as_deref().unwrap_or_default();
            let message = event.message.clone().unwrap_or_default();
            if about.is_some()
                && about == claim_uid.as_deref()
                && event.involved_object.kind.as_deref() == Some("PersistentVolumeClaim")
                && reason == "ProvisioningFailed"
                && !message.contains(
                    "the object has been modified; please apply your changes to the latest version and try again",
                )
            {
                return Err(format!("Provisioning failed: {message}"));
            }
            if about.is_some()
                && about == dv_uid.as_deref()
                && event.involved_object.kind.as_deref() == Some("DataVolume")
                && reason == "ErrClaimNotValid"
            {
                return Err(format!("Claim not valid: {message}"));
            }
        }
        Ok(())
    }

    /// Waits up to `--wait-secs` for the upload server.
    async fn wait_ready(&self, upload: &Upload, args: &ImageUploadArgs) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_secs(args.wait_secs);
        let mut said = false;
        let (mut data_volume_changes, mut claim_changes) = (
            Changes::new(self.data_volumes(), &upload.name),
            Changes::new(self.claims(), &upload.name),
        );
        loop {
            let (ready, claim_name) = match upload.kind {
                TargetKind::DataVolume => match self.data_volumes().get(&upload.name).await {
                    Ok(dv) => {
                        let phase = dv.data["status"]["phase"].as_str().unwrap_or_default().to_owned();
                        let claim = dv.data["status"]["claimName"].as_str().map(str::to_owned);
                        (objects::data_volume_ready(&phase, args.force_bind)?, claim)
                    }
                    Err(e) if is_not_found(&e) => {
                        println!("DV {} not found... ", upload.name);
                        (false, None)
                    }
                    Err(e) => return Err(api_error(&e)),
                },
                TargetKind::Claim => match self.claims().get(&upload.name).await {
                    Ok(claim) => {
                        let ready = claim
                            .metadata
                            .annotations
                            .as_ref()
                            .and_then(|a| a.get(objects::POD_READY))
                            .is_some_and(|r| objects::go_true(r));
                        (ready, Some(upload.name.clone()))
                    }
                    Err(e) if is_not_found(&e) => (false, None),
                    Err(e) => return Err(api_error(&e)),
                },
            };
            if ready {
                if said {
                    println!("Pod now ready");
                }
                return Ok(());
            }
            if !said {
                println!("Waiting for PVC {} upload pod to be ready...", upload.name);
                said = true;
            }
            self.event_errors(upload, claim_name.as_deref()).await?;
            if Instant::now() + POLL > deadline {
                return Err("context deadline exceeded".to_owned());
            }
            match upload.kind {
                TargetKind::DataVolume => data_volume_changes.next(POLL).await,
                TargetKind::Claim => claim_changes.next(POLL).await,
            }
        }
    }

    /// The upload proxy's URL: the flag, else CDIConfig's override, else its status.
    async fn proxy_url(&self, args: &ImageUploadArgs) -> Result<String, String> {
        let url = if let Some(url) = args.uploadproxy_url.as_deref().filter(|u| !u.is_empty()) {
            url.to_owned()
        } else {
            let configs: Api<DynamicObject> = Api::all_with(self.client.clone(), &resource("CDIConfig", "cdiconfigs"));
            let config = configs.get("config").await.map_err(|e| api_error(&e))?;
            let spec = config.data["spec"]["uploadProxyURLOverride"].as_str();
            let status = config.data["status"]["uploadProxyURL"].as_str();
            spec.or(status)
                .filter(|u| !u.is_empty())
                .ok_or_else(|| "uploadproxy URL not found".to_owned())?
                .to_owned()
        };
        objects::proxy_base(&url)
    }

    /// Points the DataSource of the upload's name at its claim.
    async fn data_source(&self, upload: &Upload) -> Result<(), String> {
        let sources: Api<DynamicObject> = Api::namespaced_with(
            self.client.clone(),
            self.namespace,
            &resource("DataSource", "datasources"),
        );
        match sources.get(&upload.name).await {
            Ok(existing) => {
                let labels: BTreeMap<String, String> = existing.metadata.labels.unwrap_or_default();
                let patch: json_patch::Patch =
                    serde_json::from_value(objects::data_source_patch(upload, self.namespace, &labels))
                        .map_err(|e| e.to_string())?;
                sources
                    .patch(&upload.name, &PatchParams::default(), &Patch::Json::<()>(patch))
                    .await
                    .map_err(|e| api_error(&e))?;
                println!("Updated an existing DataSource {}/{}", self.namespace, upload.name);
            }
            Err(e) if is_not_found(&e) => {
                let object: DynamicObject =
                    serde_json::from_value(objects::data_source(upload, self.namespace)).map_err(|e| e.to_string())?;
                sources
                    .create(&PostParams::default(), &object)
                    .await
                    .map_err(|e| api_error(&e))?;
                println!("Created a new DataSource {}/{}", self.namespace, upload.name);
            }
            Err(e) => return Err(api_error(&e)),
        }
        Ok(())
    }

    /// Waits for CDI to finish writing what was sent.
    async fn wait_processed(&self, upload: &Upload) -> Result<(), String> {
        let deadline = Instant::now() + PROCESSING_TIMEOUT;
        let mut changes = Changes::new(self.claims(), &upload.name);
        loop {
            let claim = self.claim(&upload.name).await.map_err(|e| api_error(&e))?;
            let phase = claim
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(objects::POD_PHASE).cloned());
            if phase.as_deref() == Some("Succeeded") {
                println!("Processing completed successfully");
                return Ok(());
            }
            if Instant::now() + POLL > deadline {
                return Err("context deadline exceeded".to_owned());
            }
            changes.next(POLL).await;
        }
    }
}

/// Upload tokens from cdi-apiserver.
struct TokenRequests<'a> {
    client: &'a kube::Client,
    namespace: &'a str,
    claim: &'a str,
}

impl Tokens for TokenRequests<'_> {
    async fn token(&self) -> Result<String, String> {
        let path = format!(
            "/apis/upload.cdi.kubevirt.io/v1beta1/namespaces/{}/uploadtokenrequests",
            self.namespace
        );
        let body = json!({
            "apiVersion": "upload.cdi.kubevirt.io/v1beta1",
            "kind": "UploadTokenRequest",
            "metadata": {"generateName": "token-for-virtctl-", "namespace": self.namespace},
            "spec": {"pvcName": self.claim},
        });
        let request = http::Request::post(path)
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(body.to_string().into_bytes())
            .map_err(|e| e.to_string())?;
        let answer: Value = self.client.request(request).await.map_err(|e| api_error(&e))?;
        answer["status"]["token"]
            .as_str()
            .filter(|t| !t.is_empty())
            .map(str::to_owned)
            .ok_or_else(|| "the UploadTokenRequest came back without a token".to_owned())
    }
}

/// Runs the checked `upload`.
///
/// # Errors
/// The first step that fails, with upstream's message.
pub async fn run(
    client: &kube::Client,
    namespace: &str,
    args: &ImageUploadArgs,
    upload: &Upload,
) -> Result<(), String> {
    let size = std::fs::metadata(&upload.path)
        .and_then(|m| {
            std::fs::File::open(&upload.path)?;
            Ok(m.len())
        })
        .map_err(|e| format!("open {}: {e}", upload.path.display()))?;
    let cluster = Cluster { client, namespace };
    match cluster.claim(&upload.name).await {
        Ok(claim) => cluster.reuse(upload, args, claim).await?,
        Err(e) => {
            if !is_not_found(&e) {
                return Err(api_error(&e));
            }
            println!("PVC {namespace}/{} not found ", upload.name);
            if args.no_create {
                return Err(api_error(&e));
            }
            cluster.create(upload, args).await?;
        }
    }
    cluster.wait_ready(upload, args).await?;
    let base = cluster.proxy_url(args).await?;
    println!("Uploading data to {base}");
    let tokens = TokenRequests {
        client,
        namespace,
        claim: &upload.name,
    };
    let token = tokens.token().await?;
    let tls =
        control_loop::tls::public_client_tls(args.insecure, &[], "the upload proxy's CA").map_err(|e| e.to_string())?;
    let sending = Sending {
        base: &base,
        tls,
        attempts: args.retry,
    };
    transfer::upload(&sending, &tokens, token, &upload.path, size).await?;
    if args.datasource {
        cluster.data_source(upload).await?;
    }
    println!(
        "Uploading data completed successfully, waiting for processing to complete, you can hit ctrl-c without interrupting the progress"
    );
    if let Err(e) = cluster.wait_processed(upload).await {
        println!(
            "Timed out waiting for post upload processing to complete, please check upload pod status for progress"
        );
        return Err(e);
    }
    println!("Uploading {} completed successfully", upload.path.display());
    Ok(())
}
