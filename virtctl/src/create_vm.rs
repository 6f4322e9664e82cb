//! `virtctl create vm`: a VirtualMachine manifest from flags, as upstream's
//! `pkg/virtctl/create/vm` writes it: a run strategy, a grace period, guest memory unless an
//! instance type gives it, the instance type and preference (named, or inferred from a volume),
//! the volumes (imported ones as DataVolume templates, [`crate::volume_import`]), and cloud-init.
//! Pure: nothing is sent to a cluster.

use std::collections::BTreeMap;

use clap::Args;
use kubevirt_api::v1::{
    CloudInitSource, ContainerDiskSource, Disk, DomainSpec, InstancetypeMatcher, Memory, PersistentVolumeClaimSource,
    PreferenceMatcher, VirtualMachine, VirtualMachineInstanceSpec, VirtualMachineInstanceTemplateSpec,
    VirtualMachineSpec, Volume,
};
use serde_json::Value;

use crate::VirtctlError;

const RUN_STRATEGIES: [&str; 5] = ["Always", "Manual", "Halted", "Once", "RerunOnFailure"];

/// The flags of `virtctl create vm`.
#[derive(Clone, Debug, Default, Args)]
pub struct CreateVmArgs {
    /// The VM's name; `vm-` and five random characters when not given.
    #[arg(long)]
    pub name: Option<String>,
    /// The run strategy.
    #[arg(long = "run-strategy", default_value = "Always")]
    pub run_strategy: String,
    /// Seconds the guest gets to shut down.
    #[arg(long = "termination-grace-period", default_value_t = 180)]
    pub termination_grace_period: i64,
    /// Guest memory, when no instance type gives it.
    #[arg(long)]
    pub memory: Option<String>,
    /// `[kind/]name` of an instance type.
    #[arg(long, conflicts_with_all = ["memory", "infer_instancetype_from"])]
    pub instancetype: Option<String>,
    /// Infer the instance type from a volume (true unless an instance type or memory is given).
    #[arg(long = "infer-instancetype", num_args = 0..=1, default_missing_value = "true")]
    pub infer_instancetype: Option<bool>,
    /// The volume to infer the instance type from.
    #[arg(long = "infer-instancetype-from")]
    pub infer_instancetype_from: Option<String>,
    /// `[kind/]name` of a preference.
    #[arg(long, conflicts_with = "infer_preference_from")]
    pub preference: Option<String>,
    /// Infer the preference from a volume (true unless a preference is given).
    #[arg(long = "infer-preference", num_args = 0..=1, default_missing_value = "true")]
    pub infer_preference: Option<bool>,
    /// The volume to infer the preference from.
    #[arg(long = "infer-preference-from")]
    pub infer_preference_from: Option<String>,
    /// `src:<image>[,name:<name>][,bootorder:<n>]`: a containerDisk volume (repeatable).
    #[arg(long = "volume-containerdisk")]
    pub volume_containerdisk: Vec<String>,
    /// `src:<pvc>[,name:<name>][,bootorder:<n>]`: a PVC volume (repeatable).
    #[arg(long = "volume-pvc")]
    pub volume_pvc: Vec<String>,
    /// `type:<http|registry|pvc|blank|ds>,size:<quantity>[,name:<name>][,bootorder:<n>]` and the
    /// source's keys: a DataVolume template and its volume (repeatable).
    #[arg(long = "volume-import")]
    pub volume_import: Vec<String>,
    /// Deprecated: `--volume-import type:ds,…`.
    #[arg(long = "volume-datasource")]
    pub volume_datasource: Vec<String>,
    /// Deprecated: `--volume-import type:pvc,…`.
    #[arg(long = "volume-clone-pvc")]
    pub volume_clone_pvc: Vec<String>,
    /// Deprecated: `--volume-import type:blank,…`.
    #[arg(long = "volume-blank")]
    pub volume_blank: Vec<String>,
    /// `nocloud` (the default), `configdrive` or `none`.
    #[arg(long = "cloud-init", default_value = "nocloud", value_parser = ["nocloud", "configdrive", "none"])]
    pub cloud_init: String,
    /// cloud-init user data, base64.
    #[arg(long = "cloud-init-user-data")]
    pub cloud_init_user_data: Option<String>,
    /// cloud-init network data, base64.
    #[arg(long = "cloud-init-network-data")]
    pub cloud_init_network_data: Option<String>,
}

const DEFAULT_MEMORY: &str = "512Mi";

fn usage(message: impl Into<String>) -> VirtctlError {
    VirtctlError::Usage(message.into())
}

/// `key:value` pairs of a volume flag.
fn parameters(flag: &str, text: &str) -> Result<BTreeMap<String, String>, VirtctlError> {
    let mut out = BTreeMap::new();
    for part in text.split(',') {
        let (key, value) = part.split_once(':').ok_or_else(|| {
            usage(format!(
                "failed to parse \"--{flag}\" flag: params need to have at least one colon: {part}"
            ))
        })?;
        match key {
            "src" | "name" | "bootorder" => {
                out.insert(key.to_owned(), value.to_owned());
            }
            other => {
                return Err(usage(format!(
                    "failed to parse \"--{flag}\" flag: unknown param(s): {other}:{value}"
                )));
            }
        }
    }
    if out.get("src").is_none_or(String::is_empty) {
        return Err(usage(format!(
            "failed to parse \"--{flag}\" flag: src must be specified"
        )));
    }
    Ok(out)
}

/// A `[kind/]name` reference, checking the kind against the two `allowed` (lower case).
fn reference(flag: &str, text: &str, allowed: [&str; 2]) -> Result<(String, Option<String>), VirtctlError> {
    match text.split_once('/') {
        None => Ok((text.to_owned(), None)),
        Some((kind, name)) => {
            let lower = kind.to_ascii_lowercase();
            if !allowed.contains(&lower.as_str()) {
                return Err(usage(format!(
                    "invalid {flag} kind \"{kind}\", supported values are: {}",
                    allowed.join(", ")
                )));
            }
            let kind = if lower == allowed[0] {
                allowed[0].to_owned()
            } else {
                allowed[1].to_owned()
            };
            Ok((name.to_owned(), Some(kind)))
        }
    }
}

fn canonical_kind(kind: &str) -> String {
    match kind {
        "virtualmachineinstancetype" => "VirtualMachineInstancetype",
        "virtualmachineclusterinstancetype" => "VirtualMachineClusterInstancetype",
        "virtualmachinepreference" => "VirtualMachinePreference",
        "virtualmachineclusterpreference" => "VirtualMachineClusterPreference",
        other => other,
    }
    .to_owned()
}

/// The volumes and disks the flags add, with upstream's checks: names are DNS labels and unique,
/// boot orders positive and unique.
struct VolumeList<'a> {
    spec: &'a mut VirtualMachineInstanceSpec,
    boot_orders: Vec<u32>,
}

impl VolumeList<'_> {
    /// Adds `volume` (and a disk when it boots in an order) for `flag`.
    fn add(&mut self, flag: &str, volume: Volume, boot_order: Option<&str>) -> Result<(), VirtctlError> {
        let fail = |message: String| usage(format!("failed to parse \"--{flag}\" flag: {message}"));
        crate::volume_import::check_name(&volume.name).map_err(fail)?;
        if self.spec.volumes.iter().any(|v| v.name == volume.name) {
            return Err(fail(format!("there is already a volume with name \"{}\"", volume.name)));
        }
        let order = boot_order
            .map(crate::volume_import::boot_order)
            .transpose()
            .map_err(fail)?;
        if let Some(order) = order {
            if self.boot_orders.contains(&order) {
                return Err(fail(format!("bootorder {order} was specified multiple times")));
            }
            self.boot_orders.push(order);
            self.spec.domain.devices.disks.push(Disk {
                name: volume.name.clone(),
                boot_order: Some(order),
                ..Disk::default()
            });
        }
        self.spec.volumes.push(volume);
        Ok(())
    }

    /// Adds a volume from a `src`/`name`/`bootorder` flag.
    fn add_from_flag(
        &mut self,
        flag: &str,
        text: &str,
        default_name: String,
        source: impl FnOnce(&str, &mut Volume),
    ) -> Result<(), VirtctlError> {
        let params = parameters(flag, text)?;
        let src = params.get("src").cloned().unwrap_or_default();
        let mut volume = Volume {
            name: params.get("name").cloned().unwrap_or(default_name),
            ..Volume::default()
        };
        source(&src, &mut volume);
        self.add(flag, volume, params.get("bootorder").map(String::as_str))
    }
}

/// The `--volume-import` values, the deprecated aliases' first (each prepended in turn, as
/// upstream does).
fn import_values(args: &CreateVmArgs) -> Vec<String> {
    let mut values = args.volume_import.clone();
    for (kind, list) in [
        ("ds", &args.volume_datasource),
        ("pvc", &args.volume_clone_pvc),
        ("blank", &args.volume_blank),
    ] {
        for value in list {
            // An empty value stays empty, so it is refused as one.
            let aliased = if value.is_empty() {
                String::new()
            } else {
                format!("type:{kind},{value}")
            };
            values.insert(0, aliased);
        }
    }
    values
}

/// The deprecation warnings the flags given deserve (upstream prints them on standard error).
#[must_use]
pub fn deprecation_warnings(args: &CreateVmArgs) -> Vec<String> {
    [
        ("volume-datasource", &args.volume_datasource),
        ("volume-clone-pvc", &args.volume_clone_pvc),
        ("volume-blank", &args.volume_blank),
    ]
    .into_iter()
    .filter(|(_, list)| !list.is_empty())
    .map(|(flag, _)| format!("Flag --{flag} has been deprecated, use flag --volume-import instead"))
    .collect()
}

/// The volume to infer from: the one named, else the disk that boots first, else the first
/// volume; only PVC and DataVolume volumes can carry the labels.
fn inference_volume(
    spec: &VirtualMachineInstanceSpec,
    templates: &[kubevirt_api::v1::DataVolumeTemplateSpec],
    named: Option<&str>,
) -> Result<Option<String>, VirtctlError> {
    let chosen = named.map(str::to_owned).or_else(|| {
        spec.domain
            .devices
            .disks
            .iter()
            .filter(|d| d.boot_order.is_some())
            .min_by_key(|d| d.boot_order)
            .map(|d| d.name.clone())
            .or_else(|| spec.volumes.first().map(|v| v.name.clone()))
    });
    let Some(name) = chosen else { return Ok(None) };
    let volume = spec
        .volumes
        .iter()
        .find(|v| v.name == name)
        .ok_or_else(|| usage(format!("there is no volume with name '{name}'")))?;
    if volume.persistent_volume_claim.is_none() && volume.data_volume.is_none() {
        return Err(usage(
            "inference of instancetype or preference works only with DataSources, DataVolumes or PersistentVolumeClaims",
        ));
    }
    // An imported volume carries labels only when it clones: a claim, a registry image (its
    // labels), a snapshot or a DataSource.
    let template = templates
        .iter()
        .find(|t| t.metadata.as_ref().and_then(|m| m.name.as_deref()) == Some(name.as_str()));
    if let Some(template) = template {
        let spec = &template.spec;
        let source = &spec["source"];
        let clones = !source["pvc"].is_null() || !source["registry"].is_null() || !source["snapshot"].is_null();
        if !clones && spec["sourceRef"]["kind"] != "DataSource" {
            return Err(usage(
                "this datavolume is not valid to infer an instancetype or preference from (source needs to be PVC, Registry or Snapshot, sourceRef needs to be DataSource)",
            ));
        }
    }
    Ok(Some(name))
}

/// The VM the flags describe; `name` is used when `--name` is not given, `namespace` when `-n`
/// was; `random` gives five characters for each generated volume name.
pub fn create_vm(
    args: &CreateVmArgs,
    name: &str,
    namespace: Option<&str>,
    random: &mut dyn FnMut() -> String,
) -> Result<VirtualMachine, VirtctlError> {
    if !RUN_STRATEGIES.contains(&args.run_strategy.as_str()) {
        return Err(usage(format!(
            "failed to parse \"--run-strategy\" flag: invalid run strategy \"{}\", supported values are: {}",
            args.run_strategy,
            RUN_STRATEGIES.join(", ")
        )));
    }
    let vm_name = args.name.clone().unwrap_or_else(|| name.to_owned());
    let mut template = VirtualMachineInstanceSpec {
        termination_grace_period_seconds: Some(args.termination_grace_period),
        domain: DomainSpec {
            memory: Some(Memory {
                guest: Some(k8s_openapi::apimachinery::pkg::api::resource::Quantity(
                    args.memory.clone().unwrap_or_else(|| DEFAULT_MEMORY.to_owned()),
                )),
                ..Memory::default()
            }),
            ..DomainSpec::default()
        },
        ..VirtualMachineInstanceSpec::default()
    };
    let mut vm_spec = VirtualMachineSpec {
        run_strategy: Some(args.run_strategy.clone()),
        ..VirtualMachineSpec::default()
    };
    if let Some(text) = &args.instancetype {
        let (it_name, kind) = reference(
            "instancetype",
            text,
            ["virtualmachineinstancetype", "virtualmachineclusterinstancetype"],
        )?;
        vm_spec.instancetype = Some(InstancetypeMatcher {
            name: Some(it_name),
            kind: kind.as_deref().map(canonical_kind),
            ..InstancetypeMatcher::default()
        });
        template.domain.memory = None;
    }
    if let Some(text) = &args.preference {
        let (pref_name, kind) = reference(
            "preference",
            text,
            ["virtualmachinepreference", "virtualmachineclusterpreference"],
        )?;
        vm_spec.preference = Some(PreferenceMatcher {
            name: Some(pref_name),
            kind: kind.as_deref().map(canonical_kind),
            ..PreferenceMatcher::default()
        });
    }
    add_volumes(
        args,
        &vm_name,
        &mut template,
        &mut vm_spec.data_volume_templates,
        random,
    )?;
    add_cloud_init(args, &mut template)?;
    infer(args, &mut vm_spec, &mut template)?;
    vm_spec.template = VirtualMachineInstanceTemplateSpec {
        metadata: None,
        spec: Some(template),
    };
    let mut vm = VirtualMachine::new(&vm_name, vm_spec);
    vm.metadata.namespace = namespace.map(str::to_owned);
    Ok(vm)
}

/// The volumes of the volume flags, in upstream's order: containerDisks, PVCs, then imported
/// volumes (whose DataVolume templates go to `templates`).
fn add_volumes(
    args: &CreateVmArgs,
    vm_name: &str,
    template: &mut VirtualMachineInstanceSpec,
    templates: &mut Vec<kubevirt_api::v1::DataVolumeTemplateSpec>,
    random: &mut dyn FnMut() -> String,
) -> Result<(), VirtctlError> {
    let mut volumes = VolumeList {
        spec: template,
        boot_orders: Vec::new(),
    };
    for (i, text) in args.volume_containerdisk.iter().enumerate() {
        volumes.add_from_flag(
            "volume-containerdisk",
            text,
            format!("{vm_name}-containerdisk-{i}"),
            |src, v| {
                v.container_disk = Some(ContainerDiskSource {
                    image: src.to_owned(),
                    ..ContainerDiskSource::default()
                });
            },
        )?;
    }
    for text in &args.volume_pvc {
        let src = parameters("volume-pvc", text)?.get("src").cloned().unwrap_or_default();
        if src.contains('/') {
            return Err(usage(
                "failed to parse \"--volume-pvc\" flag: not allowed to specify namespace of PVC, it must be in the VM's namespace",
            ));
        }
        volumes.add_from_flag("volume-pvc", text, src, |src, v| {
            v.persistent_volume_claim = Some(PersistentVolumeClaimSource {
                claim_name: src.to_owned(),
                ..PersistentVolumeClaimSource::default()
            });
        })?;
    }
    for text in import_values(args) {
        let fail = |message: String| usage(format!("failed to parse \"--volume-import\" flag: {message}"));
        let import = crate::volume_import::parse_import(&text, random).map_err(fail)?;
        let volume = Volume {
            name: import.name.clone(),
            data_volume: Some(kubevirt_api::v1::DataVolumeSource {
                name: import.name.clone(),
                ..kubevirt_api::v1::DataVolumeSource::default()
            }),
            ..Volume::default()
        };
        let order = import.boot_order.map(|o| o.to_string());
        volumes.add("volume-import", volume, order.as_deref())?;
        templates.push(import.template);
    }
    Ok(())
}

fn add_cloud_init(args: &CreateVmArgs, template: &mut VirtualMachineInstanceSpec) -> Result<(), VirtctlError> {
    if args.cloud_init_user_data.is_none() && args.cloud_init_network_data.is_none() {
        return Ok(());
    }
    let source = CloudInitSource {
        user_data_base64: args.cloud_init_user_data.clone(),
        network_data_base64: args.cloud_init_network_data.clone(),
        ..CloudInitSource::default()
    };
    let mut volume = Volume {
        name: "cloudinitdisk".to_owned(),
        ..Volume::default()
    };
    match args.cloud_init.as_str() {
        "nocloud" => volume.cloud_init_no_cloud = Some(source),
        "configdrive" => volume.cloud_init_config_drive = Some(source),
        "none" => return Ok(()),
        other => {
            return Err(usage(format!(
                "failed to parse \"--cloud-init\" flag: invalid cloud-init data source type \"{other}\", supported values are: nocloud, configdrive, none"
            )));
        }
    }
    template.volumes.push(volume);
    Ok(())
}

/// Inference, as upstream: explicit (`--infer-*-from` or `--infer-*=true`) failures are errors and
/// an explicit instance type takes the memory away; implicit ones are dropped silently and keep
/// the memory as a fallback with the `Ignore` policy.
fn infer(
    args: &CreateVmArgs,
    vm_spec: &mut VirtualMachineSpec,
    template: &mut VirtualMachineInstanceSpec,
) -> Result<(), VirtctlError> {
    let explicit_it = args.infer_instancetype == Some(true) || args.infer_instancetype_from.is_some();
    if args.instancetype.is_none() && args.memory.is_none() && args.infer_instancetype != Some(false) {
        match inference_volume(
            template,
            &vm_spec.data_volume_templates,
            args.infer_instancetype_from.as_deref(),
        ) {
            Ok(Some(volume)) => {
                vm_spec.instancetype = Some(InstancetypeMatcher {
                    infer_from_volume: Some(volume),
                    infer_from_volume_failure_policy: (!explicit_it).then(|| "Ignore".to_owned()),
                    ..InstancetypeMatcher::default()
                });
                if explicit_it {
                    template.domain.memory = None;
                }
            }
            Err(e) if explicit_it => return Err(e),
            Ok(None) | Err(_) => {}
        }
    }
    let explicit_pref = args.infer_preference == Some(true) || args.infer_preference_from.is_some();
    if args.preference.is_none() && args.infer_preference != Some(false) {
        match inference_volume(
            template,
            &vm_spec.data_volume_templates,
            args.infer_preference_from.as_deref(),
        ) {
            Ok(Some(volume)) => {
                vm_spec.preference = Some(PreferenceMatcher {
                    infer_from_volume: Some(volume),
                    infer_from_volume_failure_policy: (!explicit_pref).then(|| "Ignore".to_owned()),
                    ..PreferenceMatcher::default()
                });
            }
            Err(e) if explicit_pref => return Err(e),
            Ok(None) | Err(_) => {}
        }
    }
    Ok(())
}

/// A manifest as YAML with its keys in alphabetical order, as upstream's marshaller writes it.
pub fn to_yaml(object: &impl serde::Serialize) -> Result<String, VirtctlError> {
    let value: Value = serde_json::to_value(object).map_err(|e| usage(e.to_string()))?;
    serde_saphyr::to_string(&value).map_err(|e| usage(e.to_string()))
}
