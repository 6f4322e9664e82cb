use std::sync::Mutex;

use kube::api::ObjectMeta;
use kubevirt_api::v1::{KubeVirtSpec, KubeVirtStatus};
use pretty_assertions::assert_eq;

use super::*;

/// The cluster as a test sets it: the CRs, the workloads present, what fails; every read logged.
#[derive(Default)]
pub struct FakeCluster {
    pub crs: Vec<KubeVirt>,
    pub present: Vec<Workload>,
    pub failing: Option<Workload>,
    pub reads: Mutex<Vec<String>>,
}

impl FakeCluster {
    fn log(&self, read: String) {
        self.reads.lock().expect("log").push(read);
    }
}

impl Cluster for FakeCluster {
    async fn kubevirt(&self, namespace: &str, name: &str) -> Result<Option<KubeVirt>, String> {
        self.log(format!("get {namespace}/{name}"));
        Ok(self
            .crs
            .iter()
            .find(|cr| cr.metadata.namespace.as_deref() == Some(namespace) && cr.metadata.name.as_deref() == Some(name))
            .cloned())
    }

    async fn kubevirts(&self, namespace: &str) -> Result<Vec<KubeVirt>, String> {
        self.log(format!("list {namespace}"));
        Ok(self
            .crs
            .iter()
            .filter(|cr| cr.metadata.namespace.as_deref() == Some(namespace))
            .cloned()
            .collect())
    }

    async fn any_kubevirt(&self) -> Result<bool, String> {
        self.log("any kubevirts".to_owned());
        Ok(!self.crs.is_empty())
    }

    async fn any(&self, workload: Workload) -> Result<bool, String> {
        self.log(format!("any {}", workload.resource().plural));
        if self.failing == Some(workload) {
            return Err(format!("listing {}: the server is down", workload.resource().plural));
        }
        Ok(self.present.contains(&workload))
    }
}

pub fn cr(strategy: Option<&str>, phase: Option<&str>) -> KubeVirt {
    KubeVirt {
        metadata: ObjectMeta {
            name: Some("kubevirt".to_owned()),
            namespace: Some("kubevirt".to_owned()),
            ..ObjectMeta::default()
        },
        spec: KubeVirtSpec {
            uninstall_strategy: strategy.map(str::to_owned),
            ..KubeVirtSpec::default()
        },
        status: phase.map(|p| KubeVirtStatus {
            phase: Some(p.to_owned()),
            ..KubeVirtStatus::default()
        }),
    }
}

#[test]
fn only_a_deployed_cr_that_blocks_its_uninstall_waits_on_workloads() {
    for (strategy, phase, blocking) in [
        (Some(BLOCK), Some("Deployed"), true),
        (Some(BLOCK), Some("Deploying"), false),
        (Some(BLOCK), Some("Deleting"), false),
        (Some(BLOCK), Some("Deleted"), false),
        (Some(BLOCK), None, false),
        (Some("RemoveWorkloads"), Some("Deployed"), false),
        (Some(""), Some("Deployed"), false),
        (None, Some("Deployed"), false),
    ] {
        assert_eq!(blocks(&cr(strategy, phase)), blocking, "{strategy:?} {phase:?}");
    }
}

fn block(cluster: &mut FakeCluster) {
    cluster.crs = vec![cr(Some(BLOCK), Some("Deployed"))];
}

#[tokio::test]
async fn each_kind_of_workload_refuses_with_upstreams_message_in_upstreams_order() {
    for (present, refused_for) in [
        (vec![Workload::Vmis], "Virtual Machine Instances"),
        (vec![Workload::Vms], "Virtual Machines"),
        (vec![Workload::ReplicaSets], "Virtual Machine Instance Replica Sets"),
        (Workload::ALL.to_vec(), "Virtual Machine Instances"),
    ] {
        let mut cluster = FakeCluster {
            present,
            ..FakeCluster::default()
        };
        block(&mut cluster);
        assert_eq!(
            admit_delete(&cluster, "kubevirt", "kubevirt").await,
            Err(format!(
                "Rejecting the uninstall request, since there are still {refused_for} present. Either delete all KubeVirt related workloads or change the uninstall strategy before uninstalling KubeVirt."
            ))
        );
    }
    let mut cluster = FakeCluster::default();
    block(&mut cluster);
    assert_eq!(admit_delete(&cluster, "kubevirt", "kubevirt").await, Ok(()));
    assert_eq!(
        *cluster.reads.lock().expect("log"),
        [
            "get kubevirt/kubevirt",
            "any virtualmachineinstances",
            "any virtualmachines",
            "any virtualmachineinstancereplicasets"
        ]
    );
}

#[tokio::test]
async fn what_cannot_be_read_refuses_and_what_does_not_block_reads_no_workload() {
    let mut cluster = FakeCluster {
        failing: Some(Workload::Vms),
        ..FakeCluster::default()
    };
    block(&mut cluster);
    assert_eq!(
        admit_delete(&cluster, "kubevirt", "kubevirt").await,
        Err("listing virtualmachines: the server is down".to_owned())
    );
    assert_eq!(
        admit_delete(&cluster, "kubevirt", "other").await,
        Err("kubevirts.kubevirt.io \"other\" not found".to_owned()),
        "a CR that cannot be read is refused, as upstream's"
    );
    let removing = FakeCluster {
        crs: vec![cr(Some("RemoveWorkloads"), Some("Deployed"))],
        present: Workload::ALL.to_vec(),
        ..FakeCluster::default()
    };
    assert_eq!(admit_delete(&removing, "kubevirt", "kubevirt").await, Ok(()));
    assert_eq!(*removing.reads.lock().expect("log"), ["get kubevirt/kubevirt"]);
}

#[tokio::test]
async fn a_namespaces_deletion_is_about_its_first_cr_if_any() {
    let mut cluster = FakeCluster {
        present: vec![Workload::Vmis],
        ..FakeCluster::default()
    };
    assert_eq!(admit_delete(&cluster, "kubevirt", "").await, Ok(()), "no CR in it");
    block(&mut cluster);
    assert!(admit_delete(&cluster, "kubevirt", "").await.is_err());
}
