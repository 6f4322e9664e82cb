//! Devices other than disks, controllers and NICs: consoles, channels, graphics, inputs and the
//! small virtio devices.

use serde::{Deserialize, Serialize};

use super::{Address, Alias, ScaledInteger, UnixSource};

/// `<serial>`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Serial {
    /// `unix`, `pty`, `file`.
    #[serde(rename = "@type")]
    pub serial_type: String,
    /// Socket or file.
    pub source: Option<UnixSource>,
    /// Port.
    pub target: Option<SerialTarget>,
    /// Log of everything the guest writes.
    pub log: Option<Log>,
    /// Alias.
    pub alias: Option<Alias>,
}

/// `<target port type>`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SerialTarget {
    /// `serial`, `isa-serial`, ...
    #[serde(rename = "@type")]
    pub target_type: Option<String>,
    /// Port number.
    #[serde(rename = "@port")]
    pub port: Option<u32>,
}

/// `<log file append>`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Log {
    /// Log file.
    #[serde(rename = "@file")]
    pub file: String,
    /// `on` or `off`.
    #[serde(rename = "@append")]
    pub append: Option<String>,
}

/// `<console>`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Console {
    /// `pty` or `unix`.
    #[serde(rename = "@type")]
    pub console_type: String,
    /// Source (libvirt fills in the pty).
    pub source: Option<UnixSource>,
    /// Which device backs it.
    pub target: Option<SerialTarget>,
    /// Alias.
    pub alias: Option<Alias>,
}

/// `<channel>`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Channel {
    /// `unix`.
    #[serde(rename = "@type")]
    pub channel_type: String,
    /// Socket (libvirt picks one when absent).
    pub source: Option<UnixSource>,
    /// Guest-visible name.
    pub target: ChannelTarget,
    /// Alias.
    pub alias: Option<Alias>,
    /// Address.
    pub address: Option<Address>,
}

/// `<target type='virtio' name state>`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChannelTarget {
    /// `virtio`.
    #[serde(rename = "@type")]
    pub target_type: String,
    /// Port name, e.g. `org.qemu.guest_agent.0`.
    #[serde(rename = "@name")]
    pub name: Option<String>,
    /// `connected` or `disconnected` (libvirt reports it).
    #[serde(rename = "@state")]
    pub state: Option<String>,
}

/// `<input type bus model>`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Input {
    /// `tablet`, `mouse`, `keyboard`.
    #[serde(rename = "@type")]
    pub input_type: String,
    /// `usb`, `virtio`, `ps2`.
    #[serde(rename = "@bus")]
    pub bus: Option<String>,
    /// `virtio` for virtio inputs.
    #[serde(rename = "@model")]
    pub model: Option<String>,
    /// Alias.
    pub alias: Option<Alias>,
    /// Address.
    pub address: Option<Address>,
}

/// `<graphics type='vnc'>`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Graphics {
    /// `vnc`.
    #[serde(rename = "@type")]
    pub graphics_type: String,
    /// VNC UNIX socket.
    #[serde(rename = "@socket")]
    pub socket: Option<String>,
    /// Where it listens.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub listen: Vec<GraphicsListen>,
}

/// `<listen type='socket' socket>`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GraphicsListen {
    /// `socket`, `address`, `none`.
    #[serde(rename = "@type")]
    pub listen_type: String,
    /// Socket path.
    #[serde(rename = "@socket")]
    pub socket: Option<String>,
}

/// `<video><model/></video>`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Video {
    /// Model.
    pub model: VideoModel,
    /// Alias.
    pub alias: Option<Alias>,
}

/// `<model type heads vram>`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VideoModel {
    /// `vga`, `bochs`, `virtio`.
    #[serde(rename = "@type")]
    pub model_type: String,
    /// Video RAM in KiB.
    #[serde(rename = "@vram")]
    pub vram: Option<u32>,
    /// Heads.
    #[serde(rename = "@heads")]
    pub heads: Option<u32>,
}

/// `<watchdog model action>`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Watchdog {
    /// `i6300esb`.
    #[serde(rename = "@model")]
    pub model: String,
    /// `poweroff`, `reset`, `shutdown`.
    #[serde(rename = "@action")]
    pub action: Option<String>,
    /// Alias.
    pub alias: Option<Alias>,
}

/// `<rng model><backend model='random'>/dev/urandom</backend></rng>`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rng {
    /// virtio model.
    #[serde(rename = "@model")]
    pub model: String,
    /// Entropy source.
    pub backend: RngBackend,
    /// Alias.
    pub alias: Option<Alias>,
}

/// `<backend model>path</backend>`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RngBackend {
    /// `random`.
    #[serde(rename = "@model")]
    pub model: String,
    /// Device.
    #[serde(rename = "$text")]
    pub source: Option<String>,
}

/// `<tpm model><backend type version persistent_state/></tpm>`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tpm {
    /// `tpm-tis` or `tpm-crb`.
    #[serde(rename = "@model")]
    pub model: String,
    /// Emulator backend.
    pub backend: TpmBackend,
}

/// `<backend type='emulator' version='2.0'>`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TpmBackend {
    /// `emulator`.
    #[serde(rename = "@type")]
    pub backend_type: String,
    /// `2.0`.
    #[serde(rename = "@version")]
    pub version: Option<String>,
    /// `yes` to keep state.
    #[serde(rename = "@persistent_state")]
    pub persistent_state: Option<String>,
}

/// `<sound model>`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sound {
    /// `ich9` or `ac97`.
    #[serde(rename = "@model")]
    pub model: String,
    /// Alias.
    pub alias: Option<Alias>,
}

/// `<redirdev type='unix' bus='usb'><source mode='bind' path/></redirdev>`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Redirdev {
    /// `unix`.
    #[serde(rename = "@type")]
    pub redirdev_type: String,
    /// `usb`.
    #[serde(rename = "@bus")]
    pub bus: String,
    /// Socket.
    pub source: Option<UnixSource>,
}

/// `<memballoon model freePageReporting>`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Memballoon {
    /// `virtio-non-transitional` or `none`.
    #[serde(rename = "@model")]
    pub model: String,
    /// `on` or `off`.
    #[serde(rename = "@freePageReporting")]
    pub free_page_reporting: Option<String>,
    /// Statistics period.
    pub stats: Option<BalloonStats>,
    /// Alias.
    pub alias: Option<Alias>,
    /// Address.
    pub address: Option<Address>,
}

/// `<stats period>`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BalloonStats {
    /// Seconds.
    #[serde(rename = "@period")]
    pub period: u32,
}

/// `<vsock model><cid auto address/></vsock>`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Vsock {
    /// virtio model.
    #[serde(rename = "@model")]
    pub model: Option<String>,
    /// Context id.
    pub cid: VsockCid,
}

/// `<cid auto address>`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VsockCid {
    /// `yes` lets libvirt pick.
    #[serde(rename = "@auto")]
    pub auto: String,
    /// The context id.
    #[serde(rename = "@address")]
    pub address: Option<u32>,
}

/// `<memory model='virtio-mem'>`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryDevice {
    /// `virtio-mem`.
    #[serde(rename = "@model")]
    pub model: String,
    /// Size and granularity.
    pub target: MemoryTarget,
}

/// `<target>` of a memory device.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryTarget {
    /// Hotpluggable size.
    pub size: ScaledInteger,
    /// NUMA node.
    pub node: Option<u32>,
    /// Block size.
    pub block: Option<ScaledInteger>,
    /// Currently requested size.
    pub requested: Option<ScaledInteger>,
}

/// `<panic model='isa'/>`: how the guest tells the host it crashed.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Panic {
    /// `isa` or `hyperv`; libvirt's default for the machine when absent.
    #[serde(rename = "@model")]
    pub model: Option<String>,
}
