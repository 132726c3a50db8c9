//! The runner: calls the matching plugins' pre-operations in order, unwinds
//! the ones already called when a FAIL-mode plugin stops the chain (under
//! an admin's break-glass it calls them all, unwinds nothing and reports
//! the stops), and calls the post-operations once the engine's operation
//! is over.
//!
//! The runner keeps no state between the two halves: RunPreOperations hands
//! the engine the names of the plugins owed a post-operation, and the engine
//! passes them back to RunPostOperations, so either call may land on any
//! replica.

mod cache;
mod client;

use std::sync::Arc;

use ember_proto::plugin::v1 as plugin_pb;

use crate::domain::{
    CallResult, Operation, Plugin, PluginCallOutcome, PluginPhase, PreOperationsReport, stop_reason,
};
use crate::error::Result;
use crate::store::PluginStore;

pub use cache::RegistryCache;
use client::{CallAnswer, PluginClients};

pub struct PluginRunner {
    registry: Arc<RegistryCache>,
    clients: PluginClients,
}

/// The stack operation the plugins are asked about.
pub struct OperationContext {
    pub operation: Operation,
    /// Selects plugins by their project filter.
    pub project_id: String,
    /// An admin's break-glass: a plugin that would stop the chain does not
    /// (see `RunPreOperationsRequest.break_glass`).
    pub break_glass: bool,
}

impl PluginRunner {
    pub fn new(registry: Arc<RegistryCache>) -> Self {
        PluginRunner {
            registry,
            clients: PluginClients::default(),
        }
    }

    /// A runner with its own cache over `store`.
    pub fn over_store(store: Arc<dyn PluginStore>) -> Self {
        PluginRunner::new(Arc::new(RegistryCache::new(store)))
    }

    /// Runs the pre-operation chain for `context`; `request` goes to every
    /// plugin unchanged.
    pub async fn run_pre_operations(
        &self,
        context: &OperationContext,
        request: plugin_pb::PreOperationRequest,
    ) -> Result<PreOperationsReport> {
        let plugins = self.registry_plugins().await?;
        let mut calls = Vec::new();
        let mut called: Vec<&Plugin> = Vec::new();
        // Under a break-glass: why the first plugin would have stopped it.
        let mut first_stop = String::new();
        for plugin in plugins
            .iter()
            .filter(|plugin| plugin.applies_to(context.operation, &context.project_id))
        {
            let answer = self.clients.pre_operation(plugin, request.clone()).await;
            let stopped_chain = answer.result.stops_chain(plugin.failure_mode);
            let reason = stop_reason(&plugin.name, &answer.message);
            calls.push(outcome(
                plugin,
                PluginPhase::Pre,
                answer,
                false,
                stopped_chain,
            ));
            if stopped_chain && context.break_glass {
                tracing::warn!(plugin = %plugin.name, %reason, "plugin broken through by an admin's break-glass");
                if first_stop.is_empty() {
                    first_stop = reason;
                }
                continue;
            }
            if stopped_chain {
                tracing::info!(plugin = %plugin.name, %reason, "plugin stopped the chain");
                let unwind = plugin_pb::PostOperationRequest {
                    operation: request.operation,
                    stack: request.stack.clone(),
                    failed: true,
                    reason: reason.clone(),
                };
                for passed in called.iter().rev() {
                    let answer = self.clients.post_operation(passed, unwind.clone()).await;
                    calls.push(outcome(passed, PluginPhase::Post, answer, true, false));
                }
                return Ok(PreOperationsReport {
                    allowed: false,
                    reason,
                    calls,
                    post_operation_plugins: Vec::new(),
                });
            }
            called.push(plugin);
        }
        Ok(PreOperationsReport {
            allowed: first_stop.is_empty(),
            reason: first_stop,
            calls,
            post_operation_plugins: called.iter().map(|plugin| plugin.name.clone()).collect(),
        })
    }

    /// The dry run of the pre-operation chain: every plugin that applies
    /// is asked (`request.dry_run` set), whatever the others answer, and
    /// no post-operation follows; allowed when none would stop the chain.
    pub async fn ask_pre_operations(
        &self,
        context: &OperationContext,
        request: plugin_pb::PreOperationRequest,
    ) -> Result<PreOperationsReport> {
        let plugins = self.registry_plugins().await?;
        let mut calls = Vec::new();
        let mut reason = String::new();
        for plugin in plugins
            .iter()
            .filter(|plugin| plugin.applies_to(context.operation, &context.project_id))
        {
            let answer = self.clients.pre_operation(plugin, request.clone()).await;
            let stops = answer.result.stops_chain(plugin.failure_mode);
            if stops && reason.is_empty() {
                reason = stop_reason(&plugin.name, &answer.message);
            }
            calls.push(outcome(plugin, PluginPhase::Pre, answer, false, stops));
        }
        Ok(PreOperationsReport {
            allowed: reason.is_empty(),
            reason,
            calls,
            post_operation_plugins: Vec::new(),
        })
    }

    /// Whether any enabled plugin would be called for `context`.
    pub async fn any_applies(&self, context: &OperationContext) -> Result<bool> {
        Ok(self
            .registry_plugins()
            .await?
            .iter()
            .any(|plugin| plugin.applies_to(context.operation, &context.project_id)))
    }

    /// Calls the post-operation of each named plugin, in the order given.
    /// A plugin no longer registered is reported, not called.
    pub async fn run_post_operations(
        &self,
        plugin_names: &[String],
        request: plugin_pb::PostOperationRequest,
    ) -> Result<Vec<PluginCallOutcome>> {
        let plugins = self.registry_plugins().await?;
        let mut calls = Vec::with_capacity(plugin_names.len());
        for name in plugin_names {
            let Some(plugin) = plugins.iter().find(|plugin| &plugin.name == name) else {
                calls.push(PluginCallOutcome {
                    plugin: name.clone(),
                    phase: PluginPhase::Post,
                    result: CallResult::Error,
                    message: "the plugin is no longer registered: post-operation not called"
                        .to_owned(),
                    duration: std::time::Duration::ZERO,
                    failure_mode: crate::domain::FailureMode::default(),
                    failed: request.failed,
                    stopped_chain: false,
                });
                continue;
            };
            let answer = self.clients.post_operation(plugin, request.clone()).await;
            calls.push(outcome(
                plugin,
                PluginPhase::Post,
                answer,
                request.failed,
                false,
            ));
        }
        Ok(calls)
    }

    async fn registry_plugins(&self) -> Result<Arc<Vec<Plugin>>> {
        let snapshot = self.registry.current().await?;
        if snapshot.reloaded {
            self.clients.retain_endpoints(&snapshot.plugins);
        }
        Ok(snapshot.plugins)
    }
}

fn outcome(
    plugin: &Plugin,
    phase: PluginPhase,
    answer: CallAnswer,
    failed: bool,
    stopped_chain: bool,
) -> PluginCallOutcome {
    if matches!(answer.result, CallResult::Error | CallResult::Timeout) {
        tracing::warn!(plugin = %plugin.name, ?phase, message = %answer.message, "plugin call failed");
    }
    PluginCallOutcome {
        plugin: plugin.name.clone(),
        phase,
        result: answer.result,
        message: answer.message,
        duration: answer.duration,
        failure_mode: plugin.failure_mode,
        failed,
        stopped_chain,
    }
}
