//! Receivers (Senlin's): what every entry point calls to create, read,
//! change and delete them, to fire a webhook, and to post to and notify a
//! message receiver's queue (see [`messages`]). A receiver belongs to its
//! creator's project (another project's is not found; admins reach every
//! project's). Firing one records the cluster action through the
//! clustering service's own request paths, as the receiver's creator —
//! the same checks, quotas and queueing as the REST call it stands for
//! (see [`trigger`]).

mod messages;
mod trigger;

use std::sync::Arc;

use ember_runtime::Identity;
use serde_json::{Map, Value};
use uuid::Uuid;

use crate::clusters::ClusterService;
use crate::domain::admission::cluster::is_read_only;
use crate::domain::cluster::{ClusterAction, validate_name};
use crate::domain::receiver::{
    Receiver, ReceiverType, actor_of, new_receiver_id, queue_name, validate_action, validate_params,
};
use crate::error::{Error, Result};
use crate::store::receivers::{ReceiverQuery, ReceiverStore};

pub use messages::{
    BusMessage, MAX_MESSAGES_PER_POST, MESSAGE_LEASE, MESSAGE_SWEEP_INTERVAL, PostedMessage,
    spawn_message_worker,
};

/// Where the gateway serves the Clustering API, under its public URL.
const CLUSTERING_PATH: &str = "/clustering/v1";

/// What `POST /receivers` asks for.
pub struct NewReceiver {
    pub name: String,
    pub kind: String,
    /// Cluster name, id or short id.
    pub cluster: Option<String>,
    pub action: Option<String>,
    pub params: Map<String, Value>,
}

/// What `PATCH /receivers/{id}` changes; `None` leaves it.
pub struct ReceiverChanges {
    pub name: Option<String>,
    pub action: Option<String>,
    pub params: Option<Map<String, Value>>,
}

pub struct ReceiverService {
    store: Arc<dyn ReceiverStore>,
    clusters: Arc<ClusterService>,
    /// The gateway's URL as users reach it, without a trailing `/`.
    public_url: String,
    /// Wakes the message worker: a message was posted.
    wake: tokio::sync::Notify,
}

/// Senlin's not-found message.
fn not_found(name_or_id: &str) -> Error {
    Error::NotFound(format!("The receiver '{name_or_id}' could not be found."))
}

/// Senlin's answer to a change asked of a caller with no right to change.
fn refuse_readers(caller: &Identity) -> Result<()> {
    if is_read_only(caller) {
        return Err(Error::Forbidden(
            "You are not authorized to complete this operation.".into(),
        ));
    }
    Ok(())
}

impl ReceiverService {
    /// Receivers over `store`, firing through `clusters`; webhook URLs
    /// start with `public_url` (the gateway's).
    pub fn new(
        store: Arc<dyn ReceiverStore>,
        clusters: Arc<ClusterService>,
        public_url: &str,
    ) -> Arc<ReceiverService> {
        Arc::new(ReceiverService {
            store,
            clusters,
            public_url: public_url.trim_end_matches('/').to_owned(),
            wake: tokio::sync::Notify::new(),
        })
    }

    /// The project a caller's lookups are limited to (`None` for admins).
    fn scope(caller: &Identity) -> Option<&str> {
        (!caller.is_admin()).then_some(caller.project_id.as_str())
    }

    /// The URL that fires webhook `id` (Senlin's, version 2: the body's
    /// JSON object is the trigger's params).
    fn alarm_url(&self, id: Uuid) -> String {
        format!(
            "{}{CLUSTERING_PATH}/webhooks/{id}/trigger?V=2",
            self.public_url
        )
    }

    pub async fn create(&self, caller: &Identity, new: NewReceiver) -> Result<Receiver> {
        refuse_readers(caller)?;
        validate_name("receiver", &new.name)?;
        let kind = ReceiverType::parse(&new.kind)?;
        if let Some(action) = &new.action {
            validate_action(action)?;
        }
        let id = new_receiver_id();
        let mut channel = Map::new();
        let (cluster_id, action) = match kind {
            ReceiverType::Webhook => {
                let cluster = new.cluster.as_deref().ok_or_else(|| {
                    Error::InvalidInput(
                        "Cluster identity is required for creating webhook receiver.".into(),
                    )
                })?;
                let action = new.action.ok_or_else(|| {
                    Error::InvalidInput(
                        "Action name is required for creating webhook receiver.".into(),
                    )
                })?;
                validate_params(&action, &new.params)?;
                trigger::check_values(&new.params)?;
                let cluster = self.referenced_cluster(caller, cluster).await?;
                channel.insert("alarm_url".into(), Value::String(self.alarm_url(id)));
                (Some(cluster), Some(action))
            }
            // Senlin's message receivers name their cluster and action in
            // each message, not in the receiver.
            ReceiverType::Message => {
                channel.insert("queue_name".into(), Value::String(queue_name(id)));
                (None, None)
            }
        };
        let receiver = Receiver {
            id,
            name: new.name,
            kind,
            cluster_id,
            action,
            params: new.params,
            actor: actor_of(caller),
            channel,
            user_id: caller.user_id.clone(),
            project_id: caller.project_id.clone(),
            created_at: ember_runtime::time::now(),
            updated_at: None,
        };
        self.store.insert_receiver(&receiver).await?;
        tracing::info!(receiver_id = %receiver.id, kind = kind.as_str(), "receiver created");
        Ok(receiver)
    }

    /// The cluster a new receiver names, by the caller's lookup; one that
    /// is not found is a bad request (Senlin's "referenced" message).
    async fn referenced_cluster(&self, caller: &Identity, name_or_id: &str) -> Result<Uuid> {
        match self.clusters.find_cluster(caller, name_or_id).await {
            Ok(cluster) => Ok(cluster.id),
            Err(Error::NotFound(_)) => Err(Error::InvalidInput(format!(
                "The referenced cluster '{name_or_id}' could not be found."
            ))),
            Err(other) => Err(other),
        }
    }

    /// A receiver by id, name or short id, within the caller's reach.
    pub async fn find(&self, caller: &Identity, name_or_id: &str) -> Result<Receiver> {
        let mut found = self
            .store
            .match_receivers(Self::scope(caller), name_or_id)
            .await?;
        if found.len() > 1 {
            return Err(Error::InvalidInput(format!(
                "Multiple results found matching the query criteria '{name_or_id}'. Please be more specific."
            )));
        }
        found.pop().ok_or_else(|| not_found(name_or_id))
    }

    /// A page of receivers: the caller's project's, or every project's
    /// when an admin asks with `global_project`.
    pub async fn list(
        &self,
        caller: &Identity,
        global_project: bool,
        mut query: ReceiverQuery,
    ) -> Result<Vec<Receiver>> {
        if global_project && !caller.is_admin() {
            return Err(Error::Forbidden(
                "You are not authorized to complete this operation.".into(),
            ));
        }
        query.project_id = (!global_project).then(|| caller.project_id.clone());
        self.store.list_receivers(&query).await
    }

    pub async fn update(
        &self,
        caller: &Identity,
        name_or_id: &str,
        changes: ReceiverChanges,
    ) -> Result<Receiver> {
        refuse_readers(caller)?;
        let mut receiver = self.find(caller, name_or_id).await?;
        let mut changed = false;
        if let Some(name) = changes.name.filter(|name| *name != receiver.name) {
            validate_name("receiver", &name)?;
            receiver.name = name;
            changed = true;
        }
        if let Some(action) = changes
            .action
            .filter(|action| receiver.action.as_ref() != Some(action))
        {
            validate_action(&action)?;
            receiver.action = Some(action);
            changed = true;
        }
        if let Some(params) = changes.params.filter(|params| *params != receiver.params) {
            receiver.params = params;
            changed = true;
        }
        if !changed {
            return Err(Error::InvalidInput("No property needs an update.".into()));
        }
        if let Some(action) = &receiver.action {
            validate_params(action, &receiver.params)?;
            trigger::check_values(&receiver.params)?;
        }
        receiver.updated_at = Some(ember_runtime::time::now());
        if !self.store.update_receiver(&receiver).await? {
            return Err(not_found(name_or_id));
        }
        Ok(receiver)
    }

    pub async fn delete(&self, caller: &Identity, name_or_id: &str) -> Result<()> {
        refuse_readers(caller)?;
        let receiver = self.find(caller, name_or_id).await?;
        if !self.store.delete_receiver(receiver.id).await? {
            return Err(not_found(name_or_id));
        }
        tracing::info!(receiver_id = %receiver.id, "receiver deleted");
        Ok(())
    }

    /// Fires webhook `id` (its full id: the URL's secret; whoever calls)
    /// with `params` laid over its own: records its cluster action as the
    /// receiver's creator. Any id that is not a webhook's is not found,
    /// with the same answer whether or not anything else has that id.
    pub async fn trigger_webhook(
        &self,
        id: &str,
        params: Map<String, Value>,
    ) -> Result<ClusterAction> {
        let receiver = match Uuid::parse_str(id) {
            Ok(uuid) => self.store.get_receiver(uuid).await?,
            Err(_) => None,
        }
        .filter(|receiver| receiver.kind == ReceiverType::Webhook)
        .ok_or_else(|| not_found(id))?;
        let action = trigger::fire(&self.clusters, &receiver, params).await?;
        tracing::info!(
            receiver_id = %receiver.id,
            action_id = %action.id,
            action = action.kind.as_str(),
            "webhook triggered"
        );
        Ok(action)
    }
}
