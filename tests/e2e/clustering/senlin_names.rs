//! Names and messages as Senlin has them, through the Clustering REST API:
//! names need not be unique, an identity is an id, a name or the start of
//! an id, an ambiguous one is a 400; "not found", the size checks of
//! create/resize/add_nodes/del_nodes, the delete conflicts and the spec
//! checks say what Senlin says, with its status, before any action runs;
//! and another project's objects are not found by any identity.

use axum::http::StatusCode;
use ember_tests::TestEmber;
use reqwest::Method;
use serde_json::{Value, json};

use crate::clustering::clusters::{Rest, location};

fn member(ember: &TestEmber) -> Rest<'_> {
    Rest::member(ember)
}

/// A member of another project.
fn stranger(ember: &TestEmber) -> Rest<'_> {
    let token = ember.outsider_token();
    Rest { ember, token }
}

fn nova_spec() -> Value {
    json!({"type": "os.nova.server", "version": "1.0",
        "properties": {"flavor": "m1.small", "image": "cirros"}})
}

fn ember_spec() -> Value {
    json!({"type": "ember.instance", "version": "1.0",
        "properties": {"flavor": "m1.small", "image": "debian-12"}})
}

fn message(body: &Value) -> &str {
    body["error"]["message"].as_str().unwrap_or_default()
}

/// A call refused with `status` and exactly `expected` as its message.
async fn refused(
    rest: &Rest<'_>,
    method: Method,
    path: &str,
    body: Option<Value>,
    status: StatusCode,
    expected: &str,
) {
    let (answered, _, answer) = rest.call(method.clone(), path, body).await;
    assert_eq!(answered, status, "{method} {path}: {answer}");
    assert_eq!(message(&answer), expected, "{method} {path}");
}

/// Creates a profile; its id.
async fn profile(rest: &Rest<'_>, name: &str, spec: Value) -> String {
    let (status, _, body) = rest
        .post(
            "/profiles",
            json!({"profile": {"name": name, "spec": spec}}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    body["profile"]["id"].as_str().expect("id").to_owned()
}

/// Creates a cluster (min, max, desired) and waits for it; its id.
async fn cluster(rest: &Rest<'_>, name: &str, profile: &str, sizes: (i32, i32, i32)) -> String {
    let (min_size, max_size, desired_capacity) = sizes;
    let (status, headers, body) = rest
        .post(
            "/clusters",
            json!({"cluster": {"name": name, "profile_id": profile, "min_size": min_size,
                "max_size": max_size, "desired_capacity": desired_capacity}}),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    rest.wait_action(&location(&headers), "SUCCEEDED").await;
    body["cluster"]["id"].as_str().expect("id").to_owned()
}

/// Creates an orphan node and waits for it to be ACTIVE; its id.
async fn orphan(rest: &Rest<'_>, name: &str, profile: &str) -> String {
    let (status, headers, body) = rest
        .post(
            "/nodes",
            json!({"node": {"name": name, "profile_id": profile}}),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    rest.wait_action(&location(&headers), "SUCCEEDED").await;
    body["node"]["id"].as_str().expect("id").to_owned()
}

fn ambiguous(identity: &str) -> String {
    format!(
        "Multiple results found matching the query criteria '{identity}'. Please be more specific."
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_repeat_and_lookups_go_by_id_name_then_short_id() {
    let ember = TestEmber::start().await;
    let rest = member(&ember);
    let first = profile(&rest, "p-01", nova_spec()).await;
    let second = profile(&rest, "p-01", nova_spec()).await;
    assert_ne!(first, second);
    refused(
        &rest,
        Method::GET,
        "/profiles/p-01",
        None,
        StatusCode::BAD_REQUEST,
        &ambiguous("p-01"),
    )
    .await;
    refused(
        &rest,
        Method::DELETE,
        "/profiles/p-01",
        None,
        StatusCode::BAD_REQUEST,
        &ambiguous("p-01"),
    )
    .await;
    assert_eq!(
        rest.get(&format!("/profiles/{first}")).await["profile"]["id"],
        first
    );

    // Two clusters of one name: both made; the name alone finds neither.
    let web = cluster(&rest, "c-01", &first, (0, 3, 0)).await;
    let also = cluster(&rest, "c-01", &first, (0, 3, 0)).await;
    for method in [Method::GET, Method::DELETE] {
        refused(
            &rest,
            method,
            "/clusters/c-01",
            None,
            StatusCode::BAD_REQUEST,
            &ambiguous("c-01"),
        )
        .await;
    }
    // A short id (the start of an id) finds its one cluster; both ids
    // share their first digits (the time they were made), so that start
    // is ambiguous too.
    let short = &web[..28];
    assert_eq!(
        rest.get(&format!("/clusters/{short}")).await["cluster"]["id"],
        web
    );
    let common: String = web
        .chars()
        .zip(also.chars())
        .take_while(|(one, other)| one == other)
        .map(|(one, _)| one)
        .collect();
    if !common.is_empty() && !common.ends_with('-') {
        refused(
            &rest,
            Method::GET,
            &format!("/clusters/{common}"),
            None,
            StatusCode::BAD_REQUEST,
            &ambiguous(&common),
        )
        .await;
    }

    // Not found, in Senlin's words, for each kind.
    for (kind, path) in [
        ("cluster", "/clusters/c-99"),
        ("node", "/nodes/n-99"),
        ("profile", "/profiles/p-99"),
        ("policy", "/policies/x-99"),
    ] {
        let identity = path.rsplit('/').next().unwrap_or_default();
        refused(
            &rest,
            Method::GET,
            path,
            None,
            StatusCode::NOT_FOUND,
            &format!("The {kind} '{identity}' could not be found."),
        )
        .await;
    }
    refused(
        &rest,
        Method::GET,
        "/actions/01a21643-3bf4-7545-a1df-eb337786bf9b",
        None,
        StatusCode::NOT_FOUND,
        "The action '01a21643-3bf4-7545-a1df-eb337786bf9b' could not be found.",
    )
    .await;

    // Another project finds nothing, by id, short id or name: as absent.
    let other = stranger(&ember);
    for identity in [web.as_str(), short, "c-01"] {
        refused(
            &other,
            Method::GET,
            &format!("/clusters/{identity}"),
            None,
            StatusCode::NOT_FOUND,
            &format!("The cluster '{identity}' could not be found."),
        )
        .await;
    }
    refused(
        &other,
        Method::DELETE,
        &format!("/profiles/{first}"),
        None,
        StatusCode::NOT_FOUND,
        &format!("The profile '{first}' could not be found."),
    )
    .await;
    // Its own cluster of the same name is its only one.
    let theirs = profile(&other, "p-01", nova_spec()).await;
    let their_cluster = cluster(&other, "c-01", &theirs, (0, 1, 0)).await;
    assert_eq!(
        other.get("/clusters/c-01").await["cluster"]["id"],
        their_cluster
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn size_checks_refuse_before_any_action_in_senlins_words() {
    let ember = TestEmber::start().await;
    let rest = member(&ember);
    let nova = profile(&rest, "nova", nova_spec()).await;

    let create = |min: i32, max: i32, desired: i32| {
        json!({"cluster": {"name": "bad", "profile_id": nova, "min_size": min,
            "max_size": max, "desired_capacity": desired}})
    };
    for (body, expected) in [
        (
            create(5, 3, 2),
            "The target capacity (2) is less than the specified min_size (5).",
        ),
        (
            create(0, 3, 4),
            "The target capacity (4) is greater than the specified max_size (3).",
        ),
    ] {
        refused(
            &rest,
            Method::POST,
            "/clusters",
            Some(body),
            StatusCode::BAD_REQUEST,
            expected,
        )
        .await;
    }
    refused(
        &rest,
        Method::POST,
        "/clusters",
        Some(json!({"cluster": {"name": "bad", "profile_id": "no-such-profile"}})),
        StatusCode::BAD_REQUEST,
        "The specified profile 'no-such-profile' could not be found.",
    )
    .await;

    let web = cluster(&rest, "web", &nova, (2, 5, 3)).await;
    let actions = format!("/clusters/{web}/actions");
    let resize = |parameters: Value| Some(json!({ "resize": parameters }));
    for (parameters, expected) in [
        (
            json!({"adjustment_type": "CHANGE_IN_CAPACITY", "number": 3, "strict": true}),
            "The target capacity (6) is greater than the cluster's max_size (5).",
        ),
        (
            json!({"adjustment_type": "CHANGE_IN_CAPACITY", "number": -2, "strict": true}),
            "The target capacity (1) is less than the cluster's min_size (2).",
        ),
        (
            json!({"max_size": 2, "strict": true}),
            "The specified max_size (2) is less than the current desired_capacity (3) of the cluster.",
        ),
        (
            json!({"max_size": 1, "strict": false}),
            "The specified max_size (1) is less than the current min_size (2) of the cluster.",
        ),
        (
            json!({"min_size": 4, "strict": true}),
            "The specified min_size (4) is greater than the current desired_capacity (3) of the cluster.",
        ),
        (
            json!({"min_size": 6, "strict": false}),
            "The specified min_size (6) is greater than the current max_size (5) of the cluster.",
        ),
        (
            json!({"adjustment_type": "CHANGE_IN_CAPACITY", "number": 1, "min_size": 20, "max_size": 10}),
            "The specified min_size (20) is greater than the specified max_size (10).",
        ),
        (
            json!({"adjustment_type": "bogus", "number": 1}),
            "Value 'bogus' is not acceptable for field 'adjustment_type'.",
        ),
    ] {
        refused(
            &rest,
            Method::POST,
            &actions,
            resize(parameters),
            StatusCode::BAD_REQUEST,
            expected,
        )
        .await;
    }
    // Nothing was recorded: the cluster is as it was, with no action but
    // its create.
    let shown = rest.get(&format!("/clusters/{web}")).await;
    assert_eq!(shown["cluster"]["desired_capacity"], 3, "{shown}");
    assert_eq!(shown["cluster"]["max_size"], 5, "{shown}");
    let listed = rest.get("/actions").await;
    let resizes = listed["actions"]
        .as_array()
        .map(|actions| {
            actions
                .iter()
                .filter(|action| action["target"] == web.as_str())
                .filter(|action| action["action"] == "CLUSTER_RESIZE")
                .count()
        })
        .unwrap_or_default();
    assert_eq!(resizes, 0, "{listed}");

    // A lenient resize beyond the range is accepted and clamped.
    let done = rest
        .act(
            &web,
            json!({"resize": {"adjustment_type": "CHANGE_IN_CAPACITY", "number": 3, "strict": false}}),
        )
        .await;
    rest.wait_action(&done, "SUCCEEDED").await;
    assert_eq!(
        rest.get(&format!("/clusters/{web}")).await["cluster"]["desired_capacity"],
        5
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn add_and_del_nodes_name_every_node_they_refuse() {
    let ember = TestEmber::start().await;
    let rest = member(&ember);
    let nova = profile(&rest, "nova", nova_spec()).await;
    let other_type = profile(&rest, "ember", ember_spec()).await;
    let web = cluster(&rest, "web", &nova, (0, 2, 1)).await;
    let db = cluster(&rest, "db", &nova, (1, 3, 1)).await;
    let member_of_db = rest.nodes(&db).await[0]["id"]
        .as_str()
        .expect("id")
        .to_owned();
    let free = orphan(&rest, "free", &nova).await;
    let foreign = orphan(&rest, "foreign", &other_type).await;
    let actions = format!("/clusters/{web}/actions");
    let add = |nodes: Vec<&str>| Some(json!({"add_nodes": {"nodes": nodes}}));
    let del = |nodes: Vec<&str>| Some(json!({"del_nodes": {"nodes": nodes}}));

    refused(
        &rest,
        Method::POST,
        &actions,
        add(vec!["ghost"]),
        StatusCode::BAD_REQUEST,
        "Nodes not found: ['ghost'].",
    )
    .await;
    refused(
        &rest,
        Method::POST,
        &actions,
        add(vec![member_of_db.as_str()]),
        StatusCode::BAD_REQUEST,
        &format!("Nodes ['{member_of_db}'] already owned by some cluster."),
    )
    .await;
    refused(
        &rest,
        Method::POST,
        &actions,
        add(vec![foreign.as_str(), "ghost"]),
        StatusCode::BAD_REQUEST,
        &format!(
            "Profile type of nodes ['{foreign}'] does not match that of the cluster.\nNodes not found: ['ghost']."
        ),
    )
    .await;
    refused(
        &rest,
        Method::POST,
        &actions,
        del(vec![free.as_str()]),
        StatusCode::BAD_REQUEST,
        &format!("Nodes not members of specified cluster: ['{free}']."),
    )
    .await;
    refused(
        &rest,
        Method::POST,
        &format!("/clusters/{db}/actions"),
        del(vec![member_of_db.as_str()]),
        StatusCode::BAD_REQUEST,
        "The target capacity (0) is less than the cluster's min_size (1).",
    )
    .await;
    let second = orphan(&rest, "second", &nova).await;
    refused(
        &rest,
        Method::POST,
        &actions,
        add(vec![free.as_str(), second.as_str()]),
        StatusCode::BAD_REQUEST,
        "The target capacity (3) is greater than the cluster's max_size (2).",
    )
    .await;
    // Another project's node is not found, whatever it is called.
    let theirs = stranger(&ember);
    let their_web = {
        let their_profile = profile(&theirs, "nova", nova_spec()).await;
        cluster(&theirs, "web", &their_profile, (0, 2, 0)).await
    };
    refused(
        &theirs,
        Method::POST,
        &format!("/clusters/{their_web}/actions"),
        add(vec![free.as_str()]),
        StatusCode::BAD_REQUEST,
        &format!("Nodes not found: ['{free}']."),
    )
    .await;

    // What fits is accepted and done.
    let done = rest
        .act(&web, json!({"add_nodes": {"nodes": ["free"]}}))
        .await;
    rest.wait_action(&done, "SUCCEEDED").await;
    assert_eq!(rest.nodes(&web).await.len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn types_specs_and_delete_conflicts_answer_as_senlin() {
    let ember = TestEmber::start().await;
    let rest = member(&ember);
    let mut bogus = nova_spec();
    bogus["type"] = json!("senlin.profile.bogus");
    refused(
        &rest,
        Method::POST,
        "/profiles",
        Some(json!({"profile": {"name": "p", "spec": bogus}})),
        StatusCode::NOT_FOUND,
        "The profile_type 'senlin.profile.bogus-1.0' could not be found.",
    )
    .await;
    let mut extra = nova_spec();
    extra["properties"]["bogus"] = json!("foo");
    refused(
        &rest,
        Method::POST,
        "/profiles",
        Some(json!({"profile": {"name": "test-profile", "spec": extra}})),
        StatusCode::BAD_REQUEST,
        "Failed in creating profile test-profile: Unrecognizable spec item 'bogus'",
    )
    .await;
    let scaling = json!({"type": "senlin.policy.scaling", "version": "1.0",
        "properties": {"event": "CLUSTER_SCALE_IN",
            "adjustment": {"type": "CHANGE_IN_CAPACITY", "number": 1}}});
    let mut bogus_policy = scaling.clone();
    bogus_policy["type"] = json!("senlin.policy.bogus");
    refused(
        &rest,
        Method::POST,
        "/policies",
        Some(json!({"policy": {"name": "p", "spec": bogus_policy}})),
        StatusCode::NOT_FOUND,
        "The policy_type 'senlin.policy.bogus-1.0' could not be found.",
    )
    .await;
    // Senlin answers an unknown policy property with a 500 (its schema
    // error escapes); Ember with the 400 a profile's gets.
    let mut extra_policy = scaling.clone();
    extra_policy["properties"]["bogus"] = json!("foo");
    refused(
        &rest,
        Method::POST,
        "/policies",
        Some(json!({"policy": {"name": "p", "spec": extra_policy}})),
        StatusCode::BAD_REQUEST,
        "Unrecognizable spec item 'bogus'",
    )
    .await;

    let nova = profile(&rest, "nova", nova_spec()).await;
    let web = cluster(&rest, "web", &nova, (0, 2, 0)).await;
    let (status, _, body) = rest
        .post(
            "/policies",
            json!({"policy": {"name": "shrink", "spec": scaling}}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let policy = body["policy"]["id"].as_str().expect("id").to_owned();
    let done = rest
        .act(&web, json!({"policy_attach": {"policy_id": "shrink"}}))
        .await;
    rest.wait_action(&done, "SUCCEEDED").await;
    refused(
        &rest,
        Method::DELETE,
        "/policies/shrink",
        None,
        StatusCode::CONFLICT,
        "The policy 'shrink' cannot be deleted: still attached to some clusters.",
    )
    .await;
    refused(
        &rest,
        Method::DELETE,
        "/profiles/nova",
        None,
        StatusCode::CONFLICT,
        &format!(
            "The profile '{nova}' cannot be deleted: still referenced by some clusters and/or nodes."
        ),
    )
    .await;
    // Attach and detach name the policy in Senlin's words: one that does
    // not exist, one not attached.
    let actions = format!("/clusters/{web}/actions");
    for action in ["policy_attach", "policy_detach"] {
        refused(
            &rest,
            Method::POST,
            &actions,
            Some(json!({ action: {"policy_id": "nope"} })),
            StatusCode::BAD_REQUEST,
            "The specified policy 'nope' could not be found.",
        )
        .await;
    }
    let deletion = json!({"type": "senlin.policy.deletion", "version": "1.1",
        "properties": {"criteria": "OLDEST_FIRST"}});
    let (status, _, body) = rest
        .post(
            "/policies",
            json!({"policy": {"name": "idle", "spec": deletion}}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    refused(
        &rest,
        Method::POST,
        &actions,
        Some(json!({"policy_detach": {"policy_id": "idle"}})),
        StatusCode::BAD_REQUEST,
        &format!("The policy 'idle' is not attached to the specified cluster '{web}'."),
    )
    .await;
    // Both are still there.
    assert_eq!(
        rest.get(&format!("/policies/{policy}")).await["policy"]["name"],
        "shrink"
    );
    assert_eq!(
        rest.get("/profiles/nova").await["profile"]["id"],
        nova.as_str()
    );
}
