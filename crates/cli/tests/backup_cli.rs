//! `ember admin backup` and `restore` as an operator runs them: a backup
//! of a running `ember dev` holds what was there when it was taken (a
//! stack, a user), restored into a new directory it is a working Ember
//! again; what came after the backup is not in it; and a backup or restore
//! that would overwrite something is refused, saying what.

mod support;

use support::{Dev, fail, field, succeed};

#[test]
fn a_backup_of_a_running_ember_restores_into_a_working_one() {
    let root = tempfile::tempdir().expect("tempdir");
    let (live, backup, restored) = (
        root.path().join("live"),
        root.path().join("backup"),
        root.path().join("restored"),
    );
    std::fs::create_dir_all(&live).expect("dir");
    let template = root.path().join("none.yaml");
    std::fs::write(
        &template,
        "heat_template_version: 2021-04-16\nresources:\n  n: {type: OS::Heat::None}\n",
    )
    .expect("template");
    let template = template.to_str().expect("utf-8");
    {
        let _dev = Dev::start(&live);
        succeed(
            &["stack", "create", "kept", "-t", template, "--wait"],
            &live,
        );
        succeed(
            &[
                "identity",
                "user",
                "create",
                "alice",
                "--password",
                "a long password",
            ],
            &live,
        );
        let done = succeed(
            &["admin", "backup", "--to", backup.to_str().expect("utf-8")],
            &live,
        );
        assert!(done.contains("engine.db, gateway.db"), "{done}");
        assert!(done.contains("dev-secrets.json"), "{done}");
        // After the backup: not in it.
        succeed(
            &["stack", "create", "later", "-t", template, "--wait"],
            &live,
        );
        let again = fail(
            &["admin", "backup", "--to", backup.to_str().expect("utf-8")],
            &live,
        );
        assert!(again.contains("a backup is there already"), "{again}");
        let over = fail(
            &[
                "admin",
                "restore",
                "--from",
                backup.to_str().expect("utf-8"),
            ],
            &live,
        );
        assert!(
            over.contains("it holds a deployment already (engine.db)"),
            "{over}"
        );
    }
    let not_a_backup = fail(
        &["admin", "restore", "--from", live.to_str().expect("utf-8")],
        &restored,
    );
    assert!(
        not_a_backup.contains("not an Ember backup"),
        "{not_a_backup}"
    );
    let no_deployment = fail(
        &[
            "admin",
            "backup",
            "--to",
            root.path().join("other").to_str().expect("utf-8"),
        ],
        &restored,
    );
    assert!(
        no_deployment.contains("no engine.db here"),
        "{no_deployment}"
    );

    let done = succeed(
        &[
            "admin",
            "restore",
            "--from",
            backup.to_str().expect("utf-8"),
        ],
        &restored,
    );
    assert!(done.contains("start Ember on it"), "{done}");
    let _dev = Dev::start(&restored);
    let kept = succeed(&["stack", "show", "kept"], &restored);
    assert_eq!(field(&kept, "status"), "CREATE_COMPLETE", "{kept}");
    let later = fail(&["stack", "show", "later"], &restored);
    assert!(later.contains("not found"), "{later}");
    let users = succeed(&["identity", "user", "list"], &restored);
    assert!(users.contains("alice"), "{users}");
    // It works on: a new stack is made and deleted.
    succeed(
        &["stack", "create", "after", "-t", template, "--wait"],
        &restored,
    );
    succeed(&["stack", "delete", "kept", "--wait"], &restored);
}
