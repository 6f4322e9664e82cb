//! The pace of image-upload's waits: a wait looks again as soon as its object changes, through a
//! watch on that one object, and at least every poll interval (upstream's 2 s polls), so a wait
//! ends when its state arrives rather than up to a poll later. A watch that cannot be opened,
//! fails or ends leaves the poll alone until it is opened again.

use std::fmt::Debug;
use std::time::Duration;

use futures::stream::BoxStream;
use futures::{StreamExt as _, TryStreamExt as _};
use kube::api::{Api, WatchEvent, WatchParams};
use serde::de::DeserializeOwned;

/// How long the API server keeps one watch open before it is opened again.
const WATCH_SECONDS: u32 = 290;

/// Changes of one named object.
pub(super) struct Changes<K> {
    api: Api<K>,
    name: String,
    stream: Option<BoxStream<'static, bool>>,
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
        }
    }

    /// Returns once the object changed or `poll` passed, whichever comes first.
    pub(super) async fn next(&mut self, poll: Duration) {
        if self.stream.is_none() {
            self.stream = self.open().await;
        }
        let Some(stream) = self.stream.as_mut() else {
            tokio::time::sleep(poll).await;
            return;
        };
        let sleep = tokio::time::sleep(poll);
        tokio::pin!(sleep);
        tokio::select! {
            event = stream.next() => {
                // An error or the end: closed, and this wait sleeps its poll out.
                if event != Some(true) {
                    self.stream = None;
                    sleep.await;
                }
            }
            () = &mut sleep => {}
        }
    }

    async fn open(&self) -> Option<BoxStream<'static, bool>> {
        let params = WatchParams::default()
            .fields(&format!("metadata.name={}", self.name))
            .timeout(WATCH_SECONDS);
        match self.api.watch(&params, "0").await {
            Ok(events) => Some(
                events
                    .map_ok(|event| !matches!(event, WatchEvent::Error(_)))
                    .map(|event| event.unwrap_or(false))
                    .boxed(),
            ),
            Err(error) => {
                tracing::debug!(name = %self.name, %error, "no watch; polling");
                None
            }
        }
    }
}
