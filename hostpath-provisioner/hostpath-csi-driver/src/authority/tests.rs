use pretty_assertions::assert_eq;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use super::*;

fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let length = u32::try_from(payload.len()).expect("length");
    let mut out = length.to_be_bytes()[1..].to_vec();
    out.extend_from_slice(&[kind, flags]);
    out.extend_from_slice(&stream.to_be_bytes());
    out.extend_from_slice(payload);
    out
}

/// What the server reads: its frames, and the header blocks decoded.
/// A decoded header block.
type HeaderList = Vec<(Vec<u8>, Vec<u8>)>;

fn read_frames(mut bytes: &[u8]) -> (Vec<(u8, u8, u32)>, Vec<HeaderList>) {
    assert!(bytes.starts_with(PREFACE));
    bytes = &bytes[PREFACE.len()..];
    let mut decoder = fluke_hpack::Decoder::new();
    let (mut frames, mut blocks) = (Vec::new(), Vec::new());
    while !bytes.is_empty() {
        let length = usize::from(bytes[0]) << 16 | usize::from(bytes[1]) << 8 | usize::from(bytes[2]);
        let (kind, flags) = (bytes[3], bytes[4]);
        let stream = u32::from_be_bytes([bytes[5], bytes[6], bytes[7], bytes[8]]);
        let payload = &bytes[9..9 + length];
        frames.push((kind, flags, stream));
        if kind == HEADERS {
            let block = if flags & PRIORITY != 0 { &payload[5..] } else { payload };
            blocks.push(decoder.decode(block).expect("decoded"));
        }
        bytes = &bytes[9 + length..];
    }
    (frames, blocks)
}

#[tokio::test]
async fn a_path_as_authority_becomes_localhost_and_the_rest_passes_as_it_is() {
    let mut client_encoder = fluke_hpack::Encoder::new();
    let socket = b"/var/lib/kubelet/plugins_registry/kubevirt.io.hostpath-provisioner-reg.sock";
    let request = |encoder: &mut fluke_hpack::Encoder<'_>| {
        encoder.encode([
            (&b":method"[..], &b"POST"[..]),
            (b":scheme", b"http"),
            (b":path", b"/pluginregistration.Registration/GetInfo"),
            (b":authority", &socket[..]),
            (b"content-type", b"application/grpc"),
        ])
    };
    let first = request(&mut client_encoder);
    // The second request names the authority from the dynamic table.
    let second = request(&mut client_encoder);
    let mut sent = PREFACE.to_vec();
    sent.extend(frame(0x4, 0, 0, &[0, 3, 0, 0, 0, 100]));
    // A padded HEADERS frame with a priority, its block split into a CONTINUATION.
    let mut padded = vec![2];
    padded.extend_from_slice(&[0, 0, 0, 0, 16]);
    padded.extend_from_slice(&first[..10]);
    padded.extend_from_slice(&[0, 0]);
    sent.extend(frame(HEADERS, PADDED | PRIORITY, 1, &padded));
    sent.extend(frame(CONTINUATION, END_HEADERS, 1, &first[10..]));
    sent.extend(frame(0x0, 0x1, 1, b"\0\0\0\0\0"));
    sent.extend(frame(HEADERS, END_HEADERS, 3, &second));
    let (mut client, server) = tokio::io::duplex(1 << 16);
    let mut fixed = AuthorityFix::new(server);
    client.write_all(&sent).await.expect("sent");
    drop(client);
    let mut received = Vec::new();
    fixed.read_to_end(&mut received).await.expect("read");
    let (frames, blocks) = read_frames(&received);
    assert_eq!(
        frames,
        [
            (0x4, 0, 0),
            (HEADERS, PRIORITY | END_HEADERS, 1),
            (0x0, 0x1, 1),
            (HEADERS, END_HEADERS, 3)
        ]
    );
    for block in &blocks {
        let authority = block
            .iter()
            .find(|(n, _)| n.as_slice() == b":authority")
            .expect("authority");
        assert_eq!(authority.1, b"localhost");
        let path = block.iter().find(|(n, _)| n.as_slice() == b":path").expect("path");
        assert_eq!(path.1, b"/pluginregistration.Registration/GetInfo");
    }
}

#[test]
fn authorities_are_told_from_paths() {
    assert!(valid_authority(b"localhost"));
    assert!(valid_authority(b"registration:80"));
    assert!(!valid_authority(b"/var/lib/kubelet/plugins_registry/x-reg.sock"));
    assert!(!valid_authority(b"\xff"));
}

#[tokio::test]
async fn a_frame_inside_a_header_block_ends_the_connection() {
    let block = fluke_hpack::Encoder::new().encode([(&b":authority"[..], &b"/x.sock"[..])]);
    let mut sent = PREFACE.to_vec();
    sent.extend(frame(HEADERS, 0, 1, &block[..2]));
    sent.extend(frame(0x0, 0, 1, b"data"));
    let (mut client, server) = tokio::io::duplex(1 << 16);
    let mut fixed = AuthorityFix::new(server);
    client.write_all(&sent).await.expect("sent");
    drop(client);
    let mut received = Vec::new();
    let error = fixed.read_to_end(&mut received).await.expect_err("refused");
    assert_eq!(error.kind(), std::io::ErrorKind::InvalidData);
}
