//! Pages of the cluster store's lists, on SQLite and PostgreSQL, as
//! Senlin's list calls need them: every filter is applied before the page
//! is cut (a match far from the start is still found with `limit=1`), a
//! sort orders the whole list with ties broken by id, a marker is a place
//! in that order, and a project sees only its own rows unless the query is
//! for every project.

mod cluster_support;

use ember_engine::domain::cluster::{
    ActionKind, ActionStatus, Cluster, ClusterAction, ClusterEvent, ClusterLock, ClusterLockLevel,
    ClusterStatus, Node, NodeStatus, Profile, ProfileSpec,
};
use ember_engine::store::clusters::{
    ActionQuery, ClusterStore, EventQuery, ObjectQuery, PROFILE_SORT_KEYS, SortKey, SqlClusterStore,
};
use ember_engine::store::migrations::Migrator;
use ember_runtime::Identity;
use ember_runtime::database::{connect_and_migrate, testing::TestDatabase};
use sea_orm::{ConnectionTrait, DbBackend, Statement};
use serde_json::{Map, json};
use uuid::Uuid;

/// Records a profile of `project` named `name`, of `type_name` (`ember.instance`
/// or `os.nova.server`).
async fn profile(store: &SqlClusterStore, project: &str, name: &str, type_name: &str) -> Profile {
    let profile = Profile {
        id: Uuid::now_v7(),
        name: name.to_owned(),
        spec: ProfileSpec::parse(json!({"type": type_name, "version": "1.0",
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

async fn profile_names(store: &SqlClusterStore, query: ObjectQuery) -> Vec<String> {
    store
        .list_profiles(&query)
        .await
        .expect("listed")
        .into_iter()
        .map(|profile| profile.name)
        .collect()
}

fn project(name: &str) -> Option<String> {
    Some(name.to_owned())
}

async fn filters_apply_before_the_page_is_cut(database: &TestDatabase) {
    let store = cluster_support::cluster_store(database).await;
    for name in ["alpha", "bravo", "charlie"] {
        profile(&store, "project-a", name, "ember.instance").await;
    }
    profile(&store, "project-a", "delta", "os.nova.server").await;
    profile(&store, "project-b", "delta", "ember.instance").await;

    let one = |names: &[&str]| ObjectQuery {
        project_id: project("project-a"),
        names: names.iter().map(|name| (*name).to_owned()).collect(),
        limit: 1,
        ..ObjectQuery::default()
    };
    assert_eq!(profile_names(&store, one(&["delta"])).await, ["delta"]);
    assert_eq!(
        profile_names(
            &store,
            ObjectQuery {
                limit: 10,
                ..one(&["charlie", "alpha"])
            }
        )
        .await,
        ["alpha", "charlie"]
    );
    let nova = ObjectQuery {
        project_id: project("project-a"),
        types: vec!["os.nova.server-1.0".into()],
        limit: 1,
        ..ObjectQuery::default()
    };
    assert_eq!(profile_names(&store, nova).await, ["delta"]);
    // Another project's "delta" is not this project's.
    let everyone = ObjectQuery {
        names: vec!["delta".into()],
        ..ObjectQuery::default()
    };
    assert_eq!(profile_names(&store, everyone).await, ["delta", "delta"]);
    let theirs = ObjectQuery {
        project_id: project("project-b"),
        ..ObjectQuery::default()
    };
    assert_eq!(profile_names(&store, theirs).await, ["delta"]);
}

async fn sorted_pages_follow_one_another_through_ties(database: &TestDatabase) {
    let store = cluster_support::cluster_store(database).await;
    let mut made = Vec::new();
    for name in ["kilo", "lima", "kilo", "mike", "lima"] {
        made.push(profile(&store, "project-a", name, "ember.instance").await);
    }
    let sort = SortKey::parse_list("name:desc", PROFILE_SORT_KEYS).expect("a sort");
    let mut seen = Vec::new();
    let mut marker = None;
    loop {
        let page = store
            .list_profiles(&ObjectQuery {
                project_id: project("project-a"),
                sort: sort.clone(),
                limit: 2,
                marker,
                ..ObjectQuery::default()
            })
            .await
            .expect("a page");
        let Some(last) = page.last() else { break };
        marker = Some(last.id);
        seen.extend(page.into_iter().map(|profile| (profile.name, profile.id)));
    }
    let names: Vec<&str> = seen.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(names, ["mike", "lima", "lima", "kilo", "kilo"]);
    // Ties come in id order, and every row exactly once.
    assert!(seen[1].1 < seen[2].1 && seen[3].1 < seen[4].1, "{seen:?}");
    let mut ids: Vec<Uuid> = seen.iter().map(|(_, id)| *id).collect();
    ids.sort();
    let mut expected: Vec<Uuid> = made.iter().map(|profile| profile.id).collect();
    expected.sort();
    assert_eq!(ids, expected);

    let error = SortKey::parse_list("name:sideways", PROFILE_SORT_KEYS).expect_err("refused");
    assert_eq!(
        error.to_string(),
        "Unsupported sort dir 'sideways' for 'sort'."
    );
}

async fn actions_and_events_are_filtered_before_paging(database: &TestDatabase) {
    let store = cluster_support::cluster_store(database).await;
    let caller = Identity::new("alice", "project-a", vec!["member".into()]);
    let cluster_id = Uuid::now_v7();
    let now = ember_runtime::time::now();
    let mut actions = Vec::new();
    for (kind, status) in [
        (ActionKind::ClusterScaleOut, ActionStatus::Succeeded),
        (ActionKind::ClusterScaleOut, ActionStatus::Succeeded),
        (ActionKind::ClusterScaleIn, ActionStatus::Failed),
        (ActionKind::ClusterScaleOut, ActionStatus::Failed),
    ] {
        actions.push(ClusterAction::new(
            kind,
            cluster_id,
            Some(cluster_id),
            status,
            Map::new(),
            &caller,
            now,
        ));
    }
    let events: Vec<ClusterEvent> = ["ACTIVE", "ACTIVE", "ERROR"]
        .into_iter()
        .map(|status| {
            ClusterEvent::new(
                "CLUSTER",
                cluster_id,
                "web",
                Some(cluster_id),
                "CLUSTER_SCALE_OUT",
                status,
                String::new(),
                "project-a",
                "alice",
            )
        })
        .collect();
    store
        .insert_actions(&actions, &events)
        .await
        .expect("inserted");

    let failed_scale_outs = store
        .list_actions(&ActionQuery {
            project_id: project("project-a"),
            statuses: vec![ActionStatus::Failed],
            kinds: vec!["CLUSTER_SCALE_OUT".into()],
            limit: 1,
            ..ActionQuery::default()
        })
        .await
        .expect("listed");
    assert_eq!(failed_scale_outs.len(), 1);
    assert_eq!(failed_scale_outs[0].id, actions[3].id);

    let errors = store
        .list_events(&EventQuery {
            project_id: project("project-a"),
            levels: vec!["ERROR".into()],
            limit: 1,
            ..EventQuery::default()
        })
        .await
        .expect("listed");
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0].status, "ERROR");
    let elsewhere = store
        .list_events(&EventQuery {
            project_id: project("project-b"),
            ..EventQuery::default()
        })
        .await
        .expect("listed");
    assert!(elsewhere.is_empty(), "{elsewhere:?}");
}

/// Records an ACTIVE cluster of `profile` named `name` in project-a.
async fn new_cluster(store: &SqlClusterStore, profile: &Profile, name: &str) -> Uuid {
    let now = ember_runtime::time::now();
    let cluster = Cluster {
        id: Uuid::now_v7(),
        name: name.into(),
        profile_id: profile.id,
        min_size: 0,
        max_size: -1,
        desired_capacity: 0,
        status: ClusterStatus::Active,
        status_reason: String::new(),
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
    record_cluster(store, &cluster).await;
    cluster.id
}

/// Records `cluster` as alice's create made it (its action and event).
async fn record_cluster(store: &SqlClusterStore, cluster: &Cluster) {
    let caller = Identity::new("alice", "project-a", vec!["member".into()]);
    let now = ember_runtime::time::now();
    let action = ClusterAction::new(
        ActionKind::ClusterCreate,
        cluster.id,
        Some(cluster.id),
        ActionStatus::Succeeded,
        Map::new(),
        &caller,
        now,
    );
    let event = ClusterEvent::new(
        "CLUSTER",
        cluster.id,
        &cluster.name,
        Some(cluster.id),
        "CLUSTER_CREATE",
        cluster.status.as_str(),
        String::new(),
        "project-a",
        "alice",
    );
    store
        .create_cluster(cluster, &action, &event)
        .await
        .expect("created");
}

/// Records node `id` joining `cluster_id` (the store numbers it next).
async fn join(store: &SqlClusterStore, profile: &Profile, cluster_id: Uuid, id: Uuid) {
    let caller = Identity::new("alice", "project-a", vec!["member".into()]);
    let now = ember_runtime::time::now();
    let node = Node {
        id,
        name: format!("node-{id}"),
        cluster_id: Some(cluster_id),
        profile_id: profile.id,
        index: 0,
        role: String::new(),
        status: NodeStatus::Active,
        status_reason: String::new(),
        physical_id: None,
        tainted: false,
        protected: false,
        metadata: Map::new(),
        project_id: "project-a".into(),
        user_id: "alice".into(),
        created_at: now,
        updated_at: now,
    };
    let action = ClusterAction::new(
        ActionKind::NodeCreate,
        node.id,
        Some(cluster_id),
        ActionStatus::Succeeded,
        Map::new(),
        &caller,
        now,
    );
    let event = ClusterEvent::new(
        "NODE",
        node.id,
        &node.name,
        Some(cluster_id),
        "NODE_CREATE",
        "ACTIVE",
        String::new(),
        "project-a",
        "alice",
    );
    store
        .create_node(&node, &action, &event)
        .await
        .expect("created");
}

/// A second connection that runs statements as any store path would.
struct RawSql(sea_orm::DatabaseConnection);

impl RawSql {
    async fn open(database: &TestDatabase) -> RawSql {
        RawSql(
            connect_and_migrate::<Migrator>(&database.url)
                .await
                .expect("second connection"),
        )
    }

    /// Runs `statement`, written with `$1`, `$2` (rewritten for SQLite).
    async fn run(&self, statement: &str, values: Vec<sea_orm::Value>) {
        let backend = self.0.get_database_backend();
        let statement = match backend {
            DbBackend::Postgres => statement.to_owned(),
            _ => statement.replace("$1", "?").replace("$2", "?"),
        };
        self.0
            .execute_raw(Statement::from_sql_and_values(backend, statement, values))
            .await
            .expect("statement");
    }
}

/// A cluster list reads every member id of its page in one query: each
/// cluster's members in index order (not id order), and a cluster with
/// none has no entry.
async fn member_ids_come_per_cluster_in_index_order(database: &TestDatabase) {
    let store = cluster_support::cluster_store(database).await;
    let profile = profile(&store, "project-a", "web", "ember.instance").await;
    let mut clusters = Vec::new();
    for name in ["three", "one", "none"] {
        clusters.push(new_cluster(&store, &profile, name).await);
    }
    // The store numbers a cluster's nodes as they join; ids made ahead and
    // inserted out of id order tell index order from id order.
    let ids: Vec<Uuid> = (0..4).map(|_| Uuid::now_v7()).collect();
    let mut joined: Vec<(Uuid, Uuid)> = Vec::new();
    for (cluster_id, id) in [
        (clusters[0], ids[3]),
        (clusters[0], ids[1]),
        (clusters[1], ids[0]),
        (clusters[0], ids[2]),
    ] {
        join(&store, &profile, cluster_id, id).await;
        joined.push((cluster_id, id));
    }
    let expected = |cluster_id: Uuid| -> Vec<Uuid> {
        joined
            .iter()
            .filter(|(of, _)| *of == cluster_id)
            .map(|(_, id)| *id)
            .collect()
    };

    let members = store.member_ids_of(&clusters).await.expect("read");
    assert_eq!(members.len(), 2, "{members:?}");
    assert_eq!(members[&clusters[0]], expected(clusters[0]));
    assert_eq!(members[&clusters[1]], expected(clusters[1]));
    assert!(!members.contains_key(&clusters[2]));
    assert!(store.member_ids_of(&[]).await.expect("read").is_empty());

    // Every way a membership changes, made in SQL as any store path would
    // make it: the lists follow (on SQLite they are kept by triggers).
    let sql = RawSql::open(database).await;
    // The first member (index 0, lowest id) moves after every other one.
    sql.run(
        "UPDATE cluster_nodes SET node_index = 7 WHERE id = $1",
        vec![ids[1].into()],
    )
    .await;
    // A member leaves its cluster (an orphan: no cluster, index -1).
    sql.run(
        "UPDATE cluster_nodes SET cluster_id = NULL, node_index = -1 WHERE id = $1",
        vec![ids[2].into()],
    )
    .await;
    let members = store.member_ids_of(&clusters).await.expect("read");
    assert_eq!(members[&clusters[0]], [ids[3], ids[1]]);
    // The orphan joins the other cluster, after its member.
    sql.run(
        "UPDATE cluster_nodes SET cluster_id = $1, node_index = 3 WHERE id = $2",
        vec![clusters[1].into(), ids[2].into()],
    )
    .await;
    // A member is deleted.
    sql.run(
        "DELETE FROM cluster_nodes WHERE id = $1",
        vec![ids[3].into()],
    )
    .await;
    let members = store.member_ids_of(&clusters).await.expect("read");
    assert_eq!(members[&clusters[0]], [ids[1]]);
    assert_eq!(members[&clusters[1]], [ids[0], ids[2]]);
    // The last member goes: the cluster has none.
    sql.run(
        "DELETE FROM cluster_nodes WHERE id = $1",
        vec![ids[1].into()],
    )
    .await;
    let members = store.member_ids_of(&clusters).await.expect("read");
    assert!(!members.contains_key(&clusters[0]), "{members:?}");
    assert_eq!(members.len(), 1);
}

/// A cluster with every field set apart from its default (its lock too)
/// reads back the same through the list with members (columns read by
/// name), the plain list and a get: two columns read from each other's
/// place would not pass.
async fn a_listed_cluster_reads_back_every_field(database: &TestDatabase) {
    let store = cluster_support::cluster_store(database).await;
    let profile = profile(&store, "project-a", "web", "ember.instance").await;
    let now = ember_runtime::time::now();
    let mut metadata = Map::new();
    metadata.insert("team".into(), json!("blue"));
    let mut config = Map::new();
    config.insert("node.name.format".into(), json!("web-$3I"));
    let cluster = Cluster {
        id: Uuid::now_v7(),
        name: "everything".into(),
        profile_id: profile.id,
        min_size: 2,
        max_size: 9,
        desired_capacity: 3,
        status: ClusterStatus::Warning,
        status_reason: "one node is slow".into(),
        metadata,
        next_index: 5,
        timeout: Some(77),
        config: ember_engine::domain::cluster::ClusterConfig::parse(config).expect("config"),
        project_id: "project-a".into(),
        user_id: "alice".into(),
        created_at: now - chrono::Duration::minutes(3),
        updated_at: now,
        maintenance_lock: None,
    };
    record_cluster(&store, &cluster).await;
    let lock = ClusterLock {
        level: ClusterLockLevel::All,
        locked_by_user: "alice".into(),
        locked_by_admin: true,
        locked_at: now,
        reason: Some("patching".into()),
        expires_at: Some(now + chrono::Duration::hours(1)),
        locked_instances: vec![Uuid::now_v7()],
    };
    assert!(
        store
            .change_cluster_lock(cluster.id, None, Some(&lock), &[])
            .await
            .expect("locked")
    );
    let member = Uuid::now_v7();
    join(&store, &profile, cluster.id, member).await;

    let stored = store
        .get_cluster(cluster.id)
        .await
        .expect("read")
        .expect("found");
    assert_eq!(
        (
            stored.name.as_str(),
            stored.profile_id,
            stored.min_size,
            stored.max_size,
            stored.desired_capacity,
            stored.status,
            stored.status_reason.as_str(),
            &stored.metadata,
            stored.timeout,
            &stored.config,
            stored.project_id.as_str(),
            stored.user_id.as_str(),
        ),
        (
            cluster.name.as_str(),
            cluster.profile_id,
            cluster.min_size,
            cluster.max_size,
            cluster.desired_capacity,
            cluster.status,
            cluster.status_reason.as_str(),
            &cluster.metadata,
            cluster.timeout,
            &cluster.config,
            cluster.project_id.as_str(),
            cluster.user_id.as_str(),
        )
    );
    let stored_lock = stored.maintenance_lock.clone().expect("the lock is kept");
    assert_eq!(
        (
            stored_lock.level,
            stored_lock.locked_by_admin,
            stored_lock.reason.as_deref(),
            &stored_lock.locked_instances,
        ),
        (lock.level, true, Some("patching"), &lock.locked_instances)
    );
    assert!(
        stored.next_index > cluster.next_index,
        "a member took an index"
    );
    assert!(stored.created_at < stored.updated_at);

    let query = ObjectQuery {
        project_id: project("project-a"),
        limit: 10,
        ..ObjectQuery::default()
    };
    let (listed, members) = store
        .list_clusters_with_members(&query)
        .await
        .expect("listed")
        .into_iter()
        .find(|(listed, _)| listed.id == cluster.id)
        .expect("the cluster is listed");
    assert_eq!(
        listed, stored,
        "the list with members reads what a get reads"
    );
    assert_eq!(members, [member]);
    let plain = store
        .list_clusters(&query)
        .await
        .expect("listed")
        .into_iter()
        .find(|listed| listed.id == cluster.id)
        .expect("the cluster is listed");
    assert_eq!(plain, stored, "the plain list reads what a get reads");
}

/// The member ids of `cluster`, read alone and with the cluster list
/// (which must agree).
async fn members_of(store: &SqlClusterStore, cluster: Uuid) -> Vec<Uuid> {
    let alone = store.member_ids_of(&[cluster]).await.expect("read")[&cluster].clone();
    let query = ObjectQuery {
        project_id: project("project-a"),
        limit: 10,
        ..ObjectQuery::default()
    };
    let (_, with_list) = store
        .list_clusters_with_members(&query)
        .await
        .expect("listed")
        .into_iter()
        .find(|(listed, _)| listed.id == cluster)
        .expect("the cluster is listed");
    assert_eq!(alone, with_list, "both reads agree");
    alone
}

/// A cluster of 250 members (on SQLite, kept in chunks of 100 by index):
/// its member ids in index order, whether read alone or with the cluster
/// list, after a member leaves the middle of a chunk, another moves to a
/// new chunk at the end, and a third takes the freed index in the middle
/// of its chunk (that chunk built again).
async fn member_ids_of_a_large_cluster_stay_in_index_order(database: &TestDatabase) {
    let store = cluster_support::cluster_store(database).await;
    let profile = profile(&store, "project-a", "web", "ember.instance").await;
    let cluster = new_cluster(&store, &profile, "large").await;
    let ids: Vec<Uuid> = (0..250).map(|_| Uuid::now_v7()).collect();
    for id in &ids {
        join(&store, &profile, cluster, *id).await;
    }
    assert_eq!(members_of(&store, cluster).await, ids);

    // Indexes are 1-based: ids[k] has k + 1.
    let sql = RawSql::open(database).await;
    sql.run(
        "DELETE FROM cluster_nodes WHERE id = $1",
        vec![ids[150].into()],
    )
    .await;
    sql.run(
        "UPDATE cluster_nodes SET node_index = 1000 WHERE id = $1",
        vec![ids[10].into()],
    )
    .await;
    sql.run(
        "UPDATE cluster_nodes SET node_index = 151 WHERE id = $1",
        vec![ids[240].into()],
    )
    .await;
    let mut expected: Vec<Uuid> = ids
        .iter()
        .copied()
        .filter(|id| ![ids[10], ids[150], ids[240]].contains(id))
        .collect();
    let at = expected
        .iter()
        .position(|id| *id == ids[151])
        .expect("there");
    expected.insert(at, ids[240]);
    expected.push(ids[10]);
    assert_eq!(members_of(&store, cluster).await, expected);

    // Every member goes: none listed.
    sql.run(
        "DELETE FROM cluster_nodes WHERE cluster_id = $1",
        vec![cluster.into()],
    )
    .await;
    assert!(
        store
            .member_ids_of(&[cluster])
            .await
            .expect("read")
            .is_empty()
    );
}

ember_runtime::store_suite!(
    a_listed_cluster_reads_back_every_field,
    filters_apply_before_the_page_is_cut,
    sorted_pages_follow_one_another_through_ties,
    actions_and_events_are_filtered_before_paging,
    member_ids_come_per_cluster_in_index_order,
    member_ids_of_a_large_cluster_stay_in_index_order,
);
