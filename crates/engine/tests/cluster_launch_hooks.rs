//! Launch hooks (`ember.policy.launch-1.0`): every node a cluster builds
//! waits, built but not in service, until its lifecycle action is answered
//! — CONTINUE puts it in service, ABANDON deletes its resource and builds
//! another (RETRY, while rounds are left) or removes it (FAIL) — and the
//! deadline applies the hook's default result. The lifecycle-hook service
//! is not running here: the tests answer as it and the application would
//! (`complete_lifecycle`, and `continue_after_deadline` for a deadline).

mod cluster_support;

use std::time::Duration;

use cluster_support::{
    Engine, active_cluster, all_actions, all_instances, assert_settled_invariants, driver,
    instance_profile, member, members, wait_for_action,
};
use ember_engine::clusters::NewNode;
use ember_engine::clusters::dispatcher::DispatcherSettings;
use ember_engine::domain::cluster::policy::LifecycleResult;
use ember_engine::domain::cluster::{ActionKind, ActionStatus, ClusterAction, NodeStatus};
use ember_engine::error::Error;
use ember_runtime::Identity;
use ember_runtime::database::testing::TestDatabase;
use ember_runtime::testing::wait_for;
use serde_json::{Map, Value, json};
use uuid::Uuid;

const WAIT: Duration = Duration::from_secs(20);

async fn engine(database: &TestDatabase) -> Engine {
    Engine::start(
        database,
        driver(Duration::from_millis(5)),
        DispatcherSettings::default(),
        true,
    )
    .await
}

/// A cluster `name` of `size` members with a launch policy of
/// `properties` attached.
async fn launching_cluster(engine: &Engine, name: &str, size: i32, properties: Value) -> Uuid {
    instance_profile(engine, name).await;
    let cluster = active_cluster(engine, name, (0, 10, size)).await;
    let policy = format!("{name}-launch");
    engine
        .service
        .create_policy(
            &member(),
            &policy,
            json!({"type": "ember.policy.launch", "version": "1.0", "properties": properties}),
        )
        .await
        .expect("launch policy");
    let attach = engine
        .service
        .attach_policy(&member(), name, &policy, 0, true)
        .await
        .expect("attached");
    let attach = wait_for_action(engine, attach.id, WAIT).await;
    assert_eq!(attach.status, ActionStatus::Succeeded, "{attach:?}");
    cluster.id
}

fn queue_hooks(extra: Value) -> Value {
    let mut properties = json!({"hooks": {"type": "zaqar", "params": {"queue": "warm-up"},
        "timeout": 30}});
    if let (Some(properties), Value::Object(extra)) = (properties.as_object_mut(), extra) {
        properties.extend(extra);
    }
    properties
}

/// The launch waits of `cluster_id` now waiting, `count` of them.
async fn waiting_launches(engine: &Engine, cluster_id: Uuid, count: usize) -> Vec<ClusterAction> {
    let waiting = || async {
        all_actions(engine, cluster_id)
            .await
            .into_iter()
            .filter(|action| {
                action.kind == ActionKind::NodeCreate
                    && action.status == ActionStatus::WaitingLifecycleCompletion
            })
            .collect::<Vec<_>>()
    };
    wait_for("launch waits", WAIT, || async {
        waiting().await.len() == count
    })
    .await;
    waiting().await
}

/// The one launch wait of `cluster_id` that is not `answered`: the wait of
/// a node built again after ABANDON.
async fn next_wait(engine: &Engine, cluster_id: Uuid, answered: Uuid) -> ClusterAction {
    let waiting = || async {
        all_actions(engine, cluster_id)
            .await
            .into_iter()
            .filter(|action| {
                action.kind == ActionKind::NodeCreate
                    && action.status == ActionStatus::WaitingLifecycleCompletion
                    && action.id != answered
            })
            .collect::<Vec<_>>()
    };
    wait_for("the next launch wait", WAIT, || async {
        waiting().await.len() == 1
    })
    .await;
    waiting().await.remove(0)
}

async fn answer(engine: &Engine, cluster: &str, action: &ClusterAction, result: LifecycleResult) {
    engine
        .service
        .complete_lifecycle(&member(), cluster, &action.id.to_string(), result)
        .await
        .expect("completed");
}

fn active(nodes: &[ember_engine::domain::cluster::Node]) -> usize {
    nodes
        .iter()
        .filter(|node| node.status == NodeStatus::Active)
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_nodes_wait_out_of_service_until_continue() {
    let database = TestDatabase::sqlite().await;
    let engine = engine(&database).await;
    let cluster_id = launching_cluster(&engine, "warm", 1, queue_hooks(json!({}))).await;
    let scale = engine
        .service
        .scale(&member(), "warm", true, 2)
        .await
        .expect("scale out");
    let waits = waiting_launches(&engine, cluster_id, 2).await;

    // Built, counted in the size, not in service; the scale-out waits.
    let nodes = members(&engine, cluster_id).await;
    assert_eq!(nodes.len(), 3);
    assert_eq!(active(&nodes), 1, "{nodes:?}");
    for wait in &waits {
        let node = nodes
            .iter()
            .find(|node| node.id == wait.target_id)
            .expect("the waiting node is a member");
        assert_eq!(node.status, NodeStatus::Creating);
        assert!(
            node.status_reason
                .starts_with("built, waiting for lifecycle completion (launching) until"),
            "{}",
            node.status_reason
        );
        assert_eq!(wait.inputs["hook"]["transition"], "launching");
        assert_eq!(wait.depended_by, vec![scale.id]);
    }
    let cluster = cluster_support::cluster(&engine, cluster_id).await;
    assert_eq!(cluster.desired_capacity, 3);
    assert!(
        cluster
            .status_reason
            .contains("2 node(s) built, waiting for their launch lifecycle actions"),
        "{}",
        cluster.status_reason
    );
    let parent = engine
        .store()
        .get_action(scale.id)
        .await
        .expect("read")
        .expect("kept");
    assert_eq!(parent.status, ActionStatus::Waiting);
    assert_eq!(
        parent.outputs["lifecycle_action_tokens"]
            .as_array()
            .map(Vec::len),
        Some(2)
    );

    // "Why is this blocked?": the scale-out waits on the two launching
    // nodes' lifecycle actions, and a scale-in would queue behind them.
    let check = engine
        .service
        .check_cluster_operation(&member(), "warm", "scale_in", 1)
        .await
        .expect("allowed?");
    let pending: Vec<Uuid> = check
        .queued_behind
        .iter()
        .filter(|action| action.status == ActionStatus::WaitingLifecycleCompletion)
        .map(|action| action.id)
        .collect();
    assert_eq!(pending.len(), 2, "{:?}", check.queued_behind);
    assert!(waits.iter().all(|wait| pending.contains(&wait.id)));

    // One answered: that node is in service, the action still waits.
    answer(&engine, "warm", &waits[0], LifecycleResult::Continue).await;
    wait_for("the first node in service", WAIT, || async {
        active(&members(&engine, cluster_id).await) == 2
    })
    .await;
    assert_eq!(
        engine
            .store()
            .get_action(scale.id)
            .await
            .expect("read")
            .map(|action| action.status),
        Some(ActionStatus::Waiting)
    );
    answer(&engine, "warm", &waits[1], LifecycleResult::Continue).await;
    let scale = wait_for_action(&engine, scale.id, WAIT).await;
    assert_eq!(scale.status, ActionStatus::Succeeded, "{scale:?}");
    assert_eq!(scale.status_reason, "2 node(s) created");
    let nodes = members(&engine, cluster_id).await;
    assert_eq!(active(&nodes), 3, "{nodes:?}");
    let again = engine
        .service
        .complete_lifecycle(
            &member(),
            "warm",
            &waits[0].id.to_string(),
            LifecycleResult::Continue,
        )
        .await
        .expect_err("answered already");
    assert!(matches!(again, Error::Conflict(_)), "{again}");
    assert_settled_invariants(&engine, cluster_id).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abandon_builds_another_until_the_retries_are_spent() {
    let database = TestDatabase::sqlite().await;
    let engine = engine(&database).await;
    let cluster_id = launching_cluster(
        &engine,
        "retry",
        1,
        queue_hooks(json!({"on_abandon": "RETRY", "retries": 1})),
    )
    .await;
    let scale = engine
        .service
        .scale(&member(), "retry", true, 1)
        .await
        .expect("scale out");
    let first = waiting_launches(&engine, cluster_id, 1).await.remove(0);
    let node_id = first.target_id;
    let first_instance = engine
        .store()
        .get_node(node_id)
        .await
        .expect("read")
        .and_then(|node| node.physical_id)
        .expect("an instance");
    answer(&engine, "retry", &first, LifecycleResult::Abandon).await;

    // Round 2: the same node, its first instance deleted, a new one built
    // and waiting on a new lifecycle action.
    let second = next_wait(&engine, cluster_id, first.id).await;
    assert_eq!(second.target_id, node_id);
    assert_eq!(second.inputs["launch"]["round"], 2);
    let node = engine
        .store()
        .get_node(node_id)
        .await
        .expect("read")
        .expect("kept");
    let second_instance = node.physical_id.clone().expect("an instance");
    assert_ne!(second_instance, first_instance);
    let instances: Vec<String> = all_instances(&engine)
        .await
        .into_iter()
        .map(|instance| instance.uuid.to_string())
        .collect();
    assert!(!instances.contains(&first_instance), "{instances:?}");
    assert!(instances.contains(&second_instance), "{instances:?}");

    // Abandoned again, with no retries left: the node goes, the action
    // fails, the cluster is back to its size.
    answer(&engine, "retry", &second, LifecycleResult::Abandon).await;
    let scale = wait_for_action(&engine, scale.id, WAIT).await;
    assert_eq!(scale.status, ActionStatus::Failed, "{scale:?}");
    assert_eq!(
        scale.status_reason,
        "0 of 1 node(s) created, 1 abandoned by the launch lifecycle hook and deleted"
    );
    assert!(
        engine
            .store()
            .get_node(node_id)
            .await
            .expect("read")
            .is_none()
    );
    let cluster = assert_settled_invariants(&engine, cluster_id).await;
    assert_eq!(cluster.desired_capacity, 1);
    let events = cluster_support::all_events(&engine, cluster_id).await;
    let abandoned: Vec<&str> = events
        .iter()
        .filter(|event| event.status == "ABANDONED")
        .map(|event| event.status_reason.as_str())
        .collect();
    assert_eq!(abandoned.len(), 2, "{abandoned:?}");
    assert!(
        abandoned[1].ends_with("deleted, no retries left (1)"),
        "{abandoned:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_abandon_fail_fails_the_action_and_keeps_the_nodes_that_continued() {
    let database = TestDatabase::sqlite().await;
    let engine = engine(&database).await;
    let cluster_id = launching_cluster(
        &engine,
        "strict",
        1,
        queue_hooks(json!({"on_abandon": "FAIL"})),
    )
    .await;
    let resize = engine
        .service
        .resize(
            &member(),
            "strict",
            ember_engine::clusters::ResizeRequest {
                adjustment: Some((
                    ember_engine::domain::cluster::sizing::AdjustmentType::ExactCapacity,
                    3.0,
                )),
                min_size: None,
                max_size: None,
                min_step: 1,
                strict: true,
            },
        )
        .await
        .expect("resize");
    let waits = waiting_launches(&engine, cluster_id, 2).await;
    answer(&engine, "strict", &waits[0], LifecycleResult::Continue).await;
    answer(&engine, "strict", &waits[1], LifecycleResult::Abandon).await;
    let resize = wait_for_action(&engine, resize.id, WAIT).await;
    assert_eq!(resize.status, ActionStatus::Failed, "{resize:?}");
    let cluster = assert_settled_invariants(&engine, cluster_id).await;
    assert_eq!(cluster.desired_capacity, 2);
    assert!(
        cluster
            .status_reason
            .starts_with("CLUSTER_RESIZE failed: 1 of 2 node(s) created, 1 abandoned"),
        "{}",
        cluster.status_reason
    );
    assert_eq!(active(&members(&engine, cluster_id).await), 2);
}

/// Scales a launching cluster with `properties` out by one and lets the
/// deadline pass: returns the action and the members after it.
async fn past_the_deadline(
    properties: Value,
) -> (ClusterAction, Vec<ember_engine::domain::cluster::Node>) {
    let database = TestDatabase::sqlite().await;
    let engine = engine(&database).await;
    let cluster_id = launching_cluster(&engine, "late", 1, properties).await;
    let scale = engine
        .service
        .scale(&member(), "late", true, 1)
        .await
        .expect("scale out");
    let tokens: Vec<String> = waiting_launches(&engine, cluster_id, 1)
        .await
        .iter()
        .map(|action| action.id.to_string())
        .collect();
    // What lifecycle-hook calls when the deadline passes.
    engine
        .service
        .continue_after_deadline(&tokens)
        .await
        .expect("deadline");
    let scale = wait_for_action(&engine, scale.id, WAIT).await;
    assert_settled_invariants(&engine, cluster_id).await;
    (scale, members(&engine, cluster_id).await)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_deadline_applies_each_default_result() {
    // AWS's default for a launching instance: ABANDON.
    let (scale, nodes) = past_the_deadline(queue_hooks(json!({"on_abandon": "FAIL"}))).await;
    assert_eq!(scale.status, ActionStatus::Failed, "{scale:?}");
    assert_eq!(nodes.len(), 1, "{nodes:?}");
    let (scale, nodes) = past_the_deadline(json!({"hooks": {"params": {"queue": "warm-up"},
        "timeout": 30, "default_result": "CONTINUE"}}))
    .await;
    assert_eq!(scale.status, ActionStatus::Succeeded, "{scale:?}");
    assert_eq!(active(&nodes), 2, "{nodes:?}");
    assert!(
        nodes.iter().any(|node| node
            .status_reason
            .contains("lifecycle deadline passed, the hook's default result is CONTINUE")),
        "{nodes:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_created_into_the_cluster_waits_and_no_other_project_answers_for_it() {
    let database = TestDatabase::sqlite().await;
    let engine = engine(&database).await;
    let cluster_id = launching_cluster(&engine, "added", 1, queue_hooks(json!({}))).await;
    let (node, create) = engine
        .service
        .create_node(
            &member(),
            NewNode {
                name: "extra".into(),
                profile: "added".into(),
                cluster: Some("added".into()),
                role: String::new(),
                metadata: Map::new(),
            },
        )
        .await
        .expect("node create");
    let wait = waiting_launches(&engine, cluster_id, 1).await.remove(0);
    assert_eq!(wait.target_id, node.id);
    assert_eq!(wait.depended_by, vec![create.id]);

    // Another project sees no such token; nobody cancels the wait.
    let stranger = Identity::new("mallory", "other", vec!["member".to_owned()]);
    let refused = engine
        .service
        .complete_lifecycle(
            &stranger,
            &cluster_id.to_string(),
            &wait.id.to_string(),
            LifecycleResult::Continue,
        )
        .await
        .expect_err("another project");
    assert!(matches!(refused, Error::NotFound(_)), "{refused}");
    let cancel = engine
        .service
        .cancel_action(&member(), &wait.id.to_string())
        .await
        .expect_err("a launch wait is answered, not cancelled");
    assert!(
        matches!(&cancel, Error::Conflict(message) if message.contains("complete it with CONTINUE")),
        "{cancel}"
    );

    answer(&engine, "added", &wait, LifecycleResult::Continue).await;
    let create = wait_for_action(&engine, create.id, WAIT).await;
    assert_eq!(create.status, ActionStatus::Succeeded, "{create:?}");
    assert_eq!(create.status_reason, "node extra created");
    let node = engine
        .store()
        .get_node(node.id)
        .await
        .expect("read")
        .expect("kept");
    assert_eq!(node.status, NodeStatus::Active);
    assert_settled_invariants(&engine, cluster_id).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_engine_killed_while_nodes_wait_leaves_them_to_the_next() {
    let database = TestDatabase::sqlite().await;
    let first = engine(&database).await;
    let cluster_id = launching_cluster(
        &first,
        "crash",
        1,
        queue_hooks(json!({"on_abandon": "RETRY", "retries": 2})),
    )
    .await;
    let scale = first
        .service
        .scale(&member(), "crash", true, 2)
        .await
        .expect("scale out");
    let waits = waiting_launches(&first, cluster_id, 2).await;
    first.kill().await;

    // The waits are rows: the next engine answers them and finishes the
    // growth, including a node built again after ABANDON.
    let second = engine(&database).await;
    answer(&second, "crash", &waits[0], LifecycleResult::Continue).await;
    answer(&second, "crash", &waits[1], LifecycleResult::Abandon).await;
    let rebuilt = next_wait(&second, cluster_id, waits[1].id).await;
    assert_eq!(rebuilt.target_id, waits[1].target_id);
    answer(&second, "crash", &rebuilt, LifecycleResult::Continue).await;
    let scale = wait_for_action(&second, scale.id, WAIT).await;
    assert_eq!(scale.status, ActionStatus::Succeeded, "{scale:?}");
    let cluster = assert_settled_invariants(&second, cluster_id).await;
    assert_eq!(cluster.desired_capacity, 3);
    assert_eq!(active(&members(&second, cluster_id).await), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rebuilt_member_waits_before_it_is_back_in_service() {
    let database = TestDatabase::sqlite().await;
    let engine = engine(&database).await;
    let cluster_id = launching_cluster(
        &engine,
        "mended",
        2,
        queue_hooks(json!({"on_abandon": "FAIL"})),
    )
    .await;
    let nodes = members(&engine, cluster_id).await;
    // The first member's instance deleted behind the cluster's back: the
    // cluster's recover rebuilds it, and the rebuilt node waits.
    let recover_id = Path::ClusterRecover
        .start(&engine, "mended", cluster_id)
        .await;
    let wait = waiting_launches(&engine, cluster_id, 1).await.remove(0);
    assert_eq!(wait.target_id, nodes[0].id);
    assert_eq!(wait.depended_by, vec![recover_id]);
    let held = engine
        .store()
        .get_node(nodes[0].id)
        .await
        .expect("read")
        .expect("kept");
    assert_eq!(held.status, NodeStatus::Creating, "{held:?}");
    answer(&engine, "mended", &wait, LifecycleResult::Continue).await;
    let recover = wait_for_action(&engine, recover_id, WAIT).await;
    assert_eq!(recover.status, ActionStatus::Succeeded, "{recover:?}");
    assert_eq!(recover.status_reason, "1 of 1 rebuilt node(s) in service");
    assert_eq!(active(&members(&engine, cluster_id).await), 2);

    // A node's own recover: its rebuilt node abandoned, with FAIL.
    let (_, node_recover) = engine
        .service
        .check_or_recover_node(
            &member(),
            &nodes[1].id.to_string(),
            ember_engine::clusters::HealthAction::Recover,
            Map::new(),
        )
        .await
        .expect("node recover");
    let wait = waiting_launches(&engine, cluster_id, 1).await.remove(0);
    assert_eq!(wait.target_id, nodes[1].id);
    answer(&engine, "mended", &wait, LifecycleResult::Abandon).await;
    let node_recover = wait_for_action(&engine, node_recover.id, WAIT).await;
    assert_eq!(
        node_recover.status,
        ActionStatus::Failed,
        "{node_recover:?}"
    );
    assert!(
        node_recover
            .status_reason
            .ends_with("was rebuilt, then abandoned by the launch lifecycle hook and deleted"),
        "{}",
        node_recover.status_reason
    );
    let cluster = assert_settled_invariants(&engine, cluster_id).await;
    assert_eq!(cluster.desired_capacity, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_rebuilt_by_an_update_wait_before_they_are_back_in_service() {
    let database = TestDatabase::sqlite().await;
    let engine = engine(&database).await;
    let cluster_id = launching_cluster(
        &engine,
        "rolled",
        2,
        queue_hooks(json!({"on_abandon": "FAIL"})),
    )
    .await;
    let update_id = Path::Update.start(&engine, "rolled", cluster_id).await;
    let waits = waiting_launches(&engine, cluster_id, 2).await;
    for wait in &waits {
        assert_eq!(wait.depended_by, vec![update_id]);
    }
    answer(&engine, "rolled", &waits[0], LifecycleResult::Continue).await;
    answer(&engine, "rolled", &waits[1], LifecycleResult::Abandon).await;
    let update = wait_for_action(&engine, update_id, WAIT).await;
    assert_eq!(update.status, ActionStatus::Failed, "{update:?}");
    assert_eq!(
        update.status_reason,
        "1 node(s) could not be updated to the new profile (1 abandoned by the launch lifecycle hook and deleted)"
    );
    let nodes = members(&engine, cluster_id).await;
    assert_eq!(nodes.len(), 1, "{nodes:?}");
    assert_eq!(nodes[0].status, NodeStatus::Active);
    let cluster = assert_settled_invariants(&engine, cluster_id).await;
    assert_eq!(cluster.desired_capacity, 1);
}

/// How a growth or rebuild is started, on a cluster of one member.
#[derive(Debug, Clone, Copy)]
enum Path {
    ScaleOut,
    Resize,
    NodeCreate,
    ClusterRecover,
    NodeRecover,
    Update,
}

impl Path {
    const ALL: [Path; 6] = [
        Path::ScaleOut,
        Path::Resize,
        Path::NodeCreate,
        Path::ClusterRecover,
        Path::NodeRecover,
        Path::Update,
    ];

    /// Starts it on the cluster `name`: the action that waits, and the
    /// node it holds.
    async fn start(self, engine: &Engine, name: &str, cluster_id: Uuid) -> Uuid {
        let first = members(engine, cluster_id).await.remove(0);
        match self {
            Path::ScaleOut => {
                engine
                    .service
                    .scale(&member(), name, true, 1)
                    .await
                    .expect("scale")
                    .id
            }
            Path::Resize => engine
                .service
                .resize(
                    &member(),
                    name,
                    ember_engine::clusters::ResizeRequest {
                        adjustment: Some((
                            ember_engine::domain::cluster::sizing::AdjustmentType::ChangeInCapacity,
                            1.0,
                        )),
                        min_size: None,
                        max_size: None,
                        min_step: 1,
                        strict: true,
                    },
                )
                .await
                .expect("resize")
                .id,
            Path::NodeCreate => {
                engine
                    .service
                    .create_node(
                        &member(),
                        NewNode {
                            name: format!("{name}-extra"),
                            profile: name.into(),
                            cluster: Some(name.into()),
                            role: String::new(),
                            metadata: Map::new(),
                        },
                    )
                    .await
                    .expect("node create")
                    .1
                    .id
            }
            Path::ClusterRecover | Path::NodeRecover => {
                let lost: Uuid = first
                    .physical_id
                    .as_deref()
                    .and_then(|id| id.parse().ok())
                    .expect("instance id");
                engine
                    .instances
                    .delete(&member(), lost)
                    .await
                    .expect("deleting");
                wait_for("the instance gone", WAIT, || async {
                    engine.instances.get(&member(), lost).await.is_err()
                })
                .await;
                if let Path::ClusterRecover = self {
                    engine
                        .service
                        .check_or_recover(
                            &member(),
                            name,
                            ember_engine::clusters::HealthAction::Recover,
                        )
                        .await
                        .expect("recover")
                        .id
                } else {
                    engine
                        .service
                        .check_or_recover_node(
                            &member(),
                            &first.id.to_string(),
                            ember_engine::clusters::HealthAction::Recover,
                            Map::new(),
                        )
                        .await
                        .expect("node recover")
                        .1
                        .id
                }
            }
            Path::Update => {
                let profile = format!("{name}-v2");
                engine
                    .service
                    .create_profile(
                        &member(),
                        &profile,
                        json!({"type": "ember.instance", "version": "1.0",
                            "properties": {"flavor": "m1.large", "image": "debian-12"}}),
                        Map::new(),
                        false,
                    )
                    .await
                    .expect("profile");
                engine
                    .service
                    .update_cluster(
                        &member(),
                        name,
                        ember_engine::clusters::ClusterUpdate {
                            name: None,
                            metadata: None,
                            timeout: None,
                            profile: Some(profile),
                            profile_only: false,
                            config: None,
                        },
                    )
                    .await
                    .expect("update")
                    .1
                    .id
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_every_path_the_deadline_applies_each_default_result() {
    for path in Path::ALL {
        for default in [LifecycleResult::Continue, LifecycleResult::Abandon] {
            let database = TestDatabase::sqlite().await;
            let engine = engine(&database).await;
            let cluster_id = launching_cluster(
                &engine,
                "path",
                1,
                json!({"hooks": {"params": {"queue": "warm-up"}, "timeout": 30,
                    "default_result": default.as_str()}, "on_abandon": "FAIL"}),
            )
            .await;
            let action_id = path.start(&engine, "path", cluster_id).await;
            let wait = waiting_launches(&engine, cluster_id, 1).await.remove(0);
            assert_eq!(wait.depended_by, vec![action_id], "{path:?}");
            engine
                .service
                .continue_after_deadline(&[wait.id.to_string()])
                .await
                .expect("deadline");
            let action = wait_for_action(&engine, action_id, WAIT).await;
            let node = engine.store().get_node(wait.target_id).await.expect("read");
            match default {
                LifecycleResult::Continue => {
                    assert_eq!(
                        action.status,
                        ActionStatus::Succeeded,
                        "{path:?}: {action:?}"
                    );
                    assert_eq!(
                        node.map(|node| node.status),
                        Some(NodeStatus::Active),
                        "{path:?}"
                    );
                }
                LifecycleResult::Abandon => {
                    assert_eq!(action.status, ActionStatus::Failed, "{path:?}: {action:?}");
                    assert!(node.is_none(), "{path:?}: {node:?}");
                }
            }
            assert_settled_invariants(&engine, cluster_id).await;
            engine.kill().await;
        }
    }
}
