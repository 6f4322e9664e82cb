//! The core/v1 Event every component records about a VMI, as upstream's event recorder writes it.

use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

use crate::v1::VirtualMachineInstance;

/// An event about `vmi` from `component` (on `host`, when it runs per node).
#[must_use]
pub fn vmi_event(
    vmi: &VirtualMachineInstance,
    component: &str,
    host: Option<&str>,
    event_type: &str,
    reason: &str,
    message: &str,
    now: Time,
) -> Event {
    object_event(
        "VirtualMachineInstance",
        &vmi.metadata,
        component,
        host,
        (event_type, reason, message),
        now,
    )
}

/// An event about the `kubevirt.io/v1` object of `kind` with `meta`; `what` is the event's type,
/// reason and message.
#[must_use]
pub fn object_event(
    kind: &str,
    meta: &ObjectMeta,
    component: &str,
    host: Option<&str>,
    what: (&str, &str, &str),
    now: Time,
) -> Event {
    let (event_type, reason, message) = what;
    let namespace = meta.namespace.clone().unwrap_or_else(|| "default".to_owned());
    let name = meta.name.clone().unwrap_or_default();
    Event {
        metadata: ObjectMeta {
            generate_name: Some(format!("{name}.")),
            namespace: Some(namespace.clone()),
            ..ObjectMeta::default()
        },
        involved_object: ObjectReference {
            api_version: Some("kubevirt.io/v1".to_owned()),
            kind: Some(kind.to_owned()),
            name: Some(name),
            namespace: Some(namespace),
            uid: meta.uid.clone(),
            resource_version: meta.resource_version.clone(),
            ..ObjectReference::default()
        },
        type_: Some(event_type.to_owned()),
        reason: Some(reason.to_owned()),
        message: Some(message.to_owned()),
        source: Some(EventSource {
            component: Some(component.to_owned()),
            host: host.map(str::to_owned),
        }),
        reporting_component: Some(component.to_owned()),
        reporting_instance: Some(host.unwrap_or(component).to_owned()),
        first_timestamp: Some(now.clone()),
        last_timestamp: Some(now),
        count: Some(1),
        ..Event::default()
    }
}
