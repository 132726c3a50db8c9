//! The `pending_lifecycle_actions` table.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "pending_lifecycle_actions")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub token: Uuid,
    pub node_id: Uuid,
    pub resource_id: String,
    pub cluster_id: Uuid,
    pub project_id: String,
    pub target_type: String,
    pub target_address: String,
    pub deadline: ChronoDateTimeUtc,
    pub delivery_state: String,
    pub delivery_attempts: i32,
    pub last_error: Option<String>,
    pub delivered_at: Option<ChronoDateTimeUtc>,
    pub created_at: ChronoDateTimeUtc,
    pub timeout_secs: i32,
    pub resolution: Option<String>,
    pub resolved_at: Option<ChronoDateTimeUtc>,
    pub resolved_by: Option<String>,
    pub next_attempt_at: Option<ChronoDateTimeUtc>,
    pub fire_claimed_until: Option<ChronoDateTimeUtc>,
    /// `launching` or `terminating`.
    pub transition_type: String,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}

/// The embedded queue (used when no NATS server is configured).
pub mod queue_message {
    use sea_orm::entity::prelude::*;

    #[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
    #[sea_orm(table_name = "lifecycle_queue_messages")]
    pub struct Model {
        #[sea_orm(primary_key)]
        pub id: i64,
        /// The project the queue belongs to (its lifecycle action's).
        pub project_id: String,
        pub queue: String,
        pub token: Uuid,
        pub body: String,
        pub created_at: ChronoDateTimeUtc,
    }

    #[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
    pub enum Relation {}

    impl ActiveModelBehavior for ActiveModel {}
}

/// What happened to lifecycle actions.
pub mod hook_event {
    use sea_orm::entity::prelude::*;

    #[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
    #[sea_orm(table_name = "lifecycle_hook_events")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub id: Uuid,
        pub token: Uuid,
        pub cluster_id: Uuid,
        pub node_id: Uuid,
        pub project_id: String,
        pub kind: String,
        pub detail: String,
        pub created_at: ChronoDateTimeUtc,
    }

    #[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
    pub enum Relation {}

    impl ActiveModelBehavior for ActiveModel {}
}
