//! A request's body as the blocking reader the import takes: the server's task sends the body's
//! chunks through a bounded channel, so that a slow disk slows the client rather than filling
//! memory, and the reader says when it has read the body's end (an async upload's answer).

use std::io::{self, Read};

use bytes::Bytes;
use http_body_util::BodyExt as _;
use tokio::sync::{mpsc, oneshot};

/// How many chunks may wait between the connection and the disk.
const CHUNKS_IN_FLIGHT: usize = 16;

/// Reads the chunks sent by [`forward`].
#[derive(Debug)]
pub struct ChannelReader {
    chunks: mpsc::Receiver<io::Result<Bytes>>,
    current: Bytes,
    at_end: Option<oneshot::Sender<()>>,
}

impl Read for ChannelReader {
    fn read(&mut self, buffer: &mut [u8]) -> io::Result<usize> {
        while self.current.is_empty() {
            match self.chunks.blocking_recv() {
                Some(Ok(chunk)) => self.current = chunk,
                Some(Err(error)) => return Err(error),
                None => {
                    if let Some(at_end) = self.at_end.take() {
                        let _ = at_end.send(());
                    }
                    return Ok(0);
                }
            }
        }
        let n = buffer.len().min(self.current.len());
        buffer[..n].copy_from_slice(&self.current.split_to(n));
        Ok(n)
    }
}

/// A reader of what [`forward`] sends, and a signal fired when it has read to the end.
#[must_use]
pub fn channel() -> (mpsc::Sender<io::Result<Bytes>>, ChannelReader, oneshot::Receiver<()>) {
    let (sender, chunks) = mpsc::channel(CHUNKS_IN_FLIGHT);
    let (at_end, ended) = oneshot::channel();
    let reader = ChannelReader {
        chunks,
        current: Bytes::new(),
        at_end: Some(at_end),
    };
    (sender, reader, ended)
}

/// Sends `body`'s data to `sender` until its end (then the channel closes) or an error (which
/// the reader returns). Stops early when the reader is gone.
pub async fn forward<B>(mut body: B, sender: mpsc::Sender<io::Result<Bytes>>)
where
    B: hyper::body::Body<Data = Bytes> + Unpin,
    B::Error: std::fmt::Display,
{
    loop {
        let sent = match body.frame().await {
            None => return,
            Some(Ok(frame)) => match frame.into_data() {
                Ok(data) if data.is_empty() => continue,
                Ok(data) => sender.send(Ok(data)).await,
                Err(_trailers) => continue,
            },
            Some(Err(error)) => {
                let error = io::Error::new(io::ErrorKind::UnexpectedEof, format!("reading the upload: {error}"));
                let _ = sender.send(Err(error)).await;
                return;
            }
        };
        if sent.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use http_body_util::{BodyExt as _, Full, StreamBody};

    use super::*;

    #[tokio::test]
    async fn the_body_reads_whole_and_its_end_is_signalled() {
        let (sender, mut reader, mut ended) = channel();
        tokio::spawn(forward(Full::new(Bytes::from_static(b"0123456789")), sender));
        let read = tokio::task::spawn_blocking(move || {
            let mut small = [0_u8; 4];
            let mut all = Vec::new();
            loop {
                match reader.read(&mut small).expect("read") {
                    0 => return all,
                    n => all.extend_from_slice(&small[..n]),
                }
            }
        })
        .await
        .expect("reader");
        assert_eq!(read, b"0123456789");
        assert!(ended.try_recv().is_ok(), "the end was signalled");
    }

    #[tokio::test]
    async fn a_body_cut_short_is_an_error_and_no_end() {
        let frames: Vec<Result<hyper::body::Frame<Bytes>, String>> = vec![
            Ok(hyper::body::Frame::data(Bytes::from_static(b"abc"))),
            Err("connection reset".to_owned()),
        ];
        let body = StreamBody::new(futures::stream::iter(frames)).boxed_unsync();
        let (sender, mut reader, mut ended) = channel();
        tokio::spawn(forward(body, sender));
        let error = tokio::task::spawn_blocking(move || {
            let mut all = Vec::new();
            reader.read_to_end(&mut all).expect_err("cut short")
        })
        .await
        .expect("reader");
        assert_eq!(error.kind(), io::ErrorKind::UnexpectedEof);
        assert!(error.to_string().contains("connection reset"), "{error}");
        assert!(ended.try_recv().is_err(), "no end");
    }
}
