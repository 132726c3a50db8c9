//! `ember instance …` as an operator runs it, against a real `ember dev`:
//! create and wait for the simulated build, list and show, lock against a
//! member's delete, act as an admin through the lock, the owner/admin
//! unlock rule, power and delete with `--wait`, and a failed build making
//! `--wait` exit non-zero with the fault.

mod support;

use support::{Dev, fail, field, succeed};

#[test]
fn instances_through_the_cli() {
    let data_dir = tempfile::tempdir().expect("tempdir");
    let dir = data_dir.path();
    let _dev = Dev::start(dir);

    let created = succeed(
        &[
            "instance",
            "create",
            "web-1",
            "--flavor",
            "m1.small",
            "--image",
            "debian-12",
            "--meta",
            "role=web",
            "--wait",
        ],
        dir,
    );
    assert_eq!(field(&created, "status"), "ACTIVE", "{created}");
    assert_eq!(field(&created, "power"), "on", "{created}");
    assert_eq!(field(&created, "metadata"), "role=web", "{created}");

    let listed = succeed(&["instance", "list"], dir);
    assert!(listed.starts_with("UUID"), "{listed}");
    let row = listed
        .lines()
        .find(|line| line.contains("web-1"))
        .unwrap_or_else(|| panic!("web-1 missing: {listed}"));
    assert!(row.contains("ACTIVE") && row.contains(" on "), "{row}");

    // A member's lock stops the member's delete, naming the lock.
    let locked = succeed(
        &["instance", "lock", "web-1", "--reason", "db migration"],
        dir,
    );
    assert!(locked.contains("locked (by owner)"), "{locked}");
    let refused = fail(&["instance", "delete", "web-1"], dir);
    assert!(
        refused.contains("conflict: instance \"web-1\" is locked (by owner \"demo\" at ")
            && refused.contains(": db migration): unlock it first"),
        "{refused}"
    );
    let shown = succeed(&["instance", "show", "web-1"], dir);
    assert_eq!(field(&shown, "locked"), "owner");
    assert_eq!(field(&shown, "lock reason"), "db migration");

    // An admin acts through the lock.
    let stopped = succeed(
        &[
            "instance", "power", "web-1", "off", "--wait", "--as", "admin",
        ],
        dir,
    );
    assert_eq!(field(&stopped, "status"), "STOPPED", "{stopped}");
    assert_eq!(field(&stopped, "locked"), "owner", "the lock stays");
    succeed(&["instance", "unlock", "web-1"], dir);

    // An admin of another project locks as admin: the owner cannot unlock.
    let ops_token = succeed(
        &[
            "token",
            "issue",
            "--user",
            "ops",
            "--project",
            "operations",
            "--role",
            "admin",
        ],
        dir,
    );
    let ops_token = ops_token.trim();
    let uuid = field(&shown, "uuid");
    let locked = succeed(
        &[
            "instance",
            "lock",
            &uuid,
            "--reason",
            "rack move",
            "--token",
            ops_token,
        ],
        dir,
    );
    assert!(locked.contains("locked (by admin)"), "{locked}");
    let refused = fail(&["instance", "unlock", "web-1"], dir);
    assert!(
        refused.contains("forbidden: instance \"web-1\" is locked (by admin \"ops\"")
            && refused.contains("only an admin can unlock it"),
        "{refused}"
    );
    succeed(&["instance", "unlock", "web-1", "--as", "admin"], dir);
    let refused = fail(&["instance", "unlock", "web-1"], dir);
    assert!(
        refused.contains("conflict: instance \"web-1\" is not locked"),
        "{refused}"
    );

    let filtered = succeed(&["instance", "list", "--locked", "true"], dir);
    assert!(!filtered.contains("web-1"), "{filtered}");
    succeed(&["instance", "power", "web-1", "on", "--wait"], dir);
    let deleted = succeed(&["instance", "delete", "web-1", "--wait"], dir);
    assert!(
        deleted.contains("\"web-1\"") && deleted.contains("deleted"),
        "{deleted}"
    );
    let gone = fail(&["instance", "show", "web-1"], dir);
    assert!(
        gone.contains("not found: no instance named \"web-1\""),
        "{gone}"
    );

    // A failed build makes --wait fail with the fault.
    let failed = fail(
        &[
            "instance",
            "create",
            "doomed",
            "--flavor",
            "m1.small",
            "--image",
            "debian-12",
            "--meta",
            "ember:simulate_failure=build",
            "--wait",
        ],
        dir,
    );
    assert!(
        failed.contains("instance doomed is ERROR: build failed: simulated build failure"),
        "{failed}"
    );
    let bad = fail(
        &[
            "instance", "create", "x", "--flavor", "f", "--image", "i", "--meta", "novalue",
        ],
        dir,
    );
    assert!(bad.contains("--meta \"novalue\": write KEY=VALUE"), "{bad}");
}
