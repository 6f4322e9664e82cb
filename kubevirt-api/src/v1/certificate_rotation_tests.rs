use super::*;

fn config(json: &str) -> SelfSignConfiguration {
    serde_json::from_str(json).expect("selfSigned")
}

fn renewal(duration: i64, renew_before: i64) -> Renewal {
    Renewal { duration, renew_before }
}

#[test]
fn lifetimes_are_read_as_upstream() {
    let h = HOUR;
    let table: &[(&str, Rotation)] = &[
        // Nothing given: upstream's defaults, renewed when a fifth is left.
        ("{}", Rotation::default()),
        (
            "{}",
            Rotation {
                ca: renewal(168 * h, 168 * h / 5),
                server: renewal(24 * h, 24 * h / 5),
            },
        ),
        // A duration alone: renewBefore is a fifth of it.
        (
            r#"{"ca":{"duration":"10h"},"server":{"duration":"5h"}}"#,
            Rotation {
                ca: renewal(10 * h, 2 * h),
                server: renewal(5 * h, h),
            },
        ),
        // Both given.
        (
            r#"{"ca":{"duration":"20m","renewBefore":"10m"},"server":{"duration":"6m","renewBefore":"4m"}}"#,
            Rotation {
                ca: renewal(1200, 600),
                server: renewal(360, 240),
            },
        ),
        // renewBefore alone keeps the default duration.
        (
            r#"{"server":{"renewBefore":"1h30m"}}"#,
            Rotation {
                ca: Rotation::default().ca,
                server: renewal(24 * h, 5400),
            },
        ),
        // The deprecated fields, alone.
        (
            r#"{"caRotateInterval":"48h","certRotateInterval":"12h","caOverlapInterval":"24h"}"#,
            Rotation {
                ca: renewal(48 * h, 24 * h),
                server: renewal(12 * h, 12 * h / 5),
            },
        ),
    ];
    for (json, want) in table {
        assert_eq!(rotation(Some(&config(json))), Ok(*want), "{json}");
    }
    assert_eq!(rotation(None), Ok(Rotation::default()));
}

#[test]
fn bad_lifetimes_are_refused_with_every_reason() {
    let table: &[(&str, &[&str])] = &[
        (
            r#"{"caRotateInterval":"48h","ca":{"duration":"48h"}}"#,
            &[
                "caRotateInterval, certRotateInterval and caOverlapInterval are deprecated and conflict with CertConfig defined rotation parameters",
            ],
        ),
        (
            r#"{"ca":{"duration":"1h","renewBefore":"2h"},"server":{"duration":"30m"}}"#,
            &[
                "CA RenewBefore cannot exceed Duration (spec.certificateRotationStrategy.selfSigned.ca.duration < spec.certificateRotationStrategy.selfSigned.ca.renewBefore)",
            ],
        ),
        (
            r#"{"server":{"duration":"1h","renewBefore":"2h"}}"#,
            &[
                "Cert RenewBefore cannot exceed Duration (spec.certificateRotationStrategy.selfSigned.server.duration < spec.certificateRotationStrategy.selfSigned.server.renewBefore)",
            ],
        ),
        // The CA's default (168 h) is shorter than the certificate asked for.
        (
            r#"{"server":{"duration":"200h"}}"#,
            &[
                "Certificate duration cannot exceed CA (spec.certificateRotationStrategy.selfSigned.server.duration > spec.certificateRotationStrategy.selfSigned.ca.duration)",
            ],
        ),
        (
            r#"{"ca":{"duration":"1h"},"server":{"duration":"1h","renewBefore":"1h"}}"#,
            &[
                "spec.certificateRotateStrategy.selfSigned.server.renewBefore: must be shorter than the duration, or every certificate is due as soon as it is made",
            ],
        ),
        (
            r#"{"ca":{"duration":"0"},"server":{"duration":"0"}}"#,
            &[
                "spec.certificateRotateStrategy.selfSigned.ca.duration: must be at least a second",
                "spec.certificateRotateStrategy.selfSigned.server.duration: must be at least a second",
            ],
        ),
        (
            r#"{"ca":{"duration":"900000h"},"server":{"duration":"24h"}}"#,
            &["spec.certificateRotateStrategy.selfSigned.ca.duration: must be at most 100 years"],
        ),
        (
            r#"{"ca":{"duration":"a week"}}"#,
            &[
                r#"spec.certificateRotateStrategy.selfSigned.ca.duration: "a week" is not a duration such as 48h, 1h30m or 90s"#,
            ],
        ),
        (
            r#"{"server":{"renewBefore":"-1h"}}"#,
            &[
                r#"spec.certificateRotateStrategy.selfSigned.server.renewBefore: "-1h" is not a duration such as 48h, 1h30m or 90s"#,
            ],
        ),
    ];
    for (json, want) in table {
        let got = rotation(Some(&config(json)));
        let want = RotationError(want.iter().map(|s| (*s).to_owned()).collect());
        assert_eq!(got, Err(want), "{json}");
    }
}
