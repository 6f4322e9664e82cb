use super::*;

fn strategy(json: &str) -> WorkloadUpdateStrategy {
    serde_json::from_str(json).expect("workloadUpdateStrategy")
}

#[test]
fn strategies_are_read_with_upstreams_defaults() {
    let minute = Duration::from_secs(60);
    let table: &[(&str, bool, bool, u32, Duration)] = &[
        // Upstream's sample CR: no method, so nothing moves.
        ("{}", false, false, 10, minute),
        (r#"{"workloadUpdateMethods":[]}"#, false, false, 10, minute),
        (r#"{"workloadUpdateMethods":["LiveMigrate"]}"#, true, false, 10, minute),
        (r#"{"workloadUpdateMethods":["Evict"]}"#, false, true, 10, minute),
        (
            r#"{"workloadUpdateMethods":["LiveMigrate","Evict"],"batchEvictionSize":30,"batchEvictionInterval":"2s"}"#,
            true,
            true,
            30,
            Duration::from_secs(2),
        ),
        (
            r#"{"batchEvictionInterval":"1m30s"}"#,
            false,
            false,
            10,
            Duration::from_secs(90),
        ),
        (r#"{"batchEvictionInterval":"0"}"#, false, false, 10, Duration::ZERO),
    ];
    for (json, live_migrate, evict, size, interval) in table {
        let read = workload_updates(Some(&strategy(json))).expect(json);
        assert_eq!(
            read,
            WorkloadUpdates {
                live_migrate: *live_migrate,
                evict: *evict,
                batch_eviction_size: *size,
                batch_eviction_interval: *interval,
            },
            "{json}"
        );
        assert_eq!(read.any_method(), *live_migrate || *evict, "{json}");
    }
    assert_eq!(workload_updates(None), Ok(WorkloadUpdates::default()));
}

#[test]
fn what_cannot_be_followed_is_refused_by_field() {
    let table: &[(&str, &[&str])] = &[
        (
            r#"{"workloadUpdateMethods":["LiveMigrate","Restart"]}"#,
            &[r#"spec.workloadUpdateStrategy.workloadUpdateMethods[1]: "Restart" is not a method"#],
        ),
        (
            r#"{"batchEvictionSize":0}"#,
            &["spec.workloadUpdateStrategy.batchEvictionSize: 0 is not a number of VMIs"],
        ),
        (
            r#"{"batchEvictionSize":-3,"batchEvictionInterval":"soon"}"#,
            &[
                "spec.workloadUpdateStrategy.batchEvictionSize: -3",
                r#"spec.workloadUpdateStrategy.batchEvictionInterval: "soon" is not a duration"#,
            ],
        ),
        (
            r#"{"batchEvictionInterval":"-1m"}"#,
            &["spec.workloadUpdateStrategy.batchEvictionInterval"],
        ),
    ];
    for (json, expected) in table {
        let WorkloadUpdateError(errors) = workload_updates(Some(&strategy(json))).expect_err(json);
        assert_eq!(errors.len(), expected.len(), "{json}: {errors:?}");
        for (error, start) in errors.iter().zip(*expected) {
            assert!(error.starts_with(start), "{json}: {error}");
        }
    }
}
