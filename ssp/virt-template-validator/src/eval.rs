//! Evaluating a rule set against a VirtualMachine (as JSON), and what the webhook answers:
//! upstream's order (a duplicate name, an unknown type, a missing message, the `valid` guard,
//! the arguments, then every value the path reaches), its texts, and its decision (a rule that
//! errs refuses, even a `justWarning` one; a broken `justWarning` rule alone is only logged).
//! Pure.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::path::Path;
use crate::reference::reference_vm;
use crate::rules::{IntOrPath, Rule, StringOrPath, kind_of};

/// What became of one rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Its `valid` path reaches nothing on the VM: it does not apply.
    Skipped,
    /// It applied: whether every value satisfied it, and the text that says so.
    Applied {
        /// Every value satisfied it.
        satisfied: bool,
        /// Upstream's text of the result.
        text: String,
    },
    /// It could not be applied (upstream's error texts).
    Error(String),
}

/// One rule's report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Report {
    /// The rule's name.
    pub name: String,
    /// Its path, as written (a refusal's field).
    pub field: String,
    /// Its message.
    pub message: String,
    /// It is only a warning.
    pub just_warning: bool,
    /// What became of it.
    pub outcome: Outcome,
}

/// A reason to refuse the VM: the rule's path and `<message>: <text>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cause {
    /// The rule's path, relative to `spec.template` (`.spec.domain.cpu.cores`).
    pub field: String,
    /// `<rule message>: <what went wrong>`.
    pub message: String,
}

/// What the webhook answers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Admitted; the `justWarning` rules it breaks, to be logged.
    Allowed {
        /// Each broken warning rule's cause.
        warnings: Vec<Cause>,
    },
    /// Refused (422 `Invalid`), with every rule that erred or is broken, warnings included.
    Refused(Vec<Cause>),
}

const TYPES: [&str; 4] = ["integer", "string", "enum", "regex"];

/// Evaluates every rule on `vm`, in order.
#[must_use]
pub fn evaluate(rules: &[Rule], vm: &Value) -> Vec<Report> {
    let mut names = BTreeSet::new();
    rules
        .iter()
        .map(|rule| {
            let first = names.insert(rule.name.clone());
            Report {
                name: rule.name.clone(),
                field: rule.path.as_ref().map(|p| p.expr().to_owned()).unwrap_or_default(),
                message: rule.message.clone(),
                just_warning: rule.just_warning,
                outcome: outcome(rule, vm, first),
            }
        })
        .collect()
}

/// The webhook's decision from the reports.
#[must_use]
pub fn decide(reports: &[Report]) -> Decision {
    let cause = |report: &Report, text: &str| Cause {
        field: report.field.clone(),
        message: format!("{}: {text}", report.message),
    };
    let failed = reports.iter().any(|r| match &r.outcome {
        Outcome::Error(_) => true,
        Outcome::Applied { satisfied, .. } => !satisfied && !r.just_warning,
        Outcome::Skipped => false,
    });
    let broken = reports.iter().filter_map(|r| match &r.outcome {
        Outcome::Error(text) | Outcome::Applied { satisfied: false, text } => Some(cause(r, text)),
        _ => None,
    });
    if failed {
        Decision::Refused(broken.collect())
    } else {
        Decision::Allowed {
            warnings: broken.collect(),
        }
    }
}

fn outcome(rule: &Rule, vm: &Value, first_of_its_name: bool) -> Outcome {
    if !first_of_its_name {
        return Outcome::Error("duplicate Rule Name".to_owned());
    }
    if !TYPES.contains(&rule.kind.as_str()) {
        return Outcome::Error("unrecognized Rule type".to_owned());
    }
    if rule.message.is_empty() {
        return Outcome::Error("missing required key".to_owned());
    }
    // Looked up on the VM alone: a rule applies where its guard reaches something.
    if let Some(valid) = &rule.valid
        && valid.lookup(vm).map_or(true, |found| found.is_empty())
    {
        return Outcome::Skipped;
    }
    // Upstream's handler fails on a rule without a path; here it is said.
    let Some(path) = &rule.path else {
        return Outcome::Error("missing required key: path".to_owned());
    };
    match apply(rule, path, vm) {
        Ok((satisfied, text)) => Outcome::Applied { satisfied, text },
        Err(text) => Outcome::Error(text),
    }
}

/// The values `path` reaches: on the VM, else on the reference VM.
fn values<'a>(path: &Path, vm: &'a Value) -> Result<Vec<&'a Value>, String> {
    path.lookup(vm)
        .or_else(|_| path.lookup(reference_vm()))
        .map_err(|_| "invalid JSONPath".to_owned())
}

/// The one value a path argument gives.
fn one<'a>(path: &Path, vm: &'a Value) -> Result<&'a Value, String> {
    let found = values(path, vm)?;
    match found.as_slice() {
        [value] => Ok(*value),
        _ => Err(format!("expected one value, found {}", found.len())),
    }
}

fn bound(bound: Option<&IntOrPath>, vm: &Value) -> Result<Option<i64>, String> {
    match bound {
        None => Ok(None),
        Some(IntOrPath::Int(n)) => Ok(Some(*n)),
        Some(IntOrPath::Path(path)) => as_int(one(path, vm)?).map(Some),
    }
}

/// A value as a whole number: a JSON number (a fraction rounded), or a quantity that is one
/// (`128M`, `2Gi`; not `100m`).
fn as_int(value: &Value) -> Result<i64, String> {
    let mismatch = |kind: &str| format!("mismatching type: {kind}, not int or resource.Quantity");
    match value {
        Value::Number(n) => n
            .as_i64()
            .or_else(|| n.as_u64().and_then(|u| i64::try_from(u).ok()))
            .or_else(|| n.as_f64().map(crate::rules::round_f64))
            .ok_or_else(|| mismatch("number")),
        Value::String(text) if integer_scaled(text) => kubevirt_api::quantity::ParsedQuantity::parse(text)
            .ok()
            .filter(|q| q.floor() == q.ceil())
            .and_then(|q| i64::try_from(q.floor()).ok())
            .ok_or_else(|| mismatch("string")),
        Value::String(_) => Err(mismatch("string")),
        other => Err(mismatch(kind_of(other))),
    }
}

/// Whether a quantity is written as a whole number of its unit, with no fraction and no
/// sub-unit (`128M`, `2Gi`, `1e3`; not `1.5Gi` or `1000m`): the ones Go's `AsInt64` reads.
fn integer_scaled(text: &str) -> bool {
    !text.contains('.') && !text.ends_with(['m', 'u', 'n']) && !text.contains("e-") && !text.contains("E-")
}

/// A value as text: a string as it is, a number or a boolean as JSON writes it.
fn as_string(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

fn shown(bound: Option<i64>) -> String {
    bound.map_or_else(|| "N/A".to_owned(), |b| b.to_string())
}

/// Applies a rule whose type and message are known good: whether every value satisfies it, and
/// the text.
fn apply(rule: &Rule, path: &Path, vm: &Value) -> Result<(bool, String), String> {
    match rule.kind.as_str() {
        "integer" => {
            let (min, max) = (bound(rule.min.as_ref(), vm)?, bound(rule.max.as_ref(), vm)?);
            let found = present(values(path, vm)?)?
                .into_iter()
                .map(as_int)
                .collect::<Result<Vec<_>, _>>()?;
            Ok(integer(&found, min, max))
        }
        "string" => {
            let min = bound(rule.min_length.as_ref(), vm)?;
            let max = bound(rule.max_length.as_ref(), vm)?;
            let found: Vec<String> = present(values(path, vm)?)?.into_iter().map(as_string).collect();
            let interval = format!("[{}, {}]", shown(min), shown(max));
            // Bytes, as upstream counts a string's length.
            let fits = |s: &String| {
                let len = i64::try_from(s.len()).unwrap_or(i64::MAX);
                min.is_none_or(|m| len >= m) && max.is_none_or(|m| len <= m)
            };
            Ok(if found.iter().all(fits) {
                (true, format!("Lengts of all strings are in interval {interval}"))
            } else {
                (false, format!("Lengths of some strings are not in interval {interval}"))
            })
        }
        "enum" => {
            let allowed = rule
                .values
                .iter()
                .flatten()
                .map(|v| match v {
                    StringOrPath::Literal(s) => Ok(s.clone()),
                    StringOrPath::Path(p) => one(p, vm).map(as_string),
                })
                .collect::<Result<Vec<_>, _>>()?;
            let found: Vec<String> = present(values(path, vm)?)?.into_iter().map(as_string).collect();
            let (found_list, allowed_list) = (found.join(", "), allowed.join(", "));
            Ok(if found.iter().all(|f| allowed.contains(f)) {
                (true, format!("All [{found_list}] are in [{allowed_list}]"))
            } else {
                (false, format!("Some of [{found_list}] are not in [{allowed_list}]"))
            })
        }
        _ => {
            let pattern = rule.regex.clone().unwrap_or_default();
            let regex = regex::Regex::new(&pattern).map_err(|e| format!("error parsing regexp: {e}"))?;
            let found: Vec<String> = present(values(path, vm)?)?.into_iter().map(as_string).collect();
            let list = found.join(", ");
            // Unanchored, as Go's MatchString.
            Ok(if found.iter().all(|f| regex.is_match(f)) {
                (true, format!("All [{list}] match {pattern}"))
            } else {
                (false, format!("Some of [{list}] do not match {pattern}"))
            })
        }
    }
}

fn present(found: Vec<&Value>) -> Result<Vec<&Value>, String> {
    if found.is_empty() {
        Err("no values were found".to_owned())
    } else {
        Ok(found)
    }
}

/// An integer rule's result and upstream's text (every value's complaint, each followed by
/// `, ` but the last's, even one that had none).
fn integer(found: &[i64], min: Option<i64>, max: Option<i64>) -> (bool, String) {
    let low = |v: i64| min.is_some_and(|m| v < m);
    let high = |v: i64| max.is_some_and(|m| v > m);
    if found.iter().all(|&v| !low(v) && !high(v)) {
        let list: Vec<String> = found.iter().map(ToString::to_string).collect();
        return (
            true,
            format!(
                "All values [{}] are in interval [{}, {}]",
                list.join(" "),
                shown(min),
                shown(max)
            ),
        );
    }
    let text = found
        .iter()
        .map(|&value| {
            let lower = min
                .filter(|_| low(value))
                .map(|m| format!("value {value} is lower than minimum [{m}]"));
            let higher = max
                .filter(|_| high(value))
                .map(|m| format!("value {value} is higher than maximum [{m}]"));
            lower.into_iter().chain(higher).collect::<String>()
        })
        .collect::<Vec<_>>()
        .join(", ");
    (false, text)
}
