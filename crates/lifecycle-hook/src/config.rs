//! The lifecycle-hook's configuration: the `[lifecycle_hook]` section of
//! Ember's configuration file, its defaults and validation, and the
//! [`Config`] the service runs with, resolved from it. The `ember` binary
//! loads the file and hands the section here.
//!
//! ```toml
//! [lifecycle_hook]
//! listen = "0.0.0.0:50053"
//! nats_url = "nats://nats:4222"
//! receivers_stream = "EMBER_RECEIVERS"
//! receivers_subject_prefix = "ember.receivers"
//! receivers_max_age_secs = 604800
//! receivers_max_bytes = 1073741824
//! ```

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use ember_runtime::config::{
    Validate, check_database_url, check_more_than_zero, check_secret_length, check_service_urls,
    database_url_or_sqlite,
};
use serde::{Deserialize, Serialize};

/// `[lifecycle_hook]`: where the service listens and keeps its state, the
/// engine it tells of deadlines, and how it delivers.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LifecycleHookSection {
    pub listen: SocketAddr,
    /// Empty = SQLite at `<data_dir>/lifecycle-hook.db`.
    pub database_url: String,
    /// NATS server for queue targets, and whose subjects
    /// `<receivers_subject_prefix>.<project>.<queue>` feed message
    /// receivers; empty = the embedded queue (receivers by REST only).
    pub nats_url: String,
    /// The JetStream stream (made or updated at start) holding messages
    /// for receivers' queues.
    pub receivers_stream: String,
    /// The subjects of that stream: `<prefix>.<project>.<queue>`.
    pub receivers_subject_prefix: String,
    /// How long the stream keeps a message nobody took.
    pub receivers_max_age_secs: u64,
    /// The most the stream holds; the oldest messages go first.
    pub receivers_max_bytes: u64,
    /// The engine, told when lifecycle deadlines pass.
    pub engine_url: String,
    /// Key of the `X-Ember-Signature` HMAC on webhook deliveries (at least
    /// 32 characters); unset = webhooks are not delivered (`ember dev`
    /// makes one).
    pub webhook_secret: Option<String>,
    /// PEM file of CA certificates trusted for `https://` webhooks besides
    /// the system's; empty = the system's only.
    pub webhook_ca_file: String,
    pub request_timeout_ms: u64,
}

impl Default for LifecycleHookSection {
    fn default() -> Self {
        LifecycleHookSection {
            listen: SocketAddr::from(([127, 0, 0, 1], 50053)),
            database_url: String::new(),
            nats_url: String::new(),
            receivers_stream: "EMBER_RECEIVERS".to_owned(),
            receivers_subject_prefix: "ember.receivers".to_owned(),
            receivers_max_age_secs: 7 * 24 * 3600,
            receivers_max_bytes: 1024 * 1024 * 1024,
            engine_url: "http://127.0.0.1:50052".to_owned(),
            webhook_secret: None,
            webhook_ca_file: String::new(),
            request_timeout_ms: 30_000,
        }
    }
}

impl Validate for LifecycleHookSection {
    fn validate(&self, problems: &mut Vec<String>) {
        check_secret_length(
            "lifecycle_hook.webhook_secret",
            self.webhook_secret.as_deref(),
            problems,
        );
        check_service_urls(
            "lifecycle_hook.engine_url",
            &self.engine_url,
            false,
            problems,
        );
        check_database_url("lifecycle_hook.database_url", &self.database_url, problems);
        if !self.webhook_ca_file.is_empty() && !Path::new(&self.webhook_ca_file).is_file() {
            problems.push(format!(
                "lifecycle_hook.webhook_ca_file: {:?} is not a readable file",
                self.webhook_ca_file
            ));
        }
        if !self.nats_url.is_empty() && !self.nats_url.starts_with("nats://") {
            problems.push(format!(
                "lifecycle_hook.nats_url: {:?} must start with nats://",
                self.nats_url
            ));
        }
        check_more_than_zero(
            "lifecycle_hook.request_timeout_ms",
            self.request_timeout_ms,
            problems,
        );
        self.validate_receivers(problems);
    }
}

/// A byte NATS gives a meaning to in a subject token or a stream name.
fn is_nats_special(byte: u8) -> bool {
    matches!(byte, b'.' | b'*' | b'>' | b'/' | b'\\')
        || byte.is_ascii_whitespace()
        || byte.is_ascii_control()
}

impl LifecycleHookSection {
    fn validate_receivers(&self, problems: &mut Vec<String>) {
        if self.receivers_stream.is_empty() || self.receivers_stream.bytes().any(is_nats_special) {
            problems.push(format!(
                "lifecycle_hook.receivers_stream: {:?} must be a non-empty name without \
                 '.', '*', '>', '/', '\\' or spaces",
                self.receivers_stream
            ));
        }
        let prefix = &self.receivers_subject_prefix;
        if prefix
            .split('.')
            .any(|token| token.is_empty() || token.bytes().any(is_nats_special))
        {
            problems.push(format!(
                "lifecycle_hook.receivers_subject_prefix: {prefix:?} must be dot-separated \
                 non-empty tokens without wildcards or spaces"
            ));
        } else if format!("{prefix}.").starts_with(crate::workers::delivery::NATS_SUBJECT_PREFIX) {
            problems.push(format!(
                "lifecycle_hook.receivers_subject_prefix: {prefix:?} would overlap the \
                 lifecycle messages' subjects ({}>)",
                crate::workers::delivery::NATS_SUBJECT_PREFIX
            ));
        }
        check_more_than_zero(
            "lifecycle_hook.receivers_max_age_secs",
            self.receivers_max_age_secs,
            problems,
        );
        check_more_than_zero(
            "lifecycle_hook.receivers_max_bytes",
            self.receivers_max_bytes,
            problems,
        );
        if i64::try_from(self.receivers_max_bytes).is_err() {
            problems.push("lifecycle_hook.receivers_max_bytes: too large".to_owned());
        }
    }

    /// The service's resolved configuration (validated before): the SQLite
    /// file, when no database URL is set, lives under `data_dir`.
    pub fn resolve(&self, data_dir: &Path, internal_credential: &str) -> Config {
        Config {
            database_url: database_url_or_sqlite(&self.database_url, data_dir, "lifecycle-hook.db"),
            internal_credential: internal_credential.to_owned(),
            request_timeout: Duration::from_millis(self.request_timeout_ms),
            engine_url: self.engine_url.clone(),
            webhook_secret: self.webhook_secret.clone().unwrap_or_default(),
            nats_url: self.nats_url.clone(),
            webhook_ca_file: self.webhook_ca_file.clone(),
            webhook_targets: ember_runtime::egress::EgressRules::default(),
            receivers: ReceiverStreamConfig {
                stream: self.receivers_stream.clone(),
                subject_prefix: self.receivers_subject_prefix.clone(),
                max_age: Duration::from_secs(self.receivers_max_age_secs),
                max_bytes: i64::try_from(self.receivers_max_bytes).unwrap_or(i64::MAX),
            },
            in_process: None,
        }
    }
}

/// What the lifecycle-hook runs with, resolved from [`LifecycleHookSection`].
#[derive(Debug, Clone)]
pub struct Config {
    /// `sqlite://…` or `postgres://…`; migrated at start-up.
    pub database_url: String,
    /// The secret other Ember services present (see `ember_runtime::identity`).
    pub internal_credential: String,
    /// Deadline for one call when the client sets none.
    pub request_timeout: Duration,
    /// Calls from services in the same process (`ember dev`), served
    /// beside the TCP listener.
    pub in_process: Option<ember_runtime::in_process::InProcessListener>,
    /// gRPC URL of the engine, told when a deadline passes; empty = deadlines
    /// are not fired (they wait, durably, until one is configured).
    pub engine_url: String,
    /// Key of the `X-Ember-Signature` HMAC-SHA256 on webhook deliveries;
    /// empty = webhook targets are refused (recorded as delivery failures).
    pub webhook_secret: String,
    /// NATS server for queue targets (JetStream); empty = the embedded queue.
    pub nats_url: String,
    /// PEM file of CA certificates trusted for `https://` webhooks besides
    /// the system's (a private CA); empty = the system's only.
    pub webhook_ca_file: String,
    /// Where webhooks may be delivered (the `[webhook_targets]` section;
    /// the strict default refuses internal and private addresses).
    pub webhook_targets: ember_runtime::egress::EgressRules,
    /// Where message receivers' messages come from when `nats_url` is set.
    pub receivers: ReceiverStreamConfig,
}

/// The JetStream stream feeding message receivers' queues.
#[derive(Debug, Clone)]
pub struct ReceiverStreamConfig {
    /// Stream name.
    pub stream: String,
    /// Its subjects are `<subject_prefix>.<project>.<queue>`.
    pub subject_prefix: String,
    pub max_age: Duration,
    pub max_bytes: i64,
}

impl Default for ReceiverStreamConfig {
    fn default() -> Self {
        let section = LifecycleHookSection::default();
        ReceiverStreamConfig {
            stream: section.receivers_stream,
            subject_prefix: section.receivers_subject_prefix,
            max_age: Duration::from_secs(section.receivers_max_age_secs),
            max_bytes: i64::try_from(section.receivers_max_bytes).unwrap_or(i64::MAX),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lifecycle_hook_keys_are_validated() {
        let mut problems = Vec::new();
        LifecycleHookSection::default().validate(&mut problems);
        assert!(problems.is_empty(), "{problems:?}");
        let section = LifecycleHookSection {
            webhook_secret: Some("short".into()),
            engine_url: "engine:50052".into(),
            nats_url: "http://nats:4222".into(),
            webhook_ca_file: "/nonexistent/ca.pem".into(),
            receivers_stream: "EMBER.RECEIVERS".into(),
            receivers_max_age_secs: 0,
            ..LifecycleHookSection::default()
        };
        section.validate(&mut problems);
        let text = problems.join("\n");
        for key in [
            "lifecycle_hook.webhook_secret: must be at least 32",
            "lifecycle_hook.engine_url",
            "lifecycle_hook.nats_url",
            "lifecycle_hook.webhook_ca_file: \"/nonexistent/ca.pem\" is not a readable file",
            "lifecycle_hook.receivers_stream: \"EMBER.RECEIVERS\" must be",
            "lifecycle_hook.receivers_max_age_secs",
        ] {
            assert!(text.contains(key), "{key} in {text}");
        }
    }

    #[test]
    fn receiver_subject_prefixes_are_checked() {
        for (prefix, expected) in [
            ("ember.*", "must be dot-separated"),
            ("ember..receivers", "must be dot-separated"),
            ("", "must be dot-separated"),
            ("ember.lifecycle", "would overlap"),
            ("ember.lifecycle.more", "would overlap"),
        ] {
            let mut problems = Vec::new();
            LifecycleHookSection {
                receivers_subject_prefix: prefix.into(),
                ..LifecycleHookSection::default()
            }
            .validate(&mut problems);
            let text = problems.join("\n");
            assert!(
                text.contains("lifecycle_hook.receivers_subject_prefix") && text.contains(expected),
                "{prefix:?}: {text}"
            );
        }
        let mut problems = Vec::new();
        LifecycleHookSection {
            receivers_subject_prefix: "ember.lifecycles".into(),
            ..LifecycleHookSection::default()
        }
        .validate(&mut problems);
        assert!(problems.is_empty(), "{problems:?}");
    }
}
