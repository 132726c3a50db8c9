//! The cluster store's node adoption and event lookup, on SQLite and
//! PostgreSQL: two engines adopting one instance at once make one node
//! (the other is refused and leaves nothing behind), and an event is found
//! by id only within its project.

mod cluster_support;

use ember_engine::domain::cluster::{ClusterEvent, Node, NodeStatus, Profile, ProfileSpec};
use ember_engine::error::Error;
use ember_engine::store::clusters::{ClusterStore, ObjectQuery};
use ember_runtime::database::testing::TestDatabase;
use serde_json::{Map, json};
use uuid::Uuid;

/// The profile, node and event one adoption of `instance` records.
fn adoption(name: &str, instance: &str) -> (Profile, Node, ClusterEvent) {
    let now = ember_runtime::time::now();
    let profile = Profile {
        id: Uuid::now_v7(),
        name: format!("prof-{name}"),
        spec: ProfileSpec::parse(json!({"type": "os.nova.server", "version": "1.0",
            "properties": {"flavor": "m1.small", "image": "debian-12"}}))
        .expect("a spec"),
        metadata: Map::new(),
        protected: false,
        project_id: "project-a".into(),
        user_id: "alice".into(),
        created_at: now,
        updated_at: None,
    };
    let node = Node {
        id: Uuid::now_v7(),
        name: name.to_owned(),
        cluster_id: None,
        profile_id: profile.id,
        index: -1,
        role: String::new(),
        status: NodeStatus::Active,
        status_reason: "Node adopted successfully".into(),
        physical_id: Some(instance.to_owned()),
        tainted: false,
        protected: false,
        metadata: Map::new(),
        project_id: "project-a".into(),
        user_id: "alice".into(),
        created_at: now,
        updated_at: now,
    };
    let event = ClusterEvent::new(
        "NODE",
        node.id,
        &node.name,
        None,
        "NODE_ADOPT",
        "ACTIVE",
        format!("instance {instance} adopted"),
        "project-a",
        "alice",
    );
    (profile, node, event)
}

async fn racing_adoptions_of_one_instance_make_one_node(database: &TestDatabase) {
    let (one, two) = (
        cluster_support::cluster_store(database).await,
        cluster_support::cluster_store(database).await,
    );
    let instance = Uuid::now_v7().to_string();
    let first = adoption("first", &instance);
    let second = adoption("second", &instance);
    let (a, b) = tokio::join!(
        one.adopt_node(&first.0, &first.1, &first.2),
        two.adopt_node(&second.0, &second.1, &second.2),
    );
    let (won, lost) = match (a, b) {
        (Ok(node), Err(error)) | (Err(error), Ok(node)) => (node, error),
        other => panic!("exactly one adoption must win: {other:?}"),
    };
    assert!(matches!(lost, Error::Conflict(_)), "{lost:?}");
    let loser = if won.id == first.1.id {
        &second
    } else {
        &first
    };
    assert!(
        one.get_node(loser.1.id).await.expect("read").is_none(),
        "the refused node is not recorded"
    );
    assert!(
        one.get_profile(loser.0.id).await.expect("read").is_none(),
        "nor its profile"
    );
    let kept = one.get_node(won.id).await.expect("read").expect("kept");
    assert_eq!(kept.physical_id.as_deref(), Some(instance.as_str()));
    assert_eq!(kept.status, NodeStatus::Active);
    let profiles = one
        .list_profiles(&ObjectQuery::default())
        .await
        .expect("listed");
    assert_eq!(profiles.len(), 1, "{profiles:?}");
}

async fn an_event_is_found_by_id_only_within_its_project(database: &TestDatabase) {
    let store = cluster_support::cluster_store(database).await;
    let (profile, node, event) = adoption("n1", &Uuid::now_v7().to_string());
    store
        .adopt_node(&profile, &node, &event)
        .await
        .expect("adopted");
    let found = store
        .get_event(Some("project-a"), event.id)
        .await
        .expect("read")
        .expect("found in its project");
    assert_eq!(found.action, "NODE_ADOPT");
    assert_eq!(found.obj_id, node.id.to_string());
    assert!(
        store
            .get_event(Some("project-b"), event.id)
            .await
            .expect("read")
            .is_none(),
        "another project's event is not found"
    );
    assert!(
        store
            .get_event(None, event.id)
            .await
            .expect("read")
            .is_some(),
        "an admin finds it"
    );
    assert!(
        store
            .get_event(None, Uuid::now_v7())
            .await
            .expect("read")
            .is_none()
    );
}

ember_runtime::store_suite!(
    racing_adoptions_of_one_instance_make_one_node,
    an_event_is_found_by_id_only_within_its_project,
);
