//! Proto ⇄ domain conversions, at the edge so proto types stay out of the
//! domain.

use ember_proto::common::v1::StackOperation;
use ember_proto::pluginregistry::v1 as pb;
use ember_runtime::time::{to_optional_timestamp, to_timestamp};

use crate::domain::{
    CallResult, Circuit, FailureMode, NewPlugin, Operation, Plugin, PluginCallOutcome, PluginPhase,
    PluginUpdate,
};
use crate::error::Error;

/// `field` names the request field in error messages.
pub fn operation_from_proto(value: i32, field: &str) -> Result<Operation, Error> {
    let operation = StackOperation::try_from(value)
        .map_err(|_| Error::InvalidInput(format!("{field}: unknown operation number {value}")))?;
    Ok(match operation {
        StackOperation::Unspecified => {
            return Err(Error::InvalidInput(format!(
                "{field}: STACK_OPERATION_UNSPECIFIED is not an operation"
            )));
        }
        StackOperation::Create => Operation::Create,
        StackOperation::Update => Operation::Update,
        StackOperation::Delete => Operation::Delete,
        StackOperation::Abandon => Operation::Abandon,
        StackOperation::Adopt => Operation::Adopt,
        StackOperation::Check => Operation::Check,
        StackOperation::Suspend => Operation::Suspend,
        StackOperation::Resume => Operation::Resume,
        StackOperation::Rollback => Operation::Rollback,
        StackOperation::Lock => Operation::Lock,
        StackOperation::Unlock => Operation::Unlock,
    })
}

fn operations_from_proto(values: Vec<i32>) -> Result<Vec<Operation>, Error> {
    values
        .into_iter()
        .map(|value| operation_from_proto(value, "operations"))
        .collect()
}

fn operation_to_proto(operation: Operation) -> StackOperation {
    match operation {
        Operation::Create => StackOperation::Create,
        Operation::Update => StackOperation::Update,
        Operation::Delete => StackOperation::Delete,
        Operation::Abandon => StackOperation::Abandon,
        Operation::Adopt => StackOperation::Adopt,
        Operation::Check => StackOperation::Check,
        Operation::Suspend => StackOperation::Suspend,
        Operation::Resume => StackOperation::Resume,
        Operation::Rollback => StackOperation::Rollback,
        Operation::Lock => StackOperation::Lock,
        Operation::Unlock => StackOperation::Unlock,
    }
}

/// `UNSPECIFIED` means the default (FAIL) on registration; an update must
/// name a mode.
fn failure_mode_from_proto(
    value: i32,
    unspecified: Option<FailureMode>,
) -> Result<FailureMode, Error> {
    match (pb::FailureMode::try_from(value), unspecified) {
        (Ok(pb::FailureMode::Fail), _) => Ok(FailureMode::Fail),
        (Ok(pb::FailureMode::Warn), _) => Ok(FailureMode::Warn),
        (Ok(pb::FailureMode::Unspecified), Some(default)) => Ok(default),
        (Ok(pb::FailureMode::Unspecified), None) => Err(Error::InvalidInput(
            "failure_mode: FAILURE_MODE_UNSPECIFIED is not a mode: use FAILURE_MODE_FAIL or FAILURE_MODE_WARN".to_owned(),
        )),
        (Err(_), _) => Err(Error::InvalidInput(format!(
            "failure_mode: unknown value {value}"
        ))),
    }
}

fn failure_mode_to_proto(failure_mode: FailureMode) -> pb::FailureMode {
    match failure_mode {
        FailureMode::Fail => pb::FailureMode::Fail,
        FailureMode::Warn => pb::FailureMode::Warn,
    }
}

pub fn new_plugin_from_proto(request: pb::RegisterPluginRequest) -> Result<NewPlugin, Error> {
    Ok(NewPlugin {
        name: request.name,
        endpoint: request.endpoint,
        ordinal: request.ordinal,
        operations: operations_from_proto(request.operations)?,
        project_ids: request.project_ids,
        failure_mode: failure_mode_from_proto(request.failure_mode, Some(FailureMode::Fail))?,
        timeout_ms: (request.timeout_ms != 0).then_some(request.timeout_ms),
        enabled: !request.disabled,
        enforce: request.enforce.unwrap_or(true),
        breaker_failures: request.breaker_failures,
        breaker_cooldown_ms: request.breaker_cooldown_ms,
    })
}

pub fn plugin_update_from_proto(request: pb::UpdatePluginRequest) -> Result<PluginUpdate, Error> {
    Ok(PluginUpdate {
        endpoint: request.endpoint,
        ordinal: request.ordinal,
        operations: request
            .operations
            .map(|filter| operations_from_proto(filter.values))
            .transpose()?,
        project_ids: request.project_ids.map(|filter| filter.values),
        failure_mode: request
            .failure_mode
            .map(|value| failure_mode_from_proto(value, None))
            .transpose()?,
        timeout_ms: request.timeout_ms,
        enabled: request.enabled,
        enforce: request.enforce,
        breaker_failures: request.breaker_failures,
        breaker_cooldown_ms: request.breaker_cooldown_ms,
        close_circuit: request.close_circuit,
    })
}

pub fn plugin_to_proto(plugin: &Plugin) -> pb::Plugin {
    pb::Plugin {
        name: plugin.name.clone(),
        endpoint: plugin.endpoint.clone(),
        ordinal: plugin.ordinal,
        operations: plugin
            .operations
            .iter()
            .map(|operation| operation_to_proto(*operation) as i32)
            .collect(),
        project_ids: plugin.project_ids.clone(),
        failure_mode: failure_mode_to_proto(plugin.failure_mode) as i32,
        timeout_ms: plugin.timeout_ms,
        enabled: plugin.enabled,
        created_at: Some(to_timestamp(plugin.created_at)),
        updated_at: Some(to_timestamp(plugin.updated_at)),
        enforce: plugin.enforce,
        breaker_failures: plugin.breaker.failures,
        breaker_cooldown_ms: plugin.breaker.cooldown_ms,
        circuit: Some(circuit_to_proto(plugin, ember_runtime::time::now())),
    }
}

/// `plugin`'s circuit as a caller meets it at `now`.
fn circuit_to_proto(plugin: &Plugin, now: chrono::DateTime<chrono::Utc>) -> pb::Circuit {
    let record = &plugin.circuit;
    pb::Circuit {
        state: match plugin.circuit_at(now) {
            Circuit::Closed => pb::CircuitState::Closed,
            Circuit::Open { .. } => pb::CircuitState::Open,
            Circuit::HalfOpen { .. } => pb::CircuitState::HalfOpen,
        } as i32,
        consecutive_failures: record.consecutive_failures,
        opened_at: to_optional_timestamp(record.opened_at),
        open_until: to_optional_timestamp(record.open_until),
        last_failure: record.last_failure.clone(),
    }
}

pub fn call_outcome_to_proto(outcome: PluginCallOutcome) -> pb::PluginCallOutcome {
    pb::PluginCallOutcome {
        plugin: outcome.plugin,
        phase: match outcome.phase {
            PluginPhase::Pre => pb::PluginPhase::Pre,
            PluginPhase::Post => pb::PluginPhase::Post,
        } as i32,
        outcome: match outcome.result {
            CallResult::Allow => pb::PluginCallResult::Allow,
            CallResult::Deny => pb::PluginCallResult::Deny,
            CallResult::Warn => pb::PluginCallResult::Warn,
            CallResult::Error => pb::PluginCallResult::Error,
            CallResult::Timeout => pb::PluginCallResult::Timeout,
            CallResult::Ok => pb::PluginCallResult::Ok,
            CallResult::CircuitOpen => pb::PluginCallResult::CircuitOpen,
        } as i32,
        message: outcome.message,
        duration_ms: u32::try_from(outcome.duration.as_millis()).unwrap_or(u32::MAX),
        duration_us: u64::try_from(outcome.duration.as_micros()).unwrap_or(u64::MAX),
        failure_mode: failure_mode_to_proto(outcome.failure_mode) as i32,
        failed: outcome.failed,
        stopped_chain: outcome.stopped_chain,
        observed: outcome.observed,
    }
}
