//! Calling one plugin: pooled channels (one per endpoint, connected on first
//! use), the plugin's own timeout, and every failure turned into a
//! [`CallAnswer`] instead of an error, because a failing plugin is an
//! outcome the engine records, not a failure of the runner.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use ember_proto::plugin::v1 as plugin_pb;
use ember_proto::plugin::v1::lifecycle_plugin_client::LifecyclePluginClient;
use tonic::transport::{Channel, Endpoint};

use crate::domain::{CallResult, Plugin};

/// How long establishing a connection to a plugin may take at most; each
/// call is still bounded by the plugin's own, usually shorter, timeout.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// What one call came to.
#[derive(Debug)]
pub struct CallAnswer {
    pub result: CallResult,
    pub message: String,
    pub duration: Duration,
}

/// gRPC channels to plugin endpoints, keyed by endpoint URL.
#[derive(Default)]
pub struct PluginClients {
    channels: Mutex<HashMap<String, Channel>>,
}

impl PluginClients {
    /// Calls `PreOperation` on `plugin` within its timeout.
    pub async fn pre_operation(
        &self,
        plugin: &Plugin,
        request: plugin_pb::PreOperationRequest,
    ) -> CallAnswer {
        let request = with_timeout(request, plugin.timeout_ms);
        self.call(
            plugin,
            |mut client| async move { client.pre_operation(request).await },
            verdict,
        )
        .await
    }

    /// Calls `PostOperation` on `plugin` within its timeout.
    pub async fn post_operation(
        &self,
        plugin: &Plugin,
        request: plugin_pb::PostOperationRequest,
    ) -> CallAnswer {
        let request = with_timeout(request, plugin.timeout_ms);
        self.call(
            plugin,
            |mut client| async move { client.post_operation(request).await },
            |_| (CallResult::Ok, String::new()),
        )
        .await
    }

    /// Makes one call to `plugin` on its pooled channel, within its
    /// timeout; `read` turns what the plugin answered into the result and
    /// message to report.
    async fn call<Answer, Call>(
        &self,
        plugin: &Plugin,
        call: impl FnOnce(LifecyclePluginClient<Channel>) -> Call,
        read: impl FnOnce(Answer) -> (CallResult, String),
    ) -> CallAnswer
    where
        Call: Future<Output = Result<tonic::Response<Answer>, tonic::Status>>,
    {
        let started = Instant::now();
        let (result, message) = match self.channel(&plugin.endpoint) {
            Err(message) => (CallResult::Error, message),
            Ok(channel) => match bounded(plugin, call(LifecyclePluginClient::new(channel))).await {
                Ok(response) => read(response.into_inner()),
                Err(failure) => failure,
            },
        };
        CallAnswer {
            result,
            message,
            duration: started.elapsed(),
        }
    }

    /// Drops the channels of endpoints no plugin uses any more.
    pub fn retain_endpoints(&self, plugins: &[Plugin]) {
        let in_use: HashSet<&str> = plugins
            .iter()
            .map(|plugin| plugin.endpoint.as_str())
            .collect();
        self.channels
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .retain(|endpoint, _| in_use.contains(endpoint.as_str()));
    }

    /// The pooled channel to `endpoint`, created (not yet connected) if new.
    fn channel(&self, endpoint: &str) -> Result<Channel, String> {
        let mut channels = self
            .channels
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(channel) = channels.get(endpoint) {
            return Ok(channel.clone());
        }
        let channel = Endpoint::from_shared(endpoint.to_owned())
            .map_err(|error| format!("endpoint {endpoint:?} is invalid: {error}"))?
            .connect_timeout(CONNECT_TIMEOUT)
            .tcp_nodelay(true)
            .http2_keep_alive_interval(Duration::from_secs(30))
            .keep_alive_while_idle(true)
            .connect_lazy();
        channels.insert(endpoint.to_owned(), channel.clone());
        Ok(channel)
    }
}

fn with_timeout<T>(message: T, timeout_ms: u32) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    // Tells the plugin its deadline (grpc-timeout); the runner enforces it
    // on its own side as well.
    request.set_timeout(Duration::from_millis(u64::from(timeout_ms)));
    request
}

/// Runs `call` within the plugin's timeout; a failure becomes the result and
/// message to report. A failure at or after the deadline is a timeout,
/// whichever timer fired first (ours, or tonic's for grpc-timeout, which
/// reports CANCELLED).
async fn bounded<T>(
    plugin: &Plugin,
    call: impl Future<Output = Result<T, tonic::Status>>,
) -> Result<T, (CallResult, String)> {
    let timeout = Duration::from_millis(u64::from(plugin.timeout_ms));
    let timed_out = || {
        (
            CallResult::Timeout,
            format!("timed out after {} ms", plugin.timeout_ms),
        )
    };
    let started = Instant::now();
    match tokio::time::timeout(timeout, call).await {
        Err(_) => Err(timed_out()),
        Ok(Ok(answer)) => Ok(answer),
        Ok(Err(status))
            if status.code() == tonic::Code::DeadlineExceeded || started.elapsed() >= timeout =>
        {
            Err(timed_out())
        }
        Ok(Err(status)) if status.code() == tonic::Code::Unavailable => Err((
            CallResult::Error,
            format!(
                "endpoint {} is unreachable: {}",
                plugin.endpoint,
                describe(&status)
            ),
        )),
        Ok(Err(status)) => Err((
            CallResult::Error,
            format!(
                "call failed with {:?}: {}",
                status.code(),
                describe(&status)
            ),
        )),
    }
}

/// The status message with its transport cause, which tonic keeps apart.
fn describe(status: &tonic::Status) -> String {
    ember_runtime::error::with_causes(status.message(), std::error::Error::source(status))
}

fn verdict(response: plugin_pb::PreOperationResponse) -> (CallResult, String) {
    match plugin_pb::Verdict::try_from(response.verdict) {
        Ok(plugin_pb::Verdict::Allow) => (CallResult::Allow, response.message),
        Ok(plugin_pb::Verdict::Warn) => (CallResult::Warn, response.message),
        Ok(plugin_pb::Verdict::Deny) if response.message.is_empty() => (
            CallResult::Deny,
            "denied without giving a reason".to_owned(),
        ),
        Ok(plugin_pb::Verdict::Deny) => (CallResult::Deny, response.message),
        Ok(plugin_pb::Verdict::Unspecified) | Err(_) => (
            CallResult::Error,
            format!("answered without a verdict (verdict {})", response.verdict),
        ),
    }
}
