//! Creating a VMI's pods as a plan asks: its temporary pod for claims that wait for their first
//! consumer, and its launcher pod, each with its expectation and event.

use kubevirt_api::clock::Clock;
use kubevirt_api::v1::VirtualMachineInstance;

use super::VmiController;
use crate::claims::ClaimModes;
use crate::cluster_api::ControllerApi;
use crate::pod::{PodConfig, render_launcher_pod};
use crate::reconcile_error::ReconcileError;
use crate::vmi_lifecycle::{Plan, TemporaryPod};

impl<A: ControllerApi, K: Clock> VmiController<A, K> {
    /// Creates the pods `plan` asks for; whether the reconcile goes on.
    pub(super) async fn create_pods(
        &self,
        key: &str,
        namespace: &str,
        plan: &Plan,
        config: &PodConfig,
        claims: &ClaimModes,
        current: &VirtualMachineInstance,
    ) -> Result<bool, ReconcileError> {
        if plan.temporary_pod == TemporaryPod::Create {
            // Rendered for the user the launcher pod will run as (not yet in the status), so that
            // it is admitted, placed and sized as the launcher pod will be.
            let mut planned = current.clone();
            planned
                .status
                .get_or_insert_default()
                .runtime_user
                .get_or_insert(u64::from(config.runtime_user));
            if !self
                .create_rendered(key, namespace, &planned, true, (config, claims), current)
                .await?
            {
                return Ok(false);
            }
        }
        if plan.create_pod {
            // Rendered from the status the plan writes, whose `runtimeUser` says who the pod runs as.
            let mut planned = current.clone();
            if let Some(status) = &plan.status {
                planned.status = Some(status.clone());
            }
            return self
                .create_rendered(key, namespace, &planned, false, (config, claims), current)
                .await;
        }
        Ok(true)
    }

    /// Renders `planned`'s launcher pod, made the temporary pod when `temporary` (its compute
    /// container only prints the launcher's version and ends; marked
    /// `kubevirt.io/ephemeral-provisioning`), and creates it; whether the reconcile goes on. A VMI
    /// that cannot be rendered needs a change of it or of the configuration, not a retry.
    async fn create_rendered(
        &self,
        key: &str,
        namespace: &str,
        planned: &VirtualMachineInstance,
        temporary: bool,
        (config, claims): (&PodConfig, &ClaimModes),
        current: &VirtualMachineInstance,
    ) -> Result<bool, ReconcileError> {
        let what = if temporary { "temporary pod" } else { "launcher pod" };
        let pod = match render_launcher_pod(planned, config, claims) {
            Ok(pod) if temporary => Box::new(crate::pod::temporary(pod)),
            Ok(pod) => Box::new(pod),
            Err(error) => {
                tracing::warn!(error = %error, "cannot render the {what}");
                self.event(current, "Warning", "FailedCreate", &error.to_string()).await;
                return Ok(false);
            }
        };
        self.known().expectations.expect_creation(key, self.clock.monotonic());
        match self.api.create_pod(namespace, &pod).await {
            Ok(created) => {
                let name = created.metadata.name.as_deref().unwrap_or_default();
                let message = if temporary {
                    format!("Created temporary pod {name} for the claims that wait for their first consumer")
                } else {
                    format!("Created virtual machine pod {name}")
                };
                self.event(current, "Normal", "SuccessfulCreate", &message).await;
                self.on_pod_created(&created);
                Ok(true)
            }
            Err(error) => {
                self.known().expectations.creation_observed(key);
                self.event(current, "Warning", "FailedCreate", &error.to_string()).await;
                Err(ReconcileError::new(format!("create the {what}"), error))
            }
        }
    }
}
