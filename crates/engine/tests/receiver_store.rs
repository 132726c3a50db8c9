//! The receiver store on SQLite and PostgreSQL: receivers are found by id,
//! name or short id within a project (two matches are both returned, so
//! the caller can say it is ambiguous), listed with filters, sort and
//! marker, updated in the columns a PATCH changes, and deleted.

use ember_engine::domain::receiver::{Receiver, ReceiverType, new_receiver_id};
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

ember_runtime::store_suite!(
    receivers_round_trip_and_are_found_within_their_project,
    listings_filter_sort_and_page,
    updates_write_their_columns_and_deletes_remove,
);
