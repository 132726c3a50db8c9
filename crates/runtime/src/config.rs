//! Layered, typed configuration: defaults → TOML file → `EMBER_*` environment
//! variables (`__` separates nesting, e.g. `EMBER_GATEWAY__LISTEN`) → flags.
//! After loading, the value is validated and every problem is reported at
//! once, naming the key, so a person can fix a file in one pass.

use std::path::Path;

use figment::Figment;
use figment::providers::{Env, Format, Serialized, Toml};
use serde::{Deserialize, Serialize, de::DeserializeOwned};

/// Environment variables with this prefix configure Ember.
pub const ENV_PREFIX: &str = "EMBER_";

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("configuration file {path}: {reason}")]
    File { path: String, reason: String },
    #[error("configuration: {0}")]
    Parse(String),
    #[error("configuration is invalid:\n  - {}", .0.join("\n  - "))]
    Invalid(Vec<String>),
}

/// A configuration that can check itself after loading. Push one message per
/// problem, naming the key (`gateway.listen: …`).
pub trait Validate {
    fn validate(&self, problems: &mut Vec<String>);
}

/// Loads `T` from its defaults, an optional TOML file, the environment, and
/// finally `overrides` (command-line flags, serialized; unset flags must be
/// skipped when serializing so they do not clobber earlier layers).
pub fn load<T>(file: Option<&Path>, overrides: &impl Serialize) -> Result<T, ConfigError>
where
    T: Default + Serialize + DeserializeOwned + Validate,
{
    let mut figment = Figment::from(Serialized::defaults(T::default()));
    if let Some(path) = file {
        if !path.is_file() {
            return Err(ConfigError::File {
                path: path.display().to_string(),
                reason: "no such file".to_owned(),
            });
        }
        figment = figment.merge(Toml::file_exact(path));
    }
    let sections = top_level_keys(&T::default());
    let config: T = figment
        .merge(
            Env::prefixed(ENV_PREFIX)
                .split("__")
                // Only variables naming a configuration key configure Ember:
                // others share the prefix for other purposes (EMBER_URL and
                // EMBER_TOKEN for the client commands, EMBER_TEST_* for the
                // test suite, EMBER_CONFIG naming the file). A misspelt key
                // *inside* a section is still an error naming it.
                .filter(move |key| {
                    let key = key.as_str().to_ascii_lowercase();
                    let first = key.split('.').next().unwrap_or_default();
                    sections.iter().any(|section| section == first)
                }),
        )
        .merge(Serialized::defaults(overrides))
        .extract()
        .map_err(|error| ConfigError::Parse(describe_figment_error(error)))?;
    let mut problems = Vec::new();
    config.validate(&mut problems);
    if problems.is_empty() {
        Ok(config)
    } else {
        Err(ConfigError::Invalid(problems))
    }
}

/// The top-level keys of a configuration tree, from its defaults.
fn top_level_keys<T: Serialize>(defaults: &T) -> Vec<String> {
    match figment::value::Value::serialize(defaults) {
        Ok(figment::value::Value::Dict(_, dict)) => dict.into_keys().collect(),
        _ => Vec::new(),
    }
}

fn describe_figment_error(error: figment::Error) -> String {
    error
        .into_iter()
        .map(|error| {
            let key = error.path.join(".");
            let source = error
                .metadata
                .as_ref()
                .map(|metadata| format!(" (from {})", metadata.name))
                .unwrap_or_default();
            if key.is_empty() {
                format!("{}{source}", error.kind)
            } else {
                format!("{key}: {}{source}", error.kind)
            }
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// The minimum length of secrets, so a typo'd or toy key is refused.
pub const MIN_SECRET_LENGTH: usize = 32;

/// Reports a secret that is set but shorter than [`MIN_SECRET_LENGTH`].
pub fn check_secret_length(key: &str, secret: Option<&str>, problems: &mut Vec<String>) {
    if let Some(secret) = secret
        && secret.len() < MIN_SECRET_LENGTH
    {
        problems.push(format!(
            "{key}: must be at least {MIN_SECRET_LENGTH} characters (got {})",
            secret.len()
        ));
    }
}

/// Reports a URL that is neither empty nor `http://` or `https://`.
pub fn check_optional_http_url(key: &str, url: &str, problems: &mut Vec<String>) {
    if !(url.is_empty() || is_http_url(url)) {
        problems.push(format!(
            "{key}: {url:?} must be an http:// or https:// URL (or empty)"
        ));
    }
}

/// Reports a peer service's address that is not one `http://` or
/// `https://` URL or several separated by commas (replicas on several
/// hosts, see [`crate::channel`]), or is empty where `required`.
pub fn check_service_urls(key: &str, urls: &str, required: bool, problems: &mut Vec<String>) {
    if urls.is_empty() {
        if required {
            problems.push(format!("{key}: must be an http:// or https:// URL"));
        }
        return;
    }
    for url in urls.split(',').map(str::trim) {
        if !is_http_url(url) {
            problems.push(format!(
                "{key}: {url:?} must be an http:// or https:// URL (several are separated by commas)"
            ));
        }
    }
}

fn is_http_url(url: &str) -> bool {
    url.starts_with("http://") || url.starts_with("https://")
}

/// Reports a database URL that is neither empty (SQLite under the data
/// directory) nor `sqlite://` or `postgres://`; the password is redacted.
pub fn check_database_url(key: &str, url: &str, problems: &mut Vec<String>) {
    if !url.is_empty() && crate::database::Backend::of(url).is_none() {
        problems.push(format!(
            "{key}: {:?} is not a sqlite:// or postgres:// URL",
            crate::database::redact(url)
        ));
    }
}

/// Reports a duration, count or timeout of 0 where 0 would stall the service.
pub fn check_more_than_zero(key: &str, value: u64, problems: &mut Vec<String>) {
    if value == 0 {
        problems.push(format!("{key}: must be more than 0"));
    }
}

/// A service's database: the configured URL, or when it is empty a SQLite
/// file named `file_name` under the data directory.
pub fn database_url_or_sqlite(configured: &str, data_dir: &Path, file_name: &str) -> String {
    if configured.is_empty() {
        crate::database::sqlite_url(&data_dir.join(file_name))
    } else {
        configured.to_owned()
    }
}

/// How logs are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LogConfig {
    pub format: LogFormat,
    /// A `tracing` filter such as `info` or `info,ember_engine=debug`;
    /// `RUST_LOG` wins when set.
    pub filter: String,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            format: LogFormat::Text,
            filter: "info".to_owned(),
        }
    }
}

impl Validate for LogConfig {
    fn validate(&self, problems: &mut Vec<String>) {
        if let Err(error) = tracing_subscriber::EnvFilter::try_new(&self.filter) {
            problems.push(format!("log.filter: {error}"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Default, Serialize, Deserialize)]
    #[serde(default, deny_unknown_fields)]
    struct Sample {
        port: u16,
        name: String,
        log: LogConfig,
    }

    impl Validate for Sample {
        fn validate(&self, problems: &mut Vec<String>) {
            if self.port == 0 {
                problems.push("port: must not be 0".to_owned());
            }
            self.log.validate(problems);
        }
    }

    #[derive(Serialize)]
    struct Flags {
        #[serde(skip_serializing_if = "Option::is_none")]
        name: Option<String>,
    }

    #[test]
    fn later_layers_win_and_unset_flags_do_not_clobber() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("ember.toml");
        std::fs::write(&file, "port = 7\nname = \"from-file\"\n").expect("write");
        let loaded: Sample = load(Some(&file), &Flags { name: None }).expect("loads");
        assert_eq!((loaded.port, loaded.name.as_str()), (7, "from-file"));
        let loaded: Sample = load(
            Some(&file),
            &Flags {
                name: Some("flag".into()),
            },
        )
        .expect("loads");
        assert_eq!(loaded.name, "flag");
    }

    #[test]
    fn every_problem_is_reported_with_its_key() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("ember.toml");
        std::fs::write(&file, "port = 0\n[log]\nfilter = \"=[\"\n").expect("write");
        let error = load::<Sample>(Some(&file), &Flags { name: None }).expect_err("invalid");
        let message = error.to_string();
        assert!(message.contains("port: must not be 0"), "{message}");
        assert!(message.contains("log.filter"), "{message}");
    }

    #[test]
    fn unknown_keys_and_wrong_types_name_the_key() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("ember.toml");
        std::fs::write(&file, "port = \"many\"\n").expect("write");
        let message = load::<Sample>(Some(&file), &Flags { name: None })
            .expect_err("invalid")
            .to_string();
        assert!(message.contains("port"), "{message}");
        std::fs::write(&file, "prot = 5\n").expect("write");
        let message = load::<Sample>(Some(&file), &Flags { name: None })
            .expect_err("invalid")
            .to_string();
        assert!(message.contains("prot"), "{message}");
    }

    #[test]
    // figment's Jail dictates the closure's error type.
    #[allow(clippy::result_large_err)]
    fn environment_variables_that_are_not_keys_are_left_alone() {
        figment::Jail::expect_with(|jail| {
            jail.set_env("EMBER_URL", "http://127.0.0.1:1");
            jail.set_env("EMBER_TOKEN", "abc");
            jail.set_env("EMBER_NAME", "from-env");
            jail.set_env("EMBER_PORT", "7");
            let loaded: Sample = load(None, &Flags { name: None }).expect("loads");
            assert_eq!(loaded.name, "from-env");
            jail.set_env("EMBER_LOG__FILTRE", "debug");
            let message = load::<Sample>(None, &Flags { name: None })
                .expect_err("a misspelt key inside a section")
                .to_string();
            assert!(message.contains("filtre"), "{message}");
            Ok(())
        });
    }

    #[test]
    fn a_missing_file_is_an_error_not_a_default() {
        let message = load::<Sample>(
            Some(Path::new("/nonexistent/ember.toml")),
            &Flags { name: None },
        )
        .expect_err("missing")
        .to_string();
        assert!(message.contains("no such file"), "{message}");
    }
}
