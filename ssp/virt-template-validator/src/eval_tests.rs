//! Evaluation as upstream's tests have it: each rule type's satisfied and broken texts, the
//! reference VM's zeros for unset fields, `valid` guards, `justWarning`, malformed rules, and the
//! webhook's decision; then where the rules come from.

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::eval::{Cause, Decision, Outcome, Report, decide, evaluate};
use crate::rules::parse;
use crate::sources::{RuleSource, as_evaluated, rule_source};

fn vm(domain: &Value) -> Value {
    json!({"metadata": {"name": "vm", "namespace": "default"},
           "spec": {"template": {"spec": {"domain": domain}}}})
}

fn cirros() -> Value {
    vm(&json!({
        "machine": {"type": "q35"},
        "resources": {"requests": {"memory": "128M"}},
        "devices": {"disks": [{"name": "root", "disk": {"bus": "virtio"}}, {"name": "data", "disk": {"bus": "virtio"}}]}
    }))
}

fn outcomes(rules: &str, vm: &Value) -> Vec<Outcome> {
    evaluate(&parse(rules).expect("rules"), vm)
        .into_iter()
        .map(|r| r.outcome)
        .collect()
}

fn applied(satisfied: bool, text: &str) -> Outcome {
    Outcome::Applied {
        satisfied,
        text: text.to_owned(),
    }
}

fn error(text: &str) -> Outcome {
    Outcome::Error(text.to_owned())
}

const MEMORY: &str = "jsonpath::.spec.domain.resources.requests.memory";

fn memory_rule(min: &str, max: &str) -> String {
    format!(
        r#"[{{"name": "m", "rule": "integer", "message": "memory", "path": "{MEMORY}", "min": {min}, "max": {max}}}]"#
    )
}

#[test]
fn integer_rules_read_quantities_and_say_which_bound_a_value_breaks() {
    let with_memory = |memory: &str| vm(&json!({"resources": {"requests": {"memory": memory}}}));
    let (min, max) = ("67108864", "536870912");
    assert_eq!(
        outcomes(&memory_rule(min, max), &with_memory("68M")),
        [applied(
            true,
            "All values [68000000] are in interval [67108864, 536870912]"
        )]
    );
    assert_eq!(
        outcomes(&memory_rule(min, max), &with_memory("1M")),
        [applied(false, "value 1000000 is lower than minimum [67108864]")]
    );
    assert_eq!(
        outcomes(&memory_rule(min, max), &with_memory("10G")),
        [applied(false, "value 10000000000 is higher than maximum [536870912]")]
    );
    // An unset bound shows as N/A; a bound may be read from the VM.
    assert_eq!(
        outcomes(
            &memory_rule("null", "\"jsonpath::.spec.domain.memory.guest\""),
            &vm(&json!({
            "resources": {"requests": {"memory": "1Gi"}}, "memory": {"guest": "2Gi"}}))
        ),
        [applied(
            true,
            "All values [1073741824] are in interval [N/A, 2147483648]"
        )]
    );
    // A quantity that is not a whole number is not an integer.
    assert_eq!(
        outcomes(&memory_rule("1", "2"), &with_memory("100m")),
        [error("mismatching type: string, not int or resource.Quantity")]
    );
}

#[test]
fn every_value_counts_and_each_complaint_is_followed_by_a_comma_but_the_last() {
    let rules = r#"[{"name": "n", "rule": "integer", "message": "ports",
                     "path": "jsonpath::.spec.domain.devices.interfaces[*].ports[*].port", "max": 8}]"#;
    let ports = vm(&json!({"devices": {"interfaces": [{"name": "a", "ports": [{"port": 2}, {"port": 9}]}]}}));
    assert_eq!(
        outcomes(rules, &ports),
        [applied(false, ", value 9 is higher than maximum [8]")]
    );
    let fine = vm(&json!({"devices": {"interfaces": [{"name": "a", "ports": [{"port": 1}, {"port": 2}]}]}}));
    assert_eq!(
        outcomes(rules, &fine),
        [applied(true, "All values [1 2] are in interval [N/A, 8]")]
    );
}

#[test]
fn string_enum_and_regex_rules_have_upstreams_texts() {
    let rule = |kind: &str, args: &str, path: &str| {
        format!(r#"[{{"name": "r", "rule": "{kind}", "message": "m", "path": "{path}", {args}}}]"#)
    };
    let machine = "jsonpath::.spec.domain.machine.type";
    let buses = "jsonpath::.spec.domain.devices.disks[*].disk.bus";
    let cases = [
        (
            rule("string", r#""minLength": 1, "maxLength": 32"#, machine),
            applied(true, "Lengts of all strings are in interval [1, 32]"),
        ),
        (
            rule("string", r#""minLength": 64, "maxLength": 1"#, machine),
            applied(false, "Lengths of some strings are not in interval [64, 1]"),
        ),
        (
            rule("enum", r#""values": ["q35", "440fx"]"#, machine),
            applied(true, "All [q35] are in [q35, 440fx]"),
        ),
        (
            rule("enum", r#""values": ["foo", "bar"]"#, machine),
            applied(false, "Some of [q35] are not in [foo, bar]"),
        ),
        (
            rule("enum", r#""values": ["virtio", "sata"]"#, buses),
            applied(true, "All [virtio, virtio] are in [virtio, sata]"),
        ),
        (
            rule("regex", r#""regex": "q35|440fx""#, machine),
            applied(true, "All [q35] match q35|440fx"),
        ),
        (
            rule("regex", r#""regex": "\\d[a-z]+\\d\\d""#, machine),
            applied(false, "Some of [q35] do not match \\d[a-z]+\\d\\d"),
        ),
        (
            rule("regex", r#""regex": "foo|bar""#, buses),
            applied(false, "Some of [virtio, virtio] do not match foo|bar"),
        ),
        // Unanchored, as Go's MatchString.
        (
            rule("regex", r#""regex": "3""#, machine),
            applied(true, "All [q35] match 3"),
        ),
        // An enum without values takes nothing; a regex without one takes everything.
        (
            rule("enum", r#""justWarning": false"#, machine),
            applied(false, "Some of [q35] are not in []"),
        ),
        (
            rule("regex", r#""justWarning": false"#, machine),
            applied(true, "All [q35] match "),
        ),
        (
            rule("regex", r#""regex": "(""#, machine),
            error("error parsing regexp: regex parse error:\n    (\n    ^\nerror: unclosed group"),
        ),
    ];
    for (rules, expected) in cases {
        assert_eq!(outcomes(&rules, &cirros()), [expected], "{rules}");
    }
}

#[test]
fn unset_fields_read_as_the_reference_vms_zero_and_a_valid_guard_skips_a_rule() {
    let cores = r#"{"name": "cores", "rule": "integer", "message": "cores", "path": "jsonpath::.spec.domain.cpu.cores", "min": 1}"#;
    assert_eq!(
        outcomes(&format!("[{cores}]"), &cirros()),
        [applied(false, "value 0 is lower than minimum [1]")]
    );
    let guarded = cores.replacen('{', r#"{"valid": "jsonpath::.spec.domain.cpu.cores", "#, 1);
    assert_eq!(outcomes(&format!("[{guarded}]"), &cirros()), [Outcome::Skipped]);
    // A path no VM has is an error, even on a warning rule; an empty array has no values.
    let bogus = r#"[{"name": "b", "rule": "integer", "message": "b", "path": "jsonpath::.spec.domain.bogus", "min": 1, "justWarning": true}]"#;
    assert_eq!(outcomes(bogus, &cirros()), [error("invalid JSONPath")]);
    let no_disks = vm(&json!({"devices": {"disks": []}}));
    let bus = r#"[{"name": "b", "rule": "enum", "message": "b", "path": "jsonpath::.spec.domain.devices.disks[*].disk.bus", "values": ["virtio"]}]"#;
    assert_eq!(outcomes(bus, &no_disks), [error("no values were found")]);
    let two = r#"[{"name": "b", "rule": "integer", "message": "b", "path": "jsonpath::.spec.domain.cpu.cores", "min": "jsonpath::.spec.domain.devices.disks[*].name"}]"#;
    assert_eq!(outcomes(two, &cirros()), [error("expected one value, found 2")]);
}

#[test]
fn malformed_rules_are_errors_in_order_and_a_duplicate_name_after_the_first() {
    let rules = r#"[{"name": "r", "rule": "enum", "message": "m", "path": "jsonpath::.spec.domain.machine.type", "values": ["q35"]},
                    {"name": "r", "rule": "enum", "message": "m", "path": "jsonpath::.spec.domain.machine.type", "values": ["q35"]},
                    {"name": "t", "rule": "value-set", "message": "m", "path": "jsonpath::.spec.domain.machine.type"},
                    {"name": "u", "rule": "enum", "path": "jsonpath::.spec.domain.machine.type"},
                    {"name": "v", "rule": "enum", "message": "m"}]"#;
    assert_eq!(
        outcomes(rules, &cirros()),
        [
            applied(true, "All [q35] are in [q35]"),
            error("duplicate Rule Name"),
            error("unrecognized Rule type"),
            error("missing required key"),
            error("missing required key: path"),
        ]
    );
}

fn report(message: &str, field: &str, just_warning: bool, outcome: Outcome) -> Report {
    Report {
        name: message.to_owned(),
        field: field.to_owned(),
        message: message.to_owned(),
        just_warning,
        outcome,
    }
}

#[test]
fn the_decision_refuses_on_an_error_or_a_broken_rule_and_lists_warnings_with_them() {
    let broken_warning = report(
        "bus",
        ".spec.domain.devices.disks[*].disk.bus",
        true,
        applied(false, "Some of [virtio] are not in [sata]"),
    );
    let broken = report(
        "cores",
        ".spec.domain.cpu.cores",
        false,
        applied(false, "value 5 is higher than maximum [4]"),
    );
    let fine = report(
        "machine",
        ".spec.domain.machine.type",
        false,
        applied(true, "All [q35] match q35"),
    );
    let warning_cause = Cause {
        field: ".spec.domain.devices.disks[*].disk.bus".to_owned(),
        message: "bus: Some of [virtio] are not in [sata]".to_owned(),
    };
    assert_eq!(
        decide(&[
            broken_warning.clone(),
            fine.clone(),
            report("s", "", false, Outcome::Skipped)
        ]),
        Decision::Allowed {
            warnings: vec![warning_cause.clone()]
        }
    );
    assert_eq!(
        decide(&[broken_warning.clone(), broken, fine.clone()]),
        Decision::Refused(vec![
            warning_cause.clone(),
            Cause {
                field: ".spec.domain.cpu.cores".to_owned(),
                message: "cores: value 5 is higher than maximum [4]".to_owned(),
            }
        ])
    );
    let erring_warning = report("w", ".spec.domain.bogus", true, error("invalid JSONPath"));
    assert_eq!(
        decide(&[erring_warning, fine]),
        Decision::Refused(vec![Cause {
            field: ".spec.domain.bogus".to_owned(),
            message: "w: invalid JSONPath".to_owned(),
        }])
    );
}

#[test]
fn the_cpu_topology_reads_zero_as_one_when_a_cpu_is_given() {
    let rules = r#"[{"name": "c", "rule": "integer", "message": "c", "path": "jsonpath::.spec.domain.cpu.cores", "min": 1},
                    {"name": "s", "rule": "integer", "message": "s", "path": "jsonpath::.spec.domain.cpu.sockets", "min": 1},
                    {"name": "t", "rule": "integer", "message": "t", "path": "jsonpath::.spec.domain.cpu.threads", "min": 1}]"#;
    let given = as_evaluated(&vm(&json!({"cpu": {"cores": 0}})));
    let reports = evaluate(&parse(rules).expect("rules"), &given);
    assert_eq!(decide(&reports), Decision::Allowed { warnings: vec![] });
    // No cpu at all: nothing to default, and the reference VM's 0 breaks the rules.
    let none = as_evaluated(&vm(&json!({})));
    assert!(
        matches!(decide(&evaluate(&parse(rules).expect("rules"), &none)), Decision::Refused(causes) if causes.len() == 3)
    );
}

#[test]
fn the_rules_come_from_the_vm_else_its_template_unless_skipped() {
    let with = |metadata: &Value| json!({"metadata": metadata, "spec": {}});
    assert_eq!(rule_source(&with(&json!({}))), RuleSource::Nothing);
    assert_eq!(
        rule_source(&with(&json!({"annotations": {"vm.kubevirt.io/validations": "[]",
                                                   "vm.kubevirt.io/skip-validations": "false"}}))),
        RuleSource::Nothing,
        "skipped whatever the value"
    );
    assert_eq!(
        rule_source(&with(&json!({"annotations": {"vm.kubevirt.io/validations": "[]"},
                                  "labels": {"vm.kubevirt.io/template": "fedora", "vm.kubevirt.io/template.namespace": "openshift"}}))),
        RuleSource::Own("[]".to_owned()),
        "the VM's own rules replace its template's"
    );
    let template = |namespace: &str| RuleSource::Template {
        namespace: namespace.to_owned(),
        name: "fedora".to_owned(),
    };
    assert_eq!(
        rule_source(&with(&json!({"annotations": {"vm.kubevirt.io/validations": ""},
                                  "labels": {"vm.kubevirt.io/template": "fedora", "vm.kubevirt.io/template.namespace": "openshift"}}))),
        template("openshift")
    );
    assert_eq!(
        rule_source(&with(&json!({"labels": {"vm.kubevirt.io/template": "fedora"},
                                  "annotations": {"vm.kubevirt.io/template": "fedora", "vm.kubevirt.io/template-namespace": "old"}}))),
        template("old"),
        "incomplete labels: the annotations, with the older namespace key"
    );
    assert_eq!(
        rule_source(&with(
            &json!({"annotations": {"vm.kubevirt.io/template.namespace": "openshift"}})
        )),
        RuleSource::Nothing,
        "a namespace alone names no template"
    );
}

#[test]
fn fields_the_json_leaves_out_read_as_go_holds_them() {
    let buses = r#"[{"name": "bus", "rule": "enum", "message": "bus", "values": ["virtio"],
                     "path": "jsonpath::.spec.domain.devices.disks[*].disk.bus"}]"#;
    // A disk written `disk: {}` has the bus "" in Go's object: it is counted.
    let half =
        vm(&json!({"devices": {"disks": [{"name": "a", "disk": {"bus": "virtio"}}, {"name": "b", "disk": {}}]}}));
    assert_eq!(
        outcomes(buses, &half),
        [applied(false, "Some of [virtio, ] are not in [virtio]")]
    );
    let one = vm(&json!({"devices": {"disks": [{"name": "b", "disk": {}}]}}));
    assert_eq!(
        outcomes(buses, &one),
        [applied(false, "Some of [] are not in [virtio]")]
    );
    // And a guard on it applies; a guard on a struct the VM leaves out does not.
    let guarded = r#"[{"name": "bus", "rule": "enum", "message": "bus", "values": ["virtio"],
                       "valid": "jsonpath::.spec.domain.devices.disks[*].disk.bus",
                       "path": "jsonpath::.spec.domain.devices.disks[*].disk.bus"}]"#;
    assert_eq!(
        outcomes(guarded, &one),
        [applied(false, "Some of [] are not in [virtio]")]
    );
    let cdroms = guarded.replace("[*].disk.bus", "[*].cdrom.bus");
    assert_eq!(outcomes(&cdroms, &one), [Outcome::Skipped]);
}

#[test]
fn only_quantities_written_as_whole_units_are_integers() {
    let with_memory = |memory: &str| vm(&json!({"resources": {"requests": {"memory": memory}}}));
    assert_eq!(
        outcomes(&memory_rule("1", "10000"), &with_memory("1e3")),
        [applied(true, "All values [1000] are in interval [1, 10000]")]
    );
    for fraction in ["1.5Gi", "1000m", "1e-3"] {
        assert_eq!(
            outcomes(&memory_rule("1", "2"), &with_memory(fraction)),
            [error("mismatching type: string, not int or resource.Quantity")],
            "{fraction}"
        );
    }
}

#[test]
fn a_null_rule_set_is_no_rules_and_only_an_unset_or_zero_topology_is_defaulted() {
    assert_eq!(parse("null"), Ok(Vec::new()));
    let given = as_evaluated(&vm(&json!({"cpu": {"cores": -2, "sockets": "x"}})));
    assert_eq!(
        given["spec"]["template"]["spec"]["domain"]["cpu"],
        json!({"cores": -2, "sockets": "x", "threads": 1})
    );
}
