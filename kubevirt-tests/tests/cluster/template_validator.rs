//! SSP on the real cluster: the SSP CR `kubevirt/ssp` (manifests/ssp/ssp_cr.yaml) deploys the
//! template validator and its webhook; a VirtualMachine that breaks a validation rule is refused
//! by the API server with the rule's message, one that breaks only a `justWarning` rule is
//! admitted and the validator logs it; an object the operator owns changed by hand is put back; a
//! second SSP gets an error and nothing, and goes when deleted; a field the operator does not do
//! is refused by the API server.

use std::time::Duration;

use super::support::{Cleanup, condition, controlled_by, field, get, kubectl_ok, kubectl_stdin, wait_for};

const NAMESPACE: &str = "kubevirt";

/// The SSP, once Deployed.
fn deployed() -> serde_json::Value {
    wait_for("the SSP to be Deployed", Duration::from_secs(300), || {
        get("ssp", "ssp", NAMESPACE)
            .filter(|cr| field(cr, "status.phase") == "Deployed" && condition(cr, "Available").0 == "True")
    })
}

/// A stopped VM named `name` whose own rules are `rules` (JSON).
fn vm_with_rules(name: &str, rules: &str) -> String {
    let rules = serde_json::to_string(rules).expect("a JSON string");
    format!(
        r"apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: {name}
  namespace: default
  annotations:
    vm.kubevirt.io/validations: {rules}
spec:
  runStrategy: Halted
  template:
    spec:
      domain:
        memory:
          guest: 256Mi
        devices: {{}}
"
    )
}

fn memory_rule(just_warning: bool) -> String {
    serde_json::json!([{
        "name": "minimal-required-memory",
        "path": "jsonpath::.spec.domain.memory.guest",
        "rule": "integer",
        "message": "This VM requires more memory.",
        "min": 1_073_741_824,
        "justWarning": just_warning,
    }])
    .to_string()
}

#[test]
#[ignore = "needs the test cluster: make cluster"]
fn the_template_validator_refuses_a_vm_that_breaks_a_rule_and_admits_one_that_breaks_a_warning() {
    let cr = deployed();
    assert_eq!(condition(&cr, "Available"), ("True".to_owned(), "Available".to_owned()));
    assert_eq!(condition(&cr, "Degraded").0, "False");
    assert!(!field(&cr, "status.observedVersion").is_empty(), "{cr}");
    let uid = field(&cr, "metadata.uid");
    for (kind, name) in [
        ("deployment", "virt-template-validator"),
        ("service", "virt-template-validator"),
        ("secret", "virt-template-validator-certs"),
        ("poddisruptionbudget", "virt-template-validator"),
    ] {
        let object = get(kind, name, NAMESPACE).unwrap_or_else(|| panic!("{kind} {name}"));
        assert!(controlled_by(&object, "SSP", &uid), "{kind} {name}: {object}");
    }
    let webhook = get("validatingwebhookconfiguration", "virt-template-validator", "default").expect("the webhook");
    assert_eq!(
        field(&webhook, "metadata.annotations.operator-sdk/primary-resource"),
        "kubevirt/ssp"
    );
    assert!(!field(&webhook, "webhooks.0.clientConfig.caBundle").is_empty());

    let mut cleanup = Cleanup::new();
    // A VM below the rule's minimum: the API server refuses it with the validator's answer.
    cleanup.track("vm", "ssp-refused");
    let refused = kubectl_stdin(
        &["create", "-f", "-"],
        &vm_with_rules("ssp-refused", &memory_rule(false)),
    );
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "the VM was admitted");
    // The API server words a 422 with causes as "The request is invalid: <field>: <message>".
    assert!(
        stderr.contains(
            "The request is invalid: .spec.domain.memory.guest: This VM requires more memory.: value 268435456 is lower than minimum [1073741824]"
        ),
        "{stderr}"
    );
    assert!(get("vm", "ssp-refused", "default").is_none());

    // The same rule as a warning: admitted, and logged by the validator.
    cleanup.apply("vm", "ssp-warned", &vm_with_rules("ssp-warned", &memory_rule(true)));
    assert!(get("vm", "ssp-warned", "default").is_some());
    wait_for("the validator to log the warning", Duration::from_secs(60), || {
        let logs = kubectl_ok(&[
            "-n",
            NAMESPACE,
            "logs",
            "-l",
            "kubevirt.io=virt-template-validator",
            "--tail=-1",
        ]);
        (logs.contains("rule is not satisfied") && logs.contains("This VM requires more memory.")).then_some(())
    });
}

#[test]
#[ignore = "needs the test cluster: make cluster"]
fn the_ssp_operator_reverts_edits_refuses_a_second_ssp_and_what_it_does_not_do() {
    deployed();
    // A field the operator applies, changed by hand, is put back.
    kubectl_ok(&[
        "-n",
        NAMESPACE,
        "label",
        "--overwrite",
        "service",
        "template-validator-metrics",
        "metrics.ssp.kubevirt.io=edited",
    ]);
    wait_for("the operator to revert the label", Duration::from_secs(60), || {
        let service = get("service", "template-validator-metrics", NAMESPACE)?;
        (field(&service, "metadata.labels.metrics\\.ssp\\.kubevirt\\.io") == "template-validator-metrics").then_some(())
    });

    // A second SSP: an error in its status, no objects, and it goes when deleted.
    let mut cleanup = Cleanup::new();
    let second = "apiVersion: ssp.kubevirt.io/v1beta3\nkind: SSP\nmetadata:\n  name: second\n  namespace: default\nspec:\n  commonTemplates:\n    namespace: default\n";
    cleanup.apply("ssp", "second", second);
    let cr = wait_for("the second SSP's error", Duration::from_secs(60), || {
        // A CR just made has no conditions yet.
        get("ssp", "second", "default")
            .filter(|cr| cr["status"]["conditions"].is_array() && condition(cr, "Degraded").0 == "True")
    });
    assert_eq!(
        field(&cr, "status.conditions.2.message"),
        "Error: there should be a single SSP: kubevirt/ssp is the one in use"
    );
    assert_eq!(field(&cr, "metadata.finalizers.0"), "ssp.kubevirt.io/finalizer");
    assert!(get("deployment", "virt-template-validator", "default").is_none());
    kubectl_ok(&["-n", "default", "delete", "ssp", "second", "--timeout=60s"]);
    assert!(get("ssp", "second", "default").is_none());
    // The one in use kept its webhook.
    assert!(get("validatingwebhookconfiguration", "virt-template-validator", "default").is_some());

    // What the operator does not do is refused by the API server, naming the field.
    let tls = "apiVersion: ssp.kubevirt.io/v1beta3\nkind: SSP\nmetadata:\n  name: tls\n  namespace: default\nspec:\n  commonTemplates:\n    namespace: default\n  tlsSecurityProfile:\n    type: Old\n";
    let output = kubectl_stdin(&["create", "--dry-run=server", "-f", "-"], tls);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "the SSP was admitted");
    assert!(
        stderr.contains("spec.tlsSecurityProfile: a TLS security profile is not supported"),
        "{stderr}"
    );
}
