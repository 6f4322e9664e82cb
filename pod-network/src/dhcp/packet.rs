//! DHCPv4 messages (RFC 2131, options RFC 2132): the fixed BOOTP header, the magic cookie and the
//! options, read from untrusted bytes without panicking and written back.

use std::net::Ipv4Addr;

/// BOOTREQUEST.
pub const BOOT_REQUEST: u8 = 1;
/// BOOTREPLY.
pub const BOOT_REPLY: u8 = 2;
const MAGIC_COOKIE: [u8; 4] = [99, 130, 83, 99];
const HEADER: usize = 236;

/// Option codes used here.
pub mod code {
    /// Pad.
    pub const PAD: u8 = 0;
    /// Subnet mask.
    pub const SUBNET_MASK: u8 = 1;
    /// Routers.
    pub const ROUTER: u8 = 3;
    /// DNS servers.
    pub const DNS: u8 = 6;
    /// Host name.
    pub const HOSTNAME: u8 = 12;
    /// Domain name.
    pub const DOMAIN_NAME: u8 = 15;
    /// Interface MTU.
    pub const MTU: u8 = 26;
    /// Broadcast address.
    pub const BROADCAST: u8 = 28;
    /// Requested IP address.
    pub const REQUESTED_IP: u8 = 50;
    /// Lease time.
    pub const LEASE_TIME: u8 = 51;
    /// Message type.
    pub const MESSAGE_TYPE: u8 = 53;
    /// Server identifier.
    pub const SERVER_ID: u8 = 54;
    /// NTP servers.
    pub const NTP_SERVERS: u8 = 42;
    /// TFTP server name.
    pub const TFTP_SERVER_NAME: u8 = 66;
    /// Boot file name.
    pub const BOOT_FILE_NAME: u8 = 67;
    /// Domain search list (RFC 3397).
    pub const DOMAIN_SEARCH: u8 = 119;
    /// Classless static routes (RFC 3442).
    pub const CLASSLESS_ROUTES: u8 = 121;
    /// End.
    pub const END: u8 = 255;
}

/// DHCP message types (option 53).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MessageType {
    /// DHCPDISCOVER.
    Discover,
    /// DHCPOFFER.
    Offer,
    /// DHCPREQUEST.
    Request,
    /// DHCPDECLINE.
    Decline,
    /// DHCPACK.
    Ack,
    /// DHCPNAK.
    Nak,
    /// DHCPRELEASE.
    Release,
    /// DHCPINFORM.
    Inform,
}

impl MessageType {
    fn from_byte(b: u8) -> Option<Self> {
        Some(match b {
            1 => Self::Discover,
            2 => Self::Offer,
            3 => Self::Request,
            4 => Self::Decline,
            5 => Self::Ack,
            6 => Self::Nak,
            7 => Self::Release,
            8 => Self::Inform,
            _ => return None,
        })
    }

    fn to_byte(self) -> u8 {
        match self {
            Self::Discover => 1,
            Self::Offer => 2,
            Self::Request => 3,
            Self::Decline => 4,
            Self::Ack => 5,
            Self::Nak => 6,
            Self::Release => 7,
            Self::Inform => 8,
        }
    }
}

/// Why bytes are not a DHCP message.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PacketError {
    /// Shorter than the BOOTP header and cookie.
    #[error("a DHCP message has at least 240 bytes, this one {0}")]
    Short(usize),
    /// The magic cookie is wrong.
    #[error("not a DHCP message: wrong magic cookie")]
    Cookie,
    /// An option runs past the end.
    #[error("option {0} runs past the end of the message")]
    Truncated(u8),
}

/// One DHCP message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Packet {
    /// BOOTREQUEST or BOOTREPLY.
    pub op: u8,
    /// Transaction id.
    pub xid: u32,
    /// Seconds since the client began.
    pub secs: u16,
    /// Flags; bit 15 asks for broadcast replies.
    pub flags: u16,
    /// Client address (when it has one).
    pub ciaddr: Ipv4Addr,
    /// "Your" address: what the server gives.
    pub yiaddr: Ipv4Addr,
    /// Next server.
    pub siaddr: Ipv4Addr,
    /// Relay agent.
    pub giaddr: Ipv4Addr,
    /// Client hardware address (the first 6 bytes for Ethernet).
    pub chaddr: [u8; 16],
    /// Options in order, without pad and end.
    pub options: Vec<(u8, Vec<u8>)>,
}

fn ip(bytes: &[u8]) -> Ipv4Addr {
    Ipv4Addr::new(bytes[0], bytes[1], bytes[2], bytes[3])
}

impl Packet {
    /// Reads a message.
    pub fn parse(bytes: &[u8]) -> Result<Self, PacketError> {
        if bytes.len() < HEADER + MAGIC_COOKIE.len() {
            return Err(PacketError::Short(bytes.len()));
        }
        if bytes[HEADER..HEADER + 4] != MAGIC_COOKIE {
            return Err(PacketError::Cookie);
        }
        let mut chaddr = [0_u8; 16];
        chaddr.copy_from_slice(&bytes[28..44]);
        let mut options = Vec::new();
        let mut at = HEADER + 4;
        while at < bytes.len() {
            let code = bytes[at];
            at += 1;
            match code {
                code::PAD => {}
                code::END => break,
                _ => {
                    let len = usize::from(*bytes.get(at).ok_or(PacketError::Truncated(code))?);
                    let value = bytes.get(at + 1..at + 1 + len).ok_or(PacketError::Truncated(code))?;
                    options.push((code, value.to_vec()));
                    at += 1 + len;
                }
            }
        }
        Ok(Self {
            op: bytes[0],
            xid: u32::from_be_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]),
            secs: u16::from_be_bytes([bytes[8], bytes[9]]),
            flags: u16::from_be_bytes([bytes[10], bytes[11]]),
            ciaddr: ip(&bytes[12..16]),
            yiaddr: ip(&bytes[16..20]),
            siaddr: ip(&bytes[20..24]),
            giaddr: ip(&bytes[24..28]),
            chaddr,
            options,
        })
    }

    /// Writes the message: Ethernet, header, cookie, options (long ones split), end, padding to
    /// the 300 bytes some clients expect.
    #[must_use]
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = vec![0_u8; HEADER];
        out[0] = self.op;
        out[1] = 1; // Ethernet
        out[2] = 6;
        out[4..8].copy_from_slice(&self.xid.to_be_bytes());
        out[8..10].copy_from_slice(&self.secs.to_be_bytes());
        out[10..12].copy_from_slice(&self.flags.to_be_bytes());
        out[12..16].copy_from_slice(&self.ciaddr.octets());
        out[16..20].copy_from_slice(&self.yiaddr.octets());
        out[20..24].copy_from_slice(&self.siaddr.octets());
        out[24..28].copy_from_slice(&self.giaddr.octets());
        out[28..44].copy_from_slice(&self.chaddr);
        out.extend_from_slice(&MAGIC_COOKIE);
        for (code, value) in &self.options {
            if value.is_empty() {
                // A zero-length option (RFC 2132 allows them, e.g. rapid commit) is kept.
                out.extend_from_slice(&[*code, 0]);
            }
            for chunk in value.chunks(255) {
                out.push(*code);
                out.push(u8::try_from(chunk.len()).unwrap_or(u8::MAX));
                out.extend_from_slice(chunk);
            }
        }
        out.push(code::END);
        if out.len() < 300 {
            out.resize(300, 0);
        }
        out
    }

    /// An option's value, when present.
    #[must_use]
    pub fn option(&self, code: u8) -> Option<&[u8]> {
        self.options.iter().find(|(c, _)| *c == code).map(|(_, v)| v.as_slice())
    }

    /// Option 53.
    #[must_use]
    pub fn message_type(&self) -> Option<MessageType> {
        self.option(code::MESSAGE_TYPE)
            .and_then(|v| v.first())
            .and_then(|b| MessageType::from_byte(*b))
    }

    /// Sets option 53.
    pub fn set_message_type(&mut self, kind: MessageType) {
        self.options.push((code::MESSAGE_TYPE, vec![kind.to_byte()]));
    }

    /// The client's Ethernet address.
    #[must_use]
    pub fn mac(&self) -> [u8; 6] {
        let mut mac = [0_u8; 6];
        mac.copy_from_slice(&self.chaddr[..6]);
        mac
    }

    /// An IPv4 option (requested address, server id), when present and well formed.
    #[must_use]
    pub fn ipv4_option(&self, code: u8) -> Option<Ipv4Addr> {
        self.option(code).filter(|v| v.len() == 4).map(ip)
    }
}

/// Encodes domain names for option 119 (RFC 3397), without compression.
#[must_use]
pub fn encode_search_list(domains: &[String]) -> Vec<u8> {
    let mut out = Vec::new();
    for domain in domains {
        for label in domain.trim_end_matches('.').split('.').filter(|l| !l.is_empty()) {
            let label = &label.as_bytes()[..label.len().min(63)];
            out.push(u8::try_from(label.len()).unwrap_or(63));
            out.extend_from_slice(label);
        }
        out.push(0);
    }
    out
}
