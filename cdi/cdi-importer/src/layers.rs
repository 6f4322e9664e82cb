//! Taking a stream apart: its first bytes are read ([`format::detect`]), a compression layer is
//! taken off and the rest looked at again, until the image itself shows. gzip streams of several
//! members (as `pigz` writes) and xz streams of several blocks are read whole.

use std::io::{self, Cursor, Read};

use crate::format::{self, Compression, Detected, ImageFormat};

/// How many compression layers are taken off before the stream is refused (a gzip inside an xz
/// is two; no real image has more).
pub const MAX_LAYERS: usize = 3;

/// A stream being read.
pub type Stream = Box<dyn Read + Send>;

/// Why a stream could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum LayerError {
    /// The source failed while its first bytes were read.
    #[error("reading the image's header: {0}")]
    Header(#[source] io::Error),
    /// Compression inside compression, more than [`MAX_LAYERS`] deep.
    #[error("the image is compressed more than {MAX_LAYERS} layers deep")]
    TooDeep,
    /// A decoder could not start.
    #[error("starting the {compression:?} decoder: {source}")]
    Decoder {
        /// Which one.
        compression: Compression,
        /// Its error.
        #[source]
        source: io::Error,
    },
}

/// Reads up to [`format::HEADER_LEN`] bytes (fewer only at the end of the stream) and gives them
/// back with a stream that yields them again before the rest.
///
/// # Errors
/// The source's own.
pub fn peek(mut stream: Stream) -> io::Result<(Vec<u8>, Stream)> {
    let mut header = Vec::with_capacity(format::HEADER_LEN);
    (&mut stream).take(format::HEADER_LEN as u64).read_to_end(&mut header)?;
    let replay = Cursor::new(header.clone());
    Ok((header, Box::new(replay.chain(stream))))
}

fn decoder(compression: Compression, stream: Stream) -> Result<Stream, LayerError> {
    Ok(match compression {
        Compression::Gzip => Box::new(flate2::read::MultiGzDecoder::new(stream)),
        Compression::Xz => Box::new(liblzma::read::XzDecoder::new_multi_decoder(stream)),
        Compression::Zstd => Box::new(
            zstd::stream::read::Decoder::new(stream).map_err(|source| LayerError::Decoder { compression, source })?,
        ),
    })
}

/// What the stream holds once its compression is off.
pub struct Opened {
    /// The image's format.
    pub format: ImageFormat,
    /// The layers taken off, outermost first.
    pub compression: Vec<Compression>,
    /// The image's bytes.
    pub stream: Stream,
}

impl std::fmt::Debug for Opened {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Opened")
            .field("format", &self.format)
            .field("compression", &self.compression)
            .finish_non_exhaustive()
    }
}

/// Takes `stream`'s compression off and says what the image is.
///
/// # Errors
/// [`LayerError`].
pub fn open(stream: Stream) -> Result<Opened, LayerError> {
    let mut stream = stream;
    let mut compression = Vec::new();
    loop {
        let (header, rest) = peek(stream).map_err(LayerError::Header)?;
        match format::detect(&header) {
            Detected::Image(format) => {
                return Ok(Opened {
                    format,
                    compression,
                    stream: rest,
                });
            }
            Detected::Compressed(_) if compression.len() == MAX_LAYERS => return Err(LayerError::TooDeep),
            Detected::Compressed(layer) => {
                compression.push(layer);
                stream = decoder(layer, rest)?;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;

    use super::*;

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        encoder.write_all(data).expect("gzip");
        encoder.finish().expect("gzip")
    }

    fn xz(data: &[u8]) -> Vec<u8> {
        let mut encoder = liblzma::write::XzEncoder::new(Vec::new(), 1);
        encoder.write_all(data).expect("xz");
        encoder.finish().expect("xz")
    }

    fn zstd(data: &[u8]) -> Vec<u8> {
        zstd::stream::encode_all(data, 1).expect("zstd")
    }

    fn read_all(opened: Opened) -> Vec<u8> {
        let mut out = Vec::new();
        let mut stream = opened.stream;
        stream.read_to_end(&mut out).expect("the image");
        out
    }

    fn image() -> Vec<u8> {
        (0..200_000_u32).flat_map(|n| (n % 251).to_le_bytes()).collect()
    }

    #[test]
    fn each_compression_is_taken_off_and_the_image_comes_back_whole() {
        let cases: [(Vec<u8>, Vec<Compression>); 5] = [
            (image(), vec![]),
            (gzip(&image()), vec![Compression::Gzip]),
            (xz(&image()), vec![Compression::Xz]),
            (zstd(&image()), vec![Compression::Zstd]),
            (xz(&gzip(&image())), vec![Compression::Xz, Compression::Gzip]),
        ];
        for (bytes, layers) in cases {
            let opened = open(Box::new(Cursor::new(bytes))).expect("opened");
            assert_eq!(opened.format, ImageFormat::Raw);
            assert_eq!(opened.compression, layers);
            assert!(read_all(opened) == image(), "{layers:?} came back whole");
        }
    }

    #[test]
    fn a_gzip_of_several_members_is_read_to_its_end() {
        let half = image().len() / 2;
        let mut bytes = gzip(&image()[..half]);
        bytes.extend(gzip(&image()[half..]));
        let opened = open(Box::new(Cursor::new(bytes))).expect("opened");
        assert!(read_all(opened) == image());
    }

    #[test]
    fn a_compressed_qcow2_is_seen_under_its_compression() {
        let mut qcow2 = b"QFI\xfb\x00\x00\x00\x03".to_vec();
        qcow2.resize(64, 0);
        qcow2[24..32].copy_from_slice(&(5_u64 << 20).to_be_bytes());
        let opened = open(Box::new(Cursor::new(gzip(&qcow2)))).expect("opened");
        assert_eq!(opened.format, ImageFormat::Qcow2 { virtual_size: 5 << 20 });
        assert!(read_all(opened) == qcow2, "the header is given back");
    }

    #[test]
    fn short_streams_are_raw_and_come_back_whole() {
        for bytes in [
            Vec::new(),
            b"x".to_vec(),
            vec![7; format::HEADER_LEN],
            vec![7; format::HEADER_LEN + 1],
        ] {
            let opened = open(Box::new(Cursor::new(bytes.clone()))).expect("opened");
            assert_eq!(opened.format, ImageFormat::Raw);
            assert_eq!(read_all(opened), bytes);
        }
    }

    #[test]
    fn compression_nested_too_deep_is_refused() {
        let mut bytes = image();
        for _ in 0..=MAX_LAYERS {
            bytes = gzip(&bytes);
        }
        assert!(matches!(open(Box::new(Cursor::new(bytes))), Err(LayerError::TooDeep)));
    }

    #[test]
    fn a_corrupt_gzip_fails_when_read_not_silently() {
        let mut bytes = gzip(&image());
        let middle = bytes.len() / 2;
        bytes.truncate(middle);
        let opened = open(Box::new(Cursor::new(bytes))).expect("the header is fine");
        let mut out = Vec::new();
        let mut stream = opened.stream;
        assert!(stream.read_to_end(&mut out).is_err(), "a cut gzip is an error");
    }
}
