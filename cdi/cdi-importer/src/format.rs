//! What a stream is, from its first bytes, as upstream's importer reads them: a compression layer
//! to take off (gzip, xz, zstd), an image format that `qemu-img` must convert (qcow2 with its
//! virtual size, VMDK, VDI, VHD, VHDX), or raw data (an ISO is raw). Pure.

/// How many leading bytes the detection reads (every magic number lies within them).
pub const HEADER_LEN: usize = 512;

/// A compression layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compression {
    /// gzip.
    Gzip,
    /// xz.
    Xz,
    /// Zstandard.
    Zstd,
}

/// An image format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ImageFormat {
    /// Raw bytes (ISOs included): written as they come.
    Raw,
    /// QEMU's copy-on-write format, with its virtual size in bytes.
    Qcow2 {
        /// The disk's size as the guest sees it.
        virtual_size: u64,
    },
    /// VMware's.
    Vmdk,
    /// VirtualBox's.
    Vdi,
    /// Hyper-V's older format.
    Vhd,
    /// Hyper-V's.
    Vhdx,
}

impl ImageFormat {
    /// Whether `qemu-img` must convert it (it cannot be written as it comes).
    #[must_use]
    pub fn needs_conversion(self) -> bool {
        !matches!(self, Self::Raw)
    }

    /// `qemu-img`'s name for it (given with `-f`, so that qemu-img never guesses).
    #[must_use]
    pub fn qemu_name(self) -> &'static str {
        match self {
            Self::Raw => "raw",
            Self::Qcow2 { .. } => "qcow2",
            Self::Vmdk => "vmdk",
            Self::Vdi => "vdi",
            Self::Vhd => "vpc",
            Self::Vhdx => "vhdx",
        }
    }
}

/// What the first bytes say.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Detected {
    /// A compression layer: take it off and look again.
    Compressed(Compression),
    /// The image itself.
    Image(ImageFormat),
}

/// Whether `header` has `magic` at `offset`.
fn has(header: &[u8], offset: usize, magic: &[u8]) -> bool {
    header.get(offset..offset + magic.len()) == Some(magic)
}

/// Reads what `header` (the stream's first bytes, up to [`HEADER_LEN`]) is. Anything unknown is
/// raw, as upstream treats it.
#[must_use]
pub fn detect(header: &[u8]) -> Detected {
    if has(header, 0, &[0x1f, 0x8b]) {
        return Detected::Compressed(Compression::Gzip);
    }
    if has(header, 0, &[0xfd, b'7', b'z', b'X', b'Z', 0x00]) {
        return Detected::Compressed(Compression::Xz);
    }
    if has(header, 0, &[0x28, 0xb5, 0x2f, 0xfd]) {
        return Detected::Compressed(Compression::Zstd);
    }
    if has(header, 0, b"QFI\xfb") {
        let virtual_size = header
            .get(24..32)
            .and_then(|b| <[u8; 8]>::try_from(b).ok())
            .map_or(0, u64::from_be_bytes);
        return Detected::Image(ImageFormat::Qcow2 { virtual_size });
    }
    if has(header, 0, b"KDMV") {
        return Detected::Image(ImageFormat::Vmdk);
    }
    if has(header, 0x40, &[0x7f, 0x10, 0xda, 0xbe]) {
        return Detected::Image(ImageFormat::Vdi);
    }
    if has(header, 0, b"conectix") {
        return Detected::Image(ImageFormat::Vhd);
    }
    if has(header, 0, b"vhdxfile") {
        return Detected::Image(ImageFormat::Vhdx);
    }
    Detected::Image(ImageFormat::Raw)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(offset: usize, magic: &[u8]) -> Vec<u8> {
        let mut bytes = vec![0_u8; HEADER_LEN];
        bytes[offset..offset + magic.len()].copy_from_slice(magic);
        bytes
    }

    #[test]
    fn each_magic_number_is_told_apart() {
        let cases: [(Vec<u8>, Detected); 8] = [
            (header(0, &[0x1f, 0x8b, 0x08]), Detected::Compressed(Compression::Gzip)),
            (header(0, b"\xfd7zXZ\x00"), Detected::Compressed(Compression::Xz)),
            (
                header(0, &[0x28, 0xb5, 0x2f, 0xfd]),
                Detected::Compressed(Compression::Zstd),
            ),
            (header(0, b"KDMV"), Detected::Image(ImageFormat::Vmdk)),
            (
                header(0x40, &[0x7f, 0x10, 0xda, 0xbe]),
                Detected::Image(ImageFormat::Vdi),
            ),
            (header(0, b"conectix"), Detected::Image(ImageFormat::Vhd)),
            (header(0, b"vhdxfile"), Detected::Image(ImageFormat::Vhdx)),
            (header(0, b"\xeb\x63\x90"), Detected::Image(ImageFormat::Raw)),
        ];
        for (bytes, expected) in cases {
            assert_eq!(detect(&bytes), expected, "{:02x?}", &bytes[..8]);
        }
    }

    #[test]
    fn a_qcow2_header_gives_its_virtual_size() {
        let mut bytes = header(0, b"QFI\xfb\x00\x00\x00\x03");
        bytes[24..32].copy_from_slice(&(1_u64 << 30).to_be_bytes());
        let found = detect(&bytes);
        assert_eq!(found, Detected::Image(ImageFormat::Qcow2 { virtual_size: 1 << 30 }));
        assert!(matches!(found, Detected::Image(f) if f.needs_conversion()));
    }

    #[test]
    fn short_or_unknown_headers_are_raw_and_raw_is_written_as_it_comes() {
        assert_eq!(detect(&[]), Detected::Image(ImageFormat::Raw));
        assert_eq!(detect(b"QF"), Detected::Image(ImageFormat::Raw));
        assert_eq!(
            detect(b"QFI\xfb"),
            Detected::Image(ImageFormat::Qcow2 { virtual_size: 0 }),
            "a qcow2 cut short has no size to read"
        );
        // An ISO 9660 image says CD001 at 0x8001, beyond the header: raw.
        assert_eq!(detect(&header(1, b"CD001")), Detected::Image(ImageFormat::Raw));
        assert!(!ImageFormat::Raw.needs_conversion());
    }
}
