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
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
