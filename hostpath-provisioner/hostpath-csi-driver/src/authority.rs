//! The kubelet dials a plugin's registration socket with grpc-go, whose `:authority` is then the
//! socket's path (the kubelet's CSI client says `localhost`; its registration dialer does not).
//! A path is not an authority, and the HTTP/2 server refuses such a request. [`AuthorityFix`]
//! sits between the socket and the server: it reads the client's frames, and re-encodes each
//! header block whose `:authority` is not one with `localhost` in its place; everything else,
//! and all the server writes, passes through as it is.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Buf as _, BytesMut};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The client connection preface (RFC 9113, 3.4).
const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
const HEADERS: u8 = 0x1;
const CONTINUATION: u8 = 0x9;
const END_HEADERS: u8 = 0x4;
const PADDED: u8 = 0x8;
const PRIORITY: u8 = 0x20;
/// The largest frame a peer takes before it says otherwise (RFC 9113, 4.2).
const MAX_FRAME: usize = 16_384;
/// The largest header block taken (the registration's are a few hundred bytes).
const MAX_BLOCK: usize = 64 * 1024;

/// Whether `value` is an authority the server takes (`host[:port]`, a registered name).
#[must_use]
pub fn valid_authority(value: &[u8]) -> bool {
    std::str::from_utf8(value).is_ok_and(|text| !text.contains('/') && text.parse::<http::uri::Authority>().is_ok())
}

/// A header block being read: the HEADERS frame's flags, stream and priority, and its fragments.
struct Block {
    flags: u8,
    stream: u32,
    priority: Option<[u8; 5]>,
    fragment: Vec<u8>,
}

/// The client's side of a connection, with `:authority` made an authority.
pub struct AuthorityFix<S> {
    inner: S,
    /// Read from the client, not yet framed.
    input: BytesMut,
    /// Ready for the server.
    output: BytesMut,
    preface_seen: bool,
    block: Option<Block>,
    decoder: fluke_hpack::Decoder<'static>,
    encoder: fluke_hpack::Encoder<'static>,
}

impl<S> std::fmt::Debug for AuthorityFix<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthorityFix").finish_non_exhaustive()
    }
}

impl<S> AuthorityFix<S> {
    /// Wraps the client's connection.
    pub fn new(inner: S) -> Self {
        Self {
            inner,
            input: BytesMut::new(),
            output: BytesMut::new(),
            preface_seen: false,
            block: None,
            decoder: fluke_hpack::Decoder::new(),
            encoder: fluke_hpack::Encoder::new(),
        }
    }

    /// Moves every whole frame from the input to the output, fixing header blocks.
    fn frame(&mut self) -> io::Result<()> {
        if !self.preface_seen {
            if self.input.len() < PREFACE.len() {
                return Ok(());
            }
            let preface = self.input.split_to(PREFACE.len());
            self.output.extend_from_slice(&preface);
            self.preface_seen = true;
        }
        while self.input.len() >= 9 {
            let length =
                usize::from(self.input[0]) << 16 | usize::from(self.input[1]) << 8 | usize::from(self.input[2]);
            if self.input.len() < 9 + length {
                break;
            }
            if length > MAX_FRAME {
                return Err(bad("a frame larger than the largest this server takes"));
            }
            let kind = self.input[3];
            let flags = self.input[4];
            // A header block's frames come one after the other (RFC 9113, 6.10).
            if self.block.is_some() && kind != CONTINUATION {
                return Err(bad("a frame inside a header block"));
            }
            let stream = u32::from_be_bytes([self.input[5], self.input[6], self.input[7], self.input[8]]) & 0x7fff_ffff;
            match kind {
                HEADERS => {
                    let frame = self.input.split_to(9 + length);
                    let mut payload = &frame[9..];
                    let mut pad = 0;
                    if flags & PADDED != 0 {
                        pad = usize::from(
                            *payload
                                .first()
                                .ok_or_else(|| bad("a padded HEADERS frame without its pad length"))?,
                        );
                        payload = &payload[1..];
                    }
                    let mut priority = None;
                    if flags & PRIORITY != 0 {
                        let bytes: [u8; 5] = payload
                            .get(..5)
                            .and_then(|p| p.try_into().ok())
                            .ok_or_else(|| bad("a HEADERS frame too short for its priority"))?;
                        priority = Some(bytes);
                        payload = &payload[5..];
                    }
                    let end = payload
                        .len()
                        .checked_sub(pad)
                        .ok_or_else(|| bad("a HEADERS frame's padding is too long"))?;
                    self.block = Some(Block {
                        flags,
                        stream,
                        priority,
                        fragment: payload[..end].to_vec(),
                    });
                    if flags & END_HEADERS != 0 {
                        self.finish_block()?;
                    }
                }
                CONTINUATION if self.block.is_some() => {
                    if self
                        .block
                        .as_ref()
                        .is_some_and(|b| b.fragment.len() + length > MAX_BLOCK)
                    {
                        return Err(bad("a header block larger than this server takes"));
                    }
                    let frame = self.input.split_to(9 + length);
                    if let Some(block) = &mut self.block {
                        block.fragment.extend_from_slice(&frame[9..]);
                    }
                    if flags & END_HEADERS != 0 {
                        self.finish_block()?;
                    }
                }
                _ => {
                    let frame = self.input.split_to(9 + length);
                    self.output.extend_from_slice(&frame);
                }
            }
        }
        Ok(())
    }

    /// Decodes the block, puts `localhost` for an `:authority` that is not one, and writes it as
    /// one HEADERS frame.
    fn finish_block(&mut self) -> io::Result<()> {
        let Some(block) = self.block.take() else {
            return Ok(());
        };
        let mut headers = self
            .decoder
            .decode(&block.fragment)
            .map_err(|e| bad(&format!("decoding a header block: {e:?}")))?;
        for (name, value) in &mut headers {
            if name.as_slice() == b":authority" && !valid_authority(value) {
                *value = b"localhost".to_vec();
            }
        }
        let encoded = self
            .encoder
            .encode(headers.iter().map(|(n, v)| (n.as_slice(), v.as_slice())));
        let mut payload = Vec::with_capacity(encoded.len() + 5);
        if let Some(priority) = block.priority {
            payload.extend_from_slice(&priority);
        }
        payload.extend_from_slice(&encoded);
        // One HEADERS frame, then CONTINUATION frames, each within the largest frame.
        let chunks: Vec<&[u8]> = payload.chunks(MAX_FRAME).collect();
        let last = chunks.len().saturating_sub(1);
        for (i, chunk) in chunks.iter().enumerate() {
            let (kind, mut flags) = if i == 0 {
                (HEADERS, block.flags & !(PADDED | END_HEADERS))
            } else {
                (CONTINUATION, 0)
            };
            if i == last {
                flags |= END_HEADERS;
            }
            let length = u32::try_from(chunk.len()).map_err(|_| bad("a header block too large"))?;
            self.output.extend_from_slice(&length.to_be_bytes()[1..]);
            self.output.extend_from_slice(&[kind, flags]);
            self.output.extend_from_slice(&block.stream.to_be_bytes());
            self.output.extend_from_slice(chunk);
        }
        Ok(())
    }
}

fn bad(message: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message.to_owned())
}

impl<S: AsyncRead + Unpin> AsyncRead for AuthorityFix<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        loop {
            if !this.output.is_empty() {
                let n = this.output.len().min(buf.remaining());
                buf.put_slice(&this.output[..n]);
                this.output.advance(n);
                return Poll::Ready(Ok(()));
            }
            let mut chunk = [0_u8; 8192];
            let mut read = ReadBuf::new(&mut chunk);
            match Pin::new(&mut this.inner).poll_read(cx, &mut read) {
                Poll::Ready(Ok(())) if read.filled().is_empty() => return Poll::Ready(Ok(())),
                Poll::Ready(Ok(())) => {
                    this.input.extend_from_slice(read.filled());
                    this.frame()?;
                }
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for AuthorityFix<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

impl<S> tonic::transport::server::Connected for AuthorityFix<S> {
    type ConnectInfo = ();

    fn connect_info(&self) -> Self::ConnectInfo {}
}

#[cfg(test)]
mod tests;
