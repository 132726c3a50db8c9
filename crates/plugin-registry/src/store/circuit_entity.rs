//! The `plugin_circuits` table: the recent failures and the circuit of each
//! plug-in that failed lately (no row: closed, no failures).

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "plugin_circuits")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub name: String,
    pub consecutive_failures: i64,
    pub opened_at: Option<ChronoDateTimeUtc>,
    pub open_until: Option<ChronoDateTimeUtc>,
    /// A half-open circuit's probe is claimed until then.
    pub probe_until: Option<ChronoDateTimeUtc>,
    pub last_failure: String,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
