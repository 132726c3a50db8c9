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
//!
//! Every call goes through the plug-in's circuit breaker ([`guarded`]): a
//! plug-in whose circuit is open is not called (its failure mode decides
//! at once), a half-open one is probed by the one caller that claims it,
//! and each failure or recovery is recorded in the registry for every
//! replica. A plug-in in observe mode is called like any other; what it
//! would have stopped is reported (`observed`), not enforced.
//!
//! [`guarded`]: PluginRunner::guarded

mod cache;
mod client;
mod gauges;

use std::sync::Arc;

use ember_proto::plugin::v1 as plugin_pb;

use crate::domain::{
    CallResult, Circuit, Operation, PROBE_GRACE, Plugin, PluginCallOutcome, PluginPhase,
    PreOperationsReport, stop_reason,
};
use crate::error::Result;
use crate::store::PluginStore;

pub use cache::RegistryCache;
use client::{CallAnswer, PluginClients};
pub use gauges::circuit_check;

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

/// RunPreOperations as the engine asks it.
pub struct PreOperationsAsked {
    pub operation: Operation,
    /// Selects plugins by their project filter; empty: the stack's project.
    pub project_id: String,
    /// An admin's break-glass (a dry run enforces nothing, so breaks
    /// nothing).
    pub break_glass: bool,
    /// The engine may hold the stack's snapshot back until a plugin that
    /// would be called needs it.
    pub snapshot_on_demand: bool,
    /// What every plugin is sent; its `dry_run` asks about the chain
    /// instead of running it.
    pub request: plugin_pb::PreOperationRequest,
}

/// RunPostOperations as the engine asks it.
pub struct PostOperationsAsked {
    pub operation: Operation,
    /// The project of the operation; empty: the stack's.
    pub project_id: String,
    /// The plugins owed a post-operation, as RunPreOperations named them.
    pub plugins: Vec<String>,
    pub request: plugin_pb::PostOperationRequest,
}

/// The project whose plugins apply: the request's, else the stack's.
fn project_of(project_id: String, stack: Option<&plugin_pb::StackSnapshot>) -> String {
    if project_id.is_empty() {
        stack
            .map(|stack| stack.project_id.clone())
            .unwrap_or_default()
    } else {
        project_id
    }
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

    /// RunPreOperations: without the stack's snapshot when the engine may
    /// send it on demand ([`PluginRunner::pre_operations_on_demand`]), else
    /// the chain asked about for a dry run or run.
    pub async fn pre_operations(&self, asked: PreOperationsAsked) -> Result<OnDemand> {
        let request = asked.request;
        let context = OperationContext {
            operation: asked.operation,
            project_id: project_of(asked.project_id, request.stack.as_ref()),
            break_glass: asked.break_glass && !request.dry_run,
        };
        if asked.snapshot_on_demand && request.stack.is_none() {
            self.pre_operations_on_demand(&context, request).await
        } else if request.dry_run {
            Ok(OnDemand::Answered(
                self.ask_pre_operations(&context, request).await?,
            ))
        } else {
            Ok(OnDemand::Answered(
                self.run_pre_operations(&context, request).await?,
            ))
        }
    }

    /// RunPostOperations: the post-operations of the plugins named.
    pub async fn post_operations(
        &self,
        asked: PostOperationsAsked,
    ) -> Result<Vec<PluginCallOutcome>> {
        tracing::debug!(
            operation = asked.operation.as_str(),
            project_id = %project_of(asked.project_id, asked.request.stack.as_ref()),
            failed = asked.request.failed,
            plugins = asked.plugins.len(),
            "running post-operations"
        );
        self.run_post_operations(&asked.plugins, asked.request)
            .await
    }

    /// Runs the pre-operation chain for `context`; `request` goes to every
    /// plugin unchanged.
    pub async fn run_pre_operations(
        &self,
        context: &OperationContext,
        request: plugin_pb::PreOperationRequest,
    ) -> Result<PreOperationsReport> {
        let plugins = self.registry_plugins().await?;
        Ok(self
            .run_chain(&plugins, context, request, Probe::Allowed)
            .await)
    }

    /// The chain's answer when the stack's snapshot would be wasted on it:
    /// [`OnDemand::NoPlugin`] when no plugin applies, the report itself
    /// when each that applies has its circuit open (none is called, so
    /// the operation costs what it costs without plugins), and
    /// [`OnDemand::SnapshotNeeded`] when one would be called. One read of
    /// the registry decides and runs it.
    pub async fn pre_operations_on_demand(
        &self,
        context: &OperationContext,
        request: plugin_pb::PreOperationRequest,
    ) -> Result<OnDemand> {
        let plugins = self.registry_plugins().await?;
        let now = ember_runtime::time::now();
        let (applies, called) = plugins
            .iter()
            .filter(|plugin| plugin.applies_to(context.operation, &context.project_id))
            .fold((false, false), |(_, called), plugin| {
                let open = matches!(plugin.circuit_at(now), Circuit::Open { .. });
                (true, called || !open)
            });
        if !applies {
            return Ok(OnDemand::NoPlugin);
        }
        if called {
            return Ok(OnDemand::SnapshotNeeded);
        }
        // Every circuit it meets is open: no call, and no probe (a probe
        // would need the snapshot; the next operation makes it).
        Ok(OnDemand::Answered(if request.dry_run {
            self.ask_chain(&plugins, context, request).await
        } else {
            self.run_chain(&plugins, context, request, Probe::NotAllowed)
                .await
        }))
    }

    async fn run_chain(
        &self,
        plugins: &[Plugin],
        context: &OperationContext,
        request: plugin_pb::PreOperationRequest,
        probe: Probe,
    ) -> PreOperationsReport {
        let mut calls = Vec::new();
        let mut called: Vec<&Plugin> = Vec::new();
        // Under a break-glass: why the first plugin would have stopped it.
        let mut first_stop = String::new();
        for plugin in plugins
            .iter()
            .filter(|plugin| plugin.applies_to(context.operation, &context.project_id))
        {
            let answer = self
                .guarded(
                    plugin,
                    probe,
                    self.clients.pre_operation(plugin, request.clone()),
                )
                .await;
            let stopped_chain = plugin.stops_chain(answer.result);
            let answer_result = answer.result;
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
                    let answer = self
                        .guarded(
                            passed,
                            Probe::Allowed,
                            self.clients.post_operation(passed, unwind.clone()),
                        )
                        .await;
                    calls.push(outcome(passed, PluginPhase::Post, answer, true, false));
                }
                return PreOperationsReport {
                    allowed: false,
                    reason,
                    calls,
                    post_operation_plugins: Vec::new(),
                };
            }
            // A plug-in skipped for its open circuit was not called, so it
            // is owed nothing.
            if answer_result != CallResult::CircuitOpen {
                called.push(plugin);
            }
        }
        PreOperationsReport {
            allowed: first_stop.is_empty(),
            reason: first_stop,
            calls,
            post_operation_plugins: called.iter().map(|plugin| plugin.name.clone()).collect(),
        }
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
        Ok(self.ask_chain(&plugins, context, request).await)
    }

    async fn ask_chain(
        &self,
        plugins: &[Plugin],
        context: &OperationContext,
        request: plugin_pb::PreOperationRequest,
    ) -> PreOperationsReport {
        let mut calls = Vec::new();
        let mut reason = String::new();
        for plugin in plugins
            .iter()
            .filter(|plugin| plugin.applies_to(context.operation, &context.project_id))
        {
            // Asking changes no circuit's course: no probe.
            let answer = self
                .guarded(
                    plugin,
                    Probe::NotAllowed,
                    self.clients.pre_operation(plugin, request.clone()),
                )
                .await;
            let stops = plugin.stops_chain(answer.result);
            if stops && reason.is_empty() {
                reason = stop_reason(&plugin.name, &answer.message);
            }
            calls.push(outcome(plugin, PluginPhase::Pre, answer, false, stops));
        }
        PreOperationsReport {
            allowed: reason.is_empty(),
            reason,
            calls,
            post_operation_plugins: Vec::new(),
        }
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
                    observed: false,
                });
                continue;
            };
            let answer = self
                .guarded(
                    plugin,
                    Probe::Allowed,
                    self.clients.post_operation(plugin, request.clone()),
                )
                .await;
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

    /// Makes `call` to `plugin` unless its circuit is open, and records
    /// what it came to for the breaker: a failure counted (the circuit
    /// opens at the plug-in's threshold), an answer forgetting earlier
    /// failures. A half-open circuit is probed by the caller that claims
    /// it (when `probe` allows), skipped by the others.
    async fn guarded(
        &self,
        plugin: &Plugin,
        probe: Probe,
        call: impl Future<Output = CallAnswer>,
    ) -> CallAnswer {
        let probing = match self.gate(plugin, probe).await {
            Ok(probing) => probing,
            Err(message) => {
                return CallAnswer {
                    result: CallResult::CircuitOpen,
                    message,
                    duration: std::time::Duration::ZERO,
                };
            }
        };
        let answer = call.await;
        self.count_for_breaker(plugin, &answer, probing).await;
        answer
    }

    /// Whether `plugin` may be called now: `Ok(true)` when the call is its
    /// half-open circuit's probe, `Err` with what the caller is told when
    /// its circuit is open.
    async fn gate(&self, plugin: &Plugin, probe: Probe) -> Result<bool, String> {
        let now = ember_runtime::time::now();
        let since = match plugin.circuit_at(now) {
            Circuit::Closed => return Ok(false),
            Circuit::Open { since, .. } => since,
            Circuit::HalfOpen { since } => {
                if probe == Probe::Allowed {
                    let until = now
                        + chrono::Duration::milliseconds(i64::from(plugin.timeout_ms))
                        + PROBE_GRACE;
                    match self
                        .registry
                        .store()
                        .claim_probe(&plugin.name, now, until)
                        .await
                    {
                        Ok(true) => {
                            tracing::info!(plugin = %plugin.name, "probing a half-open circuit");
                            return Ok(true);
                        }
                        Ok(false) => {}
                        Err(error) => {
                            tracing::warn!(plugin = %plugin.name, %error, "cannot claim a circuit's probe");
                        }
                    }
                }
                since
            }
        };
        Err(plugin.circuit.unavailable(since, now))
    }

    /// Records `answer` for `plugin`'s breaker. A bookkeeping failure is
    /// logged: the call happened, and the operation goes on.
    async fn count_for_breaker(&self, plugin: &Plugin, answer: &CallAnswer, probing: bool) {
        let store = self.registry.store();
        if answer.result.is_unavailable() {
            if !plugin.breaker.enabled() {
                return;
            }
            let now = ember_runtime::time::now();
            match store
                .record_failure(&plugin.name, plugin.breaker, now, &answer.message, probing)
                .await
            {
                Ok(Some(record)) if record.open_until != plugin.circuit.open_until => {
                    tracing::warn!(
                        plugin = %plugin.name,
                        failures = record.consecutive_failures,
                        cooldown_ms = plugin.breaker.cooldown_ms,
                        "circuit opened: the plug-in is not called until the cool-down passes"
                    );
                }
                Ok(_) => {}
                Err(error) => {
                    tracing::warn!(plugin = %plugin.name, %error, "cannot record a plug-in's failure");
                }
            }
        } else if probing || plugin.circuit.consecutive_failures > 0 {
            match store.record_success(&plugin.name).await {
                Ok(()) if probing => {
                    tracing::info!(plugin = %plugin.name, "circuit closed: the probe was answered");
                }
                Ok(()) => {}
                Err(error) => {
                    tracing::warn!(plugin = %plugin.name, %error, "cannot record a plug-in's recovery");
                }
            }
        }
    }

    async fn registry_plugins(&self) -> Result<Arc<Vec<Plugin>>> {
        let snapshot = self.registry.current().await?;
        if snapshot.reloaded {
            self.clients.retain_endpoints(&snapshot.plugins);
        }
        Ok(snapshot.plugins)
    }
}

/// The chain's answer, to a request without the stack's snapshot too.
pub enum OnDemand {
    /// No enabled plugin applies: allowed, nothing called.
    NoPlugin,
    /// A plugin would be called: send the snapshot.
    SnapshotNeeded,
    /// The chain's report (without the snapshot: each plugin that applies
    /// has its circuit open).
    Answered(PreOperationsReport),
}

/// Whether a call may be a half-open circuit's probe: not when the
/// operation is only asked about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Probe {
    Allowed,
    NotAllowed,
}

fn outcome(
    plugin: &Plugin,
    phase: PluginPhase,
    answer: CallAnswer,
    failed: bool,
    stopped_chain: bool,
) -> PluginCallOutcome {
    if answer.result.is_unavailable() {
        tracing::warn!(plugin = %plugin.name, ?phase, message = %answer.message, "plugin call failed");
    }
    let observed = phase == PluginPhase::Pre && plugin.observed(answer.result);
    if observed {
        tracing::info!(plugin = %plugin.name, message = %answer.message, "observe mode: the plug-in would have stopped the chain");
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
        observed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_requests_project_selects_plugins_else_the_stacks() {
        let stack = plugin_pb::StackSnapshot {
            project_id: "stack-project".to_owned(),
            ..Default::default()
        };
        assert_eq!(
            project_of("asked-project".to_owned(), Some(&stack)),
            "asked-project"
        );
        assert_eq!(project_of(String::new(), Some(&stack)), "stack-project");
        assert_eq!(project_of(String::new(), None), "");
    }
}
