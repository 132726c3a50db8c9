//! The docker driver itself on a real engine: every call is idempotent —
//! a build run again (a retry, a take-over, a restart under another name
//! prefix) finds the container it made instead of making a second, a
//! delete of a container already gone succeeds — and inspect, sync and
//! observe report what the engine sees.

use std::time::Duration;

use ember_engine::compute::docker::{DockerComputeConfig, DockerDriver, PullPolicy};
use ember_engine::compute::flavors::Flavor;
use ember_engine::compute::{BuildAttempt, ComputeDriver, MachinePower, MachineState};
use ember_engine::domain::instance::{Instance, NewInstance, Workload};
use ember_tests::containers::{ContainerEngine, TEST_NETWORK};
use ember_tests::wait_for;
use futures::StreamExt;

fn driver(engine: &ContainerEngine, prefix: &str) -> DockerDriver {
    DockerDriver::new(DockerComputeConfig {
        docker_host: engine.docker_host.clone(),
        network: TEST_NETWORK.to_owned(),
        name_prefix: prefix.to_owned(),
        pull: PullPolicy::Never,
        stop_grace: Duration::from_secs(3),
        init: true,
        api_timeout: Duration::from_secs(60),
    })
    .expect("valid configuration")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn driver_calls_are_idempotent_and_report_what_the_engine_sees() {
    let Some(engine) = ContainerEngine::from_env("driver_calls_are_idempotent").await else {
        return;
    };
    let prefix = ContainerEngine::unique_prefix();
    let first = driver(&engine, &prefix);
    let new = NewInstance {
        name: "twice".into(),
        flavor: "half".into(),
        image: engine.image.clone(),
        metadata: Default::default(),
        workload: Workload {
            command: vec!["/bin/sleep".into(), "3600".into()],
            ..Workload::default()
        },
        placement: Default::default(),
        delegation: None,
    };
    let new_probe = new.clone();
    let mut instance =
        Instance::new_building("demo", "demo", new, ember_runtime::time::now()).expect("valid");
    let flavor = Flavor {
        vcpus: 0.5,
        memory_mb: 32,
    };
    // The event stream, driven from now on (its request goes out when it
    // is first polled).
    let mut stream = first.observe().await.expect("observe");
    let (sender, observations) = tokio::sync::mpsc::unbounded_channel();
    let pump = tokio::spawn(async move {
        while let Some(item) = stream.next().await {
            if sender.send(item).is_err() {
                return;
            }
        }
    });
    // The stream is live once it reports a change to a machine this
    // driver made: a probe instance's container, made again until one of
    // its changes comes through, then deleted.
    let probe = Instance::new_building(
        "demo",
        "demo",
        NewInstance {
            name: "probe".into(),
            ..new_probe
        },
        ember_runtime::time::now(),
    )
    .expect("valid");
    let observations = std::sync::Mutex::new(observations);
    wait_for(
        "the event stream to report a change",
        Duration::from_secs(30),
        || async {
            let seen = {
                let mut observations = observations.lock().expect("observations");
                std::iter::from_fn(|| observations.try_recv().ok())
                    .any(|seen| seen.is_ok_and(|uuid| uuid == probe.uuid))
            };
            if seen {
                return true;
            }
            first.delete(&probe).await.expect("probe deleted");
            first
                .build(&probe, &flavor, BuildAttempt::First)
                .await
                .expect("probe built");
            false
        },
    )
    .await;
    first.delete(&probe).await.expect("probe deleted");
    let mut observations = observations.into_inner().expect("observations");
    first
        .build(&instance, &flavor, BuildAttempt::First)
        .await
        .expect("built");
    // The same build again: the name is taken, the label finds it.
    first
        .build(&instance, &flavor, BuildAttempt::First)
        .await
        .expect("built again");
    first
        .build(&instance, &flavor, BuildAttempt::Resumed)
        .await
        .expect("resumed");
    // Resumed by an engine configured with another prefix: the label
    // finds what the first made.
    let renamed = driver(&engine, &format!("{prefix}other-"));
    renamed
        .build(&instance, &flavor, BuildAttempt::Resumed)
        .await
        .expect("built by another");
    let mut made = engine.containers(&prefix).await;
    assert_eq!(made.len(), 1, "one container: {made:?}");
    let container = made.pop().and_then(|container| container.id).expect("id");
    let observed = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            match observations.recv().await {
                Some(Ok(uuid)) if uuid == instance.uuid => return uuid,
                Some(_) => {}
                None => panic!("the event stream ended"),
            }
        }
    })
    .await
    .expect("an event names the instance");
    assert_eq!(observed, instance.uuid);
    pump.abort();

    instance.status = ember_engine::domain::instance::InstanceStatus::Active;
    instance.power_state = ember_engine::domain::instance::PowerState::On;
    assert_eq!(
        renamed.inspect(&instance).await.expect("inspect"),
        MachineState::Running
    );
    assert_eq!(
        first
            .sync(std::slice::from_ref(&instance))
            .await
            .expect("sync"),
        vec![(instance.uuid, MachinePower::Running)]
    );
    renamed
        .power_off(&instance)
        .await
        .expect("stopped through the label");
    let MachineState::Exited(exit) = first.inspect(&instance).await.expect("inspect") else {
        panic!("stopped");
    };
    assert_eq!(
        exit.exit_code, 143,
        "SIGTERM ended sleep through the init process"
    );
    first
        .power_off(&instance)
        .await
        .expect("stopping a stopped one is fine");

    first.delete(&instance).await.expect("deleted");
    first
        .delete(&instance)
        .await
        .expect("deleting what is gone succeeds");
    assert_eq!(
        first.inspect(&instance).await.expect("inspect"),
        MachineState::Missing
    );
    assert_eq!(
        first
            .sync(std::slice::from_ref(&instance))
            .await
            .expect("sync"),
        vec![(instance.uuid, MachinePower::Missing)]
    );
    let error = first
        .power_on(&instance)
        .await
        .expect_err("nothing to start");
    assert!(error.0.contains("is gone"), "{error}");
    assert!(
        engine
            .docker
            .inspect_container(&container, None)
            .await
            .is_err()
    );
}
