use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kubevirt_api::v1::VirtualMachineInstance;
use serde_json::json;

use super::{Action, Existing, plan, render, wants_budget};

fn vmi(strategy: Option<&str>, phase: &str, migratable: bool) -> VirtualMachineInstance {
    let mut value = json!({
        "metadata": {"name": "vm1", "namespace": "prod", "uid": "vmi-uid"},
        "spec": {"domain": {"devices": {}}},
        "status": {"phase": phase, "conditions": [
            {"type": "LiveMigratable", "status": if migratable { "True" } else { "False" }}
        ]}
    });
    if let Some(strategy) = strategy {
        value["spec"]["evictionStrategy"] = json!(strategy);
    }
    serde_json::from_value(value).expect("vmi")
}

#[test]
fn which_vmis_are_protected() {
    // (VMI strategy, cluster default, phase, live migratable, protected)
    let cases = [
        (None, None, "Running", true, false),
        (Some("None"), Some("LiveMigrate"), "Running", true, false),
        (Some("LiveMigrate"), None, "Running", false, true),
        (Some("LiveMigrate"), None, "Scheduling", true, true),
        (Some("External"), None, "Running", false, true),
        (Some("LiveMigrateIfPossible"), None, "Running", true, true),
        (Some("LiveMigrateIfPossible"), None, "Running", false, false),
        (None, Some("LiveMigrate"), "Running", true, true),
        (Some("LiveMigrate"), None, "Succeeded", true, false),
        (Some("LiveMigrate"), None, "Failed", true, false),
    ];
    for (strategy, default, phase, migratable, protected) in cases {
        let one = vmi(strategy, phase, migratable);
        assert_eq!(
            wants_budget(&one, default),
            protected,
            "{strategy:?} default={default:?} {phase} migratable={migratable}"
        );
    }
    let mut deleting = vmi(Some("LiveMigrate"), "Running", true);
    deleting.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
    ));
    assert!(!wants_budget(&deleting, None));
}

fn existing(name: &str, min: i32) -> Existing {
    Existing {
        name: name.to_owned(),
        min_available: Some(min),
    }
}

#[test]
fn one_budget_of_one_or_two_while_migrating() {
    let protected = vmi(Some("LiveMigrate"), "Running", true);
    let p = Some(&protected);
    assert_eq!(plan(p, None, false, &[]), [Action::Create(1)]);
    assert_eq!(plan(p, None, true, &[]), [Action::Create(2)]);
    assert!(plan(p, None, false, &[existing("a", 1)]).is_empty());
    assert_eq!(
        plan(p, None, true, &[existing("a", 1)]),
        [Action::SetMinAvailable {
            name: "a".to_owned(),
            min_available: 2
        }]
    );
    assert_eq!(
        plan(p, None, false, &[existing("a", 2)]),
        [Action::SetMinAvailable {
            name: "a".to_owned(),
            min_available: 1
        }]
    );
    // Extra budgets go; the first by name stays.
    assert_eq!(
        plan(p, None, false, &[existing("b", 1), existing("a", 1)]),
        [Action::Delete("b".to_owned())]
    );
    // Not protected, or gone: every budget goes.
    let plain = vmi(None, "Running", true);
    assert_eq!(
        plan(Some(&plain), None, false, &[existing("a", 1)]),
        [Action::Delete("a".to_owned())]
    );
    assert_eq!(
        plan(None, None, false, &[existing("a", 1)]),
        [Action::Delete("a".to_owned())]
    );
    assert!(plan(None, None, false, &[]).is_empty());
}

#[test]
fn the_budget_is_owned_by_the_vmi_and_covers_its_pods() {
    let budget = render(&vmi(Some("LiveMigrate"), "Running", true), 1);
    assert_eq!(
        budget.metadata.generate_name.as_deref(),
        Some("kubevirt-disruption-budget-")
    );
    let owner = &budget.metadata.owner_references.as_ref().expect("owner")[0];
    assert_eq!(
        (
            owner.kind.as_str(),
            owner.name.as_str(),
            owner.uid.as_str(),
            owner.controller
        ),
        ("VirtualMachineInstance", "vm1", "vmi-uid", Some(true))
    );
    let spec = budget.spec.expect("spec");
    assert_eq!(spec.min_available, Some(IntOrString::Int(1)));
    assert_eq!(
        spec.selector
            .and_then(|s| s.match_labels)
            .and_then(|l| l.get("kubevirt.io/created-by").cloned())
            .as_deref(),
        Some("vmi-uid")
    );
}
