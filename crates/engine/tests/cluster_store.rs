//! The cluster store's action conformance suite, on SQLite and PostgreSQL:
//! what keeps several engine replicas from running the same action, or two
//! actions of one cluster at once (the cluster lock, FIFO per cluster), the
//! fenced writes of runs, the atomic node index allocator, and the one
//! conditional update that decides between `complete_lifecycle` and the
//! deadline. Each race runs two connection pools, as two engines would.

mod cluster_support;

use std::collections::{HashMap, HashSet};

use chrono::Duration;
use ember_engine::domain::cluster::{
    ActionKind, ActionStatus, Cluster, ClusterAction, ClusterEvent, ClusterStatus,
    LifecycleOutcome, Node, NodeStatus,
};
use ember_engine::store::clusters::{
    ClusterChange, ClusterColumns, ClusterStore, NodeStatusChange, ReadyOutcome, Settle,
    SqlClusterStore,
};
use ember_engine::store::migrations::Migrator;
use ember_runtime::Identity;
use ember_runtime::database::{connect_and_migrate, testing::TestDatabase};
use serde_json::Map;
use uuid::Uuid;

fn alice() -> Identity {
    Identity::new("alice", "project-a", vec!["member".into()])
}

/// An action of the cluster; NODE_DELETE ones are children of a removal
/// (they run under their parent's lock and take none).
fn action(kind: ActionKind, status: ActionStatus, cluster_id: Uuid) -> ClusterAction {
    let mut action = ClusterAction::new(
        kind,
        Uuid::now_v7(),
        Some(cluster_id),
        status,
        Map::new(),
        &alice(),
        ember_runtime::time::now(),
    );
    if kind == ActionKind::NodeDelete {
        action.depended_by = vec![Uuid::now_v7()];
    }
    action
}

/// An action that needs the cluster's lock.
fn locking(kind: ActionKind, cluster_id: Uuid) -> ClusterAction {
    let action = ClusterAction::new(
        kind,
        cluster_id,
        Some(cluster_id),
        ActionStatus::Ready,
        Map::new(),
        &alice(),
        ember_runtime::time::now(),
    );
    assert!(action.takes_cluster_lock());
    action
}

/// A cluster whose CLUSTER_CREATE has run (so its lock is free).
async fn cluster(store: &SqlClusterStore, desired_capacity: i32) -> Cluster {
    let now = ember_runtime::time::now();
    let cluster = Cluster {
        id: Uuid::now_v7(),
        name: format!("c-{}", Uuid::now_v7().simple()),
        profile_id: Uuid::now_v7(),
        min_size: 0,
        max_size: -1,
        desired_capacity,
        status: ClusterStatus::Init,
        status_reason: "creating".into(),
        metadata: Map::new(),
        next_index: 1,
        timeout: None,
        config: ember_engine::domain::cluster::ClusterConfig::default(),
        project_id: "project-a".into(),
        user_id: "alice".into(),
        created_at: now,
        updated_at: now,
        maintenance_lock: None,
    };
    let create = locking(ActionKind::ClusterCreate, cluster.id);
    store
        .create_cluster(&cluster, &create, &event_about(&create, "READY"))
        .await
        .expect("created");
    let engine = Uuid::now_v7();
    let claimed = store
        .claim_ready_actions(engine, lease(), 1)
        .await
        .expect("claimed");
    assert_eq!(claimed.len(), 1, "the create is claimed");
    assert_eq!(claimed[0].id, create.id);
    assert!(
        store
            .finish_action(
                &claimed[0],
                ActionStatus::Succeeded,
                "created",
                &ClusterChange::default(),
                &Settle::Unchanged,
            )
            .await
            .expect("finished")
    );
    assert_eq!(
        store.cluster_lock_holder(cluster.id).await.expect("read"),
        None
    );
    cluster
}

async fn finish(store: &SqlClusterStore, action: &ClusterAction) {
    assert!(
        store
            .finish_action(
                action,
                ActionStatus::Succeeded,
                "done",
                &ClusterChange::default(),
                &Settle::Unchanged,
            )
            .await
            .expect("finished"),
        "{} finished by its run",
        action.name
    );
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
    let one = cluster_support::cluster_store(database).await;
    let two = cluster_support::cluster_store(database).await;
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
    let one = cluster_support::cluster_store(database).await;
    let two = cluster_support::cluster_store(database).await;
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
    let one = cluster_support::cluster_store(database).await;
    let two = cluster_support::cluster_store(database).await;
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
            ActionStatus::Succeeded,
            "late",
            &ClusterChange::default(),
            &Settle::Unchanged,
        )
        .await
        .expect("answered")
    );
    let _ = dead_engine;
}

/// A parent waiting on its children finishes once, when the last child
/// is final, even when two engines try at the same moment.
async fn a_waiting_parent_finishes_once_after_its_last_child(database: &TestDatabase) {
    let one = cluster_support::cluster_store(database).await;
    let two = cluster_support::cluster_store(database).await;
    let cluster = cluster(&one, 3).await.id;
    let engine = Uuid::now_v7();
    let parent = locking(ActionKind::ClusterScaleIn, cluster);
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
            assert!(!child.takes_cluster_lock());
            child
        })
        .collect();
    assert!(
        one.start_waiting_on_children(&parent, &children, &ClusterChange::default())
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
        finish(&one, child).await;
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
    let one = cluster_support::cluster_store(database).await;
    let two = cluster_support::cluster_store(database).await;
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

/// Two engines claiming over and over while the actions of two clusters
/// queue: never two actions of one cluster RUNNING at once, each cluster's
/// actions run in the order they were asked for, and the two clusters'
/// actions do run side by side.
async fn two_claims_never_run_two_actions_of_one_cluster(database: &TestDatabase) {
    let one = cluster_support::cluster_store(database).await;
    let two = cluster_support::cluster_store(database).await;
    let clusters = [cluster(&one, 0).await.id, cluster(&one, 0).await.id];
    let mut queued: HashMap<Uuid, Vec<Uuid>> = HashMap::new();
    for round in 0..8 {
        for cluster_id in clusters {
            let kind = if round % 2 == 0 {
                ActionKind::ClusterCheck
            } else {
                ActionKind::ClusterScaleOut
            };
            let queued_action = locking(kind, cluster_id);
            one.insert_actions(std::slice::from_ref(&queued_action), &[])
                .await
                .expect("inserted");
            queued.entry(cluster_id).or_default().push(queued_action.id);
        }
    }
    // Children of some removal: they need no lock and go at once.
    let children: Vec<ClusterAction> = (0..6)
        .map(|_| action(ActionKind::NodeDelete, ActionStatus::Ready, clusters[0]))
        .collect();
    one.insert_actions(&children, &[]).await.expect("inserted");
    let (engine_one, engine_two) = (Uuid::now_v7(), Uuid::now_v7());
    let mut ran: HashMap<Uuid, Vec<Uuid>> = HashMap::new();
    let mut children_claimed = 0;
    let mut side_by_side = false;
    for _ in 0..100 {
        let (first, second) = tokio::join!(
            one.claim_ready_actions(engine_one, lease(), 64),
            two.claim_ready_actions(engine_two, lease(), 64)
        );
        let claimed: Vec<ClusterAction> = first
            .expect("claimed")
            .into_iter()
            .chain(second.expect("claimed"))
            .collect();
        let mut running_per_cluster: HashMap<Uuid, usize> = HashMap::new();
        for claimed_action in &claimed {
            assert_eq!(claimed_action.attempt, 1, "a first claim is attempt 1");
            if claimed_action.takes_cluster_lock() {
                let cluster_id = claimed_action.cluster_id.expect("cluster");
                *running_per_cluster.entry(cluster_id).or_default() += 1;
                assert_eq!(
                    one.cluster_lock_holder(cluster_id).await.expect("read"),
                    Some(claimed_action.id),
                    "the running action holds its cluster's lock"
                );
                ran.entry(cluster_id).or_default().push(claimed_action.id);
            } else {
                children_claimed += 1;
            }
        }
        assert!(
            running_per_cluster.values().all(|running| *running <= 1),
            "two actions of one cluster claimed at once: {running_per_cluster:?}"
        );
        side_by_side |= running_per_cluster.len() == 2;
        // Nothing more is claimable for a cluster while its action runs.
        assert!(
            one.claim_ready_actions(engine_one, lease(), 64)
                .await
                .expect("claimed")
                .iter()
                .all(|action| !action.takes_cluster_lock()),
            "claimed past a held lock"
        );
        for claimed_action in &claimed {
            finish(&one, claimed_action).await;
        }
        if ran.values().map(Vec::len).sum::<usize>() == 16 {
            break;
        }
    }
    assert_eq!(children_claimed, children.len());
    assert!(side_by_side, "the two clusters never ran side by side");
    for cluster_id in clusters {
        assert_eq!(
            ran.get(&cluster_id),
            queued.get(&cluster_id),
            "FIFO per cluster"
        );
        assert_eq!(
            one.cluster_lock_holder(cluster_id).await.expect("read"),
            None
        );
    }
}

/// The lock goes with the final status: a finished action releases it;
/// a parent waiting on its children keeps it (its children still run, the
/// cluster's next action waits) until it finishes; an expired run queued
/// again keeps it for its takeover; the sweeper's FAILED path releases it
/// and settles the cluster.
async fn the_lock_is_released_with_the_final_status(database: &TestDatabase) {
    let one = cluster_support::cluster_store(database).await;
    let two = cluster_support::cluster_store(database).await;
    let cluster_id = cluster(&one, 0).await.id;
    let engine = Uuid::now_v7();

    // A parent waits on its children, holding the lock.
    let parent = locking(ActionKind::ClusterScaleIn, cluster_id);
    let next = locking(ActionKind::ClusterCheck, cluster_id);
    one.insert_actions(std::slice::from_ref(&parent), &[])
        .await
        .expect("inserted");
    one.insert_actions(std::slice::from_ref(&next), &[])
        .await
        .expect("inserted");
    let parent = one
        .claim_ready_actions(engine, lease(), 10)
        .await
        .expect("claimed");
    assert_eq!(parent.len(), 1, "only the oldest of the cluster");
    let parent = parent.into_iter().next().expect("parent");
    let mut child = action(ActionKind::NodeDelete, ActionStatus::Ready, cluster_id);
    child.depended_by = vec![parent.id];
    assert!(
        one.start_waiting_on_children(
            &parent,
            std::slice::from_ref(&child),
            &ClusterChange::default()
        )
        .await
        .expect("waiting")
    );
    assert_eq!(
        one.cluster_lock_holder(cluster_id).await.expect("read"),
        Some(parent.id)
    );
    let claimed = two
        .claim_ready_actions(engine, lease(), 10)
        .await
        .expect("claimed");
    assert_eq!(
        claimed.iter().map(|action| action.id).collect::<Vec<_>>(),
        vec![child.id],
        "the child runs under its parent's lock; the next action waits"
    );
    finish(&one, &claimed[0]).await;
    let finished = one
        .finish_parent_if_done(parent.id)
        .await
        .expect("checked")
        .expect("finished");
    assert_eq!(finished.status, ActionStatus::Succeeded);
    assert_eq!(
        one.cluster_lock_holder(cluster_id).await.expect("read"),
        None
    );
    let settled = one
        .get_cluster(cluster_id)
        .await
        .expect("read")
        .expect("kept");
    assert_eq!(
        settled.status,
        ClusterStatus::Active,
        "{}",
        settled.status_reason
    );

    // Its engine dies: queued again, the lock stays with it, and the
    // next claim takes it over (attempt 2).
    let dead = Uuid::now_v7();
    let past = ember_runtime::time::now() - Duration::seconds(1);
    let orphan = one
        .claim_ready_actions(dead, past, 10)
        .await
        .expect("claimed")
        .remove(0);
    assert_eq!(orphan.id, next.id);
    let now = ember_runtime::time::now();
    assert!(
        one.recover_expired_action(&orphan, now, true, &event_about(&orphan, "READY"))
            .await
            .expect("recovered")
    );
    assert_eq!(
        one.cluster_lock_holder(cluster_id).await.expect("read"),
        Some(next.id),
        "kept for the takeover"
    );
    let later = locking(ActionKind::ClusterCheck, cluster_id);
    one.insert_actions(std::slice::from_ref(&later), &[])
        .await
        .expect("inserted");
    let taken = two
        .claim_ready_actions(engine, past, 10)
        .await
        .expect("claimed");
    assert_eq!(
        taken
            .iter()
            .map(|action| (action.id, action.attempt))
            .collect::<Vec<_>>(),
        vec![(next.id, 2)],
        "the takeover, not the later action"
    );
    // It dies again and is given up: FAILED, lock released, cluster settled.
    let now = ember_runtime::time::now();
    assert!(
        one.recover_expired_action(&taken[0], now, false, &event_about(&taken[0], "FAILED"))
            .await
            .expect("recovered")
    );
    let failed = one.get_action(next.id).await.expect("read").expect("kept");
    assert_eq!(failed.status, ActionStatus::Failed);
    assert_eq!(
        one.cluster_lock_holder(cluster_id).await.expect("read"),
        None
    );
    let settled = one
        .get_cluster(cluster_id)
        .await
        .expect("read")
        .expect("kept");
    assert!(
        settled.status_reason.contains("CLUSTER_CHECK failed"),
        "{}",
        settled.status_reason
    );
    let claimed = one
        .claim_ready_actions(engine, lease(), 10)
        .await
        .expect("claimed");
    assert_eq!(
        claimed.iter().map(|action| action.id).collect::<Vec<_>>(),
        vec![later.id]
    );
    finish(&one, &claimed[0]).await;
    assert_eq!(
        one.cluster_lock_holder(cluster_id).await.expect("read"),
        None
    );
}

/// Index allocators racing on two pools get disjoint ranges, and the
/// unique index refuses a repeated index of one cluster's members.
async fn racing_allocators_get_disjoint_indexes(database: &TestDatabase) {
    let one = cluster_support::cluster_store(database).await;
    let two = cluster_support::cluster_store(database).await;
    let cluster_id = cluster(&one, 0).await.id;
    let mut ranges = Vec::new();
    for round in 0..20 {
        let count = 1 + round % 3;
        let (first, second) = tokio::join!(
            one.take_node_indexes(cluster_id, count),
            two.take_node_indexes(cluster_id, count)
        );
        ranges.push((first.expect("taken"), count));
        ranges.push((second.expect("taken"), count));
    }
    let mut seen = HashSet::new();
    for (first, count) in &ranges {
        for index in *first..first + count {
            assert!(seen.insert(index), "index {index} given twice: {ranges:?}");
        }
    }
    // Members made through the store get fresh indexes too.
    let new_node = |name: &str| Node {
        id: Uuid::now_v7(),
        name: name.into(),
        cluster_id: Some(cluster_id),
        profile_id: Uuid::now_v7(),
        index: -1,
        role: String::new(),
        status: NodeStatus::Init,
        status_reason: String::new(),
        physical_id: None,
        tainted: false,
        protected: false,
        metadata: Map::new(),
        project_id: "project-a".into(),
        user_id: "alice".into(),
        created_at: ember_runtime::time::now(),
        updated_at: ember_runtime::time::now(),
    };
    let mut made = Vec::new();
    for name in ["a", "b"] {
        let node = new_node(name);
        let create = ClusterAction::new(
            ActionKind::NodeCreate,
            node.id,
            Some(cluster_id),
            ActionStatus::Ready,
            Map::new(),
            &alice(),
            ember_runtime::time::now(),
        );
        made.push(
            one.create_node(&node, &create, &event_about(&create, "READY"))
                .await
                .expect("recorded"),
        );
    }
    assert!(!seen.contains(&made[0].index) && !seen.contains(&made[1].index));
    assert_ne!(made[0].index, made[1].index);
    // A regression that repeats an index fails loudly.
    let connection = connect_and_migrate::<Migrator>(&database.url)
        .await
        .expect("migrated");
    use sea_orm::ConnectionTrait;
    use sea_orm::sea_query::{Alias, Expr, ExprTrait, Query};
    let repeat = Query::update()
        .table(Alias::new("cluster_nodes"))
        .value(Alias::new("node_index"), made[0].index)
        .and_where(Expr::col(Alias::new("id")).eq(made[1].id))
        .to_owned();
    assert!(
        connection.execute(&repeat).await.is_err(),
        "two members of one cluster with index {}",
        made[0].index
    );
}

/// A run whose lease expired and whose action was claimed again — by the
/// same engine — writes nothing any more: not its changes, not its end,
/// not its children.
async fn a_stale_attempt_writes_nothing(database: &TestDatabase) {
    let one = cluster_support::cluster_store(database).await;
    let cluster_id = cluster(&one, 2).await.id;
    let engine = Uuid::now_v7();
    let scale = locking(ActionKind::ClusterScaleOut, cluster_id);
    one.insert_actions(std::slice::from_ref(&scale), &[])
        .await
        .expect("inserted");
    let past = ember_runtime::time::now() - Duration::seconds(1);
    let stale = one
        .claim_ready_actions(engine, past, 1)
        .await
        .expect("claimed")
        .remove(0);
    let now = ember_runtime::time::now();
    assert!(
        one.recover_expired_action(&stale, now, true, &event_about(&stale, "READY"))
            .await
            .expect("recovered")
    );
    let current = one
        .claim_ready_actions(engine, lease(), 1)
        .await
        .expect("claimed")
        .remove(0);
    assert_eq!((current.id, current.owner), (stale.id, stale.owner));
    assert_eq!((stale.attempt, current.attempt), (1, 2));
    let stale_fence = stale.fence().expect("fence");
    let grow = ClusterChange {
        cluster_id: Some(cluster_id),
        cluster: ClusterColumns {
            desired_capacity: Some(9),
            ..ClusterColumns::default()
        },
        ..ClusterChange::default()
    };
    assert!(!one.still_owned(&stale_fence).await.expect("checked"));
    assert_eq!(
        one.apply_cluster_change(&stale_fence, &grow)
            .await
            .expect("answered"),
        None
    );
    let mut child = action(ActionKind::NodeDelete, ActionStatus::Ready, cluster_id);
    child.depended_by = vec![stale.id];
    assert!(
        !one.start_waiting_on_children(&stale, std::slice::from_ref(&child), &grow)
            .await
            .expect("answered")
    );
    assert!(
        !one.finish_action(
            &stale,
            ActionStatus::Failed,
            "stale",
            &grow,
            &Settle::Status(ClusterStatus::Error, "stale".into()),
        )
        .await
        .expect("answered")
    );
    assert_eq!(one.get_action(child.id).await.expect("read"), None);
    let untouched = one
        .get_cluster(cluster_id)
        .await
        .expect("read")
        .expect("kept");
    assert_eq!(untouched.desired_capacity, 2);
    assert_ne!(untouched.status, ClusterStatus::Error);
    assert_eq!(
        one.get_action(stale.id)
            .await
            .expect("read")
            .expect("kept")
            .status,
        ActionStatus::Running
    );
    // The current run writes.
    let fence = current.fence().expect("fence");
    let outcome = one
        .apply_cluster_change(&fence, &grow)
        .await
        .expect("applied");
    assert!(outcome.is_some());
    let mut gone = NodeStatusChange::new(Uuid::now_v7(), NodeStatus::Error, "x");
    gone.only_from = vec![NodeStatus::Creating];
    let outcome = one
        .apply_cluster_change(
            &fence,
            &ClusterChange {
                node_changes: vec![gone],
                ..ClusterChange::default()
            },
        )
        .await
        .expect("applied")
        .expect("owned");
    assert!(outcome.changed_nodes.is_empty(), "no such node");
    assert_eq!(
        one.get_cluster(cluster_id)
            .await
            .expect("read")
            .expect("kept")
            .desired_capacity,
        9
    );
    finish(&one, &current).await;
}

ember_runtime::store_suite!(
    two_claims_never_run_two_actions_of_one_cluster,
    the_lock_is_released_with_the_final_status,
    racing_allocators_get_disjoint_indexes,
    a_stale_attempt_writes_nothing,
    a_batch_of_deadlines_moves_only_the_waiting,
    racing_engines_claim_each_ready_action_once,
    completion_and_deadline_race_and_exactly_one_wins,
    an_expired_lease_is_recovered_by_one_engine_only,
    a_waiting_parent_finishes_once_after_its_last_child,
);
