//! The `instances` and `instance_events` tables (sea-orm entities).

pub mod instances {
    use sea_orm::entity::prelude::*;

    #[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
    #[sea_orm(table_name = "instances")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub uuid: Uuid,
        pub name: String,
        pub project_id: String,
        pub user_id: String,
        pub flavor: String,
        pub image: String,
        /// JSON object of strings.
        pub metadata: Json,
        pub status: String,
        pub power_state: String,
        pub locked: bool,
        /// `owner` or `admin` while locked.
        pub locked_by: Option<String>,
        pub locked_by_user: Option<String>,
        pub locked_at: Option<ChronoDateTimeUtc>,
        pub locked_reason: Option<String>,
        /// When the maintenance lock expires (the sweep lifts it).
        pub lock_expires_at: Option<ChronoDateTimeUtc>,
        pub status_reason: String,
        /// User data; NULL = none.
        pub user_data: Option<String>,
        /// JSON array of strings; NULL = no command.
        pub command: Option<Json>,
        /// JSON object of strings; NULL = no variables.
        pub env: Option<Json>,
        /// JSON object (`domain::instance::placement::Placement`); NULL =
        /// nothing placed.
        pub placement: Option<Json>,
        /// JSON object (`domain::delegation::Delegation`); NULL = none.
        pub delegation: Option<Json>,
        pub revision: i64,
        pub created_at: ChronoDateTimeUtc,
        pub updated_at: ChronoDateTimeUtc,
    }

    #[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
    pub enum Relation {}

    impl ActiveModelBehavior for ActiveModel {}
}

pub mod instance_events {
    use sea_orm::entity::prelude::*;

    #[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
    #[sea_orm(table_name = "instance_events")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub id: Uuid,
        pub instance_uuid: Uuid,
        pub project_id: String,
        pub kind: String,
        pub status: String,
        pub power_state: String,
        pub reason: String,
        pub at: ChronoDateTimeUtc,
    }

    #[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
    pub enum Relation {}

    impl ActiveModelBehavior for ActiveModel {}
}
