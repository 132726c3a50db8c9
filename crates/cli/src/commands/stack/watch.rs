//! `--wait`: live progress of a stack operation. Polls ListEvents with a
//! marker every 200 ms and prints each new event as it happens, then the
//! final status. An operation that ends `*_FAILED` is an error carrying the
//! reason, so the command exits non-zero; a wait that outlives its deadline
//! is an error too.

use std::time::{Duration, Instant};

use ember_proto::engine::v1 as pb;
use ember_proto::engine::v1::event_service_client::EventServiceClient;
use ember_proto::engine::v1::stack_service_client::StackServiceClient;

use super::format_time;
use crate::client::Client;
use crate::error::CliError;

const POLL_INTERVAL: Duration = Duration::from_millis(200);
const EVENT_PAGE: u32 = 100;

/// The id of the stack's newest event, so a wait prints only what follows.
pub async fn latest_event_id(client: &Client, stack: &str) -> Result<String, CliError> {
    let page = EventServiceClient::new(client.channel.clone())
        .max_decoding_message_size(ember_runtime::server::MAX_MESSAGE_BYTES)
        .list_events(client.request(pb::ListEventsRequest {
            stack: stack.to_owned(),
            limit: 1,
            descending: true,
            ..pb::ListEventsRequest::default()
        })?)
        .await?
        .into_inner();
    Ok(page
        .events
        .first()
        .map(|event| event.id.clone())
        .unwrap_or_default())
}

/// Prints events after `marker` until the stack `stack_id` leaves
/// `*_IN_PROGRESS` (or, deleting, disappears). Returns the final stack.
pub async fn wait_until_settled(
    client: &Client,
    stack_id: &str,
    mut marker: String,
    timeout: Duration,
) -> Result<Option<pb::Stack>, CliError> {
    let deadline = Instant::now() + timeout;
    loop {
        let found = StackServiceClient::new(client.channel.clone())
            .max_decoding_message_size(ember_runtime::server::MAX_MESSAGE_BYTES)
            .get_stack(client.request(pb::GetStackRequest {
                stack: stack_id.to_owned(),
            })?)
            .await;
        // Events first, so the last ones before the final status show.
        print_new_events(client, stack_id, &mut marker).await?;
        match found {
            Ok(stack) => {
                let stack = stack.into_inner();
                if stack.status != pb::ActionStatus::InProgress as i32 {
                    return Ok(Some(stack));
                }
                if Instant::now() >= deadline {
                    return Err(CliError::TimedOut(format!(
                        "stack {} still {} after {} s: stopped waiting (it goes on)",
                        stack.name,
                        stack.stack_status,
                        timeout.as_secs()
                    )));
                }
            }
            Err(status) if status.code() == tonic::Code::NotFound => return Ok(None),
            Err(status) => return Err(CliError::from(status)),
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}

async fn print_new_events(
    client: &Client,
    stack_id: &str,
    marker: &mut String,
) -> Result<(), CliError> {
    loop {
        let page = EventServiceClient::new(client.channel.clone())
            .max_decoding_message_size(ember_runtime::server::MAX_MESSAGE_BYTES)
            .list_events(client.request(pb::ListEventsRequest {
                stack: stack_id.to_owned(),
                limit: EVENT_PAGE,
                marker: marker.clone(),
                ..pb::ListEventsRequest::default()
            })?)
            .await;
        let page = match page {
            Ok(page) => page.into_inner(),
            // A deleted stack's events may go with it.
            Err(status) if status.code() == tonic::Code::NotFound => return Ok(()),
            Err(status) => return Err(CliError::from(status)),
        };
        for event in &page.events {
            println!("{}", event_line(event));
        }
        if let Some(last) = page.events.last() {
            marker.clone_from(&last.id);
        }
        if page.next_marker.is_empty() || page.events.is_empty() {
            return Ok(());
        }
    }
}

/// One event as heat prints it: `TIME [resource]: STATUS  reason`.
pub fn event_line(event: &pb::Event) -> String {
    format!(
        "{} [{}]: {}  {}",
        format_time(event.created_at.as_ref()),
        event.resource_name,
        event.resource_status,
        event.resource_status_reason
    )
    .trim_end()
    .to_owned()
}

/// The final line, or the error that makes the command fail.
pub fn conclude(name: &str, settled: Option<pb::Stack>) -> Result<(), CliError> {
    match settled {
        None => {
            println!("stack {name} deleted");
            Ok(())
        }
        Some(stack) if stack.status == pb::ActionStatus::Failed as i32 => {
            Err(CliError::Failed(format!(
                "stack {} {}: {}",
                stack.name, stack.stack_status, stack.status_reason
            )))
        }
        Some(stack) => {
            println!("stack {} {}", stack.name, stack.stack_status);
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_stack_is_an_error_with_its_reason() {
        let failed = pb::Stack {
            name: "web".into(),
            status: pb::ActionStatus::Failed as i32,
            stack_status: "CREATE_FAILED".into(),
            status_reason: "Resource CREATE failed: Test Resource failed".into(),
            ..pb::Stack::default()
        };
        let error = conclude("web", Some(failed)).expect_err("failed");
        assert_eq!(
            error,
            CliError::Failed(
                "stack web CREATE_FAILED: Resource CREATE failed: Test Resource failed".to_owned()
            )
        );
        let complete = pb::Stack {
            status: pb::ActionStatus::Complete as i32,
            ..pb::Stack::default()
        };
        assert!(conclude("web", Some(complete)).is_ok());
        assert!(conclude("web", None).is_ok());
    }

    #[test]
    fn events_print_like_heats() {
        let event = pb::Event {
            resource_name: "random".into(),
            resource_status: "CREATE_COMPLETE".into(),
            resource_status_reason: "state changed".into(),
            created_at: Some(prost_types::Timestamp {
                seconds: 1_767_225_600,
                nanos: 0,
            }),
            ..pb::Event::default()
        };
        assert_eq!(
            event_line(&event),
            "2026-01-01T00:00:00Z [random]: CREATE_COMPLETE  state changed"
        );
    }
}
