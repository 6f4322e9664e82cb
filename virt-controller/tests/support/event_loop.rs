//! The controllers' event loop over the in-memory API server, as the event-loop tests start it,
//! and the wait they poll with.

use std::sync::Arc;
use std::time::{Duration, Instant};

use kubevirt_api::clock::SystemClock;
use tokio_util::sync::CancellationToken;
use virt_controller::cluster_api::FakeControllerApi;
use virt_controller::pod::PodConfig;
use virt_controller::runner::{Controllers, run};

/// Polls `check` every 5 ms until it gives a value; fails the test after 10 s.
pub async fn wait_for<T>(what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    let begin = Instant::now();
    loop {
        if let Some(value) = check() {
            return value;
        }
        assert!(begin.elapsed() < Duration::from_secs(10), "no {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// The controllers' loop over `api`, leading; cancel the token and await the task to stop it.
pub fn start(api: &FakeControllerApi) -> (CancellationToken, tokio::task::JoinHandle<()>) {
    let (_, stop, task) = start_controllers(api);
    (stop, task)
}

/// [`start`], with the controllers (for their metrics).
#[allow(dead_code, reason = "not every test binary that shares this file reads metrics")]
pub fn start_controllers(
    api: &FakeControllerApi,
) -> (
    Arc<Controllers<FakeControllerApi, SystemClock>>,
    CancellationToken,
    tokio::task::JoinHandle<()>,
) {
    let controllers = Arc::new(Controllers::new(
        api,
        &SystemClock,
        PodConfig::new("registry.example/virt-launcher:v0.1.0"),
    ));
    let stop = CancellationToken::new();
    let (lead, leading) = tokio::sync::watch::channel(true);
    let task = {
        let (api, stop, controllers) = (api.clone(), stop.clone(), controllers.clone());
        tokio::spawn(async move {
            // The sender lives as long as the loop: leadership never ends in these tests.
            let _leader = lead;
            run(controllers, &api, 4, leading, stop).await;
        })
    };
    (controllers, stop, task)
}
