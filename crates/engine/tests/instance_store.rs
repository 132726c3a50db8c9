//! The instance store's conformance suite, on SQLite and PostgreSQL.

use std::collections::BTreeMap;

use chrono::Duration;
use ember_engine::Error;
use ember_engine::domain::instance::{
    Instance, InstanceStatus, InstanceTask, LockedBy, MaintenanceLock, NewInstance, PowerState,
};
use ember_engine::store::instances::{
    InstanceListQuery, InstanceStore, SqlInstanceStore, TaskOutcome,
};
use ember_engine::store::migrations::Migrator;
use ember_runtime::database::{connect_and_migrate, testing::TestDatabase};

async fn store(database: &TestDatabase) -> SqlInstanceStore {
    let connection = connect_and_migrate::<Migrator>(&database.url)
        .await
        .expect("migrated");
    SqlInstanceStore::new(connection)
}

fn instance(project: &str, name: &str, seconds_after_start: i64) -> Instance {
    let created_at = ember_runtime::time::now() + Duration::seconds(seconds_after_start);
    let new = NewInstance {
        name: name.to_owned(),
        flavor: "m1.small".to_owned(),
        image: "debian-12".to_owned(),
        metadata: BTreeMap::from([("role".to_owned(), "web".to_owned())]),
        workload: Default::default(),
        placement: Default::default(),
        delegation: None,
    };
    Instance::new_building(project, "alice", new, created_at).expect("valid")
}

fn active(project: &str, name: &str, seconds_after_start: i64) -> Instance {
    Instance {
        status: InstanceStatus::Active,
        power_state: PowerState::On,
        ..instance(project, name, seconds_after_start)
    }
}

/// `instance` one revision later, locked.
fn locked(instance: &Instance, locked_by: LockedBy, reason: Option<&str>) -> Instance {
    let now = ember_runtime::time::now();
    Instance {
        revision: instance.revision + 1,
        updated_at: now,
        maintenance_lock: Some(MaintenanceLock {
            locked_by,
            user_id: "ops".to_owned(),
            locked_at: now,
            reason: reason.map(str::to_owned),
            expires_at: Some(now + chrono::Duration::hours(1)),
        }),
        ..instance.clone()
    }
}

fn outcome(task: InstanceTask, succeeded: bool) -> TaskOutcome {
    let (status, power_state) = if succeeded {
        task.succeeded()
    } else {
        task.failed()
    };
    TaskOutcome {
        task,
        status,
        power_state,
        status_reason: if succeeded {
            String::new()
        } else {
            "simulated failure".to_owned()
        },
        at: ember_runtime::time::now(),
    }
}

async fn read(store: &SqlInstanceStore, instance: &Instance) -> Instance {
    store
        .get_instance(instance.uuid)
        .await
        .expect("read")
        .expect("exists")
}

async fn an_instance_reads_back_as_written(database: &TestDatabase) {
    let store = store(database).await;
    let web = instance("project-a", "web-1", 0);
    store.insert_instance(&web).await.expect("inserted");
    assert_eq!(read(&store, &web).await, web);
    let locked_web = locked(&web, LockedBy::Admin, Some("maintenance"));
    assert!(store.lock_instance(&locked_web).await.expect("locked"));
    assert_eq!(read(&store, &web).await, locked_web);
    assert!(
        store
            .get_instance(uuid::Uuid::now_v7())
            .await
            .expect("read")
            .is_none()
    );
}

async fn a_change_decided_on_a_stale_revision_is_not_written(database: &TestDatabase) {
    let store = store(database).await;
    let web = active("project-a", "web-1", 0);
    store.insert_instance(&web).await.expect("inserted");
    let owner_lock = locked(&web, LockedBy::Owner, None);
    assert!(store.lock_instance(&owner_lock).await.expect("written"));
    // A second change decided on the same (now stale) revision loses.
    let mut renamed = web.clone();
    renamed.revision += 1;
    renamed.name = "web-renamed".to_owned();
    assert!(
        !store
            .update_instance_details(&renamed)
            .await
            .expect("refused")
    );
    let mut deleting = web.clone();
    deleting.revision += 1;
    deleting.status = InstanceStatus::Deleting;
    assert!(!store.start_instance_task(&deleting).await.expect("refused"));
    assert_eq!(read(&store, &web).await, owner_lock);

    let mut unlocked = owner_lock.clone();
    unlocked.revision += 1;
    unlocked.maintenance_lock = None;
    assert!(store.unlock_instance(&unlocked).await.expect("written"));
    assert_eq!(read(&store, &web).await, unlocked);
}

async fn details_are_updated_in_place(database: &TestDatabase) {
    let store = store(database).await;
    let web = active("project-a", "web-1", 0);
    store.insert_instance(&web).await.expect("inserted");
    let mut renamed = web.clone();
    renamed.revision += 1;
    renamed.name = "web-2".to_owned();
    renamed.metadata = BTreeMap::from([("tier".to_owned(), "front".to_owned())]);
    assert!(
        store
            .update_instance_details(&renamed)
            .await
            .expect("written")
    );
    assert_eq!(read(&store, &web).await, renamed);
}

async fn a_driver_outcome_lands_only_while_its_task_is_in_progress(database: &TestDatabase) {
    let store = store(database).await;
    let web = instance("project-a", "web-1", 0);
    store.insert_instance(&web).await.expect("inserted");
    // A lock in between changes the revision but not the task.
    let locked_web = locked(&web, LockedBy::Owner, None);
    assert!(store.lock_instance(&locked_web).await.expect("locked"));
    assert!(
        store
            .finish_instance_task(&web, &outcome(InstanceTask::Build, true))
            .await
            .expect("written")
    );
    let built = read(&store, &web).await;
    assert_eq!(
        (built.status, built.power_state),
        (InstanceStatus::Active, PowerState::On)
    );
    assert_eq!(built.revision, locked_web.revision + 1);
    assert!(built.is_locked(), "the outcome leaves the lock alone");
    let events = store
        .list_instance_events(web.uuid, 10)
        .await
        .expect("events");
    let finished = events.last().expect("the outcome's event");
    assert_eq!(
        (finished.kind.as_str(), finished.project_id.as_str()),
        ("build", "project-a"),
        "the outcome's event is the instance's project's"
    );

    // The same outcome again (a resumed task finishing twice) does nothing.
    assert!(
        !store
            .finish_instance_task(&web, &outcome(InstanceTask::Build, true))
            .await
            .expect("refused")
    );
}

async fn a_late_build_result_cannot_undo_a_delete(database: &TestDatabase) {
    let store = store(database).await;
    let web = instance("project-a", "web-1", 0);
    store.insert_instance(&web).await.expect("inserted");
    let mut deleting = web.clone();
    deleting.revision += 1;
    deleting.status = InstanceStatus::Deleting;
    assert!(store.start_instance_task(&deleting).await.expect("written"));
    assert!(
        !store
            .finish_instance_task(&web, &outcome(InstanceTask::Build, true))
            .await
            .expect("refused")
    );
    assert!(
        store
            .finish_instance_task(&web, &outcome(InstanceTask::Delete, true))
            .await
            .expect("written")
    );
    // Deleted: kept as history, but no read returns it any more (404).
    assert_eq!(store.get_instance(web.uuid).await.expect("read"), None);
    // Its uuid is not taken again.
    assert!(
        !store
            .insert_instance_if_absent(&web)
            .await
            .expect("answered")
    );
}

async fn a_failed_task_leaves_the_fault(database: &TestDatabase) {
    let store = store(database).await;
    let web = instance("project-a", "web-1", 0);
    store.insert_instance(&web).await.expect("inserted");
    assert!(
        store
            .finish_instance_task(&web, &outcome(InstanceTask::Build, false))
            .await
            .expect("written")
    );
    let failed = read(&store, &web).await;
    assert_eq!(failed.status, InstanceStatus::Error);
    assert_eq!(failed.status_reason, "simulated failure");
}

async fn listing_filters_by_project_status_lock_and_name(database: &TestDatabase) {
    let store = store(database).await;
    let building = instance("project-a", "web-1", 0);
    let running = active("project-a", "web-2", 1);
    let other_project = active("project-b", "web-1", 2);
    let mut deleted = active("project-a", "old", 3);
    deleted.status = InstanceStatus::Deleted;
    store
        .insert_instances(&[
            building.clone(),
            running.clone(),
            other_project.clone(),
            deleted.clone(),
        ])
        .await
        .expect("inserted");
    let locked_running = locked(&running, LockedBy::Owner, None);
    assert!(store.lock_instance(&locked_running).await.expect("locked"));

    let names = |instances: Vec<Instance>| -> Vec<(String, String)> {
        instances
            .into_iter()
            .map(|instance| (instance.project_id, instance.name))
            .collect()
    };
    let list = |query: InstanceListQuery| {
        let store = &store;
        async move { names(store.list_instances(&query).await.expect("listed")) }
    };
    let project_a = || InstanceListQuery {
        project_id: Some("project-a".to_owned()),
        ..Default::default()
    };
    let pair = |project: &str, name: &str| (project.to_owned(), name.to_owned());

    assert_eq!(
        list(project_a()).await,
        vec![pair("project-a", "web-2"), pair("project-a", "web-1")],
        "newest first, DELETED hidden"
    );
    assert_eq!(
        list(InstanceListQuery {
            status: Some(InstanceStatus::Deleted),
            ..project_a()
        })
        .await,
        Vec::<(String, String)>::new(),
        "a deleted instance is never listed, even asked for by status"
    );
    assert_eq!(
        list(InstanceListQuery {
            status: Some(InstanceStatus::Building),
            ..project_a()
        })
        .await,
        vec![pair("project-a", "web-1")]
    );
    assert_eq!(
        list(InstanceListQuery {
            locked: Some(true),
            ..project_a()
        })
        .await,
        vec![pair("project-a", "web-2")]
    );
    assert_eq!(
        list(InstanceListQuery {
            locked: Some(false),
            ..project_a()
        })
        .await,
        vec![pair("project-a", "web-1")]
    );
    assert_eq!(
        list(InstanceListQuery {
            name: Some("web-1".to_owned()),
            ..project_a()
        })
        .await,
        vec![pair("project-a", "web-1")]
    );
    assert_eq!(
        list(InstanceListQuery {
            name: Some("web-1".to_owned()),
            ..Default::default()
        })
        .await,
        vec![pair("project-b", "web-1"), pair("project-a", "web-1")],
        "no project lists every project"
    );
}

async fn listing_pages_newest_first_with_markers(database: &TestDatabase) {
    let store = store(database).await;
    let instances: Vec<Instance> = (0..5)
        .map(|index| active("project-a", &format!("web-{index}"), index))
        .collect();
    store.insert_instances(&instances).await.expect("inserted");
    let mut seen = Vec::new();
    let mut marker = None;
    loop {
        let page = store
            .list_instances(&InstanceListQuery {
                project_id: Some("project-a".to_owned()),
                limit: 2,
                marker,
                ..Default::default()
            })
            .await
            .expect("listed");
        if page.is_empty() {
            break;
        }
        marker = page.last().map(|instance| instance.uuid);
        seen.extend(page.into_iter().map(|instance| instance.name));
    }
    assert_eq!(seen, ["web-4", "web-3", "web-2", "web-1", "web-0"]);

    let error = store
        .list_instances(&InstanceListQuery {
            project_id: Some("project-b".to_owned()),
            marker: Some(instances[0].uuid),
            ..Default::default()
        })
        .await
        .expect_err("another project's marker");
    assert!(
        matches!(&error, Error::InvalidInput(message) if message.starts_with("marker")),
        "{error:?}"
    );
}

async fn unfinished_tasks_are_found_after_a_restart(database: &TestDatabase) {
    let store = store(database).await;
    let building = instance("project-a", "building", 0);
    let running = active("project-a", "running", 1);
    let mut powering_off = active("project-a", "powering-off", 2);
    powering_off.power_state = PowerState::PoweringOff;
    let mut deleting = active("project-b", "deleting", 3);
    deleting.status = InstanceStatus::Deleting;
    store
        .insert_instances(&[
            building.clone(),
            running.clone(),
            powering_off.clone(),
            deleting.clone(),
        ])
        .await
        .expect("inserted");
    let mut unfinished: Vec<(String, Option<InstanceTask>)> = store
        .list_unfinished_instances()
        .await
        .expect("listed")
        .into_iter()
        .map(|instance| (instance.name.clone(), instance.unfinished_task()))
        .collect();
    unfinished.sort_by(|left, right| left.0.cmp(&right.0));
    assert_eq!(
        unfinished,
        vec![
            ("building".to_owned(), Some(InstanceTask::Build)),
            ("deleting".to_owned(), Some(InstanceTask::Delete)),
            ("powering-off".to_owned(), Some(InstanceTask::PowerOff)),
        ]
    );
}

/// Every project's live instances as the quota reads them (the count the
/// triggers keep) and as a `COUNT(*)` of the rows finds them.
async fn kept_and_counted(
    connection: &sea_orm::DatabaseConnection,
    projects: &[&str],
) -> Vec<(u64, u64)> {
    use ember_engine::store::quotas::{QuotaStore, SqlQuotaStore, Usage};
    use sea_orm::ConnectionTrait;

    let quotas = SqlQuotaStore::new(
        connection.clone(),
        ember_runtime::database::Reader::shared(connection.clone()),
    );
    let backend = connection.get_database_backend();
    let mut both = Vec::new();
    for project in projects {
        let kept = quotas
            .quota_usage(project, Usage::Instances)
            .await
            .expect("usage");
        let row = connection
            .query_one_raw(ember_runtime::database::statement(
                backend,
                "SELECT COUNT(*) AS used FROM instances WHERE project_id = $1 AND status <> 'DELETED'",
                vec![(*project).into()],
            ))
            .await
            .expect("count")
            .expect("a row");
        let counted: i64 = row.try_get("", "used").expect("used");
        both.push((kept, u64::try_from(counted).expect("not negative")));
    }
    both
}

/// The instances quota reads a count the database keeps: it follows every
/// insert, delete, move into or out of DELETED and move of project, by the
/// store's writes or any other statement.
async fn the_kept_instance_count_follows_every_change(database: &TestDatabase) {
    use sea_orm::ConnectionTrait;

    let connection = connect_and_migrate::<Migrator>(&database.url)
        .await
        .expect("migrated");
    let store = SqlInstanceStore::new(connection.clone());
    let projects = ["project-a", "project-b"];
    let check = |step: &'static str, expected: [u64; 2]| {
        let connection = connection.clone();
        async move {
            let both = kept_and_counted(&connection, &projects).await;
            assert_eq!(
                both,
                expected.map(|used| (used, used)).to_vec(),
                "after {step}: (kept, counted) per project"
            );
        }
    };
    check("nothing", [0, 0]).await;
    let web = active("project-a", "web-1", 0);
    store.insert_instance(&web).await.expect("inserted");
    store
        .insert_instances(&[
            active("project-a", "web-2", 1),
            instance("project-a", "web-3", 2),
            instance("project-b", "db-1", 3),
        ])
        .await
        .expect("inserted");
    check("four inserts", [3, 1]).await;
    let run = |sql: String| {
        let connection = connection.clone();
        async move { connection.execute_unprepared(&sql).await.expect(&sql) }
    };
    let by_name = |name: &str| format!("name = '{name}'");
    run(format!(
        "UPDATE instances SET status = 'DELETED' WHERE {}",
        by_name("web-2")
    ))
    .await;
    check("a delete", [2, 1]).await;
    run(format!(
        "UPDATE instances SET status = 'DELETED' WHERE {}",
        by_name("web-2")
    ))
    .await;
    run(format!(
        "UPDATE instances SET status = 'ERROR' WHERE {}",
        by_name("web-3")
    ))
    .await;
    check("changes that keep the count", [2, 1]).await;
    run(format!(
        "UPDATE instances SET project_id = 'project-b' WHERE {}",
        by_name("web-3")
    ))
    .await;
    check("a move of project", [1, 2]).await;
    run(format!(
        "UPDATE instances SET status = 'ACTIVE', project_id = 'project-b' WHERE {}",
        by_name("web-2")
    ))
    .await;
    check("a DELETED row back, in another project", [1, 3]).await;
    run("DELETE FROM instances WHERE project_id = 'project-b'".to_owned()).await;
    check("the rows removed", [1, 0]).await;
    assert_eq!(read(&store, &web).await, web);
}

/// A database with instances from before the kept count gets it counted
/// by the upgrade.
async fn an_upgrade_counts_the_instances_already_there(database: &TestDatabase) {
    use sea_orm_migration::MigratorTrait;

    let connection = ember_runtime::database::connect(&database.url)
        .await
        .expect("connected");
    let before = Migrator::migrations()
        .iter()
        .position(|migration| migration.name() == "m20261211_100001_count_project_instances")
        .expect("the count's migration is listed");
    Migrator::up(&connection, Some(u32::try_from(before).expect("a few")))
        .await
        .expect("old schema");
    let store = SqlInstanceStore::new(connection.clone());
    let gone = Instance {
        status: InstanceStatus::Deleted,
        ..active("project-a", "web-0", 0)
    };
    store
        .insert_instances(&[
            gone,
            active("project-a", "web-1", 1),
            active("project-a", "web-2", 2),
            active("project-b", "db-1", 3),
        ])
        .await
        .expect("inserted");
    Migrator::up(&connection, None).await.expect("upgraded");
    assert_eq!(
        kept_and_counted(&connection, &["project-a", "project-b", "project-c"]).await,
        vec![(2, 2), (1, 1), (0, 0)]
    );
    store
        .insert_instance(&active("project-c", "app-1", 4))
        .await
        .expect("inserted");
    assert_eq!(
        kept_and_counted(&connection, &["project-c"]).await,
        vec![(1, 1)]
    );
}

ember_runtime::store_suite!(
    an_instance_reads_back_as_written,
    the_kept_instance_count_follows_every_change,
    an_upgrade_counts_the_instances_already_there,
    a_change_decided_on_a_stale_revision_is_not_written,
    details_are_updated_in_place,
    a_driver_outcome_lands_only_while_its_task_is_in_progress,
    a_late_build_result_cannot_undo_a_delete,
    a_failed_task_leaves_the_fault,
    listing_filters_by_project_status_lock_and_name,
    listing_pages_newest_first_with_markers,
    unfinished_tasks_are_found_after_a_restart,
);
