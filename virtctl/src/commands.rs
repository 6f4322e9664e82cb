//! The lifecycle commands: which request each sends (upstream's paths and bodies) and what it
//! prints. [`request_for`] is pure; [`run`] sends through a kube client, so tests drive it with a
//! mock API server.

use kubevirt_api::v1::{DRY_RUN_ALL, MigrateOptions, PauseOptions, RestartOptions, StartOptions, StopOptions};
use serde::Serialize;

use crate::VirtctlError;
use crate::cli::{Command, DryRun, Force, Kind};

pub use crate::SUBRESOURCES;

/// One request virtctl sends, with what it prints on success and says on failure.
#[derive(Debug, PartialEq, Eq)]
pub struct Call {
    /// The request path.
    pub path: String,
    /// The JSON body.
    pub body: String,
    /// Printed on success, e.g. `VM vm was scheduled to start`.
    pub done: String,
    /// Prefix of the error, e.g. `Error starting VirtualMachine`.
    pub context: &'static str,
}

fn dry(dry_run: DryRun) -> Vec<String> {
    if dry_run.dry_run {
        vec![DRY_RUN_ALL.to_owned()]
    } else {
        Vec::new()
    }
}

fn grace(force: Force) -> Result<Option<i64>, VirtctlError> {
    match (force.force, force.grace_period) {
        (false, None) => Ok(None),
        (true, Some(seconds)) => Ok(Some(seconds)),
        _ => Err(VirtctlError::Usage(
            "Must both use --force=true and set --grace-period.".to_owned(),
        )),
    }
}

fn body(value: &impl Serialize) -> String {
    serde_json::to_string(value).unwrap_or_else(|_| "{}".to_owned())
}

/// The request for a lifecycle command; `None` for the console, which is not a single request,
/// for `create` and `expand`, which are not lifecycle requests, and for `migrate-cancel`, which
/// deletes the migration ([`crate::migrate_cancel`]).
pub fn request_for(command: &Command, namespace: &str) -> Result<Option<Call>, VirtctlError> {
    let vm = |name: &str, verb: &str| format!("{SUBRESOURCES}/namespaces/{namespace}/virtualmachines/{name}/{verb}");
    let vmi =
        |name: &str, verb: &str| format!("{SUBRESOURCES}/namespaces/{namespace}/virtualmachineinstances/{name}/{verb}");
    let call = match command {
        Command::Start { name, paused, dry_run } => Call {
            path: vm(name, "start"),
            body: body(&StartOptions {
                paused: *paused,
                dry_run: dry(*dry_run),
            }),
            done: format!("VM {name} was scheduled to start"),
            context: "Error starting VirtualMachine",
        },
        Command::Stop { name, force, dry_run } => Call {
            path: vm(name, "stop"),
            body: body(&StopOptions {
                grace_period: grace(*force)?,
                dry_run: dry(*dry_run),
            }),
            done: format!("VM {name} was scheduled to stop"),
            context: "Error stopping VirtualMachine",
        },
        Command::Restart { name, force, dry_run } => Call {
            path: vm(name, "restart"),
            body: body(&RestartOptions {
                grace_period_seconds: grace(*force)?,
                dry_run: dry(*dry_run),
            }),
            done: format!("VM {name} was scheduled to restart"),
            context: "Error restarting VirtualMachine",
        },
        Command::Migrate {
            name,
            added_node_selector,
            dry_run,
        } => Call {
            path: vm(name, "migrate"),
            body: body(&MigrateOptions {
                dry_run: dry(*dry_run),
                added_node_selector: added_node_selector.clone(),
            }),
            done: format!("VM {name} was scheduled to migrate"),
            context: "Error migrating VirtualMachine",
        },
        Command::Pause { kind, name, dry_run } | Command::Unpause { kind, name, dry_run } => {
            let pause = matches!(command, Command::Pause { .. });
            let verb = if pause { "pause" } else { "unpause" };
            let what = match kind {
                Kind::Vm => "VirtualMachine",
                Kind::Vmi => "VirtualMachineInstance",
            };
            Call {
                path: vmi(name, verb),
                body: body(&PauseOptions { dry_run: dry(*dry_run) }),
                done: format!("VMI {name} was scheduled to {verb}"),
                context: match (pause, what) {
                    (true, "VirtualMachine") => "Error pausing VirtualMachine",
                    (true, _) => "Error pausing VirtualMachineInstance",
                    (false, "VirtualMachine") => "Error unpausing VirtualMachine",
                    (false, _) => "Error unpausing VirtualMachineInstance",
                },
            }
        }
        Command::Console { .. }
        | Command::Create { .. }
        | Command::Expand(_)
        | Command::ImageUpload(_)
        | Command::MigrateCancel { .. } => {
            return Ok(None);
        }
    };
    Ok(Some(call))
}

/// Sends `call`; the success line, or the server's refusal.
pub async fn send(client: &kube::Client, call: &Call) -> Result<String, VirtctlError> {
    let request = http::Request::put(&call.path)
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(call.body.clone().into_bytes())
        .map_err(|e| VirtctlError::Usage(e.to_string()))?;
    match client.request_text(request).await {
        Ok(_) => Ok(call.done.clone()),
        Err(kube::Error::Api(status)) => Err(VirtctlError::Refused {
            context: call.context.to_owned(),
            message: status.message.clone(),
            code: status.code,
        }),
        Err(source) => Err(VirtctlError::Transport {
            context: call.context.to_owned(),
            source,
        }),
    }
}
