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
    }

    #[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
    pub enum Relation {}

    impl ActiveModelBehavior for ActiveModel {}
}
