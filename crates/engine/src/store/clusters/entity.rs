//! The clustering tables as sea-orm entities (private to the store).

macro_rules! no_relations {
    () => {
        #[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
        pub enum Relation {}

        impl ActiveModelBehavior for ActiveModel {}
    };
}

pub mod profile {
    use sea_orm::entity::prelude::*;

    #[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
    #[sea_orm(table_name = "cluster_profiles")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub id: Uuid,
        pub name: String,
        pub type_name: String,
        pub spec: Json,
        pub metadata: Json,
        pub protected: bool,
        pub project_id: String,
        pub user_id: String,
        pub created_at: ChronoDateTimeUtc,
        pub updated_at: Option<ChronoDateTimeUtc>,
    }
    no_relations!();
}

pub mod policy {
    use sea_orm::entity::prelude::*;

    #[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
    #[sea_orm(table_name = "cluster_policies")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub id: Uuid,
        pub name: String,
        pub type_name: String,
        pub spec: Json,
        pub project_id: String,
        pub user_id: String,
        pub created_at: ChronoDateTimeUtc,
        pub updated_at: Option<ChronoDateTimeUtc>,
    }
    no_relations!();
}

pub mod binding {
    use sea_orm::entity::prelude::*;

    #[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
    #[sea_orm(table_name = "cluster_policy_bindings")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub cluster_id: Uuid,
        #[sea_orm(primary_key, auto_increment = false)]
        pub policy_id: Uuid,
        pub priority: i32,
        pub enabled: bool,
    }
    no_relations!();
}

pub mod cluster {
    use sea_orm::entity::prelude::*;

    #[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
    #[sea_orm(table_name = "clusters")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub id: Uuid,
        pub name: String,
        pub profile_id: Uuid,
        pub min_size: i32,
        pub max_size: i32,
        pub desired_capacity: i32,
        pub status: String,
        pub status_reason: String,
        pub metadata: Json,
        pub next_index: i32,
        pub timeout: Option<i32>,
        /// Senlin's cluster `config` (a JSON object).
        pub config: Json,
        pub project_id: String,
        pub user_id: String,
        pub created_at: ChronoDateTimeUtc,
        pub updated_at: ChronoDateTimeUtc,
        /// The action holding the cluster's lock, if any.
        pub lock_action_id: Option<Uuid>,
        /// The maintenance lock ([`crate::domain::cluster::ClusterLock`])
        /// as JSON text: a change is made only where the text is what the
        /// writer read.
        pub maintenance_lock: Option<String>,
        /// The maintenance lock's expiry, for the sweep.
        pub lock_expires_at: Option<ChronoDateTimeUtc>,
    }
    no_relations!();
}

pub mod node {
    use sea_orm::entity::prelude::*;

    #[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
    #[sea_orm(table_name = "cluster_nodes")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub id: Uuid,
        pub name: String,
        pub cluster_id: Option<Uuid>,
        pub profile_id: Uuid,
        pub node_index: i32,
        pub role: String,
        pub status: String,
        pub status_reason: String,
        pub physical_id: Option<String>,
        pub tainted: bool,
        pub protected: bool,
        pub metadata: Json,
        pub project_id: String,
        pub user_id: String,
        pub created_at: ChronoDateTimeUtc,
        pub updated_at: ChronoDateTimeUtc,
    }
    no_relations!();
}

pub mod action {
    use sea_orm::entity::prelude::*;

    #[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
    #[sea_orm(table_name = "cluster_actions")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub id: Uuid,
        pub name: String,
        pub kind: String,
        pub target_id: Uuid,
        pub cluster_id: Option<Uuid>,
        pub status: String,
        pub status_reason: String,
        pub inputs: Json,
        pub outputs: Json,
        pub depends_on: Json,
        pub depended_by: Json,
        pub owner: Option<Uuid>,
        pub lease_expires_at: Option<ChronoDateTimeUtc>,
        pub lifecycle_outcome: Option<String>,
        pub lifecycle_detail: String,
        pub hook_recorded: bool,
        pub project_id: String,
        pub user_id: String,
        pub roles: String,
        /// The fencing token: incremented by each claim.
        pub attempt: i32,
        /// Whether running it needs the cluster's lock.
        pub takes_cluster_lock: bool,
        pub created_at: ChronoDateTimeUtc,
        pub updated_at: ChronoDateTimeUtc,
        pub started_at: Option<ChronoDateTimeUtc>,
    }
    no_relations!();
}

pub mod event {
    use sea_orm::entity::prelude::*;

    #[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
    #[sea_orm(table_name = "cluster_events")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub id: Uuid,
        pub generated_at: ChronoDateTimeUtc,
        pub obj_id: String,
        pub obj_type: String,
        pub obj_name: String,
        pub cluster_id: Option<Uuid>,
        pub action: String,
        pub status: String,
        pub status_reason: String,
        pub level: String,
        pub project_id: String,
        pub user_id: String,
    }
    no_relations!();
}
