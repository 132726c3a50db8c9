//! A pass-through proxy on a unix socket in front of the container engine,
//! for `ember bench compute`: Ember's driver talks to the engine through it,
//! and it notes when each connection (one API call: the driver keeps no
//! idle connections) opened and closed. The time the engine was busy with
//! Ember's calls during an operation is the union of those intervals, so
//! Ember's own share of the operation can be told apart from the engine's
//! however noisy the engine is.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::net::{UnixListener, UnixStream};

type Calls = Arc<Mutex<Vec<(Instant, Instant)>>>;

pub struct EngineProxy {
    pub socket: PathBuf,
    calls: Calls,
    task: tokio::task::JoinHandle<()>,
}

impl EngineProxy {
    /// Listens on `<directory>/engine-proxy.sock`, forwarding every
    /// connection to the engine's socket `upstream`.
    pub fn start(upstream: &Path, directory: &Path) -> Result<EngineProxy, String> {
        let socket = directory.join("engine-proxy.sock");
        let listener = UnixListener::bind(&socket)
            .map_err(|error| format!("cannot listen on {}: {error}", socket.display()))?;
        let calls = Calls::default();
        let upstream = upstream.to_path_buf();
        let recorded = calls.clone();
        let task = tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                let opened = Instant::now();
                let upstream = upstream.clone();
                let recorded = recorded.clone();
                tokio::spawn(async move {
                    let Ok(mut engine) = UnixStream::connect(&upstream).await else {
                        return;
                    };
                    let _ = tokio::io::copy_bidirectional(&mut client, &mut engine).await;
                    if let Ok(mut calls) = recorded.lock() {
                        calls.push((opened, Instant::now()));
                    }
                });
            }
        });
        Ok(EngineProxy {
            socket,
            calls,
            task,
        })
    }

    /// How long the engine was busy with calls that opened and closed
    /// between `from` and `to` (overlapping calls counted once; the event
    /// stream, open throughout, is not a call).
    pub fn busy_between(&self, from: Instant, to: Instant) -> Duration {
        let mut inside: Vec<(Instant, Instant)> = match self.calls.lock() {
            Ok(calls) => calls
                .iter()
                .filter(|(opened, closed)| *opened >= from && *closed <= to)
                .copied()
                .collect(),
            Err(_) => return Duration::ZERO,
        };
        inside.sort();
        let mut busy = Duration::ZERO;
        let mut current: Option<(Instant, Instant)> = None;
        for (opened, closed) in inside {
            current = match current {
                Some((start, end)) if opened <= end => Some((start, end.max(closed))),
                Some((start, end)) => {
                    busy += end - start;
                    Some((opened, closed))
                }
                None => Some((opened, closed)),
            };
        }
        if let Some((start, end)) = current {
            busy += end - start;
        }
        busy
    }
}

impl Drop for EngineProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}
