//! The `plugins` table.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "plugins")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub name: String,
    pub endpoint: String,
    pub ordinal: i32,
    /// JSON array of operation names; empty = all.
    pub operations: Json,
    /// JSON array of project ids; empty = all.
    pub project_ids: Json,
    pub failure_mode: String,
    pub timeout_ms: i64,
    pub enabled: bool,
    pub enforce: bool,
    pub breaker_failures: i32,
    pub breaker_cooldown_ms: i64,
    pub created_at: ChronoDateTimeUtc,
    pub updated_at: ChronoDateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
