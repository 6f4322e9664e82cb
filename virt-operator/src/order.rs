//! Which components a pass may change, in upstream's order. A fresh install (or a return to the
//! install already observed) goes virt-api, virt-controller, virt-handler; an update of a deployed
//! install goes virt-handler, virt-controller, virt-api, so that the node agents understand the
//! new controllers before they act and the API changes last. Each component is let through once
//! the ones before it run the target install and are ready; the components it lets through are
//! applied on every pass, so a manual edit of one is put back.

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use operator_kit::rollout::{daemon_set_ready, deployment_ready};

use crate::render::{Component, IDENTIFIER_ANNOTATION};

/// Install or update.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Path {
    /// Nothing deployed yet, or the deployed install is the target.
    Install,
    /// A deployed install is being replaced by another.
    Update,
}

impl Path {
    /// The path from the install observed as deployed (`observed`, upstream's
    /// `observedDeploymentID`) to the `target` one.
    #[must_use]
    pub fn between(observed: Option<&str>, target: &str) -> Self {
        match observed {
            Some(observed) if !observed.is_empty() && observed != target => Self::Update,
            _ => Self::Install,
        }
    }

    /// The components in the order this path rolls them.
    #[must_use]
    pub const fn order(self) -> [Component; 3] {
        match self {
            Self::Install => [Component::Api, Component::Controller, Component::Handler],
            Self::Update => [Component::Handler, Component::Controller, Component::Api],
        }
    }
}

/// How a component's workload stands.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Standing {
    /// It was last applied for the target install.
    pub at_target: bool,
    /// It has rolled out and serves.
    pub ready: bool,
}

/// The components a pass applies, in order: each one until the first that does not yet run the
/// target install or is not ready, that one included.
#[must_use]
pub fn allowed(path: Path, standing: impl Fn(Component) -> Standing) -> Vec<Component> {
    let mut allowed = Vec::new();
    for component in path.order() {
        allowed.push(component);
        let now = standing(component);
        if !(now.at_target && now.ready) {
            break;
        }
    }
    allowed
}

/// A live workload, as read back.
#[derive(Clone, Debug, PartialEq)]
pub enum Live {
    /// A Deployment (virt-api, virt-controller).
    Deployment(Box<Deployment>),
    /// A DaemonSet (virt-handler).
    DaemonSet(Box<DaemonSet>),
}

/// How a live workload stands against the target install `deployment_id`. virt-controller counts
/// as ready with one Ready replica once every replica runs its latest spec: only its leader is
/// Ready (its readiness is `/leader`, as upstream's).
#[must_use]
pub fn standing(component: Component, live: Option<&Live>, deployment_id: &str) -> Standing {
    let Some(live) = live else {
        return Standing::default();
    };
    let annotations = match live {
        Live::Deployment(d) => d.metadata.annotations.as_ref(),
        Live::DaemonSet(d) => d.metadata.annotations.as_ref(),
    };
    let at_target = annotations
        .and_then(|a| a.get(IDENTIFIER_ANNOTATION))
        .is_some_and(|id| id == deployment_id);
    let ready = match (component, live) {
        (Component::Controller, Live::Deployment(d)) => leader_rolled_out(d),
        (_, Live::Deployment(d)) => deployment_ready(d),
        (_, Live::DaemonSet(d)) => daemon_set_ready(d),
    };
    Standing { at_target, ready }
}

/// Every replica runs the latest spec, none of an older one is left, and one is Ready.
fn leader_rolled_out(deployment: &Deployment) -> bool {
    let generation = deployment.metadata.generation.unwrap_or(0);
    let wanted = deployment.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
    deployment.status.as_ref().is_some_and(|s| {
        let updated = s.updated_replicas.unwrap_or(0);
        s.observed_generation.unwrap_or(0) >= generation
            && updated >= wanted
            && s.replicas.unwrap_or(0) <= updated
            && s.ready_replicas.unwrap_or(0) >= 1
    })
}

#[cfg(test)]
#[path = "order_tests.rs"]
mod tests;
