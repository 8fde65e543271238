//! A server in the bench's own process, for the benches that go through
//! the API (`events_bench`, `review_bench`, `similar_http_bench`): started
//! on its loopback port, ready when `/readyz` answers 200, stopped
//! gracefully. (Its own file, included with `#[path]` only by them, so the
//! other benches do not compile an HTTP client they never use.)

use neardup::app::App;
use std::time::Duration;

pub struct Served {
    /// `http://127.0.0.1:<port>`.
    pub base: String,
    stop: tokio::sync::oneshot::Sender<()>,
    handle: tokio::task::JoinHandle<()>,
}

/// Run `app` until [`Served::stop`], once it is ready.
pub async fn serve(app: App) -> Served {
    let base = format!("http://{}", app.local_addr());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let handle = tokio::spawn(async move {
        let _ = app
            .run_until_stopped(async move {
                let _ = stopped.await;
            })
            .await;
    });
    let client = reqwest::Client::new();
    while client
        .get(format!("{base}/readyz"))
        .send()
        .await
        .map_or(true, |r| r.status() != 200)
    {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Served { base, stop, handle }
}

impl Served {
    /// Stop the server and wait until it has.
    pub async fn stop(self) {
        let _ = self.stop.send(());
        let _ = self.handle.await;
    }
}
