//! `spec.domain.devices.disks` -> `<disk>`: device kind, bus, target name, driver and IOThreads.

use std::collections::BTreeMap;

use kubevirt_api::v1::{Disk as SpecDisk, VirtualMachineInstance};

use super::error::disk_field;
use super::volumes::{VolumeDisk, volume_disk};
use super::{BootOrders, ConvertContext, ConvertError, pci_address, virtio_model};
use crate::model::{
    Address, Alias, BlockIo, Boot, Disk, DiskDriver, DiskSource, DiskTarget, Domain, Empty, Reservations, UnixSource,
};

const CACHE_MODES: [&str; 3] = ["none", "writethrough", "writeback"];
const IO_MODES: [&str; 3] = ["native", "threads", "default"];
const ERROR_POLICIES: [&str; 4] = ["stop", "ignore", "report", "enospace"];

/// What the disks need from the rest of the domain.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DiskNeeds {
    /// Some disk is on the SCSI bus.
    pub scsi: bool,
    /// Some disk is on the USB bus.
    pub usb: bool,
    /// IOThread of the SCSI controller: the first one, when the VM has IOThreads and a SCSI disk.
    pub scsi_iothread: Option<u32>,
}

/// The device kind, bus and the flags of one spec disk.
struct Target<'a> {
    device: &'static str,
    bus: &'a str,
    readonly: bool,
    tray: Option<String>,
    pci_address: Option<&'a str>,
    reservation: bool,
    /// SSD emulation: a rotation rate of 1.
    solid_state: bool,
}

fn target<'a>(disk: &'a SpecDisk, field: &str) -> Result<Target<'a>, ConvertError> {
    let kinds = usize::from(disk.disk.is_some()) + usize::from(disk.lun.is_some()) + usize::from(disk.cdrom.is_some());
    if kinds > 1 {
        return Err(ConvertError::invalid(
            field,
            "can only have a single target type defined",
        ));
    }
    let bus_of = |bus: &'a Option<String>| bus.as_deref().filter(|b| !b.is_empty()).unwrap_or("sata");
    let (device, bus, readonly, tray, pci_address, reservation, allowed): (_, _, _, _, _, _, &[&str]) =
        if let Some(cdrom) = &disk.cdrom {
            let tray = cdrom.tray.as_deref().unwrap_or("closed");
            if tray != "open" && tray != "closed" {
                return Err(ConvertError::invalid(
                    format!("{field}.cdrom.tray"),
                    format!("tray {tray} is not open or closed"),
                ));
            }
            (
                "cdrom",
                bus_of(&cdrom.bus),
                cdrom.readonly.unwrap_or(true),
                Some(tray.to_owned()),
                None,
                false,
                &["sata", "scsi"],
            )
        } else if let Some(lun) = &disk.lun {
            (
                "lun",
                bus_of(&lun.bus),
                lun.readonly == Some(true),
                None,
                None,
                lun.reservation == Some(true),
                &["scsi"],
            )
        } else {
            let d = disk.disk.as_ref();
            let bus = d.map_or("sata", |d| bus_of(&d.bus));
            let pci = d.and_then(|d| d.pci_address.as_deref()).filter(|p| !p.is_empty());
            (
                "disk",
                bus,
                d.and_then(|d| d.readonly) == Some(true),
                None,
                pci,
                false,
                &["virtio", "sata", "scsi", "usb"],
            )
        };
    if !allowed.contains(&bus) {
        let sub = match device {
            "cdrom" => "cdrom",
            "lun" => "lun",
            _ => "disk",
        };
        return Err(ConvertError::invalid(
            format!("{field}.{sub}.bus"),
            format!(
                "bus {bus} is not supported for a {device}; use one of {}",
                allowed.join(", ")
            ),
        ));
    }
    let solid_state = disk.disk.as_ref().and_then(|d| d.solid_state) == Some(true);
    if solid_state && bus != "sata" && bus != "scsi" {
        return Err(ConvertError::invalid(
            format!("{field}.disk.solidState"),
            format!(
                "disk {} - SSD emulation is only possible with bus type sata or scsi",
                disk.name
            ),
        ));
    }
    if pci_address.is_some() && bus != "virtio" {
        return Err(ConvertError::invalid(
            format!("{field}.disk.pciAddress"),
            format!(
                "disk {} - setting a PCI address is only possible with bus type virtio",
                disk.name
            ),
        ));
    }
    Ok(Target {
        device,
        bus,
        readonly,
        tray,
        pci_address,
        reservation,
        solid_state,
    })
}

/// The target names in use: the ones kept from the VMI's volume status, then each new one; a
/// new disk takes the lowest free name of its prefix, so a detached disk's name is reused
/// rather than collided with.
struct TargetNames(std::collections::BTreeSet<String>);

impl TargetNames {
    fn new<'a>(kept: impl Iterator<Item = &'a str>) -> Self {
        Self(kept.map(str::to_owned).collect())
    }

    fn next_free(&mut self, prefix: &str) -> String {
        let name = (0..usize::MAX)
            .map(|i| format!("{prefix}{}", device_suffix(i)))
            .find(|n| !self.0.contains(n))
            .unwrap_or_default();
        self.0.insert(name.clone());
        name
    }
}

/// The index of a Linux-style device suffix: a -> 0, z -> 25, aa -> 26.
fn suffix_index(suffix: &str) -> Option<usize> {
    if suffix.is_empty() || !suffix.bytes().all(|b| b.is_ascii_lowercase()) {
        return None;
    }
    suffix
        .bytes()
        .try_fold(0usize, |acc, b| {
            acc.checked_mul(26)?.checked_add(usize::from(b - b'a') + 1)
        })
        .map(|n| n - 1)
}

/// Linux-style device suffix: 0 -> a, 25 -> z, 26 -> aa.
#[must_use]
pub fn device_suffix(mut index: usize) -> String {
    let mut out = Vec::new();
    loop {
        out.push(b'a' + u8::try_from(index % 26).unwrap_or(0));
        if index < 26 {
            break;
        }
        index = index / 26 - 1;
    }
    out.reverse();
    String::from_utf8_lossy(&out).into_owned()
}

fn one_of(field: String, what: &str, value: Option<&str>, allowed: &[&str]) -> Result<Option<String>, ConvertError> {
    match value.filter(|v| !v.is_empty()) {
        None => Ok(None),
        Some(v) if allowed.contains(&v) => Ok(Some(v.to_owned())),
        Some(v) => Err(ConvertError::invalid(
            field,
            format!("{what} {v} is not one of {}", allowed.join(", ")),
        )),
    }
}

/// IOThread assignment: a pool shared round-robin by the virtio disks, then one thread per
/// dedicated disk, as upstream's `setIOThreads`.
struct IoThreads {
    pool: u32,
    next_shared: u32,
    next_dedicated: u32,
}

impl IoThreads {
    fn plan(vmi: &VirtualMachineInstance, vcpus: u32) -> Result<Option<Self>, ConvertError> {
        let disks = &vmi.spec.domain.devices.disks;
        let is_virtio = |d: &SpecDisk| d.disk.as_ref().and_then(|t| t.bus.as_deref()) == Some("virtio");
        let dedicated =
            u32::try_from(disks.iter().filter(|d| d.dedicated_io_thread == Some(true)).count()).unwrap_or(u32::MAX);
        let eligible = u32::try_from(disks.iter().filter(|d| is_virtio(d)).count()).unwrap_or(u32::MAX);
        let pool = match vmi.spec.domain.io_threads_policy.as_deref() {
            None | Some("") if dedicated == 0 => return Ok(None),
            None | Some("" | "shared") => 1,
            Some("auto") => (vcpus.saturating_mul(2).min(eligible).saturating_sub(dedicated)).max(1),
            Some(other) => {
                return Err(ConvertError::invalid(
                    "spec.domain.ioThreadsPolicy",
                    format!("invalid IOThreadsPolicy {other}: use shared, auto or supplementalPool"),
                ));
            }
        };
        Ok(Some(Self {
            pool,
            next_shared: 0,
            next_dedicated: pool,
        }))
    }

    fn total(&self) -> u32 {
        self.next_dedicated
    }

    fn dedicated(&mut self) -> u32 {
        self.next_dedicated += 1;
        self.next_dedicated
    }

    fn shared(&mut self) -> u32 {
        self.next_shared = self.next_shared % self.pool + 1;
        self.next_shared
    }
}

/// Renders every spec disk into `<disk>` elements, in spec order.
pub fn apply(
    vmi: &VirtualMachineInstance,
    ctx: &ConvertContext,
    vcpus: u32,
    boot_orders: &mut BootOrders,
    domain: &mut Domain,
) -> Result<DiskNeeds, ConvertError> {
    let devices = &vmi.spec.domain.devices;
    let kept_targets: BTreeMap<&str, &str> = vmi
        .status
        .iter()
        .flat_map(|s| s.volume_status.iter())
        .map(|v| (v.name.as_str(), v.target.as_str()))
        .collect();
    let mut io_threads = IoThreads::plan(vmi, vcpus)?;
    let mut targets = TargetNames::new(
        devices
            .disks
            .iter()
            .filter_map(|d| kept_targets.get(d.name.as_str()).copied()),
    );
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    let mut needs = DiskNeeds::default();
    for (i, disk) in devices.disks.iter().enumerate() {
        let field = disk_field(i);
        if let Some(first) = seen.insert(disk.name.as_str(), i) {
            return Err(ConvertError::invalid(
                format!("{field}.name"),
                format!("disks[{first}] and disks[{i}] must not have the same Name."),
            ));
        }
        let t = target(disk, &field)?;
        let prefix = if t.bus == "virtio" { "vd" } else { "sd" };
        // A kept target counts only when it is a name of this bus's kind (`vdb`, `sdc`).
        let kept = kept_targets
            .get(disk.name.as_str())
            .filter(|kept| kept.strip_prefix(prefix).and_then(suffix_index).is_some());
        let dev = match kept {
            Some(kept) => (*kept).to_owned(),
            None => targets.next_free(prefix),
        };
        let unit = dev.strip_prefix(prefix).and_then(suffix_index).unwrap_or(0);
        let volume = vmi.spec.volumes.iter().enumerate().find(|(_, v)| v.name == disk.name);
        let source: Option<VolumeDisk> = match volume {
            Some((index, volume)) => Some(volume_disk(vmi, index, volume, ctx)?),
            None if t.device == "cdrom" => None,
            None => {
                let name_field = format!("{field}.name");
                return Err(ConvertError::invalid(
                    &name_field,
                    format!("{name_field} '{}' not found.", disk.name),
                ));
            }
        };
        let shareable = disk.shareable == Some(true);
        let mut driver = driver(disk, &field, &t, source.as_ref())?;
        if let Some(threads) = io_threads.as_mut() {
            match (t.bus, disk.dedicated_io_thread == Some(true)) {
                ("virtio", true) => driver.iothread = Some(threads.dedicated()),
                ("virtio", false) => driver.iothread = Some(threads.shared()),
                // The SCSI controller, not the disk, runs in an IOThread: the first one.
                ("scsi", _) => needs.scsi_iothread = Some(1),
                (_, true) => {
                    return Err(ConvertError::invalid(
                        format!("{field}.dedicatedIOThread"),
                        "a dedicated IOThread needs a virtio or scsi disk",
                    ));
                }
                (_, false) => {}
            }
        }
        if t.bus == "virtio" && devices.block_multi_queue == Some(true) {
            driver.queues = Some(vcpus);
        }
        if let Some(order) = disk.boot_order {
            boot_orders.claim(order, &format!("{field}.bootOrder"))?;
        }
        let mut out = Disk {
            disk_type: source.as_ref().map_or("block", |s| s.disk_type).to_owned(),
            device: t.device.to_owned(),
            model: (t.bus == "virtio").then(|| virtio_model(devices)),
            driver: Some(driver),
            source: source.as_ref().map(|s| s.source.clone()),
            backing_store: source.as_ref().and_then(|s| s.backing_store.clone()),
            target: DiskTarget {
                dev,
                bus: Some(t.bus.to_owned()),
                tray: t.tray.clone(),
                rotation_rate: t.solid_state.then_some(1),
            },
            serial: disk.serial.clone().filter(|s| !s.is_empty()),
            readonly: (t.readonly || source.as_ref().is_some_and(|s| s.is_read_only)).then_some(Empty {}),
            shareable: shareable.then_some(Empty {}),
            blockio: block_io(disk),
            boot: disk.boot_order.map(|order| Boot { order }),
            alias: Some(Alias::user(&disk.name)),
            address: None,
        };
        place(&mut out, &t, unit, &field, ctx)?;
        needs.scsi |= t.bus == "scsi";
        needs.usb |= t.bus == "usb";
        domain.devices.disk.push(out);
    }
    domain.iothreads = io_threads.as_ref().map(IoThreads::total);
    Ok(needs)
}

/// `<driver>`: format, cache (forced to none on a shareable disk), error policy, io and discard.
fn driver(
    disk: &SpecDisk,
    field: &str,
    t: &Target<'_>,
    source: Option<&VolumeDisk>,
) -> Result<DiskDriver, ConvertError> {
    let mut cache = one_of(
        format!("{field}.cache"),
        "cache mode",
        disk.cache.as_deref(),
        &CACHE_MODES,
    )?;
    if disk.shareable == Some(true) {
        if cache.as_deref().is_some_and(|c| c != "none") {
            return Err(ConvertError::invalid(
                format!("{field}.cache"),
                "a shareable disk must use cache mode none",
            ));
        }
        cache = Some("none".to_owned());
    }
    Ok(DiskDriver {
        name: Some("qemu".to_owned()),
        format: Some(source.map_or("raw", |s| s.format).to_owned()),
        cache,
        error_policy: Some(
            one_of(
                format!("{field}.errorPolicy"),
                "error policy",
                disk.error_policy.as_deref(),
                &ERROR_POLICIES,
            )?
            .unwrap_or_else(|| "stop".to_owned()),
        ),
        io: one_of(format!("{field}.io"), "io mode", disk.io.as_deref(), &IO_MODES)?,
        // Upstream's choice: every disk but a CD-ROM with media and the downward metrics disk.
        discard: ((t.device != "cdrom" || source.is_none()) && !source.is_some_and(|s| s.is_read_only))
            .then(|| "unmap".to_owned()),
        ..DiskDriver::default()
    })
}

/// The disk's address (a PCI address, or a SCSI drive unit) and its pr-helper reservations.
fn place(out: &mut Disk, t: &Target<'_>, unit: usize, field: &str, ctx: &ConvertContext) -> Result<(), ConvertError> {
    if let Some(pci) = t.pci_address {
        out.address = Some(pci_address(pci, &format!("{field}.disk.pciAddress"))?);
    }
    if t.bus == "scsi" {
        out.address = Some(Address {
            address_type: "drive".to_owned(),
            controller: Some("0".to_owned()),
            bus: Some("0".to_owned()),
            target: Some("0".to_owned()),
            unit: Some(unit.to_string()),
            ..Address::default()
        });
    }
    if t.reservation {
        let source = out.source.get_or_insert_with(DiskSource::default);
        source.reservations = Some(Reservations {
            managed: "no".to_owned(),
            source: UnixSource {
                source_type: Some("unix".to_owned()),
                mode: Some("client".to_owned()),
                path: Some(ctx.layout.pr_helper_socket.clone()),
            },
        });
    }
    Ok(())
}

/// `<blockio>` from `blockSize.custom`. `matchVolume` and a discard granularity are refused by
/// `kubevirt_api::support` before conversion starts.
fn block_io(disk: &SpecDisk) -> Option<BlockIo> {
    let custom = disk.block_size.as_ref()?.custom.as_ref()?;
    Some(BlockIo {
        logical_block_size: Some(custom.logical),
        physical_block_size: Some(custom.physical),
        discard_granularity: None,
    })
}

#[cfg(test)]
mod tests {
    use super::device_suffix;

    #[test]
    fn device_suffixes_count_like_the_linux_sd_driver() {
        let names: Vec<String> = [0, 1, 25, 26, 27, 51, 52, 701, 702]
            .into_iter()
            .map(device_suffix)
            .collect();
        assert_eq!(names, ["a", "b", "z", "aa", "ab", "az", "ba", "zz", "aaa"]);
    }
}
