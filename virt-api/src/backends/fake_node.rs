//! A [`NodeConnector`] for tests: records pause and unpause calls and serves an echo console
//! that also prints a banner, so a test sees both directions of the pipe.

use std::sync::{Mutex, PoisonError};

use tokio::sync::mpsc;

use super::node::{ConsoleStream, NodeConnector, NodeError, VmiAction};

/// What the fake node was asked: (handler address, `ns/name`, action).
pub type NodeCall = (String, String, VmiAction);

/// The fake node handlers.
#[derive(Debug, Default)]
pub struct FakeNodeConnector {
    calls: Mutex<Vec<NodeCall>>,
}

/// The first bytes the fake console sends.
pub const FAKE_CONSOLE_BANNER: &[u8] = b"fake console\r\n";

impl FakeNodeConnector {
    /// Every pause and unpause so far.
    #[must_use]
    pub fn calls(&self) -> Vec<NodeCall> {
        self.calls.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }
}

impl NodeConnector for FakeNodeConnector {
    async fn vmi_action(&self, address: &str, ns: &str, name: &str, action: VmiAction) -> Result<(), NodeError> {
        self.calls.lock().unwrap_or_else(PoisonError::into_inner).push((
            address.to_owned(),
            format!("{ns}/{name}"),
            action,
        ));
        Ok(())
    }

    async fn console(&self, _address: &str, _ns: &str, _name: &str) -> Result<ConsoleStream, NodeError> {
        let (to_guest, mut keys) = mpsc::channel::<Vec<u8>>(16);
        let (output, from_guest) = mpsc::channel::<Vec<u8>>(16);
        tokio::spawn(async move {
            if output.send(FAKE_CONSOLE_BANNER.to_vec()).await.is_err() {
                return;
            }
            while let Some(bytes) = keys.recv().await {
                if output.send(bytes).await.is_err() {
                    return;
                }
            }
        });
        Ok(ConsoleStream { to_guest, from_guest })
    }
}
