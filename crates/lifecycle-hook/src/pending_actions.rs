//! The application layer: each public method of [`PendingActions`] is one
//! operation lifecycle-hook's gRPC services offer, on domain values. It
//! decides who sees which project's pending actions, events and queues,
//! records the engine's new pending actions and wakes the workers, resolves
//! actions with an event about each, and moves deadlines on heartbeats. The
//! handlers (`grpc.rs`, `grpc_internal.rs`) only decode and encode.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use ember_runtime::Identity;
use uuid::Uuid;

use crate::domain::{
    HookEvent, NewPendingAction, PendingLifecycleAction, PendingListQuery, QueueMessage,
    Resolution, page_size,
};
use crate::error::{Error, Result};
use crate::store::PendingActionStore;
use crate::workers::Wake;

/// Pending lifecycle actions as callers ask about them, over the store,
/// waking the delivery and deadline workers when their work changed.
pub struct PendingActions {
    store: Arc<dyn PendingActionStore>,
    wake: Wake,
}

/// One page of pending actions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingPage {
    pub actions: Vec<PendingLifecycleAction>,
    /// The marker of the next page (the last action's token) when this one
    /// is full; `None` on the last page.
    pub next_marker: Option<Uuid>,
}

/// A read of a queue of the embedded queue.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueueRead {
    /// The project whose queue is read; `None`: the caller's.
    pub project_id: Option<String>,
    pub queue: String,
    /// Only messages after this id.
    pub after_id: u64,
    /// 0 = the default page size.
    pub limit: u32,
}

/// Which hook events to list.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HookEventFilter {
    pub cluster_id: Option<Uuid>,
    /// Only the events about this lifecycle action.
    pub token: Option<Uuid>,
    /// 0 = the default page size.
    pub limit: u32,
}

impl PendingActions {
    pub fn new(store: Arc<dyn PendingActionStore>, wake: Wake) -> Self {
        PendingActions { store, wake }
    }

    /// A page of the pending actions `caller` may see; the caller decides
    /// the project (`query.project_id` is replaced by it).
    pub async fn list_pending(
        &self,
        caller: &Identity,
        query: PendingListQuery,
    ) -> Result<PendingPage> {
        let query = PendingListQuery {
            project_id: visible_project(caller),
            ..query
        };
        let actions = self.store.list_pending(&query).await?;
        let next_marker = if actions.len() == query.page_size() as usize {
            actions.last().map(|action| action.token)
        } else {
            None
        };
        Ok(PendingPage {
            actions,
            next_marker,
        })
    }

    /// The messages of one queue of the embedded queue, if `caller` may
    /// read it ([`queue_project`]).
    pub async fn list_queue_messages(
        &self,
        caller: &Identity,
        read: QueueRead,
    ) -> Result<Vec<QueueMessage>> {
        if read.queue.is_empty() {
            return Err(Error::InvalidInput("queue: give a queue name".into()));
        }
        let project_id = queue_project(caller, read.project_id.as_deref())?;
        let after_id = i64::try_from(read.after_id)
            .map_err(|_| Error::InvalidInput(format!("after_id {} is too large", read.after_id)))?;
        self.store
            .list_queue_messages(
                &project_id,
                &read.queue,
                after_id,
                u64::from(page_size(read.limit)),
            )
            .await
    }

    /// The hook events `caller` may see.
    pub async fn list_hook_events(
        &self,
        caller: &Identity,
        filter: HookEventFilter,
    ) -> Result<Vec<HookEvent>> {
        let project_id = visible_project(caller);
        self.store
            .list_events(
                project_id.as_deref(),
                filter.cluster_id,
                filter.token,
                u64::from(page_size(filter.limit)),
            )
            .await
    }

    /// Records the engine's new pending actions as of now (a token already
    /// recorded is left as it is), then wakes the workers to deliver them.
    pub async fn record(&self, actions: Vec<NewPendingAction>) -> Result<()> {
        let now = ember_runtime::time::now();
        let actions: Vec<PendingLifecycleAction> = actions
            .into_iter()
            .map(|action| action.into_pending(now))
            .collect();
        self.store.record_pending_actions(&actions).await?;
        tracing::info!(count = actions.len(), "pending lifecycle actions recorded");
        self.wake.notify();
        Ok(())
    }

    /// Resolves the actions of `tokens` still waiting, recording an event
    /// about each one this resolves; unknown or already resolved tokens are
    /// left alone.
    pub async fn resolve(
        &self,
        tokens: &[Uuid],
        resolution: Resolution,
        resolved_by: &str,
    ) -> Result<()> {
        let mut events = Vec::with_capacity(tokens.len());
        for token in tokens {
            if let Some(action) = self.store.get_pending(*token).await?
                && action.resolution.is_none()
            {
                events.push(HookEvent::about(
                    &action,
                    resolution.as_str(),
                    format!("{} by {}", resolution.as_str().to_lowercase(), resolved_by),
                ));
            }
        }
        self.store
            .resolve(tokens, resolution, resolved_by, &events)
            .await?;
        Ok(())
    }

    /// A heartbeat: moves the deadline of the action `token` (as
    /// [`PendingLifecycleAction::extended_deadline`] allows) and returns
    /// it; the deadline worker is woken to wait for the new one.
    /// `Error::Conflict` when the action is already resolved.
    pub async fn extend_deadline(&self, token: Uuid) -> Result<DateTime<Utc>> {
        let action = self
            .store
            .extend_deadline(token, ember_runtime::time::now())
            .await?;
        self.wake.notify();
        Ok(action.deadline)
    }
}

/// The project whose pending actions and events `caller` sees: admins see
/// every project's (`None`), others only their own.
fn visible_project(caller: &Identity) -> Option<String> {
    (!caller.is_admin()).then(|| caller.project_id.clone())
}

/// The queue access rule: a queue belongs to a project, the caller's unless
/// an admin names another (`asked`).
fn queue_project(caller: &Identity, asked: Option<&str>) -> Result<String> {
    match asked {
        None => Ok(caller.project_id.clone()),
        Some(own) if own == caller.project_id => Ok(caller.project_id.clone()),
        Some(other) if caller.is_admin() => Ok(other.to_owned()),
        Some(other) => Err(Error::Forbidden(format!(
            "project_id {:?}: only an admin may read another project's queues",
            ember_runtime::quote::quoted(other)
        ))),
    }
}

#[cfg(test)]
mod tests {
    use ember_runtime::database::connect_and_migrate;
    use ember_runtime::database::testing::TestDatabase;

    use super::*;
    use crate::domain::{DeliveryState, Target, Transition};
    use crate::store::SqlPendingActionStore;
    use crate::store::migrations::Migrator;

    fn member(project: &str) -> Identity {
        Identity::new("alice", project, vec!["member".to_owned()])
    }

    fn admin(project: &str) -> Identity {
        Identity::new("root", project, vec!["admin".to_owned()])
    }

    fn new_action(project: &str, cluster_id: Uuid) -> NewPendingAction {
        NewPendingAction {
            token: Uuid::now_v7(),
            transition: Transition::Terminating,
            node_id: Uuid::now_v7(),
            resource_id: "instance-1".to_owned(),
            cluster_id,
            project_id: project.to_owned(),
            target: Target::Queue {
                queue: "drain".to_owned(),
            },
            deadline: ember_runtime::time::now() + chrono::Duration::seconds(60),
            timeout_secs: 60,
        }
    }

    async fn service(database: &TestDatabase) -> PendingActions {
        let connection = connect_and_migrate::<Migrator>(&database.url)
            .await
            .expect("migrated");
        PendingActions::new(
            Arc::new(SqlPendingActionStore::new(connection)),
            Wake::default(),
        )
    }

    #[test]
    fn a_queue_is_the_callers_unless_an_admin_names_another_project() {
        let alice = member("project-a");
        assert_eq!(queue_project(&alice, None).expect("own"), "project-a");
        assert_eq!(
            queue_project(&alice, Some("project-a")).expect("own, named"),
            "project-a"
        );
        match queue_project(&alice, Some("project-b")) {
            Err(Error::Forbidden(message)) => assert_eq!(
                message,
                "project_id \"project-b\": only an admin may read another project's queues"
            ),
            other => panic!("a member read another project's queue: {other:?}"),
        }
        let root = admin("project-a");
        assert_eq!(
            queue_project(&root, Some("project-b")).expect("an admin's"),
            "project-b"
        );
        assert_eq!(queue_project(&root, None).expect("own"), "project-a");
    }

    #[test]
    fn admins_see_every_project_and_others_their_own() {
        assert_eq!(visible_project(&admin("project-a")), None);
        assert_eq!(
            visible_project(&member("project-a")),
            Some("project-a".to_owned())
        );
    }

    #[tokio::test]
    async fn members_list_their_projects_actions_and_admins_every_projects() {
        let database = TestDatabase::sqlite().await;
        let service = service(&database).await;
        let cluster_id = Uuid::now_v7();
        let ours = new_action("project-a", cluster_id);
        let theirs = new_action("project-b", cluster_id);
        service
            .record(vec![ours.clone(), theirs.clone()])
            .await
            .expect("recorded");

        let page = service
            .list_pending(&member("project-a"), PendingListQuery::default())
            .await
            .expect("listed");
        let tokens: Vec<Uuid> = page.actions.iter().map(|action| action.token).collect();
        assert_eq!(tokens, vec![ours.token]);
        assert_eq!(page.actions[0].delivery_state, DeliveryState::Pending);
        assert_eq!(page.next_marker, None);

        // A page of one is full: its last token is the next page's marker.
        let page = service
            .list_pending(
                &admin("project-c"),
                PendingListQuery {
                    limit: 1,
                    ..PendingListQuery::default()
                },
            )
            .await
            .expect("listed");
        assert_eq!(page.actions.len(), 1);
        assert_eq!(page.next_marker, Some(page.actions[0].token));
        let everything = service
            .list_pending(&admin("project-c"), PendingListQuery::default())
            .await
            .expect("listed");
        assert_eq!(everything.actions.len(), 2);
    }

    #[tokio::test]
    async fn resolving_records_one_event_per_action_it_resolves() {
        let database = TestDatabase::sqlite().await;
        let service = service(&database).await;
        let action = new_action("project-a", Uuid::now_v7());
        service
            .record(vec![action.clone()])
            .await
            .expect("recorded");
        let unknown = Uuid::now_v7();
        for _ in 0..2 {
            service
                .resolve(&[action.token, unknown], Resolution::Completed, "engine")
                .await
                .expect("resolved");
        }
        let events = service
            .list_hook_events(&member("project-a"), HookEventFilter::default())
            .await
            .expect("listed");
        let kinds: Vec<(&str, &str)> = events
            .iter()
            .map(|event| (event.kind.as_str(), event.detail.as_str()))
            .collect();
        assert_eq!(kinds, vec![("COMPLETED", "completed by engine")]);
        assert!(
            service
                .list_hook_events(&member("project-b"), HookEventFilter::default())
                .await
                .expect("listed")
                .is_empty(),
            "another project's member saw the event"
        );
        // A resolved action's deadline no longer moves.
        assert!(matches!(
            service.extend_deadline(action.token).await,
            Err(Error::Conflict(_))
        ));
    }

    #[tokio::test]
    async fn reading_a_queue_needs_its_name_and_the_right_project() {
        let database = TestDatabase::sqlite().await;
        let service = service(&database).await;
        let alice = member("project-a");
        match service
            .list_queue_messages(&alice, QueueRead::default())
            .await
        {
            Err(Error::InvalidInput(message)) => assert_eq!(message, "queue: give a queue name"),
            other => panic!("a read without a queue name: {other:?}"),
        }
        let elsewhere = QueueRead {
            project_id: Some("project-b".to_owned()),
            queue: "drain".to_owned(),
            ..QueueRead::default()
        };
        assert!(matches!(
            service.list_queue_messages(&alice, elsewhere.clone()).await,
            Err(Error::Forbidden(_))
        ));
        assert_eq!(
            service
                .list_queue_messages(&admin("project-a"), elsewhere)
                .await
                .expect("an admin reads it"),
            Vec::new()
        );
        match service
            .list_queue_messages(
                &alice,
                QueueRead {
                    queue: "drain".to_owned(),
                    after_id: u64::MAX,
                    ..QueueRead::default()
                },
            )
            .await
        {
            Err(Error::InvalidInput(message)) => {
                assert_eq!(message, format!("after_id {} is too large", u64::MAX));
            }
            other => panic!("an after_id beyond i64: {other:?}"),
        }
    }
}
