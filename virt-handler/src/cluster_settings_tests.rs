use kube::runtime::watcher::Event;
use kubevirt_api::v1::{ClusterConfig, KubeVirt};

use super::{Follower, launcher_options};

fn kubevirt(name: &str, phase: Option<&str>, configuration: &serde_json::Value) -> KubeVirt {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "kubevirt.io/v1", "kind": "KubeVirt",
        "metadata": {"name": name, "namespace": "kubevirt"},
        "spec": {"configuration": configuration},
        "status": {"phase": phase},
    }))
    .expect("KubeVirt")
}

fn deployed(manufacturer: &str) -> KubeVirt {
    kubevirt(
        "kubevirt",
        Some("Deployed"),
        &serde_json::json!({"smbios": {"manufacturer": manufacturer}}),
    )
}

/// Watch events, each with what it publishes (the configuration's manufacturer) or nothing.
type Steps = Vec<(Event<KubeVirt>, Option<&'static str>)>;

fn manufacturer(config: Option<ClusterConfig>) -> Option<String> {
    config.map(|c| c.smbios.manufacturer)
}

#[test]
fn the_follower_publishes_the_first_list_then_only_changes() {
    let being_deleted = {
        let mut kv = deployed("Deleting");
        kv.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
        ));
        kv
    };
    // (events, what each publishes: the manufacturer of the configuration, or nothing)
    let cases: Vec<(&str, Steps)> = vec![
        (
            "an empty first list publishes upstream's defaults",
            vec![(Event::Init, None), (Event::InitDone, Some("KubeVirt"))],
        ),
        (
            "the first list's resource is the configuration; the same again is no news",
            vec![
                (Event::Init, None),
                (Event::InitApply(deployed("Acme")), None),
                (Event::InitDone, Some("Acme")),
                (Event::Apply(deployed("Acme")), None),
                (Event::Apply(deployed("Globex")), Some("Globex")),
            ],
        ),
        (
            "a resource without a phase (the operator has not taken it up) does not count",
            vec![
                (Event::Init, None),
                (
                    Event::InitApply(kubevirt(
                        "second",
                        None,
                        &serde_json::json!({"smbios": {"manufacturer": "No"}}),
                    )),
                    None,
                ),
                (Event::InitDone, Some("KubeVirt")),
            ],
        ),
        (
            "deleting the resource, or relisting without it, keeps the last configuration",
            vec![
                (Event::Apply(deployed("Acme")), Some("Acme")),
                (Event::Apply(being_deleted.clone()), None),
                (Event::Delete(deployed("Acme")), None),
                (Event::Init, None),
                (Event::InitDone, None),
                (Event::Apply(deployed("Initech")), Some("Initech")),
            ],
        ),
        (
            "a relist that brings a change publishes it at its end",
            vec![
                (Event::Apply(deployed("Acme")), Some("Acme")),
                (Event::Init, None),
                (Event::InitApply(deployed("Globex")), None),
                (Event::InitDone, Some("Globex")),
            ],
        ),
    ];
    for (case, steps) in cases {
        let mut follower = Follower::default();
        for (at, (event, expected)) in steps.into_iter().enumerate() {
            let published = manufacturer(follower.on(event));
            assert_eq!(published.as_deref(), expected, "{case}, step {at}");
        }
    }
}

#[test]
fn launchers_are_told_the_smbios_strings_the_period_and_the_switches() {
    let defaults = launcher_options(&ClusterConfig::default());
    let smbios = defaults.virtual_machine_sm_bios.expect("smbios");
    assert_eq!(
        (
            smbios.manufacturer.as_str(),
            smbios.product.as_str(),
            smbios.family.as_str()
        ),
        ("KubeVirt", "None", "KubeVirt")
    );
    assert_eq!(defaults.mem_balloon_stats_period, 10);
    let switches = defaults.cluster_config.expect("cluster config");
    assert!(
        switches.bochs_display_for_efi_guests,
        "bochs for EFI guests, as upstream"
    );
    assert!(!switches.free_page_reporting_disabled && !switches.serial_console_log_disabled);

    let mut configured = deployed("Acme");
    configured.metadata.annotations = Some([("kubevirt.io/vga-display-efi-x86".to_owned(), String::new())].into());
    configured.spec.configuration = serde_json::from_value(serde_json::json!({
        "memBalloonStatsPeriod": 0,
        "smbios": {"manufacturer": "Acme", "version": "7"},
        "virtualMachineOptions": {"disableFreePageReporting": {}, "disableSerialConsoleLog": {}}
    }))
    .expect("configuration");
    let options = launcher_options(&ClusterConfig::from_kubevirt(&configured));
    let smbios = options.virtual_machine_sm_bios.expect("smbios");
    assert_eq!(
        (
            smbios.manufacturer.as_str(),
            smbios.version.as_str(),
            smbios.product.as_str()
        ),
        ("Acme", "7", "None")
    );
    assert_eq!(options.mem_balloon_stats_period, 0, "0 turns the statistics off");
    let switches = options.cluster_config.expect("cluster config");
    assert!(!switches.bochs_display_for_efi_guests);
    assert!(switches.free_page_reporting_disabled && switches.serial_console_log_disabled);
}
