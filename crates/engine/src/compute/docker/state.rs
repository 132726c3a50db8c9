//! Reading what the engine says: a container's inspected state as a
//! [`MachineState`], a listing's state as a [`MachinePower`], which events
//! mean an instance's container changed, and engine errors as messages
//! that say what to do.

use bollard::models::{
    ContainerState, ContainerStateStatusEnum, ContainerSummary, ContainerSummaryStateEnum,
    EventMessage, EventMessageTypeEnum,
};
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::spec::INSTANCE_ID_LABEL;
use crate::compute::{MachineExit, MachinePower, MachineState};

/// Event actions after which a container's state may differ from before
/// (Docker says `destroy`, Podman `remove`).
const STATE_CHANGING_ACTIONS: &[&str] = &[
    "start", "die", "stop", "kill", "oom", "destroy", "remove", "restart", "pause", "unpause",
];

/// The machine state of an inspected container.
pub fn machine_state(state: Option<&ContainerState>) -> MachineState {
    let Some(state) = state else {
        return MachineState::Exited(MachineExit::default());
    };
    let running = matches!(
        state.status,
        Some(
            ContainerStateStatusEnum::RUNNING
                | ContainerStateStatusEnum::PAUSED
                | ContainerStateStatusEnum::RESTARTING
        )
    ) || (state.status.is_none() && state.running == Some(true));
    if running {
        return MachineState::Running;
    }
    if state.status == Some(ContainerStateStatusEnum::REMOVING) {
        return MachineState::Missing;
    }
    MachineState::Exited(MachineExit {
        exit_code: state.exit_code.unwrap_or(0),
        oom_killed: state.oom_killed.unwrap_or(false),
        error: state.error.clone().unwrap_or_default(),
        finished_at: state.finished_at.as_deref().and_then(timestamp),
    })
}

/// An engine timestamp; the zero time Docker uses for "never" is `None`.
fn timestamp(text: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(text)
        .ok()
        .map(|time| time.with_timezone(&Utc))
        .filter(|time| time.timestamp() > 0)
}

/// The instance a listed container belongs to, and its power.
pub fn listed(summary: &ContainerSummary) -> Option<(Uuid, MachinePower)> {
    let uuid = summary
        .labels
        .as_ref()?
        .get(INSTANCE_ID_LABEL)
        .and_then(|text| Uuid::parse_str(text).ok())?;
    let power = match summary.state {
        Some(
            ContainerSummaryStateEnum::RUNNING
            | ContainerSummaryStateEnum::PAUSED
            | ContainerSummaryStateEnum::RESTARTING,
        ) => MachinePower::Running,
        Some(ContainerSummaryStateEnum::REMOVING) => MachinePower::Missing,
        _ => MachinePower::Stopped,
    };
    Some((uuid, power))
}

/// The instance whose container an event is about, when the event may have
/// changed its state.
pub fn changed_instance(event: &EventMessage) -> Option<Uuid> {
    if event.typ != Some(EventMessageTypeEnum::CONTAINER) {
        return None;
    }
    let action = event.action.as_deref()?;
    // `exec_die` and the like are about processes inside, not the container.
    if !STATE_CHANGING_ACTIONS.contains(&action) {
        return None;
    }
    event
        .actor
        .as_ref()?
        .attributes
        .as_ref()?
        .get(INSTANCE_ID_LABEL)
        .and_then(|text| Uuid::parse_str(text).ok())
}

/// An HTTP status of the engine, when the error is one.
pub fn status_code(error: &bollard::errors::Error) -> Option<u16> {
    match error {
        bollard::errors::Error::DockerResponseServerError { status_code, .. } => Some(*status_code),
        _ => None,
    }
}

/// The engine's message for an error answer, else the error with its
/// causes (a refused connection, a missing socket).
pub fn describe(error: &bollard::errors::Error, host: &str) -> String {
    use bollard::errors::Error;
    match error {
        Error::DockerResponseServerError {
            status_code,
            message,
        } => format!("{message} (HTTP {status_code})"),
        Error::SocketNotFoundError(path) => format!(
            "cannot reach the container engine: its socket {path} does not exist (engine.compute.docker_host = {host:?}; is Docker or `podman system service` running?)"
        ),
        Error::RequestTimeoutError => {
            format!("the container engine at {host} did not answer in time")
        }
        other => ember_runtime::error::with_causes(
            format!("cannot reach the container engine at {host}"),
            Some(other),
        ),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use bollard::models::EventActor;

    use super::*;

    #[test]
    fn inspected_states_become_machine_states() {
        let running = ContainerState {
            status: Some(ContainerStateStatusEnum::RUNNING),
            running: Some(true),
            ..ContainerState::default()
        };
        assert_eq!(machine_state(Some(&running)), MachineState::Running);
        let killed = ContainerState {
            status: Some(ContainerStateStatusEnum::EXITED),
            exit_code: Some(137),
            oom_killed: Some(true),
            finished_at: Some("2026-11-24T06:13:23.982289272Z".into()),
            ..ContainerState::default()
        };
        let MachineState::Exited(exit) = machine_state(Some(&killed)) else {
            panic!("exited");
        };
        assert!(exit.oom_killed);
        assert_eq!(exit.exit_code, 137);
        assert!(exit.finished_at.is_some());
        let never = ContainerState {
            status: Some(ContainerStateStatusEnum::CREATED),
            finished_at: Some("0001-01-01T00:00:00Z".into()),
            ..ContainerState::default()
        };
        assert_eq!(
            machine_state(Some(&never)),
            MachineState::Exited(MachineExit::default())
        );
    }

    #[test]
    fn only_state_changes_of_labelled_containers_are_observed() {
        let uuid = Uuid::now_v7();
        let event = |action: &str, label: Option<&str>| EventMessage {
            typ: Some(EventMessageTypeEnum::CONTAINER),
            action: Some(action.into()),
            actor: Some(EventActor {
                id: Some("abc".into()),
                attributes: Some(
                    label
                        .map(|value| {
                            HashMap::from([(INSTANCE_ID_LABEL.to_owned(), value.to_owned())])
                        })
                        .unwrap_or_default(),
                ),
            }),
            ..EventMessage::default()
        };
        let uuid_text = uuid.to_string();
        assert_eq!(
            changed_instance(&event("die", Some(&uuid_text))),
            Some(uuid)
        );
        assert_eq!(
            changed_instance(&event("remove", Some(&uuid_text))),
            Some(uuid)
        );
        assert_eq!(changed_instance(&event("exec_die", Some(&uuid_text))), None);
        assert_eq!(changed_instance(&event("die", None)), None);
        assert_eq!(changed_instance(&event("die", Some("not-a-uuid"))), None);
    }

    #[test]
    fn errors_say_what_is_wrong() {
        let missing = bollard::errors::Error::SocketNotFoundError("/nope.sock".into());
        let text = describe(&missing, "unix:///nope.sock");
        assert!(text.contains("/nope.sock does not exist"), "{text}");
        let answer = bollard::errors::Error::DockerResponseServerError {
            status_code: 404,
            message: "no such image".into(),
        };
        assert_eq!(describe(&answer, "unix:///x"), "no such image (HTTP 404)");
        assert_eq!(status_code(&answer), Some(404));
    }
}
