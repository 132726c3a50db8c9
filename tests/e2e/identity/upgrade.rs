//! The built-in identity upgraded from the schema of the release before
//! Keystone's account lockout (the gateway's first migration only, as
//! that release left it): users made then log in after the upgrade, start
//! with no wrong passwords, and lock out like anyone. SQLite and
//! PostgreSQL.

use ember_api_gateway::identity::migrations::Migrator;
use ember_api_gateway::identity::{Directory, Reference, password};
use ember_runtime::database::{connect, statement, testing::TestDatabase};
use sea_orm::ConnectionTrait;
use sea_orm_migration::MigratorTrait;
use tokio_util::sync::CancellationToken;

async fn users_of_the_earlier_schema_log_in_after_the_upgrade(database: &TestDatabase) {
    let earlier = connect(&database.url).await.expect("connects");
    Migrator::up(&earlier, Some(1))
        .await
        .expect("the earlier release's schema");
    let backend = earlier.get_database_backend();
    let now = chrono::Utc::now();
    let hash = password::hash("an earlier long password").expect("hash");
    for (sql, values) in [
        (
            "INSERT INTO identity_projects (id, name, description, created_at) VALUES ($1, $2, $3, $4)",
            vec!["p1".into(), "web".into(), "".into(), now.into()],
        ),
        (
            "INSERT INTO identity_users (id, name, password_hash, default_project_id, created_at) VALUES ($1, $2, $3, $4, $5)",
            vec![
                "u1".into(),
                "dora".into(),
                hash.into(),
                "p1".into(),
                now.into(),
            ],
        ),
        (
            "INSERT INTO identity_role_assignments (user_id, project_id, role) VALUES ($1, $2, $3)",
            vec!["u1".into(), "p1".into(), "member".into()],
        ),
    ] {
        earlier
            .execute_raw(statement(backend, sql, values))
            .await
            .expect("an earlier row");
    }
    earlier.close().await.expect("closed");

    let shutdown = CancellationToken::new();
    let directory = Directory::open(&database.url, shutdown.clone())
        .await
        .expect("migrated to today's schema");
    let dora = Reference::Name {
        name: "dora".into(),
        domain: None,
    };
    let login = directory
        .password_login(&dora, "an earlier long password", None)
        .await
        .expect("logs in");
    assert_eq!(login.project.name, "web");
    assert_eq!(login.roles, vec!["member".to_owned()]);
    assert_eq!(login.user.failed_auth_count, 0);
    for _ in 0..directory.lockout().attempts {
        assert!(
            directory
                .password_login(&dora, "wrong", None)
                .await
                .is_err()
        );
    }
    let locked = directory
        .password_login(&dora, "an earlier long password", None)
        .await
        .expect_err("locked out");
    assert!(locked.to_string().contains("locked out"), "{locked}");
    shutdown.cancel();
}

ember_runtime::store_suite!(users_of_the_earlier_schema_log_in_after_the_upgrade);
