//! Table definitions (sea-orm entities).

pub mod stacks {
    use sea_orm::entity::prelude::*;

    #[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
    #[sea_orm(table_name = "stacks")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub id: Uuid,
        pub name: String,
        pub project_id: String,
        pub user_id: String,
        pub parent_id: Option<Uuid>,
        pub action: String,
        pub status: String,
        pub status_reason: String,
        pub description: String,
        /// JSON array of strings.
        pub tags: Json,
        pub timeout_mins: Option<i32>,
        pub disable_rollback: bool,
        pub created_at: ChronoDateTimeUtc,
        pub updated_at: ChronoDateTimeUtc,
        pub template: Json,
        pub environment: Json,
        pub files: Json,
        pub parameters: Json,
        pub nested_depth: i32,
        pub parent_resource: Option<String>,
        pub deleted_at: Option<ChronoDateTimeUtc>,
        pub lock_level: Option<String>,
        pub locked_by_user: Option<String>,
        pub locked_by_admin: Option<bool>,
        pub locked_at: Option<ChronoDateTimeUtc>,
        pub lock_reason: Option<String>,
        /// Moves on each time the stack is given a definition.
        pub definition_version: i64,
        /// When the maintenance lock expires (the engine unlocks the stack
        /// then).
        pub lock_expires_at: Option<ChronoDateTimeUtc>,
    }

    #[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
    pub enum Relation {}

    impl ActiveModelBehavior for ActiveModel {}
}

pub mod resources {
    use sea_orm::entity::prelude::*;

    #[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
    #[sea_orm(table_name = "resources")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub id: Uuid,
        pub stack_id: Uuid,
        pub name: String,
        pub type_name: String,
        pub physical_id: Option<String>,
        pub action: String,
        pub status: String,
        pub status_reason: String,
        pub properties: Json,
        pub attributes: Json,
        pub metadata: Json,
        pub data: Json,
        pub created_at: ChronoDateTimeUtc,
        pub updated_at: ChronoDateTimeUtc,
    }

    #[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
    pub enum Relation {}

    impl ActiveModelBehavior for ActiveModel {}
}

pub mod events {
    use sea_orm::entity::prelude::*;

    #[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
    #[sea_orm(table_name = "events")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub id: Uuid,
        pub stack_id: Uuid,
        pub resource_name: String,
        pub physical_resource_id: String,
        pub resource_type: String,
        pub action: String,
        pub status: String,
        pub reason: String,
        pub created_at: ChronoDateTimeUtc,
    }

    #[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
    pub enum Relation {}

    impl ActiveModelBehavior for ActiveModel {}
}

/// The definition a running update (or its rollback) moves away from.
pub mod stack_update_origins {
    use sea_orm::entity::prelude::*;

    #[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
    #[sea_orm(table_name = "stack_update_origins")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub stack_id: Uuid,
        pub template: Json,
        pub environment: Json,
        pub files: Json,
        pub parameters: Json,
        pub recorded_at: ChronoDateTimeUtc,
    }

    #[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
    pub enum Relation {}

    impl ActiveModelBehavior for ActiveModel {}
}

pub mod stack_leases {
    use sea_orm::entity::prelude::*;

    #[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
    #[sea_orm(table_name = "stack_leases")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub stack_id: Uuid,
        pub engine_id: Uuid,
        pub operation: String,
        pub expires_at: ChronoDateTimeUtc,
        /// The fencing token: bumped by every take.
        pub generation: i64,
        /// The take's own token, when it gave one (see
        /// [`LeaseFence::holder`](crate::store::LeaseFence::holder)).
        pub holder: Option<Uuid>,
        /// The generation a delete on another engine asked to stop (see
        /// [`crate::store::StackStore::request_stack_stop`]).
        pub stop_generation: Option<i64>,
        /// What it asked ([`crate::store::StopRequest::label`]).
        pub stop_kind: Option<String>,
    }

    #[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
    pub enum Relation {}

    impl ActiveModelBehavior for ActiveModel {}
}
