//! How the cluster store finds what a caller typed, on SQLite and
//! PostgreSQL, as Senlin finds it: names need not be unique; an identity is
//! an id, else a name, else the start of an id (a short id); more than one
//! match is Senlin's "multiple choices" (a 400); another project's objects
//! are not found at all.

mod cluster_support;

use ember_engine::domain::cluster::{Profile, ProfileSpec};
use ember_engine::error::Error;
use ember_engine::store::clusters::{ClusterStore, SqlClusterStore};
use ember_runtime::database::testing::TestDatabase;
use serde_json::{Map, json};
use uuid::Uuid;

/// Records a profile of `project` with this id and name.
async fn profile(store: &SqlClusterStore, project: &str, id: &str, name: &str) -> Profile {
    let profile = Profile {
        id: Uuid::parse_str(id).expect("an id"),
        name: name.to_owned(),
        spec: ProfileSpec::parse(json!({"type": "ember.instance", "version": "1.0",
            "properties": {"flavor": "small", "image": "debian"}}))
        .expect("a spec"),
        metadata: Map::new(),
        protected: false,
        project_id: project.to_owned(),
        user_id: "alice".into(),
        created_at: ember_runtime::time::now(),
        updated_at: None,
    };
    store.insert_profile(&profile).await.expect("inserted");
    profile
}

/// The id of the profile `identity` finds in `project` (all projects for
/// `None`), `None` when none.
async fn found(store: &SqlClusterStore, project: Option<&str>, identity: &str) -> Option<Uuid> {
    store
        .find_profile(project, identity)
        .await
        .unwrap_or_else(|error| panic!("{identity}: {error:?}"))
        .map(|profile| profile.id)
}

/// The message of the refusal `identity` meets in `project`.
async fn ambiguous(store: &SqlClusterStore, project: Option<&str>, identity: &str) -> String {
    match store.find_profile(project, identity).await {
        Err(Error::InvalidInput(message)) => message,
        other => panic!("{identity}: {other:?}"),
    }
}

const FIRST: &str = "0aaaaaaa-1111-7000-8000-000000000001";
const SECOND: &str = "0aaaaaaa-2222-7000-8000-000000000002";
const OTHER: &str = "0bbbbbbb-3333-7000-8000-000000000003";

async fn names_need_not_be_unique_and_a_shared_one_is_ambiguous(database: &TestDatabase) {
    let store = cluster_support::cluster_store(database).await;
    let first = profile(&store, "project-a", FIRST, "web").await;
    let second = profile(&store, "project-a", SECOND, "web").await;
    assert_eq!(
        ambiguous(&store, Some("project-a"), "web").await,
        "Multiple results found matching the query criteria 'web'. Please be more specific."
    );
    // Each is still found by its id.
    assert_eq!(
        found(&store, Some("project-a"), FIRST).await,
        Some(first.id)
    );
    assert_eq!(
        found(&store, Some("project-a"), SECOND).await,
        Some(second.id)
    );
    // Another project's same name does not make a project's own ambiguous.
    let theirs = profile(&store, "project-b", OTHER, "db").await;
    let ours = profile(
        &store,
        "project-a",
        "0ccccccc-4444-7000-8000-000000000004",
        "db",
    )
    .await;
    assert_eq!(found(&store, Some("project-a"), "db").await, Some(ours.id));
    assert_eq!(
        found(&store, Some("project-b"), "db").await,
        Some(theirs.id)
    );
    // An admin looks across projects: there the name is shared.
    assert_eq!(
        ambiguous(&store, None, "db").await,
        "Multiple results found matching the query criteria 'db'. Please be more specific."
    );
}

async fn a_short_id_finds_the_one_id_it_starts(database: &TestDatabase) {
    let store = cluster_support::cluster_store(database).await;
    let first = profile(&store, "project-a", FIRST, "one").await;
    let second = profile(&store, "project-a", SECOND, "two").await;
    assert_eq!(
        found(&store, Some("project-a"), "0aaaaaaa-1").await,
        Some(first.id)
    );
    assert_eq!(
        found(&store, Some("project-a"), "0aaaaaaa-2222").await,
        Some(second.id)
    );
    assert_eq!(
        ambiguous(&store, Some("project-a"), "0aaaaaaa").await,
        "Multiple results found matching the query criteria '0aaaaaaa'. Please be more specific."
    );
    assert_eq!(found(&store, Some("project-a"), "0aaaaaaa-3").await, None);
    assert_eq!(found(&store, Some("project-a"), "0aaaaaab").await, None);
    // A name wins over a short id it also is.
    let named = profile(
        &store,
        "project-a",
        "0ddddddd-5555-7000-8000-000000000005",
        "0aaaaaaa",
    )
    .await;
    assert_eq!(
        found(&store, Some("project-a"), "0aaaaaaa").await,
        Some(named.id)
    );
}

async fn another_projects_objects_are_not_found_by_any_identity(database: &TestDatabase) {
    let store = cluster_support::cluster_store(database).await;
    let theirs = profile(&store, "project-b", OTHER, "theirs").await;
    for identity in [OTHER, "theirs", "0bbbbbbb", "0bbbbbbb-3333"] {
        assert_eq!(
            found(&store, Some("project-a"), identity).await,
            None,
            "{identity}"
        );
        assert_eq!(
            found(&store, Some("project-b"), identity).await,
            Some(theirs.id),
            "{identity}"
        );
        assert_eq!(
            found(&store, None, identity).await,
            Some(theirs.id),
            "{identity}"
        );
    }
}

async fn an_id_that_is_no_ones_is_tried_as_a_name(database: &TestDatabase) {
    let store = cluster_support::cluster_store(database).await;
    let named = profile(&store, "project-a", FIRST, OTHER).await;
    assert_eq!(
        found(&store, Some("project-a"), OTHER).await,
        Some(named.id)
    );
    assert_eq!(
        found(
            &store,
            Some("project-a"),
            "01234567-89ab-7def-8123-456789abcdef"
        )
        .await,
        None
    );
}

ember_runtime::store_suite!(
    names_need_not_be_unique_and_a_shared_one_is_ambiguous,
    a_short_id_finds_the_one_id_it_starts,
    another_projects_objects_are_not_found_by_any_identity,
    an_id_that_is_no_ones_is_tried_as_a_name,
);
