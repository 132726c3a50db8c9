//! `ReceiverService`: thin handlers over [`ReceiverService`].

use std::sync::Arc;

use ember_proto::engine::v1 as pb;
use ember_runtime::time::to_timestamp;
use serde_json::Value;
use tonic::Request;

use super::cluster_convert::non_empty;
use super::{Reply, answer};
use crate::domain::cluster::parse_object;
use crate::domain::receiver::{Receiver, ReceiverType};
use crate::domain::receiver::{ReceiverQuery, ReceiverSortKey};
use crate::error::{Error, Result};
use crate::receivers::{NewReceiver, PostedMessage, ReceiverChanges, ReceiverService};

pub struct ReceiverHandler {
    service: Arc<ReceiverService>,
}

impl ReceiverHandler {
    pub fn new(service: Arc<ReceiverService>) -> Self {
        ReceiverHandler { service }
    }
}

fn receiver(receiver: Receiver) -> pb::Receiver {
    pb::Receiver {
        id: receiver.id.to_string(),
        name: receiver.name,
        r#type: receiver.kind.as_str().to_owned(),
        cluster_id: receiver
            .cluster_id
            .map(|id| id.to_string())
            .unwrap_or_default(),
        action: receiver.action.unwrap_or_default(),
        params: Value::Object(receiver.params).to_string(),
        actor: Value::Object(receiver.actor).to_string(),
        channel: Value::Object(receiver.channel).to_string(),
        user_id: receiver.user_id,
        project_id: receiver.project_id,
        created_at: Some(to_timestamp(receiver.created_at)),
        updated_at: receiver.updated_at.map(to_timestamp),
    }
}

/// Senlin's `sort`: `key[:asc|desc],…`, with Senlin's messages.
fn sort_keys(text: &str) -> Result<Vec<(ReceiverSortKey, bool)>> {
    if text.is_empty() {
        return Ok(Vec::new());
    }
    text.split(',')
        .map(|part| {
            let (key, direction) = part.split_once(':').unwrap_or((part, ""));
            if key.is_empty() {
                return Err(Error::InvalidInput("Missing sort key for 'sort'.".into()));
            }
            let key = ReceiverSortKey::parse(key).ok_or_else(|| {
                Error::InvalidInput(format!("Unsupported sort key '{key}' for 'sort'."))
            })?;
            match direction {
                "" | "asc" => Ok((key, false)),
                "desc" => Ok((key, true)),
                other => Err(Error::InvalidInput(format!(
                    "Unsupported sort dir '{other}' for 'sort'."
                ))),
            }
        })
        .collect()
}

fn query(request: pb::ListReceiversRequest) -> Result<ReceiverQuery> {
    let marker = match request.marker.as_str() {
        "" => None,
        text => Some(uuid::Uuid::parse_str(text).map_err(|_| {
            Error::InvalidInput(format!(
                "The value for marker is not a valid UUID: '{text}'."
            ))
        })?),
    };
    let action = non_empty(request.action);
    if let Some(action) = &action
        && !crate::domain::receiver::CLUSTER_ACTION_NAMES.contains(&action.as_str())
    {
        return Err(Error::InvalidInput(format!(
            "Value '{action}' is not acceptable for field 'action'."
        )));
    }
    Ok(ReceiverQuery {
        project_id: None,
        name: non_empty(request.name),
        kind: non_empty(request.r#type)
            .map(|kind| ReceiverType::parse(&kind))
            .transpose()?,
        cluster_id: non_empty(request.cluster_id),
        action,
        user_id: non_empty(request.user_id),
        sort: sort_keys(&request.sort)?,
        limit: request.limit,
        marker,
    })
}

#[tonic::async_trait]
impl pb::receiver_service_server::ReceiverService for ReceiverHandler {
    async fn create_receiver(
        &self,
        request: Request<pb::CreateReceiverRequest>,
    ) -> Reply<pb::Receiver> {
        answer(
            request,
            |caller, request| async move {
                let new = NewReceiver {
                    name: request.name,
                    kind: request.r#type,
                    cluster: non_empty(request.cluster),
                    action: non_empty(request.action),
                    params: parse_object("params", &request.params)?,
                };
                self.service.create(&caller, new).await
            },
            receiver,
        )
        .await
    }

    async fn get_receiver(&self, request: Request<pb::GetReceiverRequest>) -> Reply<pb::Receiver> {
        answer(
            request,
            |caller, request| async move { self.service.find(&caller, &request.id).await },
            receiver,
        )
        .await
    }

    async fn list_receivers(
        &self,
        request: Request<pb::ListReceiversRequest>,
    ) -> Reply<pb::ListReceiversResponse> {
        answer(
            request,
            |caller, request| async move {
                let global_project = request.global_project;
                self.service
                    .list(&caller, global_project, query(request)?)
                    .await
            },
            |receivers| pb::ListReceiversResponse {
                receivers: receivers.into_iter().map(receiver).collect(),
            },
        )
        .await
    }

    async fn update_receiver(
        &self,
        request: Request<pb::UpdateReceiverRequest>,
    ) -> Reply<pb::Receiver> {
        answer(
            request,
            |caller, request| async move {
                let changes = ReceiverChanges {
                    name: request.name,
                    action: request.action,
                    params: request
                        .params
                        .map(|text| parse_object("params", &text))
                        .transpose()?,
                };
                self.service.update(&caller, &request.id, changes).await
            },
            receiver,
        )
        .await
    }

    async fn delete_receiver(
        &self,
        request: Request<pb::GetReceiverRequest>,
    ) -> Reply<pb::DeleteReceiverResponse> {
        answer(
            request,
            |caller, request| async move { self.service.delete(&caller, &request.id).await },
            |()| pb::DeleteReceiverResponse {},
        )
        .await
    }

    async fn trigger_webhook(
        &self,
        request: Request<pb::TriggerWebhookRequest>,
    ) -> Reply<pb::TriggerWebhookResponse> {
        // The caller is whoever holds the URL: the receiver decides whom
        // the action runs as.
        answer(
            request,
            |_caller, request| async move {
                let params = parse_object("params", &request.params)?;
                self.service.trigger_webhook(&request.id, params).await
            },
            |action| pb::TriggerWebhookResponse {
                action_id: action.id.to_string(),
            },
        )
        .await
    }

    async fn post_receiver_messages(
        &self,
        request: Request<pb::PostReceiverMessagesRequest>,
    ) -> Reply<pb::PostReceiverMessagesResponse> {
        answer(
            request,
            |caller, request| async move {
                let posted = request
                    .messages
                    .into_iter()
                    .enumerate()
                    .map(|(index, message)| PostedMessage::parse(index, &message.body, message.ttl))
                    .collect::<Result<Vec<_>>>()?;
                self.service
                    .post_messages(&caller, &request.queue_name, posted)
                    .await
            },
            |messages| pb::PostReceiverMessagesResponse {
                message_ids: messages
                    .iter()
                    .map(|message| message.id.to_string())
                    .collect(),
            },
        )
        .await
    }

    async fn notify_receiver(
        &self,
        request: Request<pb::GetReceiverRequest>,
    ) -> Reply<pb::NotifyReceiverResponse> {
        answer(
            request,
            |caller, request| async move { self.service.notify(&caller, &request.id).await },
            |actions| pb::NotifyReceiverResponse {
                action_ids: actions.iter().map(|action| action.id.to_string()).collect(),
            },
        )
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sort_keys_are_senlins_with_its_messages() {
        assert_eq!(
            sort_keys("name:desc,created_at").unwrap(),
            vec![
                (ReceiverSortKey::Name, true),
                (ReceiverSortKey::CreatedAt, false)
            ]
        );
        assert_eq!(
            sort_keys("bad-sort").unwrap_err().to_string(),
            "Unsupported sort key 'bad-sort' for 'sort'."
        );
        assert_eq!(
            sort_keys("name:up").unwrap_err().to_string(),
            "Unsupported sort dir 'up' for 'sort'."
        );
    }
}
