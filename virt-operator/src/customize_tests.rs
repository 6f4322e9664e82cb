use std::collections::BTreeMap;

use kubevirt_api::v1::{CustomizeComponents, CustomizeComponentsPatch, Flags};
use operator_kit::objects::Desired;

use super::{CUSTOMIZER_ANNOTATION, CustomizeError, apply, flag_args, identifier, matches, patches};

fn patch(name: &str, kind: &str, patch_type: &str, patch: &str) -> CustomizeComponentsPatch {
    CustomizeComponentsPatch {
        resource_name: name.to_owned(),
        resource_type: kind.to_owned(),
        patch: patch.to_owned(),
        patch_type: patch_type.to_owned(),
    }
}

fn controller() -> Desired {
    let deployment: k8s_openapi::api::apps::v1::Deployment = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "virt-controller", "namespace": "kubevirt", "labels": {"kubevirt.io": "virt-controller"}},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"kubevirt.io": "virt-controller"}},
            "template": {
                "metadata": {"labels": {"kubevirt.io": "virt-controller"}},
                "spec": {"containers": [
                    {"name": "virt-controller", "image": "c", "command": ["virt-controller"], "args": ["--port", "8443"]}
                ]}
            }
        }
    }))
    .expect("a Deployment");
    Desired::from_typed(&deployment).expect("desired")
}

fn applied(patches_in_order: &[CustomizeComponentsPatch]) -> Result<serde_json::Value, CustomizeError> {
    let mut desired = controller();
    apply(&mut desired, patches_in_order, "id")?;
    Ok(serde_json::to_value(&desired.object).expect("json"))
}

#[test]
fn flags_render_as_upstream_renders_them() {
    let flags: BTreeMap<String, String> = [
        ("flag-one", "1"),
        ("flag", "3"),
        ("bool-flag", ""),
        ("bool-flag-true", "True"),
        ("bool-flag-false", "false"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    assert_eq!(
        flag_args(&flags),
        [
            "--bool-flag",
            "--bool-flag-false=false",
            "--bool-flag-true=true",
            "--flag",
            "3",
            "--flag-one",
            "1"
        ]
    );
    assert_eq!(
        flag_args(&[("V".to_owned(), "Four".to_owned())].into()),
        ["--v", "four"],
        "names and values lowercased"
    );
}

#[test]
fn selectors_match_a_star_or_the_value_ignoring_case() {
    for (selector, value, expected) in [
        ("*", "Deployment", true),
        ("deployment", "Deployment", true),
        ("Deployment", "Deployment", true),
        ("Service", "Deployment", false),
        ("virt-*", "virt-api", false),
    ] {
        assert_eq!(matches(selector, value), expected, "{selector} {value}");
    }
}

#[test]
fn user_patches_go_shortest_first_then_the_flags_in_component_order() {
    let customize = CustomizeComponents {
        patches: vec![
            patch("a", "Deployment", "merge", "{\"long\":\"patch\"}"),
            patch("b", "Deployment", "merge", "{\"x\":1}"),
            patch("c", "Deployment", "merge", "{\"y\":1}"),
        ],
        flags: Some(Flags {
            handler: Some([("v".to_owned(), "4".to_owned())].into()),
            api: Some([("v".to_owned(), "3".to_owned())].into()),
            controller: Some(BTreeMap::new()),
        }),
    };
    let order: Vec<(String, String)> = patches(&customize)
        .into_iter()
        .map(|p| (p.resource_name, p.resource_type))
        .collect();
    let expected = [
        ("b", "Deployment"),
        ("c", "Deployment"),
        ("a", "Deployment"),
        ("virt-api", "Deployment"),
        ("virt-handler", "DaemonSet"),
    ];
    assert_eq!(
        order,
        expected.map(|(n, k)| (n.to_owned(), k.to_owned())),
        "an empty flags map adds no patch"
    );
}

#[test]
fn the_identifier_ignores_the_patches_order_and_follows_the_flags() {
    let one = patch("*", "Deployment", "merge", "{\"a\":1}");
    let two = patch("virt-api", "Deployment", "json", "[]");
    let with = |patches: Vec<CustomizeComponentsPatch>, v: &str| CustomizeComponents {
        patches,
        flags: Some(Flags {
            api: Some([("v".to_owned(), v.to_owned())].into()),
            ..Flags::default()
        }),
    };
    assert_eq!(
        identifier(Some(&with(vec![one.clone(), two.clone()], "4"))),
        identifier(Some(&with(vec![two.clone(), one.clone()], "4")))
    );
    assert_ne!(
        identifier(Some(&with(vec![one.clone()], "4"))),
        identifier(Some(&with(vec![one], "1")))
    );
    assert_eq!(identifier(None), identifier(Some(&CustomizeComponents::default())));
}

#[test]
fn each_patch_type_applies_to_the_objects_it_picks() {
    let customize = CustomizeComponents {
        patches: vec![
            patch(
                "virt-controller",
                "Deployment",
                "strategic",
                r#"{"spec":{"template":{"metadata":{"annotations":{"e2e":"yes"}}}}}"#,
            ),
            patch(
                "*",
                "deployment",
                "merge",
                r#"{"metadata":{"labels":{"merged":"true"}}}"#,
            ),
            patch(
                "VIRT-CONTROLLER",
                "Deployment",
                "json",
                r#"[{"op":"replace","path":"/spec/replicas","value":4}]"#,
            ),
            patch(
                "virt-api",
                "Deployment",
                "merge",
                r#"{"metadata":{"labels":{"api":"only"}}}"#,
            ),
            patch(
                "virt-controller",
                "Service",
                "merge",
                r#"{"metadata":{"labels":{"svc":"only"}}}"#,
            ),
        ],
        flags: Some(Flags {
            controller: Some([("v".to_owned(), "4".to_owned())].into()),
            ..Flags::default()
        }),
    };
    let object = applied(&patches(&customize)).expect("applies");
    assert_eq!(object["spec"]["template"]["metadata"]["annotations"]["e2e"], "yes");
    assert_eq!(object["metadata"]["labels"]["merged"], "true");
    assert_eq!(object["spec"]["replicas"], 4);
    assert!(
        object["metadata"]["labels"].get("api").is_none(),
        "another Deployment's patch"
    );
    assert!(object["metadata"]["labels"].get("svc").is_none(), "a Service's patch");
    let container = &object["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["command"], serde_json::json!(["virt-controller", "--v", "4"]));
    assert_eq!(
        container["args"],
        serde_json::json!(["--port", "8443"]),
        "the args stay"
    );
    assert_eq!(object["metadata"]["annotations"][CUSTOMIZER_ANNOTATION], "id");
}

#[test]
fn a_patch_that_does_not_apply_is_an_error_that_names_it() {
    let cases = [
        (patch("*", "*", "merge", "{not json"), "is not valid"),
        (patch("*", "*", "json", r#"{"op":"add"}"#), "is not valid"),
        (
            patch("*", "*", "json", r#"[{"op":"remove","path":"/spec/nothing"}]"#),
            "does not apply to Deployment virt-controller",
        ),
        (
            patch("*", "*", "strategic", r#"{"spec":{"$retainKeys":[]}}"#),
            "does not apply to Deployment virt-controller",
        ),
        (patch("*", "*", "yaml", "{}"), "PatchType is not supported"),
        (
            patch("*", "*", "merge", r#"{"metadata":{"name":"renamed"}}"#),
            "may not change the apiVersion, kind, name or namespace",
        ),
        (
            patch("*", "*", "merge", r#"{"metadata":"not an object"}"#),
            "does not apply to Deployment virt-controller",
        ),
    ];
    for (patch, message) in cases {
        let error = applied(std::slice::from_ref(&patch)).expect_err(&patch.patch);
        assert!(error.to_string().contains(message), "{patch:?}: {error}");
        assert!(
            error.to_string().starts_with("spec.customizeComponents.patches"),
            "{error}"
        );
    }
}

#[test]
fn objects_of_other_kinds_are_left_alone() {
    let mut crd = Desired::from_typed(&k8s_openapi::api::core::v1::ConfigMap {
        metadata: kube::api::ObjectMeta {
            name: Some("other".to_owned()),
            ..Default::default()
        },
        ..Default::default()
    })
    .expect("desired");
    let before = crd.clone();
    apply(&mut crd, &[patch("*", "*", "merge", r#"{"data":{"a":"b"}}"#)], "id").expect("nothing to do");
    assert_eq!(crd, before);
}
