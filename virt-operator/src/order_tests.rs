use k8s_openapi::api::apps::v1::{DaemonSetStatus, DeploymentSpec, DeploymentStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use pretty_assertions::assert_eq;

use super::*;

#[test]
fn the_path_is_an_update_only_from_another_observed_install() {
    assert_eq!(Path::between(None, "b"), Path::Install);
    assert_eq!(Path::between(Some(""), "b"), Path::Install);
    assert_eq!(Path::between(Some("b"), "b"), Path::Install);
    assert_eq!(Path::between(Some("a"), "b"), Path::Update);
}

/// Every combination of the three components' standings, on both paths: the components let
/// through are the path's order up to the first one not at target and ready, that one included.
#[test]
fn allowed_components_follow_the_order_for_every_standing() {
    let standings = [
        Standing {
            at_target: false,
            ready: false,
        },
        Standing {
            at_target: false,
            ready: true,
        },
        Standing {
            at_target: true,
            ready: false,
        },
        Standing {
            at_target: true,
            ready: true,
        },
    ];
    for path in [Path::Install, Path::Update] {
        for api in standings {
            for controller in standings {
                for handler in standings {
                    let of = |c: Component| match c {
                        Component::Api => api,
                        Component::Controller => controller,
                        Component::Handler => handler,
                    };
                    let order = path.order();
                    let done = |c: Component| of(c).at_target && of(c).ready;
                    let expected: Vec<Component> = if !done(order[0]) {
                        vec![order[0]]
                    } else if !done(order[1]) {
                        vec![order[0], order[1]]
                    } else {
                        order.to_vec()
                    };
                    assert_eq!(
                        allowed(path, of),
                        expected,
                        "{path:?} {api:?} {controller:?} {handler:?}"
                    );
                }
            }
        }
    }
}

#[test]
fn install_goes_api_first_and_update_handler_first() {
    let nothing = |_| Standing::default();
    assert_eq!(allowed(Path::Install, nothing), [Component::Api]);
    assert_eq!(allowed(Path::Update, nothing), [Component::Handler]);
    assert_eq!(
        Path::Update.order(),
        [Component::Handler, Component::Controller, Component::Api]
    );
}

fn annotated(id: &str, generation: i64) -> ObjectMeta {
    ObjectMeta {
        generation: Some(generation),
        annotations: Some([(IDENTIFIER_ANNOTATION.to_owned(), id.to_owned())].into()),
        ..ObjectMeta::default()
    }
}

fn deployment(id: &str, replicas: i32, updated: i32, ready: i32, total: i32) -> Live {
    Live::Deployment(Box::new(Deployment {
        metadata: annotated(id, 2),
        spec: Some(DeploymentSpec {
            replicas: Some(replicas),
            ..DeploymentSpec::default()
        }),
        status: Some(DeploymentStatus {
            observed_generation: Some(2),
            replicas: Some(total),
            updated_replicas: Some(updated),
            ready_replicas: Some(ready),
            available_replicas: Some(ready),
            ..DeploymentStatus::default()
        }),
    }))
}

#[test]
fn standing_reads_the_install_identity_and_the_rollout() {
    assert_eq!(standing(Component::Api, None, "id"), Standing::default());
    let serving = deployment("id", 2, 2, 2, 2);
    assert_eq!(
        standing(Component::Api, Some(&serving), "id"),
        Standing {
            at_target: true,
            ready: true
        }
    );
    assert!(!standing(Component::Api, Some(&serving), "other").at_target);
    // Only the leader is Ready: enough for virt-controller, not for virt-api.
    let one_leader = deployment("id", 2, 2, 1, 2);
    assert!(standing(Component::Controller, Some(&one_leader), "id").ready);
    assert!(!standing(Component::Api, Some(&one_leader), "id").ready);
    // An old replica left: not rolled out.
    let rolling = deployment("id", 2, 2, 1, 3);
    assert!(!standing(Component::Controller, Some(&rolling), "id").ready);
    let handler = Live::DaemonSet(Box::new(DaemonSet {
        metadata: annotated("id", 1),
        spec: None,
        status: Some(DaemonSetStatus {
            observed_generation: Some(1),
            desired_number_scheduled: 2,
            updated_number_scheduled: Some(2),
            number_ready: 2,
            ..DaemonSetStatus::default()
        }),
    }));
    assert_eq!(
        standing(Component::Handler, Some(&handler), "id"),
        Standing {
            at_target: true,
            ready: true
        }
    );
}
