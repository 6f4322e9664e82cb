//! Affinity and topology spread constraints, checked as upstream checks them: with Kubernetes' own
//! rules, each finding a cause whose message is Kubernetes' field error (`<path>: <kind>: <detail>`)
//! and whose path starts at `spec` without `affinity` (upstream's quirk, kept).

use k8s_openapi::api::core::v1::{
    Affinity, NodeSelectorRequirement, NodeSelectorTerm, PodAffinityTerm, TopologySpreadConstraint,
    WeightedPodAffinityTerm,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use super::{Cause, CauseType, cause};
use crate::v1::VirtualMachineInstanceSpec;

const QUALIFIED_NAME_MESSAGE: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
const SUBDOMAIN_MESSAGE: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const IN_NOT_IN_VALUES: &str = "must be specified when `operator` is 'In' or 'NotIn'";
const EXISTS_VALUES: &str = "may not be specified when `operator` is 'Exists' or 'DoesNotExist'";

/// Findings as Kubernetes words them.
struct Errors(Vec<Cause>);

impl Errors {
    fn required(&mut self, field: &str, detail: &str) {
        self.0.push(cause(
            CauseType::Required,
            field.to_owned(),
            format!("{field}: Required value: {detail}"),
        ));
    }

    fn forbidden(&mut self, field: &str, detail: &str) {
        self.0.push(cause(
            CauseType::Forbidden,
            field.to_owned(),
            format!("{field}: Forbidden: {detail}"),
        ));
    }

    fn invalid(&mut self, field: &str, value: &str, detail: &str) {
        self.0.push(cause(
            CauseType::Invalid,
            field.to_owned(),
            format!("{field}: Invalid value: {value}: {detail}"),
        ));
    }
}

fn quoted(value: &str) -> String {
    format!("{value:?}")
}

fn is_qualified_name_part(name: &str) -> bool {
    let bytes = name.as_bytes();
    let alnum = |b: &u8| b.is_ascii_alphanumeric();
    match (bytes.first(), bytes.last()) {
        (Some(first), Some(last)) => {
            alnum(first) && alnum(last) && bytes.iter().all(|b| alnum(b) || matches!(b, b'-' | b'_' | b'.'))
        }
        _ => false,
    }
}

fn is_dns1123_subdomain(value: &str) -> bool {
    !value.is_empty()
        && value.len() <= 253
        && value.split('.').all(|label| {
            let bytes = label.as_bytes();
            let ok = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
            matches!((bytes.first(), bytes.last()), (Some(f), Some(l)) if ok(f) && ok(l))
                && bytes.iter().all(|b| ok(b) || *b == b'-')
        })
}

/// Kubernetes' `IsQualifiedName` messages for `value`.
fn qualified_name_errors(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    let parts: Vec<&str> = value.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errors.push("prefix part must be non-empty".to_owned());
            } else if !is_dns1123_subdomain(prefix) {
                errors.push(format!("prefix part {SUBDOMAIN_MESSAGE}"));
            }
            name
        }
        _ => {
            return vec![
                "a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')".to_owned(),
            ];
        }
    };
    if name.is_empty() {
        errors.push("name part must be non-empty".to_owned());
    } else if name.len() > 63 {
        errors.push("name part must be no more than 63 characters".to_owned());
    }
    if !is_qualified_name_part(name) {
        errors.push(format!("name part {QUALIFIED_NAME_MESSAGE}"));
    }
    errors
}

fn check_label_selector(selector: Option<&LabelSelector>, at: &str, errors: &mut Errors) {
    let Some(selector) = selector else { return };
    for (i, expression) in selector.match_expressions.iter().flatten().enumerate() {
        let here = format!("{at}.matchExpressions[{i}]");
        let values = expression.values.as_deref().unwrap_or_default();
        match expression.operator.as_str() {
            "In" | "NotIn" if values.is_empty() => errors.required(&format!("{here}.values"), IN_NOT_IN_VALUES),
            "Exists" | "DoesNotExist" if !values.is_empty() => {
                errors.forbidden(&format!("{here}.values"), EXISTS_VALUES);
            }
            "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
            other => errors.invalid(
                &format!("{here}.operator"),
                &quoted(other),
                "not a valid selector operator",
            ),
        }
        for message in qualified_name_errors(&expression.key) {
            errors.invalid(&format!("{here}.key"), &quoted(&expression.key), &message);
        }
    }
}

fn check_pod_affinity_term(term: &PodAffinityTerm, at: &str, errors: &mut Errors) {
    check_label_selector(term.label_selector.as_ref(), &format!("{at}.labelSelector"), errors);
    let key_field = format!("{at}.topologyKey");
    if term.topology_key.is_empty() {
        errors.required(&key_field, "can not be empty");
    }
    for message in qualified_name_errors(&term.topology_key) {
        errors.invalid(&key_field, &quoted(&term.topology_key), &message);
    }
}

fn check_weighted(terms: &[WeightedPodAffinityTerm], at: &str, errors: &mut Errors) {
    for (i, term) in terms.iter().enumerate() {
        let here = format!("{at}[{i}]");
        if !(1..=100).contains(&term.weight) {
            errors.invalid(
                &format!("{here}.weight"),
                &term.weight.to_string(),
                "must be in the range 1-100",
            );
        }
        check_pod_affinity_term(&term.pod_affinity_term, &format!("{here}.podAffinityTerm"), errors);
    }
}

fn check_node_requirement(requirement: &NodeSelectorRequirement, at: &str, is_field: bool, errors: &mut Errors) {
    let values = requirement.values.as_deref().unwrap_or_default();
    match requirement.operator.as_str() {
        "In" | "NotIn" if values.is_empty() => {
            errors.required(
                &format!("{at}.values"),
                "must be specified when `operator` is 'In' or 'NotIn'",
            );
        }
        "Exists" | "DoesNotExist" if !values.is_empty() => {
            errors.forbidden(
                &format!("{at}.values"),
                "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
            );
        }
        "Gt" | "Lt" if values.len() != 1 => {
            errors.required(
                &format!("{at}.values"),
                "must be specified single value when `operator` is 'Lt' or 'Gt'",
            );
        }
        "In" | "NotIn" | "Exists" | "DoesNotExist" | "Gt" | "Lt" => {}
        other => errors.invalid(
            &format!("{at}.operator"),
            &quoted(other),
            "not a valid selector operator",
        ),
    }
    if is_field {
        if requirement.key != "metadata.name" {
            errors.invalid(
                &format!("{at}.key"),
                &quoted(&requirement.key),
                "not a valid field selector key",
            );
        }
        for (i, value) in values.iter().enumerate() {
            if !is_dns1123_subdomain(value) {
                errors.invalid(&format!("{at}.values[{i}]"), &quoted(value), SUBDOMAIN_MESSAGE);
            }
        }
    } else {
        for message in qualified_name_errors(&requirement.key) {
            errors.invalid(&format!("{at}.key"), &quoted(&requirement.key), &message);
        }
    }
}

fn check_node_selector_term(term: &NodeSelectorTerm, at: &str, errors: &mut Errors) {
    for (i, requirement) in term.match_expressions.iter().flatten().enumerate() {
        check_node_requirement(requirement, &format!("{at}.matchExpressions[{i}]"), false, errors);
    }
    for (i, requirement) in term.match_fields.iter().flatten().enumerate() {
        check_node_requirement(requirement, &format!("{at}.matchFields[{i}]"), true, errors);
    }
}

fn check_affinity(affinity: &Affinity, errors: &mut Errors) {
    if let Some(node) = &affinity.node_affinity {
        let at = "spec.nodeAffinity";
        if let Some(required) = &node.required_during_scheduling_ignored_during_execution {
            let here = format!("{at}.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms");
            if required.node_selector_terms.is_empty() {
                errors.required(&here, "must have at least one node selector term");
            }
            for (i, term) in required.node_selector_terms.iter().enumerate() {
                check_node_selector_term(term, &format!("{here}[{i}]"), errors);
            }
        }
        for (i, term) in node
            .preferred_during_scheduling_ignored_during_execution
            .iter()
            .flatten()
            .enumerate()
        {
            let here = format!("{at}.preferredDuringSchedulingIgnoredDuringExecution[{i}]");
            if !(1..=100).contains(&term.weight) {
                errors.invalid(
                    &format!("{here}.weight"),
                    &term.weight.to_string(),
                    "must be in the range 1-100",
                );
            }
            check_node_selector_term(&term.preference, &format!("{here}.preference"), errors);
        }
    }
    for (at, required, preferred) in [
        (
            "spec.podAffinity",
            affinity
                .pod_affinity
                .as_ref()
                .and_then(|a| a.required_during_scheduling_ignored_during_execution.as_ref()),
            affinity
                .pod_affinity
                .as_ref()
                .and_then(|a| a.preferred_during_scheduling_ignored_during_execution.as_ref()),
        ),
        (
            "spec.podAntiAffinity",
            affinity
                .pod_anti_affinity
                .as_ref()
                .and_then(|a| a.required_during_scheduling_ignored_during_execution.as_ref()),
            affinity
                .pod_anti_affinity
                .as_ref()
                .and_then(|a| a.preferred_during_scheduling_ignored_during_execution.as_ref()),
        ),
    ] {
        for (i, term) in required.into_iter().flatten().enumerate() {
            check_pod_affinity_term(
                term,
                &format!("{at}.requiredDuringSchedulingIgnoredDuringExecution[{i}]"),
                errors,
            );
        }
        check_weighted(
            preferred.map(Vec::as_slice).unwrap_or_default(),
            &format!("{at}.preferredDuringSchedulingIgnoredDuringExecution"),
            errors,
        );
    }
}

fn check_topology_spread(constraints: &[TopologySpreadConstraint], errors: &mut Errors) {
    for (i, constraint) in constraints.iter().enumerate() {
        let here = format!("spec.topologySpreadConstraints[{i}]");
        if constraint.max_skew <= 0 {
            errors.invalid(
                &format!("{here}.maxSkew"),
                &constraint.max_skew.to_string(),
                "must be greater than zero",
            );
        }
        let key_field = format!("{here}.topologyKey");
        if constraint.topology_key.is_empty() {
            errors.required(&key_field, "can not be empty");
        } else if let Some(message) = qualified_name_errors(&constraint.topology_key).first() {
            errors.invalid(&key_field, &quoted(&constraint.topology_key), message);
        }
        if !matches!(
            constraint.when_unsatisfiable.as_str(),
            "DoNotSchedule" | "ScheduleAnyway"
        ) {
            errors.0.push(cause(
                CauseType::NotSupported,
                format!("{here}.whenUnsatisfiable"),
                format!(
                    "{here}.whenUnsatisfiable: Unsupported value: {}: supported values: \"DoNotSchedule\", \"ScheduleAnyway\"",
                    quoted(&constraint.when_unsatisfiable)
                ),
            ));
        }
        // Upstream's path for the selector has no index (kept).
        check_label_selector(
            constraint.label_selector.as_ref(),
            "spec.topologySpreadConstraints.labelSelector",
            errors,
        );
    }
}

/// Checks the VMI's affinity and topology spread constraints.
pub(super) fn check_scheduling(spec: &VirtualMachineInstanceSpec, causes: &mut Vec<Cause>) {
    let mut errors = Errors(Vec::new());
    if let Some(affinity) = &spec.affinity {
        check_affinity(affinity, &mut errors);
    }
    check_topology_spread(&spec.topology_spread_constraints, &mut errors);
    causes.extend(errors.0);
}
