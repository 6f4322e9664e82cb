//! Reading rule sets: an empty text, keys in any case, unknown keys, bounds as numbers or paths,
//! enum values as literals or paths, and what fails the whole set.

use pretty_assertions::assert_eq;

use crate::path::{Path, PathError};
use crate::rules::{IntOrPath, Rule, RulesError, StringOrPath, parse};

#[test]
fn an_empty_annotation_is_no_rules_and_rules_are_read_in_order() {
    assert_eq!(parse(""), Ok(Vec::new()));
    assert_eq!(parse("[]"), Ok(Vec::new()));
    let rules = parse(
        r#"[{"name": "core-limits", "valid": "jsonpath::.spec.domain.cpu.cores",
             "path": "jsonpath::.spec.domain.cpu.cores", "rule": "integer",
             "message": "cpu cores must be limited", "min": 1, "max": "jsonpath::.spec.domain.cpu.sockets",
             "color": "ignored"},
            {"Name": "bus", "PATH": "jsonpath::.spec.domain.devices.disks[*].disk.bus", "rule": "enum",
             "message": "bus", "values": ["virtio", "jsonpath::.spec.domain.machine.type"], "justWarning": true},
            {"name": "rounded", "path": "jsonpath::.spec.domain.cpu.cores", "rule": "integer", "message": "m",
             "min": 1.5, "max": -2.5, "regex": "^q35$"}]"#,
    )
    .expect("rules");
    assert_eq!(rules.len(), 3);
    assert_eq!(
        rules[0],
        Rule {
            kind: "integer".to_owned(),
            name: "core-limits".to_owned(),
            path: Some(Path::parse("jsonpath::.spec.domain.cpu.cores").expect("path")),
            message: "cpu cores must be limited".to_owned(),
            valid: Some(Path::parse("jsonpath::.spec.domain.cpu.cores").expect("path")),
            min: Some(IntOrPath::Int(1)),
            max: Some(IntOrPath::Path(
                Path::parse("jsonpath::.spec.domain.cpu.sockets").expect("path")
            )),
            ..Rule::default()
        }
    );
    assert_eq!(rules[1].name, "bus", "keys match in any case, as Go's decoder");
    assert!(rules[1].just_warning);
    assert_eq!(
        rules[1].values,
        Some(vec![
            StringOrPath::Literal("virtio".to_owned()),
            StringOrPath::Path(Path::parse("jsonpath::.spec.domain.machine.type").expect("path")),
        ])
    );
    // Fractions round half away from zero, as upstream's.
    assert_eq!(
        (rules[2].min.clone(), rules[2].max.clone()),
        (Some(IntOrPath::Int(2)), Some(IntOrPath::Int(-3)))
    );
    assert_eq!(rules[2].regex.as_deref(), Some("^q35$"));
}

#[test]
fn a_malformed_part_fails_the_whole_set_naming_it() {
    assert!(matches!(parse("{"), Err(RulesError::NotJson(_))));
    assert_eq!(parse(r#"{"rule": "integer"}"#), Err(RulesError::NotArray));
    assert_eq!(parse(r#"["integer"]"#), Err(RulesError::NotArray));
    assert_eq!(
        parse(r#"[{"rule": 1}]"#),
        Err(RulesError::WrongType {
            index: 0,
            key: "rule",
            expected: "a string"
        })
    );
    assert_eq!(
        parse(r#"[{"name": "a"}, {"path": ".spec.domain"}]"#),
        Err(RulesError::Path {
            index: 1,
            key: "path",
            source: PathError::Invalid
        })
    );
    let bound = parse(r#"[{"min": "8"}]"#).expect_err("a bound of text");
    assert_eq!(
        bound.to_string(),
        "rule 0: key \"min\": cannot unmarshall IntOrPath from JSON: invalid JSONPath"
    );
    assert!(matches!(parse(r#"[{"max": true}]"#), Err(RulesError::Bound { .. })));
    assert!(matches!(
        parse(r#"[{"values": [1]}]"#),
        Err(RulesError::WrongType { key: "values", .. })
    ));
    assert!(matches!(
        parse(r#"[{"justWarning": "yes"}]"#),
        Err(RulesError::WrongType { key: "justWarning", .. })
    ));
    assert!(matches!(
        parse(r#"[{"valid": "jsonpath::random56junk%(*$%&*()"}]"#),
        Err(RulesError::Path { key: "valid", .. })
    ));
}
