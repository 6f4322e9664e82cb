//! The pace of image-upload's waits: a wait looks again as soon as its object changes, through a
//! watch on that one object, and at least every poll interval (upstream's 2 s polls), so a wait
//! ends when its state arrives rather than up to a poll later. A watch that fails or ends leaves
//! the poll alone until it is opened again; one the caller may not open is not tried again.

use std::fmt::Debug;
use std::time::Duration;

use futures::stream::BoxStream;
use futures::{StreamExt as _, TryStreamExt as _};
use kube::api::{Api, WatchEvent, WatchParams};
use serde::de::DeserializeOwned;

/// How long the API server keeps one watch open before it is opened again.
const WATCH_SECONDS: u32 = 290;

/// What a watch event means to a wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Seen {
    /// The object was added, changed or deleted: look again.
    Change,
    /// A bookmark: nothing changed.
    Nothing,
    /// The watch failed: closed.
    Failure,
}

/// Changes of one named object.
pub(super) struct Changes<K> {
    api: Api<K>,
    name: String,
    stream: Option<BoxStream<'static, Seen>>,
    /// The API server refused the watch (403): polls only.
    refused: bool,
}

impl<K> Changes<K>
where
    K: Clone + DeserializeOwned + Debug + Send + 'static,
{
    pub(super) fn new(api: Api<K>, name: &str) -> Self {
        Self {
            api,
            name: name.to_owned(),
            stream: None,
            refused: false,
        }
    }

    /// Returns once the object changed or `poll` passed, whichever comes first.
    pub(super) async fn next(&mut self, poll: Duration) {
        let sleep = tokio::time::sleep(poll);
        tokio::pin!(sleep);
        if self.stream.is_none() && !self.refused {
            self.stream = self.open().await;
        }
        let Some(stream) = self.stream.as_mut() else {
            sleep.await;
            return;
        };
        loop {
            tokio::select! {
                seen = stream.next() => match seen {
                    Some(Seen::Change) => return,
                    Some(Seen::Nothing) => {}
                    // An error or the end: closed, and this wait sleeps its poll out.
                    Some(Seen::Failure) | None => {
                        self.stream = None;
                        sleep.await;
                        return;
                    }
                },
                () = &mut sleep => return,
            }
        }
    }

    async fn open(&mut self) -> Option<BoxStream<'static, Seen>> {
        let params = WatchParams::default()
            .fields(&format!("metadata.name={}", self.name))
            .timeout(WATCH_SECONDS);
        match self.api.watch(&params, "0").await {
            Ok(events) => Some(
                events
                    .map_ok(|event| match event {
                        WatchEvent::Added(_) | WatchEvent::Modified(_) | WatchEvent::Deleted(_) => Seen::Change,
                        WatchEvent::Bookmark(_) => Seen::Nothing,
                        WatchEvent::Error(_) => Seen::Failure,
                    })
                    .map(|event| event.unwrap_or(Seen::Failure))
                    .boxed(),
            ),
            Err(error) => {
                self.refused = matches!(&error, kube::Error::Api(status) if status.code == 403);
                tracing::debug!(name = %self.name, %error, "no watch; polling");
                None
            }
        }
    }
}

#[cfg(test)]
mod tests;
