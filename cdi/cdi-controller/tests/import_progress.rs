//! The progress the controller reads is the one the importer serves: the importer's metrics
//! endpoint (its own certificate) on the loopback, scraped by the controller's adapter and parsed
//! into the DataVolume's progress.

use std::io::Read as _;
use std::sync::Arc;

use cdi_controller::import_progress::{self, HttpsMetrics, ImporterMetrics as _};
use cdi_importer::progress::{Counted, Progress};
use tokio_util::sync::CancellationToken;

#[tokio::test]
async fn the_importer_s_endpoint_gives_the_controller_the_share_read() {
    control_loop::tls::install_crypto_provider();
    let progress = Progress::default();
    let stop = CancellationToken::new();
    let address = cdi_importer::progress::serve(progress.clone(), "dv-uid".to_owned(), 0, stop.clone())
        .await
        .expect("the endpoint starts");
    let metrics = HttpsMetrics { port: address.port() };

    let page = metrics.scrape("127.0.0.1").await.expect("the page");
    assert_eq!(import_progress::parse(&page, "dv-uid"), Some(0.0), "{page}");

    let mut source = Counted::new(std::io::Cursor::new(vec![1_u8; 4000]));
    progress.follow(Arc::clone(&source.read), Some(4000));
    let mut first = vec![0_u8; 1500];
    source.read_exact(&mut first).expect("read");
    let page = metrics.scrape("127.0.0.1").await.expect("the page");
    assert_eq!(import_progress::parse(&page, "dv-uid"), Some(37.5), "{page}");
    assert_eq!(import_progress::parse(&page, "another-uid"), None);

    stop.cancel();
    let closed = HttpsMetrics { port: address.port() };
    let mut gone = None;
    for _ in 0..100 {
        gone = closed.scrape("127.0.0.1").await;
        if gone.is_none() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(gone, None, "a stopped endpoint gives nothing");
}
