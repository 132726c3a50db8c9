//! One shutdown path for every process: the first SIGINT or SIGTERM cancels
//! the token (servers report NOT_SERVING, stop accepting and drain); a second
//! signal exits at once.

use tokio_util::sync::CancellationToken;

/// Cancels `token` on the first SIGINT/SIGTERM and exits on the second.
pub fn cancel_on_signal(token: CancellationToken) {
    tokio::spawn(async move {
        wait_for_signal().await;
        tracing::info!("shutdown requested: draining (signal again to exit now)");
        token.cancel();
        wait_for_signal().await;
        tracing::warn!("second signal: exiting without draining");
        std::process::exit(130);
    });
}

async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut terminate) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = terminate.recv() => {}
                }
            }
            Err(error) => {
                tracing::warn!(%error, "cannot listen for SIGTERM; only SIGINT stops Ember");
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
