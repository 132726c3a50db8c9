//! The pending-action store's conformance suite, on SQLite and PostgreSQL.

use chrono::Duration;
use ember_lifecycle_hook::domain::{
    DeliveryState, PendingLifecycleAction, Resolution, Target, Transition,
};
use ember_lifecycle_hook::store::{
    HookEvent, PendingActionStore, PendingListQuery, SqlPendingActionStore, migrations::Migrator,
};
use ember_runtime::database::{connect_and_migrate, testing::TestDatabase};
use uuid::Uuid;

async fn store(database: &TestDatabase) -> SqlPendingActionStore {
    let connection = connect_and_migrate::<Migrator>(&database.url)
        .await
        .expect("migrated");
    SqlPendingActionStore::new(connection)
}

fn pending(project: &str, cluster_id: Uuid, deadline_in_secs: i64) -> PendingLifecycleAction {
    let now = ember_runtime::time::now();
    PendingLifecycleAction {
        token: Uuid::now_v7(),
        transition: Transition::Terminating,
        node_id: Uuid::now_v7(),
        resource_id: "instance-1".to_owned(),
        cluster_id,
        project_id: project.to_owned(),
        target: Target::Webhook {
            url: "http://127.0.0.1:9000/drain".to_owned(),
        },
        deadline: now + Duration::seconds(deadline_in_secs),
        delivery_state: DeliveryState::Pending,
        delivery_attempts: 0,
        last_error: None,
        delivered_at: None,
        created_at: now,
        timeout_secs: 60,
        resolution: None,
        resolved_at: None,
        resolved_by: None,
    }
}

async fn recorded_actions_read_back_unchanged(database: &TestDatabase) {
    let store = store(database).await;
    let action = PendingLifecycleAction {
        target: Target::Queue {
            queue: "drain-queue".to_owned(),
        },
        delivery_state: DeliveryState::Retrying,
        delivery_attempts: 3,
        last_error: Some("connection refused".to_owned()),
        transition: Transition::Launching,
        ..pending("project-a", Uuid::now_v7(), 60)
    };
    store
        .record_pending_actions(std::slice::from_ref(&action))
        .await
        .expect("recorded");
    let listed = store
        .list_pending(&PendingListQuery::default())
        .await
        .expect("listed");
    assert_eq!(listed, vec![action]);
}

async fn recording_the_same_batch_twice_keeps_one_row_each(database: &TestDatabase) {
    let store = store(database).await;
    let cluster = Uuid::now_v7();
    let batch = vec![
        pending("project-a", cluster, 30),
        pending("project-a", cluster, 40),
    ];
    store
        .record_pending_actions(&batch)
        .await
        .expect("recorded");
    store
        .record_pending_actions(&batch)
        .await
        .expect("recorded again");
    let listed = store
        .list_pending(&PendingListQuery::default())
        .await
        .expect("listed");
    assert_eq!(listed.len(), 2);
}

async fn listing_filters_by_project_and_cluster_earliest_deadline_first(database: &TestDatabase) {
    let store = store(database).await;
    let cluster_one = Uuid::now_v7();
    let cluster_two = Uuid::now_v7();
    let late = pending("project-a", cluster_one, 90);
    let early = pending("project-a", cluster_one, 10);
    let other_cluster = pending("project-a", cluster_two, 20);
    let other_project = pending("project-b", cluster_one, 5);
    store
        .record_pending_actions(&[
            late.clone(),
            early.clone(),
            other_cluster.clone(),
            other_project,
        ])
        .await
        .expect("recorded");
    let tokens = |actions: Vec<PendingLifecycleAction>| -> Vec<Uuid> {
        actions.into_iter().map(|action| action.token).collect()
    };
    let project_a = store
        .list_pending(&PendingListQuery {
            project_id: Some("project-a".into()),
            ..Default::default()
        })
        .await
        .expect("listed");
    assert_eq!(
        tokens(project_a),
        vec![early.token, other_cluster.token, late.token]
    );
    let one_cluster = store
        .list_pending(&PendingListQuery {
            project_id: Some("project-a".into()),
            cluster_id: Some(cluster_one),
            ..Default::default()
        })
        .await
        .expect("listed");
    assert_eq!(tokens(one_cluster), vec![early.token, late.token]);
    let second_page = store
        .list_pending(&PendingListQuery {
            project_id: Some("project-a".into()),
            limit: 2,
            marker: Some(other_cluster.token),
            ..Default::default()
        })
        .await
        .expect("listed");
    assert_eq!(tokens(second_page), vec![late.token]);
}

/// Two replicas (two connection pools) claim the same expired deadlines
/// and due deliveries at once: every action goes to exactly one of them.
async fn racing_replicas_claim_each_deadline_and_delivery_once(database: &TestDatabase) {
    let one = store(database).await;
    let two = store(database).await;
    let cluster = Uuid::now_v7();
    let batch: Vec<PendingLifecycleAction> = (0..200)
        .map(|_| pending("project-a", cluster, -1))
        .collect();
    one.record_pending_actions(&batch).await.expect("recorded");
    let now = ember_runtime::time::now();
    let until = now + Duration::seconds(30);
    let tokens = |claimed: Vec<PendingLifecycleAction>| -> Vec<Uuid> {
        claimed.into_iter().map(|action| action.token).collect()
    };
    let (first, second) = tokio::join!(
        one.claim_expired(now, until, 150),
        two.claim_expired(now, until, 150)
    );
    let (first, second) = (
        tokens(first.expect("claimed")),
        tokens(second.expect("claimed")),
    );
    let mut all: Vec<Uuid> = first.iter().chain(&second).copied().collect();
    all.sort();
    all.dedup();
    assert_eq!(
        all.len(),
        first.len() + second.len(),
        "a deadline claimed twice"
    );
    // Whatever the first pass left (each took at most 150) is claimed now,
    // and nothing is claimed again while the claims hold.
    let rest = tokens(one.claim_expired(now, until, 500).await.expect("claimed"));
    assert_eq!(all.len() + rest.len(), batch.len());
    assert!(
        two.claim_expired(now, until, 500)
            .await
            .expect("claimed")
            .is_empty()
    );
    // Deliveries: the deadlines passed, so nothing is due for delivery.
    assert!(
        one.claim_due_deliveries(now, until, 500)
            .await
            .expect("claimed")
            .is_empty()
    );

    let deliverable: Vec<PendingLifecycleAction> = (0..200)
        .map(|_| pending("project-a", cluster, 60))
        .collect();
    one.record_pending_actions(&deliverable)
        .await
        .expect("recorded");
    let now = ember_runtime::time::now();
    let until = now + Duration::seconds(30);
    let (first, second) = tokio::join!(
        one.claim_due_deliveries(now, until, 500),
        two.claim_due_deliveries(now, until, 500)
    );
    let (first, second) = (
        tokens(first.expect("claimed")),
        tokens(second.expect("claimed")),
    );
    assert_eq!(first.len() + second.len(), deliverable.len());
    assert!(
        first.iter().all(|token| !second.contains(token)),
        "a delivery claimed twice"
    );
}

/// Resolving what another replica already resolved changes nothing and
/// records no second event.
async fn resolving_twice_resolves_and_records_once(database: &TestDatabase) {
    let one = store(database).await;
    let two = store(database).await;
    let cluster = Uuid::now_v7();
    let action = pending("project-a", cluster, -1);
    one.record_pending_actions(std::slice::from_ref(&action))
        .await
        .expect("recorded");
    let tokens = [action.token];
    let events_one = [HookEvent::about(&action, "EXPIRED", "replica one")];
    let events_two = [HookEvent::about(&action, "EXPIRED", "replica two")];
    let (first, second) = tokio::join!(
        one.resolve(&tokens, Resolution::Expired, "deadline", &events_one),
        two.resolve(&tokens, Resolution::Expired, "deadline", &events_two)
    );
    assert_eq!(
        first.expect("resolved") + second.expect("resolved"),
        1,
        "exactly one replica resolves it"
    );
    let events = one
        .list_events(None, Some(cluster), Some(action.token), 10)
        .await
        .expect("events");
    assert_eq!(events.len(), 1, "{events:?}");
    let resolved = one
        .get_pending(action.token)
        .await
        .expect("read")
        .expect("kept");
    assert_eq!(resolved.resolution, Some(Resolution::Expired));
    assert_eq!(resolved.resolved_by.as_deref(), Some("deadline"));
}

/// Replicas started together on a fresh database: every one of them
/// migrates successfully (the migrations run once, under a lock).
async fn replicas_starting_together_all_migrate(database: &TestDatabase) {
    let migrate = || connect_and_migrate::<Migrator>(&database.url);
    let started = futures::future::join_all((0..4).map(|_| migrate())).await;
    for connection in started {
        let store = SqlPendingActionStore::new(connection.expect("migrated"));
        store
            .list_pending(&PendingListQuery::default())
            .await
            .expect("the schema is complete");
    }
}

async fn queues_of_one_name_in_two_projects_are_two_queues(database: &TestDatabase) {
    let store = store(database).await;
    let queued = |project: &str| {
        let mut action = pending(project, Uuid::now_v7(), 60);
        action.target = Target::Queue {
            queue: "drain".to_owned(),
        };
        action
    };
    let (ours, theirs) = (queued("project-a"), queued("project-b"));
    store
        .record_pending_actions(&[ours.clone(), theirs.clone()])
        .await
        .expect("recorded");
    store
        .enqueue_messages(&[
            (ours.clone(), "for a".to_owned()),
            (theirs.clone(), "for b".to_owned()),
        ])
        .await
        .expect("queued");
    for (project, action, body) in [
        ("project-a", &ours, "for a"),
        ("project-b", &theirs, "for b"),
    ] {
        let messages = store
            .list_queue_messages(project, "drain", 0, 100)
            .await
            .expect("listed");
        assert_eq!(messages.len(), 1, "{project}: {messages:?}");
        assert_eq!(messages[0].token, action.token);
        assert_eq!(messages[0].body, body);
        assert_eq!(messages[0].project_id, project);
    }
    assert!(
        store
            .list_queue_messages("project-c", "drain", 0, 100)
            .await
            .expect("listed")
            .is_empty()
    );
}

ember_runtime::store_suite!(
    queues_of_one_name_in_two_projects_are_two_queues,
    replicas_starting_together_all_migrate,
    racing_replicas_claim_each_deadline_and_delivery_once,
    resolving_twice_resolves_and_records_once,
    recorded_actions_read_back_unchanged,
    recording_the_same_batch_twice_keeps_one_row_each,
    listing_filters_by_project_and_cluster_earliest_deadline_first,
);
