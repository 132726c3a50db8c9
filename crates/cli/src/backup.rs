//! `ember admin backup` and `ember admin restore` for the embedded
//! deployment (`ember dev`, `ember serve` on SQLite): the four services'
//! databases and the data directory's secrets, copied while Ember runs.
//!
//! Each database is copied with SQLite's `VACUUM INTO`, a consistent
//! snapshot of that file taken online (writers go on meanwhile). The four
//! are copied one after another, engine first: a gateway or hook record a
//! moment newer than the engine's is harmless (Ember's services already
//! tolerate each other's lag), and every engine record is whole. A
//! restore goes into a directory holding no databases yet — never over a
//! deployment that may be running — and Ember is then started on it.
//! PostgreSQL deployments use `pg_dump` / `pg_restore` (see the docs).

use std::path::Path;

use sea_orm::{ConnectionTrait, Database};
use serde_json::json;

/// The databases of the embedded deployment, engine first.
pub const DATABASES: &[&str] = &[
    "engine.db",
    "gateway.db",
    "lifecycle-hook.db",
    "plugin-registry.db",
];

/// The data directory's other files a deployment needs back: its secrets
/// (tokens and delegations are signed with them) and what clients read.
const FILES: &[&str] = &[
    "dev-secrets.json",
    "dev-identity.json",
    "dev-credentials.json",
    "clouds.yaml",
];

/// What a backup names itself by.
const MANIFEST: &str = "ember-backup.json";

/// What a backup or restore copied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Copied {
    pub databases: Vec<String>,
    pub files: Vec<String>,
}

fn quoted_path(path: &Path) -> Result<String, String> {
    let text = path
        .to_str()
        .ok_or_else(|| format!("{}: the path is not UTF-8", path.display()))?;
    Ok(text.replace('\'', "''"))
}

/// Copies the databases and secrets of `data_dir` into `to` (made if
/// missing; it must hold no backup yet).
pub async fn backup(data_dir: &Path, to: &Path) -> Result<Copied, String> {
    if !data_dir.join("engine.db").is_file() {
        return Err(format!(
            "{}: no engine.db here: give the data directory of an embedded deployment (--data-dir); a PostgreSQL deployment is backed up with pg_dump",
            data_dir.display()
        ));
    }
    if to.join(MANIFEST).exists() || DATABASES.iter().any(|name| to.join(name).exists()) {
        return Err(format!(
            "{}: a backup is there already: give an empty or new directory",
            to.display()
        ));
    }
    std::fs::create_dir_all(to).map_err(|error| format!("{}: {error}", to.display()))?;
    let to = to
        .canonicalize()
        .map_err(|error| format!("{}: {error}", to.display()))?;
    let mut copied = Copied {
        databases: Vec::new(),
        files: Vec::new(),
    };
    for name in DATABASES {
        let source = data_dir.join(name);
        if !source.is_file() {
            continue;
        }
        let url = format!("sqlite://{}?mode=ro", source.display());
        let connection = Database::connect(&url)
            .await
            .map_err(|error| format!("{}: {error}", source.display()))?;
        connection
            .execute_unprepared(&format!("VACUUM INTO '{}'", quoted_path(&to.join(name))?))
            .await
            .map_err(|error| format!("{}: cannot copy: {error}", source.display()))?;
        connection
            .close()
            .await
            .map_err(|error| format!("{}: {error}", source.display()))?;
        owner_only(&to.join(name))?;
        copied.databases.push((*name).to_owned());
    }
    for name in FILES {
        let source = data_dir.join(name);
        if source.is_file() {
            copy_private(&source, &to.join(name))?;
            copied.files.push((*name).to_owned());
        }
    }
    let manifest = json!({
        "ember_version": env!("CARGO_PKG_VERSION"),
        "created_at": ember_runtime::time::now().to_rfc3339(),
        "databases": copied.databases,
        "files": copied.files,
    });
    write_private(&to.join(MANIFEST), manifest.to_string())?;
    Ok(copied)
}

/// Puts the backup in `from` into `data_dir`, which must hold no
/// databases (made if missing).
pub fn restore(from: &Path, data_dir: &Path) -> Result<Copied, String> {
    let manifest = std::fs::read_to_string(from.join(MANIFEST)).map_err(|error| {
        format!(
            "{}: not an Ember backup ({MANIFEST}: {error})",
            from.display()
        )
    })?;
    let manifest: serde_json::Value = serde_json::from_str(&manifest)
        .map_err(|error| format!("{}: {error}", from.join(MANIFEST).display()))?;
    let listed = |key: &str| -> Vec<String> {
        manifest[key]
            .as_array()
            .map(|names| {
                names
                    .iter()
                    .filter_map(|name| name.as_str())
                    .filter(|name| DATABASES.contains(name) || FILES.contains(name))
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default()
    };
    let copied = Copied {
        databases: listed("databases"),
        files: listed("files"),
    };
    if !copied.databases.iter().any(|name| name == "engine.db") {
        return Err(format!("{}: the backup has no engine.db", from.display()));
    }
    if let Some(present) = DATABASES.iter().find(|name| data_dir.join(name).exists()) {
        return Err(format!(
            "{}: it holds a deployment already ({present}): restore into an empty or new directory, never over one that may be running",
            data_dir.display()
        ));
    }
    std::fs::create_dir_all(data_dir)
        .map_err(|error| format!("{}: {error}", data_dir.display()))?;
    for name in copied.databases.iter().chain(&copied.files) {
        copy_private(&from.join(name), &data_dir.join(name))?;
    }
    Ok(copied)
}

fn copy_private(from: &Path, to: &Path) -> Result<(), String> {
    let bytes = std::fs::read(from).map_err(|error| format!("{}: {error}", from.display()))?;
    write_private(to, &bytes)
}

/// Makes a file only its owner's (backups hold secrets).
fn owner_only(path: &Path) -> Result<(), String> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
            .map_err(|error| format!("{}: {error}", path.display()))?;
    }
    #[cfg(not(unix))]
    let _ = path;
    Ok(())
}

/// Writes a file only its owner can read (backups hold secrets).
fn write_private(path: &Path, contents: impl AsRef<[u8]>) -> Result<(), String> {
    use std::io::Write;
    #[cfg(unix)]
    use std::os::unix::fs::OpenOptionsExt;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    options.mode(0o600);
    let mut file = options
        .open(path)
        .map_err(|error| format!("{}: {error}", path.display()))?;
    file.write_all(contents.as_ref())
        .map_err(|error| format!("{}: {error}", path.display()))
}
