//! API requests per VMI start, from the real API server's audit log: every request a kubevirt-rs
//! component made about the default namespace's VMIs, pods and events while one VMI started.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::SystemTime;

use anyhow::Context;
use serde_json::Value;

/// Requests by (component, verb).
pub type Counts = BTreeMap<(String, String), usize>;

/// The component of a service account user, or `None` for anyone else.
fn component(user: &str) -> Option<&'static str> {
    match user.strip_prefix("system:serviceaccount:kubevirt:")? {
        "kubevirt-apiserver" => Some("virt-api"),
        "kubevirt-controller" => Some("virt-controller"),
        "kubevirt-handler" => Some("virt-handler"),
        _ => None,
    }
}

fn stage_time(event: &Value) -> Option<SystemTime> {
    let text = event["stageTimestamp"].as_str()?;
    let at: k8s_openapi::jiff::Timestamp = text.parse().ok()?;
    let nanos = u64::try_from(at.as_nanosecond()).ok()?;
    Some(SystemTime::UNIX_EPOCH + std::time::Duration::from_nanos(nanos))
}

/// The requests in `log` completed within `[from, to]` by kubevirt-rs components about the
/// default namespace's VMIs, pods and events (watches excluded: they outlive a start).
pub fn count(log: &Path, from: SystemTime, to: SystemTime) -> anyhow::Result<Counts> {
    let text = std::fs::read_to_string(log).with_context(|| format!("read {}", log.display()))?;
    let mut counts = Counts::new();
    for event in text.lines().filter_map(|l| serde_json::from_str::<Value>(l).ok()) {
        let Some(component) = event["user"]["username"].as_str().and_then(component) else {
            continue;
        };
        let verb = event["verb"].as_str().unwrap_or_default();
        let resource = event["objectRef"]["resource"].as_str().unwrap_or_default();
        let in_scope = event["objectRef"]["namespace"] == "default"
            && matches!(resource, "virtualmachineinstances" | "pods" | "events")
            && verb != "watch";
        let in_window = stage_time(&event).is_some_and(|t| t >= from && t <= to);
        if in_scope && in_window {
            let subresource = event["objectRef"]["subresource"]
                .as_str()
                .map(|s| format!("/{s}"))
                .unwrap_or_default();
            *counts
                .entry((component.to_owned(), format!("{verb} {resource}{subresource}")))
                .or_default() += 1;
        }
    }
    Ok(counts)
}
