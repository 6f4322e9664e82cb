//! An HTTP body, received by async code, as the blocking reader the import takes: the body's task
//! copies it into a few buffers of its own and sends them, filled, to the reader, which gives each
//! back once read. A slow disk slows the sender rather than filling memory, and the reader says
//! when it has read the body's end (an upload's async answer). The `http` source's download and
//! cdi-uploadserver's uploads both come this way. A buffer goes to the reader once full or at the
//! body's end, so on a slow connection the reader (and the download's progress) trails by up to
//! 1 MiB. A body that ends in an error, or whose sender stops before its end, reads as an error
//! every time after, never as an end.
//!
//! Why a pool of filled buffers rather than hyper's chunks themselves, as both once sent:
//! - A chunk still waiting for the reader keeps hyper's read buffer shared, so hyper allocates a
//!   new one for its next read. Those allocations, of up to 448 KiB and freed by another thread,
//!   cost a page fault for every 4 KiB of the body (110 000 in a 1 GiB upload, a quarter of the
//!   upload server's CPU time, and 64 000–92 000 faults in a 1 GiB download). A chunk copied at
//!   once leaves hyper's buffer free to be read into again.
//! - The bound is in bytes: hyper's chunks range from a few bytes to about 448 KiB (62 KiB on
//!   average in a 1 GiB loopback upload), so a count of chunks bounds neither memory nor how long
//!   the connection may keep reading while the disk takes one of the import's 4 MiB writes. The
//!   16 chunks once allowed stalled the connection at each write.

use std::io::{self, Read};

use bytes::Bytes;
use http_body_util::BodyExt as _;
use tokio::sync::{mpsc, oneshot};

/// How many buffers may be filled and waiting for the reader (or being read).
pub const BUFFERS: usize = 8;
/// Each buffer's size: with [`BUFFERS`], twice the import's 4 MiB write, so that the connection
/// keeps reading while the disk takes one.
pub const BUFFER_LEN: usize = 1 << 20;

/// Reads the buffers filled by [`forward`], giving each back once read.
#[derive(Debug)]
pub struct ChannelReader {
    filled: mpsc::UnboundedReceiver<io::Result<Vec<u8>>>,
    emptied: mpsc::UnboundedSender<Vec<u8>>,
    current: Vec<u8>,
    read_to: usize,
    at_end: Option<oneshot::Sender<()>>,
    /// The error the body ended with: every read after it fails the same way, never reads as an
    /// end.
    failed: Option<(io::ErrorKind, String)>,
}

impl Read for ChannelReader {
    fn read(&mut self, buffer: &mut [u8]) -> io::Result<usize> {
        if let Some((kind, message)) = &self.failed {
            return Err(io::Error::new(*kind, message.clone()));
        }
        while self.read_to == self.current.len() {
            match self.filled.blocking_recv() {
                Some(Ok(filled)) => {
                    // The buffer read before was given back as its last byte was read.
                    self.current = filled;
                    self.read_to = 0;
                }
                Some(Err(error)) => {
                    self.failed = Some((error.kind(), error.to_string()));
                    return Err(error);
                }
                None => {
                    if let Some(at_end) = self.at_end.take() {
                        let _ = at_end.send(());
                    }
                    return Ok(0);
                }
            }
        }
        let unread = &self.current[self.read_to..];
        let n = buffer.len().min(unread.len());
        buffer[..n].copy_from_slice(&unread[..n]);
        self.read_to += n;
        if self.read_to == self.current.len() {
            let read = std::mem::take(&mut self.current);
            self.give_back(read);
            self.read_to = 0;
        }
        Ok(n)
    }
}

impl ChannelReader {
    /// Hands a read buffer back to the sender.
    fn give_back(&self, mut read: Vec<u8>) {
        read.clear();
        // A sender gone (the body ended) needs no buffers any more.
        let _ = self.emptied.send(read);
    }
}

/// The sending half, which [`forward`] takes: the buffers it may fill.
#[derive(Debug)]
pub struct ChannelSender {
    filled: mpsc::UnboundedSender<io::Result<Vec<u8>>>,
    emptied: mpsc::UnboundedReceiver<Vec<u8>>,
    /// How many more buffers may be made before one must come back.
    may_make: usize,
    buffer_len: usize,
    current: Vec<u8>,
    /// The body's end or its error was sent: a sender dropped before either (its task stopped or
    /// cancelled) tells the reader the body was cut short, never that it ended.
    ended: bool,
}

impl Drop for ChannelSender {
    fn drop(&mut self) {
        if !self.ended {
            let _ = self.filled.send(Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the body stopped before its end",
            )));
        }
    }
}

impl ChannelSender {
    /// A buffer to fill: a new one while fewer than the pool's exist, else one the reader gave
    /// back. None when the reader is gone.
    async fn empty_buffer(&mut self) -> Option<Vec<u8>> {
        if self.may_make > 0 {
            self.may_make -= 1;
            return Some(Vec::with_capacity(self.buffer_len));
        }
        self.emptied.recv().await
    }

    /// Copies `data` into buffers, sending each as it fills. False when the reader is gone.
    async fn send(&mut self, mut data: &[u8]) -> bool {
        while !data.is_empty() {
            if self.current.capacity() == 0 {
                match self.empty_buffer().await {
                    Some(buffer) => self.current = buffer,
                    None => return false,
                }
            }
            let room = self.buffer_len - self.current.len();
            let (now, rest) = data.split_at(room.min(data.len()));
            self.current.extend_from_slice(now);
            data = rest;
            if self.current.len() == self.buffer_len && !self.flush() {
                return false;
            }
        }
        true
    }

    /// Sends the buffer being filled, if it holds anything. False when the reader is gone.
    fn flush(&mut self) -> bool {
        if self.current.is_empty() {
            return true;
        }
        self.filled.send(Ok(std::mem::take(&mut self.current))).is_ok()
    }

    /// Sends what is left: the body has ended.
    fn finish(&mut self) {
        self.flush();
        self.ended = true;
    }

    fn fail(&mut self, error: io::Error) {
        // What was read before the error is of no use: the import fails on the error.
        let _ = self.filled.send(Err(error));
        self.ended = true;
    }
}

/// A reader of what [`forward`] sends, and a signal fired when it has read to the end.
#[must_use]
pub fn channel() -> (ChannelSender, ChannelReader, oneshot::Receiver<()>) {
    channel_of(BUFFERS, BUFFER_LEN)
}

/// [`channel`] with `buffers` buffers (at least one) of `buffer_len` bytes (at least one).
#[must_use]
pub fn channel_of(buffers: usize, buffer_len: usize) -> (ChannelSender, ChannelReader, oneshot::Receiver<()>) {
    let (filled_sender, filled) = mpsc::unbounded_channel();
    let (emptied, emptied_receiver) = mpsc::unbounded_channel();
    let (at_end, ended) = oneshot::channel();
    let sender = ChannelSender {
        filled: filled_sender,
        emptied: emptied_receiver,
        may_make: buffers.max(1),
        buffer_len: buffer_len.max(1),
        current: Vec::new(),
        ended: false,
    };
    let reader = ChannelReader {
        filled,
        emptied,
        current: Vec::new(),
        read_to: 0,
        at_end: Some(at_end),
        failed: None,
    };
    (sender, reader, ended)
}

/// Sends `body`'s data to `sender` until its end (then the channel closes) or an error (which
/// the reader returns, as `read_error` makes it). Stops early when the reader is gone.
pub async fn forward<B>(mut body: B, mut sender: ChannelSender, read_error: impl FnOnce(B::Error) -> io::Error)
where
    B: hyper::body::Body<Data = Bytes> + Unpin,
{
    loop {
        match body.frame().await {
            None => {
                sender.finish();
                return;
            }
            Some(Ok(frame)) => {
                // The chunk is dropped once copied, so hyper reads into the same memory again.
                if let Ok(data) = frame.into_data()
                    && !sender.send(&data).await
                {
                    return;
                }
            }
            Some(Err(error)) => {
                sender.fail(read_error(error));
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use http_body_util::{BodyExt as _, Full, StreamBody};

    use super::*;

    fn cut_short(error: impl std::fmt::Display) -> io::Error {
        io::Error::new(io::ErrorKind::UnexpectedEof, format!("reading the body: {error}"))
    }

    #[tokio::test]
    async fn the_body_reads_whole_and_its_end_is_signalled() {
        let (sender, mut reader, mut ended) = channel();
        tokio::spawn(forward(Full::new(Bytes::from_static(b"0123456789")), sender, cut_short));
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

    /// A body of `count` chunks of `size` bytes, counting the chunks taken from it in `taken`.
    fn counted_body(
        count: usize,
        size: usize,
        taken: &Arc<AtomicUsize>,
    ) -> http_body_util::combinators::UnsyncBoxBody<Bytes, String> {
        let taken = Arc::clone(taken);
        let frames = (0..count).map(move |i| {
            taken.fetch_add(1, Ordering::SeqCst);
            Ok(hyper::body::Frame::data(Bytes::from(vec![
                u8::try_from(i % 251)
                    .expect("small");
                size
            ])))
        });
        StreamBody::new(futures::stream::iter(frames)).boxed_unsync()
    }

    #[tokio::test(flavor = "current_thread")]
    async fn the_budget_bounds_the_bytes_waiting_for_the_reader() {
        const CHUNK: usize = 16 << 10;
        let taken = Arc::new(AtomicUsize::new(0));
        // Two buffers of two chunks each.
        let (sender, reader, _ended) = channel_of(2, 2 * CHUNK);
        tokio::spawn(forward(counted_body(10, CHUNK, &taken), sender, cut_short));
        tokio::task::yield_now().await;
        assert_eq!(
            taken.load(Ordering::SeqCst),
            5,
            "four chunks fill both buffers and the fifth waits"
        );

        let mut reader = tokio::task::spawn_blocking(move || {
            let mut reader = reader;
            let mut first = vec![0_u8; 2 * CHUNK];
            reader.read_exact(&mut first).expect("the first buffer");
            assert!(first[..CHUNK].iter().all(|&b| b == 0), "the first chunk's bytes");
            assert!(first[CHUNK..].iter().all(|&b| b == 1), "the second chunk's bytes");
            reader
        })
        .await
        .expect("reader");
        tokio::task::yield_now().await;
        assert_eq!(
            taken.load(Ordering::SeqCst),
            7,
            "a buffer read and given back takes the waiting chunk and one more, and the next waits"
        );

        let rest = tokio::task::spawn_blocking(move || {
            let mut rest = Vec::new();
            reader.read_to_end(&mut rest).expect("the rest");
            rest
        })
        .await
        .expect("reader");
        assert_eq!(rest.len(), 8 * CHUNK);
        assert_eq!(taken.load(Ordering::SeqCst), 10);
    }

    #[tokio::test]
    async fn a_chunk_larger_than_the_buffers_passes_whole_in_order() {
        let taken = Arc::new(AtomicUsize::new(0));
        let (sender, mut reader, mut ended) = channel_of(2, 64 << 10);
        tokio::spawn(forward(counted_body(3, 1 << 20, &taken), sender, cut_short));
        let read = tokio::task::spawn_blocking(move || {
            let mut all = Vec::new();
            reader.read_to_end(&mut all).expect("read");
            all
        })
        .await
        .expect("reader");
        let expected: Vec<u8> = (0..3_u8).flat_map(|i| std::iter::repeat_n(i, 1 << 20)).collect();
        assert!(read == expected, "the bytes arrive whole and in order");
        assert!(ended.try_recv().is_ok(), "the end was signalled");
    }

    #[tokio::test]
    async fn a_reader_gone_stops_the_sender() {
        let taken = Arc::new(AtomicUsize::new(0));
        let (sender, reader, _ended) = channel_of(2, 64 << 10);
        drop(reader);
        forward(counted_body(100, 32 << 10, &taken), sender, cut_short).await;
        assert!(taken.load(Ordering::SeqCst) < 100, "the body was not read to its end");
    }

    #[tokio::test]
    async fn a_body_cut_short_is_an_error_and_no_end() {
        let frames: Vec<Result<hyper::body::Frame<Bytes>, String>> = vec![
            Ok(hyper::body::Frame::data(Bytes::from_static(b"abc"))),
            Err("connection reset".to_owned()),
        ];
        let body = StreamBody::new(futures::stream::iter(frames)).boxed_unsync();
        let (sender, mut reader, mut ended) = channel();
        tokio::spawn(forward(body, sender, cut_short));
        let (error, again) = tokio::task::spawn_blocking(move || {
            let mut all = Vec::new();
            let error = reader.read_to_end(&mut all).expect_err("cut short");
            (error, reader.read(&mut [0_u8; 8]).expect_err("still cut short"))
        })
        .await
        .expect("reader");
        assert_eq!(error.kind(), io::ErrorKind::UnexpectedEof);
        assert!(error.to_string().contains("connection reset"), "{error}");
        assert_eq!(
            again.kind(),
            io::ErrorKind::UnexpectedEof,
            "a read after the error fails too"
        );
        assert!(again.to_string().contains("connection reset"), "{again}");
        assert!(ended.try_recv().is_err(), "no end");
    }

    #[tokio::test]
    async fn a_sender_dropped_before_the_end_is_a_body_cut_short() {
        let (mut sender, mut reader, mut ended) = channel_of(2, 4);
        assert!(sender.send(b"abcdef").await, "the reader is there");
        // As when the task forwarding the body is cancelled, or stops, before the body's end.
        drop(sender);
        let (read, error) = tokio::task::spawn_blocking(move || {
            let mut all = Vec::new();
            let error = reader.read_to_end(&mut all).expect_err("cut short");
            (all, error)
        })
        .await
        .expect("reader");
        assert_eq!(read, b"abcd", "the full buffer arrived; the one being filled did not");
        assert_eq!(error.kind(), io::ErrorKind::UnexpectedEof);
        assert!(ended.try_recv().is_err(), "no end");
    }
}
