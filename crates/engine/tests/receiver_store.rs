//! The receiver store on SQLite and PostgreSQL: receivers are found by id,
//! name or short id within a project (two matches are both returned, so
//! the caller can say it is ambiguous), listed with filters, sort and
//! marker, updated in the columns a PATCH changes, and deleted. A message
//! receiver's queue: posts are stored whole or not at all, a claim is
//! exclusive until its lease passes and only it deletes what it ran,
//! expired messages are never claimed, and deleting the receiver deletes
//! its messages.

use ember_engine::domain::receiver::{
    Receiver, ReceiverMessage, ReceiverType, new_receiver_id, queue_name,
};
use ember_engine::store::migrations::Migrator;
use ember_engine::store::receivers::{
    ReceiverQuery, ReceiverSortKey, ReceiverStore, SqlReceiverStore,
};
use ember_runtime::database::connect_and_migrate;
use ember_runtime::database::testing::TestDatabase;
use serde_json::{Map, Value, json};
use uuid::Uuid;

async fn store(database: &TestDatabase) -> SqlReceiverStore {
    let connection = connect_and_migrate::<Migrator>(&database.url)
        .await
        .expect("migrated");
    SqlReceiverStore::new(connection.clone(), connection)
}

fn object(value: Value) -> Map<String, Value> {
    value.as_object().cloned().unwrap_or_default()
}

/// A webhook of `project` named `name`, made `minutes` after a fixed time.
fn webhook(project: &str, name: &str, action: &str, minutes: i64) -> Receiver {
    let created_at =
        chrono::DateTime::from_timestamp(1_800_000_000 + minutes * 60, 0).expect("a time");
    Receiver {
        id: new_receiver_id(),
        name: name.to_owned(),
        kind: ReceiverType::Webhook,
        cluster_id: Some(Uuid::now_v7()),
        action: Some(action.to_owned()),
        params: object(json!({"count": 2})),
        actor: object(json!({"roles": ["member"]})),
        channel: object(
            json!({"alarm_url": "http://gateway/clustering/v1/webhooks/x/trigger?V=2"}),
        ),
        user_id: format!("{project}-user"),
        project_id: project.to_owned(),
        created_at,
        updated_at: None,
    }
}

async fn receivers_round_trip_and_are_found_within_their_project(database: &TestDatabase) {
    let store = store(database).await;
    let first = webhook("demo", "scale-out", "CLUSTER_SCALE_OUT", 0);
    store.insert_receiver(&first).await.expect("inserted");
    assert_eq!(
        store.get_receiver(first.id).await.expect("read"),
        Some(first.clone()),
        "every field as written"
    );
    let id = first.id.to_string();
    for name_or_id in [id.as_str(), "scale-out", &id[..8]] {
        let found = store
            .match_receivers(Some("demo"), name_or_id)
            .await
            .expect("matched");
        assert_eq!(found, vec![first.clone()], "found by {name_or_id:?}");
    }
    assert!(
        store
            .match_receivers(Some("other"), &id)
            .await
            .expect("matched")
            .is_empty(),
        "another project does not see it, even by id"
    );
    assert_eq!(
        store
            .match_receivers(None, "scale-out")
            .await
            .expect("matched")
            .len(),
        1,
        "an admin's lookup spans projects"
    );
    assert!(
        store
            .match_receivers(Some("demo"), "%")
            .await
            .expect("matched")
            .is_empty(),
        "a LIKE wildcard is no short id"
    );
    let twin = webhook("demo", "scale-out", "CLUSTER_SCALE_IN", 1);
    store.insert_receiver(&twin).await.expect("inserted");
    assert_eq!(
        store
            .match_receivers(Some("demo"), "scale-out")
            .await
            .expect("matched")
            .len(),
        2,
        "a shared name is ambiguous"
    );
}

async fn listings_filter_sort_and_page(database: &TestDatabase) {
    let store = store(database).await;
    let a = webhook("demo", "a", "CLUSTER_RESIZE", 0);
    let b = webhook("demo", "b", "CLUSTER_SCALE_IN", 1);
    let c = webhook("demo", "c", "CLUSTER_RESIZE", 2);
    let elsewhere = webhook("other", "d", "CLUSTER_RESIZE", 3);
    for receiver in [&c, &a, &elsewhere, &b] {
        store.insert_receiver(receiver).await.expect("inserted");
    }
    let ids =
        |receivers: Vec<Receiver>| receivers.iter().map(|r| r.name.clone()).collect::<Vec<_>>();
    let demo = || ReceiverQuery {
        project_id: Some("demo".into()),
        ..ReceiverQuery::default()
    };
    assert_eq!(
        ids(store.list_receivers(&demo()).await.expect("listed")),
        ["a", "b", "c"]
    );
    let resizes = ReceiverQuery {
        action: Some("CLUSTER_RESIZE".into()),
        ..demo()
    };
    assert_eq!(
        ids(store.list_receivers(&resizes).await.expect("listed")),
        ["a", "c"]
    );
    let by_cluster = ReceiverQuery {
        cluster_id: b.cluster_id.map(|id| id.to_string()),
        ..demo()
    };
    assert_eq!(
        ids(store.list_receivers(&by_cluster).await.expect("listed")),
        ["b"]
    );
    let newest_first = ReceiverQuery {
        sort: vec![(ReceiverSortKey::Name, true)],
        limit: 2,
        ..demo()
    };
    assert_eq!(
        ids(store.list_receivers(&newest_first).await.expect("listed")),
        ["c", "b"]
    );
    let after_c = ReceiverQuery {
        marker: Some(c.id),
        ..newest_first.clone()
    };
    assert_eq!(
        ids(store.list_receivers(&after_c).await.expect("listed")),
        ["b", "a"]
    );
    let foreign_marker = ReceiverQuery {
        marker: Some(elsewhere.id),
        ..demo()
    };
    assert!(
        store.list_receivers(&foreign_marker).await.is_err(),
        "a marker outside the listing"
    );
    let everyone = ReceiverQuery::default();
    assert_eq!(
        store.list_receivers(&everyone).await.expect("listed").len(),
        4
    );
}

async fn updates_write_their_columns_and_deletes_remove(database: &TestDatabase) {
    let store = store(database).await;
    let mut receiver = webhook("demo", "r", "CLUSTER_SCALE_IN", 0);
    store.insert_receiver(&receiver).await.expect("inserted");
    receiver.name = "renamed".into();
    receiver.action = Some("CLUSTER_SCALE_OUT".into());
    receiver.params = object(json!({"count": "3"}));
    receiver.updated_at = Some(receiver.created_at + chrono::Duration::minutes(5));
    assert!(store.update_receiver(&receiver).await.expect("updated"));
    assert_eq!(
        store.get_receiver(receiver.id).await.expect("read"),
        Some(receiver.clone())
    );
    assert!(store.delete_receiver(receiver.id).await.expect("deleted"));
    assert_eq!(store.get_receiver(receiver.id).await.expect("read"), None);
    assert!(
        !store
            .delete_receiver(receiver.id)
            .await
            .expect("deleted again")
    );
    assert!(
        !store
            .update_receiver(&receiver)
            .await
            .expect("updated after delete")
    );
}

/// A message receiver of `project`.
fn message_receiver(project: &str) -> Receiver {
    let id = new_receiver_id();
    Receiver {
        id,
        name: "queue".to_owned(),
        kind: ReceiverType::Message,
        cluster_id: None,
        action: None,
        params: Map::new(),
        actor: object(json!({"roles": ["member"]})),
        channel: object(json!({"queue_name": queue_name(id)})),
        user_id: format!("{project}-user"),
        project_id: project.to_owned(),
        created_at: ember_runtime::time::now(),
        updated_at: None,
    }
}

/// A message to `receiver`, posted `seconds_ago`, living `ttl` seconds.
fn message(receiver: &Receiver, seconds_ago: i64, ttl: i64) -> ReceiverMessage {
    let posted_at = ember_runtime::time::now() - chrono::Duration::seconds(seconds_ago);
    ReceiverMessage {
        id: Uuid::now_v7(),
        receiver_id: receiver.id,
        project_id: receiver.project_id.clone(),
        body: object(
            json!({"cluster": "web", "action": "CLUSTER_SCALE_OUT", "params": {"count": 1}}),
        ),
        posted_at,
        expires_at: posted_at + chrono::Duration::seconds(ttl),
    }
}

fn ids(messages: &[ReceiverMessage]) -> Vec<Uuid> {
    messages.iter().map(|message| message.id).collect()
}

async fn messages_are_claimed_once_and_deleted_by_their_claim(database: &TestDatabase) {
    let store = store(database).await;
    let receiver = message_receiver("demo");
    let other = message_receiver("demo");
    store.insert_receiver(&receiver).await.expect("inserted");
    store.insert_receiver(&other).await.expect("inserted");
    let first = message(&receiver, 3, 3600);
    let second = message(&receiver, 2, 3600);
    let elsewhere = message(&other, 1, 3600);
    assert!(
        store
            .post_messages(receiver.id, &[first.clone(), second.clone()])
            .await
            .expect("posted")
    );
    assert!(
        store
            .post_messages(other.id, std::slice::from_ref(&elsewhere))
            .await
            .expect("posted")
    );
    assert_eq!(
        store.list_messages(receiver.id).await.expect("listed"),
        vec![first.clone(), second.clone()],
        "every field as written, oldest first"
    );

    let now = ember_runtime::time::now();
    let lease = now + chrono::Duration::seconds(30);
    let (a, b, c) = (Uuid::now_v7(), Uuid::now_v7(), Uuid::now_v7());
    let claimed = store
        .claim_messages(Some(receiver.id), a, now, lease, 10)
        .await
        .expect("claimed");
    assert_eq!(
        ids(&claimed),
        ids(&[first.clone(), second.clone()]),
        "only that queue, in order"
    );
    assert!(
        store
            .claim_messages(Some(receiver.id), b, now, lease, 10)
            .await
            .expect("claimed")
            .is_empty(),
        "a held message is not claimed again"
    );
    let everything = store
        .claim_messages(None, b, now, lease, 10)
        .await
        .expect("claimed");
    assert_eq!(
        ids(&everything),
        vec![elsewhere.id],
        "the other queue's only"
    );
    assert!(
        !store
            .delete_claimed_message(first.id, b)
            .await
            .expect("deleted"),
        "not b's claim"
    );
    assert!(
        store
            .delete_claimed_message(first.id, a)
            .await
            .expect("deleted")
    );
    assert!(
        !store
            .delete_claimed_message(first.id, a)
            .await
            .expect("deleted again")
    );

    // Once a's lease has passed, another claim takes the rest, and a can
    // no longer delete it.
    let later = lease + chrono::Duration::seconds(1);
    let taken = store
        .claim_messages(
            Some(receiver.id),
            c,
            later,
            later + chrono::Duration::seconds(30),
            10,
        )
        .await
        .expect("claimed");
    assert_eq!(ids(&taken), vec![second.id]);
    assert!(
        !store
            .delete_claimed_message(second.id, a)
            .await
            .expect("deleted")
    );
    assert!(
        store
            .delete_claimed_message(second.id, c)
            .await
            .expect("deleted")
    );
    assert!(
        store
            .list_messages(receiver.id)
            .await
            .expect("listed")
            .is_empty()
    );

    // A claim takes at most its limit.
    let batch: Vec<ReceiverMessage> = (0..3)
        .map(|age| message(&receiver, 10 - age, 3600))
        .collect();
    assert!(
        store
            .post_messages(receiver.id, &batch)
            .await
            .expect("posted")
    );
    let two = store
        .claim_messages(Some(receiver.id), Uuid::now_v7(), now, lease, 2)
        .await
        .expect("claimed");
    assert_eq!(ids(&two), ids(&batch[..2]));
}

async fn expired_messages_are_never_claimed(database: &TestDatabase) {
    let store = store(database).await;
    let receiver = message_receiver("demo");
    store.insert_receiver(&receiver).await.expect("inserted");
    let expired = message(&receiver, 120, 60);
    let live = message(&receiver, 1, 60);
    assert!(
        store
            .post_messages(receiver.id, &[expired.clone(), live.clone()])
            .await
            .expect("posted")
    );
    let now = ember_runtime::time::now();
    let claimed = store
        .claim_messages(
            None,
            Uuid::now_v7(),
            now,
            now + chrono::Duration::seconds(30),
            10,
        )
        .await
        .expect("claimed");
    assert_eq!(ids(&claimed), vec![live.id], "the expired one is left");
    let dropped = store.delete_expired_messages(now).await.expect("dropped");
    assert_eq!(ids(&dropped), vec![expired.id]);
    assert_eq!(
        ids(&store.list_messages(receiver.id).await.expect("listed")),
        vec![live.id],
        "a claimed message is not dropped under its claim"
    );
}

async fn posts_are_whole_and_leave_with_their_receiver(database: &TestDatabase) {
    let store = store(database).await;
    let receiver = message_receiver("demo");
    store.insert_receiver(&receiver).await.expect("inserted");
    let webhook = webhook("demo", "hook", "CLUSTER_SCALE_OUT", 0);
    store.insert_receiver(&webhook).await.expect("inserted");
    assert!(
        !store
            .post_messages(webhook.id, &[message(&webhook, 0, 60)])
            .await
            .expect("posted"),
        "a webhook has no queue"
    );
    let gone = message_receiver("demo");
    assert!(
        !store
            .post_messages(gone.id, &[message(&gone, 0, 60)])
            .await
            .expect("posted"),
        "no receiver, no queue"
    );
    assert!(
        store
            .list_messages(gone.id)
            .await
            .expect("listed")
            .is_empty()
    );
    // A duplicate id fails the whole post: the first message is not kept.
    let kept = message(&receiver, 0, 60);
    assert!(
        store
            .post_messages(receiver.id, std::slice::from_ref(&kept))
            .await
            .expect("posted")
    );
    let fresh = message(&receiver, 0, 60);
    assert!(
        store
            .post_messages(receiver.id, &[fresh.clone(), kept.clone()])
            .await
            .is_err()
    );
    assert_eq!(
        ids(&store.list_messages(receiver.id).await.expect("listed")),
        vec![kept.id]
    );

    assert!(store.delete_receiver(receiver.id).await.expect("deleted"));
    assert!(
        store
            .list_messages(receiver.id)
            .await
            .expect("listed")
            .is_empty(),
        "its messages went with it"
    );
}

ember_runtime::store_suite!(
    receivers_round_trip_and_are_found_within_their_project,
    listings_filter_sort_and_page,
    updates_write_their_columns_and_deletes_remove,
    messages_are_claimed_once_and_deleted_by_their_claim,
    expired_messages_are_never_claimed,
    posts_are_whole_and_leave_with_their_receiver,
);
