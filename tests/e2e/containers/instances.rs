//! Instances as containers: a build makes a running container with the
//! flavor's limits and the instance's labels, command and environment;
//! power and reboot act on it; a delete removes it. A container killed or
//! removed behind Ember's back, or exiting by itself, moves its instance
//! within seconds, with the reason and an event. Failures are clear and
//! leave nothing BUILDING.

use ember_tests::containers::ContainerEngine;
use reqwest::Method;
use serde_json::json;

use super::{create, ember_on, events, wait_gone, wait_instance, wait_running, wait_status};
use crate::instances::{call, lock, message, power};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_is_a_running_container_with_its_limits_labels_and_power() {
    let Some(engine) = ContainerEngine::from_env("an_instance_is_a_running_container").await else {
        return;
    };
    let (ember, prefix) = ember_on(&engine, |_| {}).await;
    let token = ember.member_token().to_owned();
    let uuid = create(
        &ember,
        &token,
        json!({"name": "worker-1", "flavor": "small", "image": engine.image,
            "metadata": {"role": "worker"}, "env": {"MODE": "work"},
            "command": ["/bin/sh", "-c", "echo started; exec sleep 3600"]}),
    )
    .await;
    let active = wait_status(&ember, &token, &uuid, "ACTIVE").await;
    assert_eq!(active["power_state"], "on", "{active}");
    assert_eq!(active["command"][0], "/bin/sh", "{active}");

    let container = engine.container_of(&uuid).await.expect("a container");
    assert_eq!(
        container
            .name
            .as_deref()
            .map(|name| name.trim_start_matches('/')),
        Some(format!("{prefix}{uuid}").as_str())
    );
    let state = container.state.clone().expect("state");
    assert_eq!(state.running, Some(true), "{state:?}");
    let host = container.host_config.clone().expect("host config");
    assert_eq!(host.memory, Some(64 * 1024 * 1024), "flavor small: 64 MiB");
    assert_eq!(host.nano_cpus, Some(1_000_000_000), "flavor small: 1 vCPU");
    let config = container.config.clone().expect("config");
    let labels = config.labels.clone().expect("labels");
    assert_eq!(labels["role"], "worker");
    assert_eq!(labels["ember.instance_id"], uuid);
    assert_eq!(labels["ember.project_id"], "demo");
    let env = config.env.clone().expect("env");
    assert!(env.contains(&"MODE=work".to_owned()), "{env:?}");
    assert!(
        env.contains(&format!("EMBER_INSTANCE_ID={uuid}")),
        "{env:?}"
    );
    let networks = container
        .network_settings
        .and_then(|settings| settings.networks)
        .expect("networks");
    assert!(
        networks.contains_key(ember_tests::containers::TEST_NETWORK),
        "{networks:?}"
    );

    // Power off: the container stops (SIGTERM reaches sleep through the
    // init process, well within the grace period).
    let (status, body) = power(&ember, &token, &uuid, "off").await;
    assert_eq!(status, 202, "{body}");
    let stopped = wait_status(&ember, &token, &uuid, "STOPPED").await;
    assert_eq!(
        stopped["status_reason"],
        serde_json::Value::Null,
        "{stopped}"
    );
    assert!(!engine.running(&uuid).await);
    let (status, body) = power(&ember, &token, &uuid, "on").await;
    assert_eq!(status, 202, "{body}");
    wait_status(&ember, &token, &uuid, "ACTIVE").await;
    assert!(engine.running(&uuid).await);
    let started_before = engine
        .container_of(&uuid)
        .await
        .and_then(|container| container.state)
        .and_then(|state| state.started_at);
    let (status, body) = power(&ember, &token, &uuid, "reboot").await;
    assert_eq!(status, 202, "{body}");
    wait_instance(&ember, &token, &uuid, "rebooted", |instance| {
        instance["status"] == "ACTIVE"
    })
    .await;
    let started_after = engine
        .container_of(&uuid)
        .await
        .and_then(|container| container.state)
        .and_then(|state| state.started_at);
    assert_ne!(
        started_before, started_after,
        "a reboot restarts the container"
    );
    assert!(engine.running(&uuid).await);

    let kinds: Vec<String> = events(&ember, &token, &uuid)
        .await
        .iter()
        .map(|event| event["kind"].as_str().unwrap_or_default().to_owned())
        .collect();
    for kind in ["build", "power_off", "power_on", "reboot"] {
        assert!(kinds.contains(&kind.to_owned()), "{kind} in {kinds:?}");
    }

    let (status, body) = call(
        &ember,
        Method::DELETE,
        &format!("/instances/{uuid}"),
        &token,
        None,
    )
    .await;
    assert_eq!(status, 202, "{body}");
    wait_gone(&ember, &token, &uuid).await;
    assert!(
        engine.container_of(&uuid).await.is_none(),
        "the container is removed"
    );
    assert!(engine.containers(&prefix).await.is_empty());
    ember.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_container_killed_or_removed_behind_embers_back_shows_up_with_the_reason() {
    let Some(engine) = ContainerEngine::from_env("a_container_killed_behind_embers_back").await
    else {
        return;
    };
    // No periodic resync within the test: the engine's event stream alone
    // must bring the news.
    let (ember, prefix) = ember_on(&engine, |config| {
        config.engine.compute.resync_ms = 600_000;
    })
    .await;
    let token = ember.member_token().to_owned();
    let uuid = create(
        &ember,
        &token,
        json!({"name": "victim", "flavor": "half", "image": engine.image}),
    )
    .await;
    wait_status(&ember, &token, &uuid, "ACTIVE").await;
    let name = format!("{prefix}{uuid}");

    engine.kill_behind_the_back(&name).await;
    let killed = wait_instance(&ember, &token, &uuid, "ERROR", |instance| {
        instance["status"] == "ERROR"
    })
    .await;
    let reason = killed["status_reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("the container died: killed by SIGKILL (exit code 137)"),
        "{killed}"
    );
    assert_eq!(killed["power_state"], "off");
    let observed: Vec<_> = events(&ember, &token, &uuid)
        .await
        .into_iter()
        .filter(|event| event["kind"] == "observed")
        .collect();
    assert_eq!(observed.len(), 1, "{observed:?}");
    assert_eq!(observed[0]["status"], "ERROR");

    // A dead container can be started again.
    let (status, body) = power(&ember, &token, &uuid, "on").await;
    assert_eq!(status, 202, "{body}");
    wait_status(&ember, &token, &uuid, "ACTIVE").await;
    wait_running(&engine, &uuid, true).await;

    // A locked instance's container that vanishes is still reported, and
    // its lock still keeps a member from deleting it.
    let (status, body) = lock(&ember, &token, &uuid, json!({"target": true})).await;
    assert_eq!(status, 202, "{body}");
    engine.remove_behind_the_back(&name).await;
    // `rm -f` stops the container first: the engine may report it died
    // (SIGTERM) before it reports it gone, so wait for the final state.
    let removed = wait_instance(&ember, &token, &uuid, "ERROR (removed)", |instance| {
        instance["status"] == "ERROR" && instance["power_state"] == "nostate"
    })
    .await;
    assert_eq!(
        removed["status_reason"], "the container was removed outside Ember",
        "{removed}"
    );
    assert_eq!(removed["power_state"], "nostate");
    let (status, body) = call(
        &ember,
        Method::DELETE,
        &format!("/instances/{uuid}"),
        &token,
        None,
    )
    .await;
    assert_eq!(status, 409, "a locked instance: {body}");
    assert!(message(&body).contains("is locked"), "{body}");
    let (status, body) = call(
        &ember,
        Method::DELETE,
        &format!("/instances/{uuid}"),
        ember.admin_token(),
        None,
    )
    .await;
    assert_eq!(status, 202, "an admin deletes through the lock: {body}");
    wait_gone(&ember, &token, &uuid).await;
    ember.stop().await;
    engine.clean_up(&prefix).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_container_that_exits_by_itself_is_stopped_and_a_script_runs_as_user_data() {
    use base64::Engine;
    let Some(engine) = ContainerEngine::from_env("a_container_that_exits_by_itself").await else {
        return;
    };
    let (ember, prefix) = ember_on(&engine, |_| {}).await;
    let token = ember.member_token().to_owned();
    // The script runs as the container's process, then exits 0.
    let script = "#!/bin/sh\necho \"hello from $EMBER_INSTANCE_NAME\"\nsleep 2\nexit 0\n";
    let uuid = create(
        &ember,
        &token,
        json!({"name": "one-shot", "flavor": "half", "image": engine.image,
            "user_data": base64::engine::general_purpose::STANDARD.encode(script)}),
    )
    .await;
    wait_instance(&ember, &token, &uuid, "ACTIVE or STOPPED", |instance| {
        instance["status"] == "ACTIVE" || instance["status"] == "STOPPED"
    })
    .await;
    let stopped = wait_instance(&ember, &token, &uuid, "STOPPED", |instance| {
        assert_ne!(instance["status"], "ERROR", "{instance}");
        instance["status"] == "STOPPED"
    })
    .await;
    assert!(
        stopped["status_reason"]
            .as_str()
            .unwrap_or_default()
            .starts_with("the container stopped by itself: exited with code 0"),
        "{stopped}"
    );
    // A failing command is ERROR with its exit code.
    let failing = create(
        &ember,
        &token,
        json!({"name": "failing", "flavor": "half", "image": engine.image,
            "command": ["/bin/sh", "-c", "sleep 1; exit 3"]}),
    )
    .await;
    let failed = wait_instance(&ember, &token, &failing, "ERROR", |instance| {
        instance["status"] == "ERROR"
    })
    .await;
    assert!(
        failed["status_reason"]
            .as_str()
            .unwrap_or_default()
            .contains("exited with code 3"),
        "{failed}"
    );
    for uuid in [&uuid, &failing] {
        let (status, body) = call(
            &ember,
            Method::DELETE,
            &format!("/instances/{uuid}"),
            &token,
            None,
        )
        .await;
        assert_eq!(status, 202, "{body}");
        wait_gone(&ember, &token, uuid).await;
    }
    assert!(engine.containers(&prefix).await.is_empty());
    ember.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_images_unknown_flavors_and_an_unreachable_engine_fail_clearly() {
    let Some(engine) = ContainerEngine::from_env("missing_images_unknown_flavors").await else {
        return;
    };
    let (ember, prefix) = ember_on(&engine, |_| {}).await;
    let token = ember.member_token().to_owned();

    let (status, body) = call(
        &ember,
        Method::POST,
        "/instances",
        &token,
        Some(json!({"instance": {"name": "huge", "flavor": "m1.huge", "image": engine.image}})),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    assert!(
        message(&body).contains(
            "\"m1.huge\" is not a flavor of this cloud: use one of half, small, unlimited"
        ),
        "{body}"
    );

    let missing = create(
        &ember,
        &token,
        json!({"name": "ghost", "flavor": "small", "image": "localhost/ember-test/nothing:1"}),
    )
    .await;
    let failed = wait_instance(&ember, &token, &missing, "ERROR", |instance| {
        instance["status"] == "ERROR"
    })
    .await;
    let reason = failed["status_reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("image \"localhost/ember-test/nothing:1\" is not on the container engine")
            && reason.contains("pull = \"never\""),
        "{failed}"
    );
    assert!(engine.container_of(&missing).await.is_none());
    ember.stop().await;

    // An engine socket that is not there: the build fails saying so, and a
    // delete of what never got a container succeeds.
    let (ember, _) = ember_on(&engine, |config| {
        config.engine.compute.docker_host = "unix:///nonexistent/ember-test.sock".into();
    })
    .await;
    let token = ember.member_token().to_owned();
    let unreachable = create(
        &ember,
        &token,
        json!({"name": "nowhere", "flavor": "small", "image": engine.image}),
    )
    .await;
    let failed = wait_instance(&ember, &token, &unreachable, "ERROR", |instance| {
        assert_ne!(instance["status"], "ACTIVE", "{instance}");
        instance["status"] == "ERROR"
    })
    .await;
    assert!(
        failed["status_reason"]
            .as_str()
            .unwrap_or_default()
            .contains("socket /nonexistent/ember-test.sock does not exist"),
        "{failed}"
    );
    let (status, body) = call(
        &ember,
        Method::DELETE,
        &format!("/instances/{unreachable}"),
        &token,
        None,
    )
    .await;
    assert_eq!(status, 202, "{body}");
    let deleting = wait_instance(&ember, &token, &unreachable, "settled", |instance| {
        instance["status"] != "DELETING"
    })
    .await;
    assert_eq!(
        deleting["status"], "ERROR",
        "the engine is still unreachable: {deleting}"
    );
    ember.stop().await;
    engine.clean_up(&prefix).await;
}
