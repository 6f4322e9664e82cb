use std::collections::BTreeMap;

use super::*;

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
}

fn policy(name: &str, vmi: &[(&str, &str)], namespace: &[(&str, &str)]) -> MigrationPolicy {
    let mut policy = MigrationPolicy::new(
        name,
        MigrationPolicySpec {
            selectors: Selectors {
                namespace_selector: (!namespace.is_empty()).then(|| labels(namespace)),
                virtual_machine_instance_selector: (!vmi.is_empty()).then(|| labels(vmi)),
            },
            ..MigrationPolicySpec::default()
        },
    );
    policy.metadata.name = Some(name.to_owned());
    policy
}

/// Upstream's helper: policy `name` selects `n_vmi` labels of its own on the VMI and `n_ns` on the
/// namespace, and the VMI and namespace are given them.
fn policy_with_labels(
    name: &str,
    n_vmi: usize,
    n_ns: usize,
    vmi_labels: &mut BTreeMap<String, String>,
    ns_labels: &mut BTreeMap<String, String>,
) -> MigrationPolicy {
    let vmi: Vec<(String, String)> = (0..n_vmi)
        .map(|i| (format!("{name}-vmi-{i}"), format!("v{i}")))
        .collect();
    let ns: Vec<(String, String)> = (0..n_ns).map(|i| (format!("{name}-ns-{i}"), format!("n{i}"))).collect();
    vmi_labels.extend(vmi.iter().cloned());
    ns_labels.extend(ns.iter().cloned());
    policy(name, &borrowed(&vmi), &borrowed(&ns))
}

fn borrowed(pairs: &[(String, String)]) -> Vec<(&str, &str)> {
    pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect()
}

fn winner(policies: &[(&str, usize, usize)]) -> Option<String> {
    let (mut vmi, mut ns) = (BTreeMap::new(), BTreeMap::new());
    let policies: Vec<MigrationPolicy> = policies
        .iter()
        .map(|(name, v, n)| policy_with_labels(name, *v, *n, &mut vmi, &mut ns))
        .collect();
    select(&policies, Some(&vmi), &ns).and_then(|p| p.metadata.name.clone())
}

#[test]
fn upstreams_precedence_table() {
    assert_eq!(winner(&[("one", 1, 4)]).as_deref(), Some("one"), "the only policy");
    assert_eq!(
        winner(&[("one", 1, 4), ("two", 4, 2)]).as_deref(),
        Some("two"),
        "the most matched labels"
    );
    assert_eq!(
        winner(&[("aa", 2, 2), ("zz", 2, 2)]).as_deref(),
        Some("aa"),
        "the smallest name"
    );
    assert_eq!(
        winner(&[("zz", 2, 2), ("aa", 2, 2)]).as_deref(),
        Some("aa"),
        "whatever the order"
    );
    assert_eq!(winner(&[]), None, "no policy");
    for n in 1..=5 {
        assert_eq!(
            winner(&[("namespace", 0, n), ("vmi", n, 0)]).as_deref(),
            Some("vmi"),
            "VMI labels win over as many namespace labels"
        );
        assert_eq!(winner(&[("vmi", n, 0), ("namespace", 0, n)]).as_deref(), Some("vmi"));
    }
}

#[test]
fn one_label_that_does_not_match_rules_the_policy_out() {
    let (mut vmi, mut ns) = (BTreeMap::new(), BTreeMap::new());
    let mut p = policy_with_labels("p", 4, 3, &mut vmi, &mut ns);
    let selector = p
        .spec
        .selectors
        .virtual_machine_instance_selector
        .as_mut()
        .expect("selector");
    if let Some(value) = selector.values_mut().next() {
        *value = "XYZ".to_owned();
    }
    assert!(select(&[p.clone()], Some(&vmi), &ns).is_none());
    let mut q = policy_with_labels("q", 1, 2, &mut vmi, &mut ns);
    ns.insert("q-ns-0".to_owned(), "other".to_owned());
    assert!(select(&[q.clone()], Some(&vmi), &ns).is_none(), "a namespace label too");
    q.spec.selectors.namespace_selector = None;
    assert_eq!(
        select(&[p, q], Some(&vmi), &ns)
            .and_then(|p| p.metadata.name.clone())
            .as_deref(),
        Some("q")
    );
}

#[test]
fn empty_selectors_match_everything_with_no_label_counted() {
    let empty = policy("empty", &[], &[]);
    let one = policy("one", &[("app", "db")], &[]);
    let vmi = labels(&[("app", "db")]);
    let none = BTreeMap::new();
    assert_eq!(
        select(std::slice::from_ref(&empty), Some(&vmi), &none)
            .and_then(|p| p.metadata.name.clone())
            .as_deref(),
        Some("empty")
    );
    assert_eq!(
        select(&[empty.clone(), one], Some(&vmi), &none)
            .and_then(|p| p.metadata.name.clone())
            .as_deref(),
        Some("one"),
        "a matched label beats none"
    );
    let namespaced = policy("namespaced", &[], &[("team", "a")]);
    assert!(
        select(&[namespaced], Some(&vmi), &none).is_none(),
        "a namespace without the label"
    );
}

#[test]
fn a_vmi_without_labels_is_matched_by_every_policy() {
    // Upstream's quirk: neither selector is looked at when the VMI has no labels, so every policy
    // matches with nothing counted and the smallest name wins.
    let policies = [
        policy("b", &[("app", "db")], &[]),
        policy("a", &[("x", "y")], &[("team", "z")]),
    ];
    let none = BTreeMap::new();
    assert_eq!(
        select(&policies, None, &none)
            .and_then(|p| p.metadata.name.clone())
            .as_deref(),
        Some("a")
    );
    assert!(
        select(&policies, Some(&none), &none).is_none(),
        "empty labels are labels"
    );
}

#[test]
fn a_policy_overrides_what_it_sets_and_nothing_else() {
    let cluster = MigrationSettings::default();
    let mut spec = policy("p", &[], &[]).spec;
    assert_eq!(cluster.with_policy("p", &spec), cluster, "nothing set changes nothing");
    spec.allow_auto_converge = Some(true);
    spec.bandwidth_per_migration = Some(Quantity("25Mi".to_owned()));
    spec.completion_timeout_per_gib = Some(33425);
    spec.max_downtime_ms = Some(120);
    let settings = cluster.with_policy("p", &spec);
    assert!(settings.allow_auto_converge);
    assert_eq!(settings.bandwidth_mib_per_second, 25);
    assert_eq!(settings.completion_timeout_per_gib, 33425);
    assert_eq!(settings.max_downtime_ms, Some(120));
    assert_eq!(
        settings.progress_timeout, cluster.progress_timeout,
        "not a policy's field"
    );
    assert!(settings.unsupported.is_empty());
    spec.allow_auto_converge = Some(false);
    let converging = MigrationSettings {
        allow_auto_converge: true,
        ..MigrationSettings::default()
    };
    assert!(
        !converging.with_policy("p", &spec).allow_auto_converge,
        "false overrides too"
    );
}

#[test]
fn post_copy_without_disruption_said_sets_both() {
    let cluster = MigrationSettings::default();
    let mut spec = policy("p", &[], &[]).spec;
    spec.allow_post_copy = Some(true);
    let settings = cluster.with_policy("p", &spec);
    assert!(settings.allow_post_copy && settings.allow_workload_disruption && settings.post_copy());
    let allowing = cluster.with_policy(
        "p",
        &MigrationPolicySpec {
            allow_post_copy: Some(true),
            allow_workload_disruption: Some(true),
            ..MigrationPolicySpec::default()
        },
    );
    spec.allow_post_copy = Some(false);
    let denied = allowing.with_policy("p", &spec);
    assert!(
        !denied.allow_post_copy && !denied.allow_workload_disruption,
        "false sets both too"
    );
    spec.allow_post_copy = Some(true);
    spec.allow_workload_disruption = Some(false);
    let said = cluster.with_policy("p", &spec);
    assert!(said.allow_post_copy && !said.allow_workload_disruption && !said.post_copy());
}

#[test]
fn what_kubevirt_rs_cannot_do_is_named() {
    let mut spec = policy("slow", &[], &[]).spec;
    spec.allow_workload_disruption = Some(true);
    spec.experimental = Some(crate::v1::ExperimentalMigrationOptions::default());
    spec.bandwidth_per_migration = Some(Quantity("fast".to_owned()));
    assert_eq!(
        MigrationSettings::default().with_policy("slow", &spec).unsupported,
        [
            "MigrationPolicy slow: spec.bandwidthPerMigration is not a quantity",
            "MigrationPolicy slow: spec.experimental",
            "MigrationPolicy slow: spec.allowWorkloadDisruption without allowPostCopy (the guest paused until the migration ends)"
        ]
    );
}

#[test]
fn the_webhook_refuses_negative_values() {
    let mut spec = policy("p", &[], &[]).spec;
    assert!(validate(&spec).is_empty());
    spec.completion_timeout_per_gib = Some(0);
    spec.bandwidth_per_migration = Some(Quantity("0".to_owned()));
    assert!(validate(&spec).is_empty(), "zero is allowed");
    spec.completion_timeout_per_gib = Some(-1);
    spec.bandwidth_per_migration = Some(Quantity("-1Mi".to_owned()));
    let causes: Vec<(String, String)> = validate(&spec).into_iter().map(|c| (c.field, c.message)).collect();
    assert_eq!(
        causes,
        [
            (
                "spec.completionTimeoutPerGiB".to_owned(),
                "must not be negative".to_owned()
            ),
            (
                "spec.bandwidthPerMigration".to_owned(),
                "must not be negative".to_owned()
            )
        ]
    );
    let paused = MigrationPolicySpec {
        allow_workload_disruption: Some(true),
        allow_post_copy: Some(false),
        experimental: Some(crate::v1::ExperimentalMigrationOptions::default()),
        ..MigrationPolicySpec::default()
    };
    let fields: Vec<String> = validate(&paused).into_iter().map(|c| c.field).collect();
    assert_eq!(fields, ["spec.experimental", "spec.allowWorkloadDisruption"]);
    let post_copy = MigrationPolicySpec {
        allow_workload_disruption: Some(true),
        allow_post_copy: Some(true),
        max_downtime_ms: Some(300),
        ..MigrationPolicySpec::default()
    };
    assert!(
        validate(&post_copy).is_empty(),
        "disruption by post-copy, a maximum downtime"
    );
    let cluster_decides = MigrationPolicySpec {
        allow_workload_disruption: Some(true),
        ..MigrationPolicySpec::default()
    };
    assert!(validate(&cluster_decides).is_empty(), "post-copy as the cluster says");
}
