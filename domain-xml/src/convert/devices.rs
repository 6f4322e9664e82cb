//! The devices besides disks and NICs: controllers, serial console, guest-agent channel, VNC and
//! video, balloon, inputs, RNG, watchdog, vsock, TPM, sound and USB redirection.

use kubevirt_api::v1::{Devices as SpecDevices, VirtualMachineInstance};

use super::disks::DiskNeeds;
use super::{ConvertContext, ConvertError, virtio_model};
use crate::model::{
    Alias, BalloonStats, Channel, ChannelTarget, Console, Controller, ControllerDriver, Devices, Domain, Graphics,
    GraphicsListen, Input, Log, Memballoon, PciHole64, Redirdev, Rng, RngBackend, Serial, SerialTarget, Sound, Tpm,
    TpmBackend, UnixSource, Video, VideoModel, Vsock, VsockCid, Watchdog,
};

/// Name of the guest agent's virtio-serial port.
pub const GUEST_AGENT_CHANNEL: &str = "org.qemu.guest_agent.0";
/// USB redirection ports upstream offers for `clientPassthrough`.
const USB_REDIRECT_PORTS: u32 = 4;

/// Adds every device of this module.
pub fn apply(
    vmi: &VirtualMachineInstance,
    ctx: &ConvertContext,
    vcpus: u32,
    disks: &DiskNeeds,
    domain: &mut Domain,
) -> Result<(), ConvertError> {
    let devices = &vmi.spec.domain.devices;
    let uid = vmi.metadata.uid.as_deref().unwrap_or_default();
    let inputs = inputs(devices)?;
    let usb_needed =
        disks.usb || devices.client_passthrough.is_some() || inputs.iter().any(|i| i.bus.as_deref() == Some("usb"));
    let out = &mut domain.devices;
    out.controller
        .push(controller("usb", if usb_needed { "qemu-xhci" } else { "none" }));
    if devices.autoattach_serial_console != Some(false) {
        out.controller.push(controller("virtio-serial", &virtio_model(devices)));
        add_serial_console(devices, ctx, uid, out);
    }
    if disks.scsi || devices.disable_hotplug != Some(true) {
        let mut scsi = controller("scsi", &virtio_model(devices));
        if let Some(iothread) = disks.scsi_iothread {
            scsi.driver = Some(ControllerDriver {
                iothread: Some(iothread),
                queues: Some(vcpus),
            });
        }
        out.controller.push(scsi);
    }
    if is_pci_hole64_disabled(vmi) {
        out.controller.push(Controller {
            pcihole64: Some(PciHole64 {
                unit: Some("KiB".to_owned()),
                size: 0,
            }),
            ..controller("pci", "pcie-root")
        });
    }
    out.channel.push(Channel {
        channel_type: "unix".to_owned(),
        source: None,
        target: ChannelTarget {
            target_type: "virtio".to_owned(),
            name: Some(GUEST_AGENT_CHANNEL.to_owned()),
            state: None,
        },
        alias: None,
        address: None,
    });
    if devices.autoattach_graphics_device != Some(false) {
        out.graphics.push(Graphics {
            graphics_type: "vnc".to_owned(),
            socket: None,
            listen: vec![GraphicsListen {
                listen_type: "socket".to_owned(),
                socket: Some(format!("{}/virt-vnc", ctx.layout.vmi_private_dir(uid))),
            }],
        });
        out.video.push(video(vmi, ctx));
    }
    out.memballoon = Some(memballoon(devices, ctx));
    out.input = inputs;
    add_optional_devices(vmi, ctx, out)
}

/// The unix serial port (with its log) and the pty console on top of it.
fn add_serial_console(devices: &SpecDevices, ctx: &ConvertContext, uid: &str, out: &mut Devices) {
    let serial_dir = ctx.layout.vmi_private_dir(uid);
    // The VMI's logSerialConsole, else the cluster's setting.
    let log_enabled = devices.log_serial_console.unwrap_or(ctx.serial_console_log);
    out.serial.push(Serial {
        serial_type: "unix".to_owned(),
        source: Some(UnixSource {
            source_type: None,
            mode: Some("bind".to_owned()),
            path: Some(format!("{serial_dir}/virt-serial0")),
        }),
        target: Some(SerialTarget {
            target_type: None,
            port: Some(0),
        }),
        log: log_enabled.then(|| Log {
            file: ctx.layout.serial_console_log(uid),
            append: Some("on".to_owned()),
        }),
        alias: None,
    });
    out.console.push(Console {
        console_type: "pty".to_owned(),
        source: None,
        target: Some(SerialTarget {
            target_type: Some("serial".to_owned()),
            port: Some(0),
        }),
        alias: None,
    });
}

/// RNG, watchdog, vsock, TPM, sound and USB redirection: each only when the spec asks for it.
fn add_optional_devices(
    vmi: &VirtualMachineInstance,
    ctx: &ConvertContext,
    out: &mut Devices,
) -> Result<(), ConvertError> {
    let devices = &vmi.spec.domain.devices;
    let uid = vmi.metadata.uid.as_deref().unwrap_or_default();
    if devices.rng.is_some() {
        out.rng.push(Rng {
            model: virtio_model(devices),
            backend: RngBackend {
                model: "random".to_owned(),
                source: Some("/dev/urandom".to_owned()),
            },
            alias: None,
        });
    }
    if let Some(watchdog) = &devices.watchdog {
        let Some(esb) = &watchdog.i6300esb else {
            return Err(ConvertError::invalid(
                "spec.domain.devices.watchdog",
                "a watchdog needs a device: set i6300esb",
            ));
        };
        let action = esb.action.as_deref().filter(|a| !a.is_empty()).unwrap_or("reset");
        if !["poweroff", "reset", "shutdown"].contains(&action) {
            return Err(ConvertError::invalid(
                "spec.domain.devices.watchdog.i6300esb.action",
                format!("watchdog action {action} is not one of poweroff, reset, shutdown"),
            ));
        }
        out.watchdog.push(Watchdog {
            model: "i6300esb".to_owned(),
            action: Some(action.to_owned()),
            alias: Some(Alias::user(&watchdog.name)),
        });
    }
    if devices.autoattach_vsock == Some(true) {
        let cid = vmi.status.as_ref().and_then(|s| s.vsock_cid);
        out.vsock = Some(Vsock {
            model: Some("virtio-non-transitional".to_owned()),
            cid: VsockCid {
                auto: if cid.is_some() { "no" } else { "yes" }.to_owned(),
                address: cid,
            },
        });
    }
    if let Some(tpm) = devices.tpm.as_ref().filter(|t| t.enabled != Some(false)) {
        let persistent = tpm.persistent == Some(true);
        out.tpm.push(Tpm {
            model: if persistent { "tpm-crb" } else { "tpm-tis" }.to_owned(),
            backend: TpmBackend {
                backend_type: "emulator".to_owned(),
                version: Some("2.0".to_owned()),
                persistent_state: persistent.then(|| "yes".to_owned()),
            },
        });
    }
    if let Some(sound) = &devices.sound {
        // Upstream falls back to ich9 for any model but ac97.
        let model = if sound.model.as_deref() == Some("ac97") {
            "ac97"
        } else {
            "ich9"
        };
        out.sound.push(Sound {
            model: model.to_owned(),
            alias: Some(Alias::user(&sound.name)),
        });
    }
    if devices.client_passthrough.is_some() {
        for port in 0..USB_REDIRECT_PORTS {
            out.redirdev.push(Redirdev {
                redirdev_type: "unix".to_owned(),
                bus: "usb".to_owned(),
                source: Some(UnixSource {
                    source_type: None,
                    mode: Some("bind".to_owned()),
                    path: Some(format!("{}/virt-usbredir-{port}", ctx.layout.vmi_private_dir(uid))),
                }),
            });
        }
    }
    Ok(())
}

/// The `kubevirt.io/disablePCIHole64` annotation says `true`, in any case (as upstream reads it):
/// a guest that cannot cope with a 64-bit PCI hole, such as Windows XP.
fn is_pci_hole64_disabled(vmi: &VirtualMachineInstance) -> bool {
    vmi.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(kubevirt_api::well_known::annotations::DISABLE_PCI_HOLE64))
        .is_some_and(|v| v.eq_ignore_ascii_case("true"))
}

fn controller(kind: &str, model: &str) -> Controller {
    Controller {
        controller_type: kind.to_owned(),
        index: Some("0".to_owned()),
        model: Some(model.to_owned()),
        ..Controller::default()
    }
}

fn video(vmi: &VirtualMachineInstance, ctx: &ConvertContext) -> Video {
    let is_efi = vmi
        .spec
        .domain
        .firmware
        .as_ref()
        .and_then(|f| f.bootloader.as_ref())
        .is_some_and(|b| b.efi.is_some());
    let requested = vmi
        .spec
        .domain
        .devices
        .video
        .as_ref()
        .and_then(|v| v.video_type.clone())
        .filter(|t| !t.is_empty());
    // A type the user chose gets upstream's 16 MiB of VRAM, as the default VGA does; the bochs
    // display chosen for EFI guests keeps its own default.
    let (model_type, vram) = match requested {
        Some(chosen) => (chosen, Some(16_384)),
        None if is_efi && ctx.bochs_display_for_efi => ("bochs".to_owned(), None),
        None => ("vga".to_owned(), Some(16_384)),
    };
    Video {
        model: VideoModel {
            model_type,
            vram,
            heads: Some(1),
        },
        alias: None,
    }
}

fn memballoon(devices: &SpecDevices, ctx: &ConvertContext) -> Memballoon {
    if devices.autoattach_mem_balloon == Some(false) {
        return Memballoon {
            model: "none".to_owned(),
            ..Memballoon::default()
        };
    }
    Memballoon {
        model: virtio_model(devices),
        free_page_reporting: ctx.free_page_reporting.then(|| "on".to_owned()),
        stats: (ctx.mem_balloon_stats_period > 0).then_some(BalloonStats {
            period: ctx.mem_balloon_stats_period,
        }),
        alias: None,
        address: None,
    }
}

fn inputs(devices: &SpecDevices) -> Result<Vec<Input>, ConvertError> {
    devices
        .inputs
        .iter()
        .enumerate()
        .map(|(i, input)| {
            let field = format!("spec.domain.devices.inputs[{i}]");
            if input.input_type != "tablet" {
                return Err(ConvertError::invalid(
                    format!("{field}.type"),
                    format!("input type {} is not supported: only tablet", input.input_type),
                ));
            }
            let bus = input.bus.as_deref().filter(|b| !b.is_empty()).unwrap_or("usb");
            if bus != "usb" && bus != "virtio" {
                return Err(ConvertError::invalid(
                    format!("{field}.bus"),
                    format!("input bus {bus} is not one of usb, virtio"),
                ));
            }
            Ok(Input {
                input_type: "tablet".to_owned(),
                bus: Some(bus.to_owned()),
                model: (bus == "virtio").then(|| "virtio".to_owned()),
                alias: Some(Alias::user(&input.name)),
                address: None,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_vmis_log_serial_console_wins_over_the_clusters_setting() {
        // (the cluster logs, the VMI's logSerialConsole, logged)
        let cases = [
            (true, None, true),
            (false, None, false),
            (true, Some(false), false),
            (false, Some(true), true),
            (true, Some(true), true),
            (false, Some(false), false),
        ];
        for (cluster, vmi, logged) in cases {
            let ctx = ConvertContext {
                serial_console_log: cluster,
                ..ConvertContext::default()
            };
            let devices = SpecDevices {
                log_serial_console: vmi,
                ..SpecDevices::default()
            };
            let mut out = Devices::default();
            add_serial_console(&devices, &ctx, "uid", &mut out);
            assert_eq!(
                out.serial.first().and_then(|s| s.log.as_ref()).is_some(),
                logged,
                "cluster {cluster}, VMI {vmi:?}"
            );
        }
    }
}
