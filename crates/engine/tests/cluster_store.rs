//! The cluster store's action conformance suite, on SQLite and PostgreSQL:
//! what keeps several engine replicas from running the same action, and
//! the one conditional update that decides between `complete_lifecycle`
//! and the deadline. Each race runs two connection pools, as two engines
//! would.

use chrono::Duration;
use ember_engine::domain::cluster::{
    ActionKind, ActionStatus, ClusterAction, ClusterEvent, LifecycleOutcome,
};
use ember_engine::store::clusters::{ClusterStore, ReadyOutcome, SqlClusterStore};
use ember_engine::store::migrations::Migrator;
use ember_runtime::Identity;
use ember_runtime::database::{connect_and_migrate, testing::TestDatabase};
use serde_json::Map;
use uuid::Uuid;

async fn store(database: &TestDatabase) -> SqlClusterStore {
    let connection = connect_and_migrate::<Migrator>(&database.url)
        .await
        .expect("migrated");
    SqlClusterStore::new(connection)
}

fn action(kind: ActionKind, status: ActionStatus, cluster_id: Uuid) -> ClusterAction {
    ClusterAction::new(
        kind,
        Uuid::now_v7(),
        Some(cluster_id),
        status,
        Map::new(),
        &Identity::new("alice", "project-a", vec!["member".into()]),
        ember_runtime::time::now(),
    )
}

fn event_about(action: &ClusterAction, status: &str) -> ClusterEvent {
    ClusterEvent {
        id: Uuid::now_v7(),
        generated_at: ember_runtime::time::now(),
        obj_id: action.id.to_string(),
        obj_type: "ACTION".into(),
        obj_name: action.name.clone(),
        cluster_id: action.cluster_id,
        action: action.kind.as_str().into(),
        status: status.into(),
        status_reason: format!("{status} by this test"),
        level: "INFO".into(),
        project_id: action.project_id.clone(),
        user_id: action.user_id.clone(),
    }
}

fn lease() -> chrono::DateTime<chrono::Utc> {
    ember_runtime::time::now() + Duration::seconds(10)
}

async fn racing_engines_claim_each_ready_action_once(database: &TestDatabase) {
    let one = store(database).await;
    let two = store(database).await;
    let cluster = Uuid::now_v7();
    let actions: Vec<ClusterAction> = (0..100)
        .map(|_| action(ActionKind::NodeDelete, ActionStatus::Ready, cluster))
        .collect();
    one.insert_actions(&actions, &[]).await.expect("inserted");
    let (engine_one, engine_two) = (Uuid::now_v7(), Uuid::now_v7());
    let (first, second) = tokio::join!(
        one.claim_ready_actions(engine_one, lease(), 64),
        two.claim_ready_actions(engine_two, lease(), 64)
    );
    let (first, second) = (first.expect("claimed"), second.expect("claimed"));
    assert!(first.iter().all(
        |claimed| claimed.owner == Some(engine_one) && claimed.status == ActionStatus::Running
    ));
    assert!(
        second
            .iter()
            .all(|claimed| claimed.owner == Some(engine_two))
    );
    assert!(
        first
            .iter()
            .all(|claimed| second.iter().all(|other| other.id != claimed.id)),
        "an action claimed by both engines"
    );
    let rest = one
        .claim_ready_actions(engine_one, lease(), 500)
        .await
        .expect("claimed");
    assert_eq!(first.len() + second.len() + rest.len(), actions.len());
    assert!(
        two.claim_ready_actions(engine_two, lease(), 500)
            .await
            .expect("claimed")
            .is_empty(),
        "nothing is READY any more"
    );
    // Oldest first within one claim.
    let created: Vec<_> = rest.iter().map(|claimed| claimed.created_at).collect();
    assert!(created.is_sorted(), "{created:?}");
}

/// `complete_lifecycle` and the deadline race on the same waiting action:
/// exactly one moves it to READY; the other is told what won.
async fn completion_and_deadline_race_and_exactly_one_wins(database: &TestDatabase) {
    let one = store(database).await;
    let two = store(database).await;
    let cluster = Uuid::now_v7();
    for _ in 0..20 {
        let waiting = action(
            ActionKind::NodeDelete,
            ActionStatus::WaitingLifecycleCompletion,
            cluster,
        );
        one.insert_actions(std::slice::from_ref(&waiting), &[])
            .await
            .expect("inserted");
        let completed = event_about(&waiting, "READY");
        let expired = event_about(&waiting, "READY");
        let (by_user, by_deadline) = tokio::join!(
            one.make_ready(
                waiting.id,
                ActionStatus::WaitingLifecycleCompletion,
                Some((LifecycleOutcome::Completed, "completed by alice")),
                Some(&completed),
            ),
            two.make_ready(
                waiting.id,
                ActionStatus::WaitingLifecycleCompletion,
                Some((LifecycleOutcome::Expired, "deadline passed")),
                Some(&expired),
            )
        );
        let (winner, loser) = match (by_user.expect("answered"), by_deadline.expect("answered")) {
            (ReadyOutcome::Moved(winner), ReadyOutcome::NotWaiting(loser))
            | (ReadyOutcome::NotWaiting(loser), ReadyOutcome::Moved(winner)) => (winner, loser),
            other => panic!("exactly one must win: {other:?}"),
        };
        assert_eq!(winner.status, ActionStatus::Ready);
        assert_eq!(
            loser.lifecycle_outcome, winner.lifecycle_outcome,
            "the loser sees the winner's outcome"
        );
        assert_eq!(loser.lifecycle_detail, winner.lifecycle_detail);
        let events = one
            .list_events(&ember_engine::store::clusters::EventQuery {
                obj_id: Some(waiting.id.to_string()),
                limit: 10,
                ..Default::default()
            })
            .await
            .expect("events");
        assert_eq!(events.len(), 1, "only the winner's event: {events:?}");
    }
    let unknown = one
        .make_ready(
            Uuid::now_v7(),
            ActionStatus::WaitingLifecycleCompletion,
            None,
            None,
        )
        .await
        .expect("answered");
    assert_eq!(unknown, ReadyOutcome::Unknown);
}

/// An engine died with an action RUNNING: once its lease expired, exactly
/// one of the survivors takes it over; a live lease is left alone.
async fn an_expired_lease_is_recovered_by_one_engine_only(database: &TestDatabase) {
    let one = store(database).await;
    let two = store(database).await;
    let cluster = Uuid::now_v7();
    let dead_engine = Uuid::now_v7();
    let orphan = action(ActionKind::NodeDelete, ActionStatus::Ready, cluster);
    let alive = action(ActionKind::NodeDelete, ActionStatus::Ready, cluster);
    one.insert_actions(std::slice::from_ref(&orphan), &[])
        .await
        .expect("inserted");
    let past = ember_runtime::time::now() - Duration::seconds(1);
    let claimed = one
        .claim_ready_actions(dead_engine, past, 10)
        .await
        .expect("claimed");
    assert_eq!(claimed.len(), 1);
    one.insert_actions(std::slice::from_ref(&alive), &[])
        .await
        .expect("inserted");
    one.claim_ready_actions(Uuid::now_v7(), lease(), 10)
        .await
        .expect("claimed");

    let now = ember_runtime::time::now();
    let expired = one.list_expired_leases(now, 10).await.expect("listed");
    assert_eq!(
        expired.iter().map(|action| action.id).collect::<Vec<_>>(),
        vec![orphan.id],
        "only the dead engine's action"
    );
    let event = event_about(&expired[0], "READY");
    let (first, second) = tokio::join!(
        one.recover_expired_action(&expired[0], now, true, &event),
        two.recover_expired_action(&expired[0], now, true, &event)
    );
    assert_eq!(
        [first.expect("recovered"), second.expect("recovered")]
            .iter()
            .filter(|won| **won)
            .count(),
        1,
        "exactly one engine takes it over"
    );
    let recovered = one
        .get_action(orphan.id)
        .await
        .expect("read")
        .expect("kept");
    assert_eq!(recovered.status, ActionStatus::Ready);
    // The dead engine, should it come back, cannot finish it any more.
    assert!(
        !one.finish_action(
            &claimed[0],
            dead_engine,
            ActionStatus::Succeeded,
            "late",
            &[]
        )
        .await
        .expect("answered")
    );
}

/// A parent waiting on its children finishes once, when the last child
/// is final, even when two engines try at the same moment.
async fn a_waiting_parent_finishes_once_after_its_last_child(database: &TestDatabase) {
    let one = store(database).await;
    let two = store(database).await;
    let cluster = Uuid::now_v7();
    let engine = Uuid::now_v7();
    let parent = action(ActionKind::ClusterScaleIn, ActionStatus::Ready, cluster);
    one.insert_actions(std::slice::from_ref(&parent), &[])
        .await
        .expect("inserted");
    let parent = one
        .claim_ready_actions(engine, lease(), 1)
        .await
        .expect("claimed")
        .remove(0);
    let children: Vec<ClusterAction> = (0..3)
        .map(|_| {
            let mut child = action(ActionKind::NodeDelete, ActionStatus::Ready, cluster);
            child.depended_by = vec![parent.id];
            child
        })
        .collect();
    assert!(
        one.start_waiting_on_children(&parent, engine, &children, None, &[], &[])
            .await
            .expect("waiting")
    );
    assert_eq!(
        one.get_action(parent.id)
            .await
            .expect("read")
            .expect("kept")
            .status,
        ActionStatus::Waiting
    );
    let running = one
        .claim_ready_actions(engine, lease(), 10)
        .await
        .expect("claimed");
    assert_eq!(running.len(), 3);
    for (index, child) in running.iter().enumerate() {
        assert!(
            one.finish_parent_if_done(parent.id)
                .await
                .expect("checked")
                .is_none(),
            "not before the last child ({index} of 3 done)"
        );
        assert!(
            one.finish_action(child, engine, ActionStatus::Succeeded, "deleted", &[])
                .await
                .expect("finished")
        );
    }
    let (first, second) = tokio::join!(
        one.finish_parent_if_done(parent.id),
        two.finish_parent_if_done(parent.id)
    );
    let finished: Vec<ClusterAction> = [first.expect("checked"), second.expect("checked")]
        .into_iter()
        .flatten()
        .collect();
    assert_eq!(finished.len(), 1, "finished exactly once");
    assert_eq!(finished[0].status, ActionStatus::Succeeded);
    assert!(
        one.list_waiting_parents(10)
            .await
            .expect("listed")
            .is_empty()
    );
}

/// Deadlines fired in one batch: the waiting actions move (one event
/// each), one completed meanwhile is reported as it is, an unknown id is
/// absent; racing `complete_lifecycle` on one of them, exactly one wins.
async fn a_batch_of_deadlines_moves_only_the_waiting(database: &TestDatabase) {
    let one = store(database).await;
    let two = store(database).await;
    let cluster = Uuid::now_v7();
    let waiting: Vec<ClusterAction> = (0..50)
        .map(|_| {
            action(
                ActionKind::NodeDelete,
                ActionStatus::WaitingLifecycleCompletion,
                cluster,
            )
        })
        .collect();
    one.insert_actions(&waiting, &[]).await.expect("inserted");
    let contested = &waiting[7];
    let completion = event_about(contested, "READY");
    let mut ids: Vec<Uuid> = waiting.iter().map(|action| action.id).collect();
    let unknown = Uuid::now_v7();
    ids.push(unknown);
    let expired_event = |action: &ClusterAction| event_about(action, "READY");
    let (by_user, by_deadline) = tokio::join!(
        one.make_ready(
            contested.id,
            ActionStatus::WaitingLifecycleCompletion,
            Some((LifecycleOutcome::Completed, "completed by alice")),
            Some(&completion),
        ),
        two.expire_waiting(&ids, "deadline passed", &expired_event)
    );
    let (moved, others) = by_deadline.expect("expired");
    let user_won = matches!(by_user.expect("answered"), ReadyOutcome::Moved(_));
    assert_eq!(
        moved.len() + others.len(),
        waiting.len(),
        "the unknown id is absent"
    );
    assert!(
        moved
            .iter()
            .chain(&others)
            .all(|action| action.id != unknown)
    );
    if user_won {
        assert_eq!(moved.len(), waiting.len() - 1);
        assert_eq!(others.len(), 1);
        assert_eq!(others[0].id, contested.id);
        assert_eq!(
            others[0].lifecycle_outcome,
            Some(LifecycleOutcome::Completed)
        );
    } else {
        assert_eq!(moved.len(), waiting.len());
    }
    assert!(
        moved
            .iter()
            .all(|action| action.status == ActionStatus::Ready
                && action.lifecycle_outcome == Some(LifecycleOutcome::Expired)
                && action.lifecycle_detail == "deadline passed")
    );
    let events = one
        .list_events(&ember_engine::store::clusters::EventQuery {
            cluster_id: Some(cluster),
            limit: 1000,
            ..Default::default()
        })
        .await
        .expect("events");
    assert_eq!(
        events.len(),
        waiting.len(),
        "one event per action, by whichever won"
    );
    // Firing again changes nothing.
    let (again, _) = one
        .expire_waiting(&ids, "deadline passed again", &expired_event)
        .await
        .expect("expired");
    assert!(again.is_empty());
}

ember_runtime::store_suite!(
    a_batch_of_deadlines_moves_only_the_waiting,
    racing_engines_claim_each_ready_action_once,
    completion_and_deadline_race_and_exactly_one_wins,
    an_expired_lease_is_recovered_by_one_engine_only,
    a_waiting_parent_finishes_once_after_its_last_child,
);
