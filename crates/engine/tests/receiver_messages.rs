//! Message receivers run by the engine, on SQLite and PostgreSQL, with no
//! message worker running (so what `notify` does is seen alone): posted
//! messages wait in the queue until notified, then each runs once as the
//! receiver's creator; a message that cannot run is dropped with an ERROR
//! event on the receiver saying why; an expired one is dropped unrun; a
//! post with one bad body stores nothing; another project's queue is not
//! found.

mod cluster_support;

use std::sync::Arc;
use std::time::Duration;

use cluster_support::{
    Engine, active_cluster, driver, instance_profile, member, members, wait_for_action,
};
use ember_engine::Error;
use ember_engine::clusters::dispatcher::DispatcherSettings;
use ember_engine::domain::cluster::{ActionStatus, ClusterEvent};
use ember_engine::domain::receiver::{Receiver, ReceiverMessage};
use ember_engine::receivers::{NewReceiver, PostedMessage, ReceiverService};
use ember_engine::store::clusters::EventQuery;
use ember_engine::store::migrations::Migrator;
use ember_engine::store::receivers::{ReceiverStore, SqlReceiverStore};
use ember_runtime::Identity;
use ember_runtime::database::connect_and_migrate;
use ember_runtime::database::testing::TestDatabase;
use serde_json::{Map, Value, json};
use uuid::Uuid;

struct Setup {
    engine: Engine,
    store: Arc<SqlReceiverStore>,
    receivers: Arc<ReceiverService>,
}

async fn setup(database: &TestDatabase) -> Setup {
    let engine = Engine::start(
        database,
        driver(Duration::from_millis(5)),
        DispatcherSettings::default(),
        true,
    )
    .await;
    let connection = connect_and_migrate::<Migrator>(&database.url)
        .await
        .expect("migrated");
    let store = Arc::new(SqlReceiverStore::new(connection.clone(), connection));
    let receivers = ReceiverService::new(store.clone(), engine.service.clone(), "http://gateway");
    Setup {
        engine,
        store,
        receivers,
    }
}

async fn message_receiver(setup: &Setup, creator: &Identity) -> Receiver {
    setup
        .receivers
        .create(
            creator,
            NewReceiver {
                name: "queue".into(),
                kind: "message".into(),
                cluster: None,
                action: None,
                params: Map::new(),
            },
        )
        .await
        .expect("receiver")
}

fn queue(receiver: &Receiver) -> String {
    receiver.channel["queue_name"]
        .as_str()
        .expect("queue_name")
        .to_owned()
}

fn posted(body: Value) -> PostedMessage {
    PostedMessage { body, ttl: None }
}

async fn pending(setup: &Setup, receiver: &Receiver) -> Vec<ReceiverMessage> {
    setup
        .store
        .list_messages(receiver.id)
        .await
        .expect("listed")
}

/// The ERROR events recorded on `receiver`.
async fn receiver_errors(setup: &Setup, receiver: &Receiver) -> Vec<ClusterEvent> {
    setup
        .engine
        .store()
        .list_events(&EventQuery {
            project_id: Some(receiver.project_id.clone()),
            obj_id: Some(receiver.id.to_string()),
            obj_types: vec!["RECEIVER".into()],
            levels: vec!["ERROR".into()],
            limit: 100,
            ..EventQuery::default()
        })
        .await
        .expect("events")
}

async fn messages_wait_for_notify_and_each_runs_once(database: &TestDatabase) {
    let setup = setup(database).await;
    instance_profile(&setup.engine, "web").await;
    let cluster = active_cluster(&setup.engine, "web", (0, 5, 1)).await;
    let receiver = message_receiver(&setup, &member()).await;
    let scale_out =
        json!({"cluster": "web", "action": "CLUSTER_SCALE_OUT", "params": {"count": "1"}});
    let stored = setup
        .receivers
        .post_messages(
            &member(),
            &queue(&receiver),
            vec![posted(scale_out.clone()), posted(scale_out)],
        )
        .await
        .expect("posted");
    assert_eq!(stored.len(), 2);
    assert_eq!(
        pending(&setup, &receiver).await.len(),
        2,
        "waiting: no worker runs here"
    );

    let actions = setup
        .receivers
        .notify(&member(), &receiver.id.to_string()[..8])
        .await
        .expect("notified");
    assert_eq!(actions.len(), 2, "one action per message");
    for action in &actions {
        assert_eq!(action.kind.as_str(), "CLUSTER_SCALE_OUT");
        assert_eq!(
            action.user_id,
            member().user_id,
            "run as the receiver's creator"
        );
        let ended = wait_for_action(&setup.engine, action.id, Duration::from_secs(30)).await;
        assert_eq!(
            ended.status,
            ActionStatus::Succeeded,
            "{}",
            ended.status_reason
        );
    }
    assert_eq!(members(&setup.engine, cluster.id).await.len(), 3);
    assert!(
        pending(&setup, &receiver).await.is_empty(),
        "deleted once run"
    );
    let again = setup
        .receivers
        .notify(&member(), "queue")
        .await
        .expect("notified");
    assert!(again.is_empty(), "nothing runs twice");
    setup.engine.kill().await;
}

async fn messages_that_cannot_run_are_dropped_with_an_event(database: &TestDatabase) {
    let setup = setup(database).await;
    instance_profile(&setup.engine, "web").await;
    let cluster = active_cluster(&setup.engine, "web", (0, 5, 0)).await;
    // Another user of the same project: the cluster is not theirs.
    let bob = Identity::new("bob", "demo", vec!["member".to_owned()]);
    let bobs = message_receiver(&setup, &bob).await;
    let mine = message_receiver(&setup, &member()).await;
    let missing = setup
        .receivers
        .post_messages(
            &member(),
            &queue(&mine),
            vec![posted(
                json!({"cluster": "nope", "action": "CLUSTER_CHECK"}),
            )],
        )
        .await
        .expect("posted");
    let not_bobs = setup
        .receivers
        .post_messages(
            &bob,
            &queue(&bobs),
            vec![posted(json!({"cluster": "web", "action": "CLUSTER_CHECK"}))],
        )
        .await
        .expect("posted");

    let actions = setup
        .receivers
        .notify(&member(), &mine.id.to_string())
        .await
        .expect("notified");
    assert!(actions.is_empty());
    assert!(pending(&setup, &mine).await.is_empty(), "dropped");
    let events = receiver_errors(&setup, &mine).await;
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0].obj_name, "queue");
    assert_eq!(events[0].action, "RECEIVER_NOTIFY");
    assert_eq!(
        events[0].status_reason,
        format!(
            "message {} (CLUSTER_CHECK on cluster 'nope') dropped: The cluster 'nope' could not be found.",
            missing[0].id
        )
    );

    let actions = setup
        .receivers
        .notify(&bob, &bobs.id.to_string())
        .await
        .expect("notified");
    assert!(actions.is_empty());
    let events = receiver_errors(&setup, &bobs).await;
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0].cluster_id, Some(cluster.id));
    assert!(
        events[0]
            .status_reason
            .contains(&not_bobs[0].id.to_string())
            && events[0]
                .status_reason
                .ends_with("bob is not allowed to trigger actions on cluster web."),
        "{}",
        events[0].status_reason
    );
    assert!(pending(&setup, &bobs).await.is_empty());

    // Only the receiver's creator (or an admin) notifies it.
    let refused = setup
        .receivers
        .notify(&member(), &bobs.id.to_string())
        .await
        .expect_err("refused");
    assert!(matches!(refused, Error::Forbidden(_)), "{refused:?}");
    let admin = Identity::new("admin", "admin", vec!["admin".to_owned()]);
    setup
        .receivers
        .notify(&admin, &bobs.id.to_string())
        .await
        .expect("an admin may");
    setup.engine.kill().await;
}

async fn expired_messages_are_dropped_unrun(database: &TestDatabase) {
    let setup = setup(database).await;
    instance_profile(&setup.engine, "web").await;
    let cluster = active_cluster(&setup.engine, "web", (0, 5, 0)).await;
    let receiver = message_receiver(&setup, &member()).await;
    // Posted two hours ago with Zaqar's default ttl of an hour.
    let posted_at = ember_runtime::time::now() - chrono::Duration::hours(2);
    let expired = ReceiverMessage {
        id: Uuid::now_v7(),
        receiver_id: receiver.id,
        project_id: receiver.project_id.clone(),
        body: json!({"cluster": "web", "action": "CLUSTER_SCALE_OUT"})
            .as_object()
            .cloned()
            .expect("object"),
        posted_at,
        expires_at: posted_at + chrono::Duration::hours(1),
    };
    assert!(
        setup
            .store
            .post_messages(receiver.id, std::slice::from_ref(&expired))
            .await
            .expect("posted")
    );
    let actions = setup
        .receivers
        .notify(&member(), "queue")
        .await
        .expect("notified");
    assert!(actions.is_empty(), "{actions:?}");
    assert!(pending(&setup, &receiver).await.is_empty());
    assert!(
        members(&setup.engine, cluster.id).await.is_empty(),
        "not run"
    );
    let events = receiver_errors(&setup, &receiver).await;
    assert_eq!(events.len(), 1, "{events:?}");
    assert!(
        events[0].status_reason.starts_with(&format!(
            "message {} (CLUSTER_SCALE_OUT on cluster 'web') dropped unrun: it expired at",
            expired.id
        )),
        "{}",
        events[0].status_reason
    );
    setup.engine.kill().await;
}

async fn bad_posts_store_nothing_and_queues_stay_in_their_project(database: &TestDatabase) {
    let setup = setup(database).await;
    let receiver = message_receiver(&setup, &member()).await;
    let good = json!({"cluster": "web", "action": "CLUSTER_CHECK"});
    let refused = [
        (
            vec![posted(good.clone()), posted(json!("scale"))],
            "messages[1]: the body must be a JSON object {\"cluster\": …, \"action\": …, \"params\": {…}}",
        ),
        (
            vec![posted(json!({"cluster": "web"}))],
            "messages[0]: Both cluster identity and action must be specified.",
        ),
        (
            vec![
                posted(good.clone()),
                posted(json!({"cluster": "web", "action": "BOGUS"})),
            ],
            "messages[1]: Illegal cluster action 'BOGUS' specified.",
        ),
        (
            vec![posted(
                json!({"cluster": "web", "action": "CLUSTER_SCALE_OUT", "params": {"count": "lots"}}),
            )],
            "messages[0]: params: count must be an integer",
        ),
        (
            vec![PostedMessage {
                body: good.clone(),
                ttl: Some(30),
            }],
            "messages[0]: The TTL for a message may not exceed 1209600 seconds, and must be at least 60 seconds long.",
        ),
        (Vec::new(), "No messages to enqueue."),
        (
            (0..101).map(|_| posted(good.clone())).collect(),
            "No more than 100 messages can be posted at a time (101 were)",
        ),
    ];
    for (messages, expected) in refused {
        let error = setup
            .receivers
            .post_messages(&member(), &queue(&receiver), messages)
            .await
            .expect_err("refused");
        assert!(matches!(error, Error::InvalidInput(_)), "{error:?}");
        assert_eq!(error.to_string(), expected);
    }
    assert!(
        pending(&setup, &receiver).await.is_empty(),
        "nothing of a bad post is kept"
    );

    // Another project's queue, an unknown one, a name no receiver has: not found.
    let outsider = Identity::new("mallory", "other", vec!["member".to_owned()]);
    let unknown = format!("senlin-receiver-{}", Uuid::new_v4());
    for (caller, name) in [
        (&outsider, queue(&receiver)),
        (&member(), unknown),
        (&member(), "my-queue".to_owned()),
    ] {
        let error = setup
            .receivers
            .post_messages(caller, &name, vec![posted(good.clone())])
            .await
            .expect_err("refused");
        assert!(matches!(error, Error::NotFound(_)), "{name}: {error:?}");
        assert!(
            error
                .to_string()
                .contains(&format!("queue '{name}' not found")),
            "{error}"
        );
    }
    let error = setup
        .receivers
        .notify(&outsider, &receiver.id.to_string())
        .await
        .expect_err("refused");
    assert!(matches!(error, Error::NotFound(_)), "{error:?}");
    // A reader posts nothing.
    let reader = Identity::new("reader", "demo", vec!["reader".to_owned()]);
    let error = setup
        .receivers
        .post_messages(&reader, &queue(&receiver), vec![posted(good)])
        .await
        .expect_err("refused");
    assert!(matches!(error, Error::Forbidden(_)), "{error:?}");
    assert!(pending(&setup, &receiver).await.is_empty());
    setup.engine.kill().await;
}

ember_runtime::store_suite!(
    messages_wait_for_notify_and_each_runs_once,
    messages_that_cannot_run_are_dropped_with_an_event,
    expired_messages_are_dropped_unrun,
    bad_posts_store_nothing_and_queues_stay_in_their_project,
);
