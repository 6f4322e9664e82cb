//! `virtctl migrate-cancel VM`: cancelling a migration is deleting it, as upstream's virtctl does:
//! the VM's migrations are listed by their `kubevirt.io/vmi-name` label and the first that is not
//! finished is deleted; virt-controller then aborts it. With `--dry-run` the deletion is only
//! checked by the API server.

use kube::api::{Api, DeleteParams, ListParams};
use kubevirt_api::v1::VirtualMachineInstanceMigration;

use crate::VirtctlError;

/// Deletes the VM `name`'s unfinished migration (only checks that it could, with `dry_run`); the
/// success line.
pub async fn run(client: &kube::Client, namespace: &str, name: &str, dry_run: bool) -> Result<String, VirtctlError> {
    let api: Api<VirtualMachineInstanceMigration> = Api::namespaced(client.clone(), namespace);
    let selector = format!("{}=={name}", kubevirt_api::well_known::labels::MIGRATION_VMI_NAME);
    let list = api
        .list(&ListParams::default().labels(&selector))
        .await
        .map_err(|source| VirtctlError::Transport {
            context: "Error fetching virtual machine instance migration list".to_owned(),
            source,
        })?;
    let unfinished = list
        .items
        .iter()
        .find(|m| !m.status.as_ref().and_then(|s| s.phase).unwrap_or_default().is_final());
    let Some(migration) = unfinished else {
        return Err(VirtctlError::Usage(format!("Found no migration to cancel for {name}")));
    };
    let migration_name = migration.metadata.name.clone().unwrap_or_default();
    let params = DeleteParams {
        dry_run,
        ..DeleteParams::default()
    };
    api.delete(&migration_name, &params)
        .await
        .map_err(|source| VirtctlError::Transport {
            context: format!("Error canceling migration {migration_name} of a VirtualMachine {name}"),
            source,
        })?;
    Ok(format!("VM {name} was scheduled to migrate-cancel"))
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use http::{Request, Response};
    use kube::client::Body;
    use serde_json::{Value, json};

    /// Each request's method, URI and body.
    type Log = Arc<Mutex<Vec<(String, String, String)>>>;

    /// A client whose API server answers the list with `items` and echoes a deletion.
    fn api_server(items: Value) -> (kube::Client, Log) {
        let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        let log: Log = Arc::default();
        let record = log.clone();
        tokio::spawn(async move {
            while let Some((request, respond)) = handle.next_request().await {
                let (uri, method) = (request.uri().to_string(), request.method().clone());
                let body = request.into_body().collect_bytes().await.unwrap_or_default();
                let body = String::from_utf8_lossy(&body).into_owned();
                record.lock().expect("log").push((method.to_string(), uri, body));
                let answer = if method == http::Method::GET {
                    json!({"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstanceMigrationList",
                           "metadata": {}, "items": items})
                } else {
                    json!({"kind": "Status", "apiVersion": "v1", "status": "Success"})
                };
                respond.send_response(Response::new(Body::from(answer.to_string().into_bytes())));
            }
        });
        (kube::Client::new(service, "default"), log)
    }

    fn migration(name: &str, phase: &str) -> Value {
        json!({"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstanceMigration",
               "metadata": {"name": name, "namespace": "vms", "labels": {"kubevirt.io/vmi-name": "vm"}},
               "spec": {"vmiName": "vm"}, "status": {"phase": phase}})
    }

    #[tokio::test]
    async fn the_unfinished_migration_is_deleted() {
        let (client, log) = api_server(json!([migration("old", "Succeeded"), migration("now", "Running")]));
        let line = super::run(&client, "vms", "vm", false).await.expect("cancelled");
        assert_eq!(line, "VM vm was scheduled to migrate-cancel");
        let log = log.lock().expect("log").clone();
        assert_eq!(log.len(), 2, "{log:?}");
        assert_eq!(log[0].0, "GET");
        assert!(
            log[0]
                .1
                .starts_with("/apis/kubevirt.io/v1/namespaces/vms/virtualmachineinstancemigrations?")
                && log[0].1.contains("labelSelector=kubevirt.io%2Fvmi-name%3D%3Dvm"),
            "{}",
            log[0].1
        );
        assert_eq!(
            (log[1].0.as_str(), log[1].1.as_str()),
            (
                "DELETE",
                "/apis/kubevirt.io/v1/namespaces/vms/virtualmachineinstancemigrations/now?"
            )
        );
        assert!(!log[1].2.contains("dryRun"), "{}", log[1].2);
    }

    #[tokio::test]
    async fn a_dry_run_asks_the_server_to_only_check_the_deletion() {
        let (client, log) = api_server(json!([migration("now", "Scheduling")]));
        let line = super::run(&client, "vms", "vm", true).await.expect("checked");
        assert_eq!(line, "VM vm was scheduled to migrate-cancel");
        let log = log.lock().expect("log").clone();
        assert_eq!(log[1].0, "DELETE");
        let options: serde_json::Value = serde_json::from_str(&log[1].2).expect("DeleteOptions");
        assert_eq!(options["dryRun"], json!(["All"]), "{options}");
    }

    #[tokio::test]
    async fn nothing_to_cancel_is_an_error_that_names_the_vm() {
        let (client, log) = api_server(json!([migration("old", "Failed")]));
        let error = super::run(&client, "vms", "vm", false)
            .await
            .expect_err("nothing to cancel");
        assert_eq!(error.to_string(), "Found no migration to cancel for vm");
        assert_eq!(log.lock().expect("log").len(), 1, "nothing deleted");
    }
}
