//! Upgrades: today's Ember started on the data an earlier release left
//! (`tests/upgrade/<release>/`, made by `tests/upgrade/make-fixture.sh`
//! with that release's binary: stacks — one locked, one with a snapshot —
//! an instance, a cluster with a node waiting on its lifecycle hook, a
//! receiver, a software config and deployment, a user and a quota)
//! migrates it and goes on as if nothing happened: stacks update and
//! delete, the lock is still a lock, the hook whose deadline passed while
//! Ember was down fires, the cluster scales, the identity and quotas are
//! as they were.

mod support;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use support::{Dev, fail, field, succeed};

fn fixtures() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/upgrade");
    let mut found: Vec<PathBuf> = std::fs::read_dir(&root)
        .expect("tests/upgrade")
        .filter_map(|entry| Some(entry.ok()?.path()))
        .filter(|path| path.join("engine.db").is_file())
        .collect();
    found.sort();
    found
}

/// Polls `done` for up to `within`.
fn eventually(what: &str, within: Duration, done: impl Fn() -> bool) {
    let deadline = Instant::now() + within;
    while !done() {
        assert!(Instant::now() < deadline, "{what}: not within {within:?}");
        std::thread::park_timeout(Duration::from_millis(200));
    }
}

#[test]
fn an_earlier_releases_data_works_after_the_upgrade() {
    let fixtures = fixtures();
    assert!(!fixtures.is_empty(), "no fixture under tests/upgrade");
    for fixture in fixtures {
        let release = std::fs::read_to_string(fixture.join("RELEASE")).unwrap_or_default();
        eprintln!("upgrading from {}: {}", fixture.display(), release.trim());
        let data = tempfile::tempdir().expect("tempdir");
        let dir = data.path();
        for entry in std::fs::read_dir(&fixture).expect("fixture") {
            let path = entry.expect("entry").path();
            std::fs::copy(&path, dir.join(path.file_name().expect("name"))).expect("copy");
        }
        let _dev = Dev::start(dir);

        // Stacks: read, updated, deleted.
        let web = succeed(&["stack", "show", "web"], dir);
        assert_eq!(field(&web, "status"), "SNAPSHOT_COMPLETE", "{web}");
        succeed(
            &[
                "stack",
                "update",
                "web",
                "--existing",
                "-P",
                "greeting=bonjour",
                "--wait",
            ],
            dir,
        );
        let note = succeed(&["stack", "outputs", "web", "note"], dir);
        assert!(note.contains("bonjour"), "{note}");
        // The lock held through the upgrade.
        let locked = fail(&["stack", "delete", "locked"], dir);
        assert!(locked.contains("locked"), "{locked}");
        succeed(&["stack", "unlock", "locked", "--wait"], dir);
        succeed(&["stack", "delete", "locked", "--wait"], dir);
        succeed(&["stack", "delete", "web", "--wait"], dir);

        // The hook whose deadline passed while Ember was down fires: the
        // waiting node goes.
        eventually(
            "the expired hook's node to go",
            Duration::from_secs(60),
            || field(&succeed(&["cluster", "show", "pool"], dir), "nodes") == "1",
        );
        let scaled = succeed(
            &[
                "cluster",
                "scale-out",
                "pool",
                "--count",
                "2",
                "--wait",
                "--wait-timeout",
                "60",
            ],
            dir,
        );
        assert_eq!(field(&scaled, "desired capacity"), "3", "{scaled}");
        let receivers = succeed(&["receiver", "list"], dir);
        assert!(receivers.contains("grow"), "{receivers}");

        // The instance, the identity and the quotas.
        succeed(&["instance", "delete", "loose", "--wait"], dir);
        let users = succeed(&["identity", "user", "list", "-f", "json"], dir);
        let users: serde_json::Value = serde_json::from_str(&users).expect("json");
        let carol = users
            .as_array()
            .and_then(|users| users.iter().find(|user| user["name"] == "carol"))
            .unwrap_or_else(|| panic!("carol: {users}"));
        assert_eq!(carol["locked"], false, "{carol}");
        assert_eq!(carol["failed_logins"], 0, "{carol}");
        let quota = succeed(&["quota", "show", "-f", "json"], dir);
        assert!(
            quota.contains("\"stacks\"") && quota.contains("40"),
            "{quota}"
        );
        succeed(
            &["cluster", "policy-detach", "pool", "drain", "--wait"],
            dir,
        );
        succeed(
            &[
                "cluster",
                "delete",
                "pool",
                "--wait",
                "--wait-timeout",
                "60",
            ],
            dir,
        );
    }
}
