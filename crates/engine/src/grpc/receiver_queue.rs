//! `ReceiverQueueService`, internal (served on the engine's own port for
//! lifecycle-hook): messages taken from the message bus, posted to a
//! message receiver's queue as the project their subject names, through
//! [`ReceiverService::post_bus_messages`].

use std::sync::Arc;

use ember_proto::engine::v1 as pb;
use tonic::{Request, Response};

use super::Reply;
use crate::receivers::{BusMessage, ReceiverService};

pub struct ReceiverQueueHandler {
    service: Arc<ReceiverService>,
}

impl ReceiverQueueHandler {
    pub fn new(service: Arc<ReceiverService>) -> Self {
        ReceiverQueueHandler { service }
    }
}

#[tonic::async_trait]
impl pb::receiver_queue_service_server::ReceiverQueueService for ReceiverQueueHandler {
    async fn post_project_receiver_messages(
        &self,
        request: Request<pb::PostProjectReceiverMessagesRequest>,
    ) -> Reply<pb::PostReceiverMessagesResponse> {
        let request = request.into_inner();
        let messages = request
            .messages
            .into_iter()
            .map(|message| BusMessage {
                body: message.body,
                ttl: message.ttl,
            })
            .collect();
        let stored = self
            .service
            .post_bus_messages(&request.project_id, &request.queue_name, messages)
            .await?;
        Ok(Response::new(pb::PostReceiverMessagesResponse {
            message_ids: stored
                .iter()
                .map(|message| message.id.to_string())
                .collect(),
        }))
    }
}
