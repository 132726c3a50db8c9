//! What the lifecycle-hook needs to run, fully resolved by the caller (the `ember`
//! binary layers files, environment and flags into it).

use std::time::Duration;

#[derive(Debug, Clone)]
pub struct Config {
    /// `sqlite://…` or `postgres://…`; migrated at start-up.
    pub database_url: String,
    /// The secret other Ember services present (see `ember_runtime::identity`).
    pub internal_credential: String,
    /// Deadline for one call when the client sets none.
    pub request_timeout: Duration,
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
}
