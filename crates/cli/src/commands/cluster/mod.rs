//! `ember cluster …`: profiles, policies and clusters through the gateway's
//! `ProfileService`, `PolicyService` and `ClusterService`. Clusters,
//! profiles and policies are named by name or id. Operations that change a
//! cluster are actions the engine runs later; `--wait` polls the action
//! until it ends and fails when it does not succeed.
//!
//! This file holds the command line and sends each command to its room:
//! `specs` (profile-create, policy-create), `clusters` (list, show,
//! delete), `changes` (every change started as an action), `actions`
//! (action list, show, and the wait); `display` and `progress` say how
//! clusters and a wait look.

use std::path::PathBuf;

use ember_proto::engine::v1 as pb;

mod actions;
mod changes;
mod clusters;
mod display;
mod progress;
mod specs;

use self::actions::ActionCommand;
pub use self::actions::wait_for_action;
use self::changes::ClusterChange;
use crate::client::ConnectArgs;
use crate::commands::output::OutputArgs;
pub use crate::commands::wait::WaitArgs;
use crate::error::CliError;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum AdjustmentType {
    ExactCapacity,
    ChangeInCapacity,
    ChangeInPercentage,
}

impl AdjustmentType {
    fn api_name(self) -> &'static str {
        match self {
            AdjustmentType::ExactCapacity => "EXACT_CAPACITY",
            AdjustmentType::ChangeInCapacity => "CHANGE_IN_CAPACITY",
            AdjustmentType::ChangeInPercentage => "CHANGE_IN_PERCENTAGE",
        }
    }
}

#[derive(Debug, clap::Subcommand)]
pub enum ClusterCommand {
    /// Create a profile (what a node is) from a YAML or JSON spec file
    ProfileCreate {
        name: String,
        /// `{type: ember.instance, version: "1.0", properties: {…}}`
        #[arg(long, value_name = "FILE")]
        spec: PathBuf,
        /// Nodes made from this profile start protected from scale-in
        #[arg(long)]
        protected: bool,
    },
    /// Create a policy (deletion, scaling) from a YAML or JSON spec file
    PolicyCreate {
        name: String,
        /// `{type: senlin.policy.deletion, version: "1.1", properties: {…}}`
        #[arg(long, value_name = "FILE")]
        spec: PathBuf,
    },
    /// Create a cluster of --desired nodes of a profile
    Create {
        name: String,
        /// Profile name or id
        #[arg(long)]
        profile: String,
        #[arg(long, default_value_t = 0)]
        desired: i32,
        #[arg(long, default_value_t = 0)]
        min: i32,
        /// -1 = unlimited
        #[arg(long, default_value_t = -1, allow_negative_numbers = true)]
        max: i32,
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// Delete a cluster and its nodes
    Delete {
        cluster: String,
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// List your project's clusters
    List {
        /// Only clusters with exactly this name
        #[arg(long)]
        name: Option<String>,
        /// At most this many
        #[arg(long, default_value_t = 100)]
        limit: u32,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Show one cluster with its nodes and policies
    Show {
        cluster: String,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Remove nodes (the deletion policy and its hooks apply)
    ScaleIn {
        cluster: String,
        /// How many [default: the scaling policy's adjustment, else 1]
        #[arg(long)]
        count: Option<u32>,
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// Add nodes
    ScaleOut {
        cluster: String,
        /// How many [default: the scaling policy's adjustment, else 1]
        #[arg(long)]
        count: Option<u32>,
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// Change the capacity and/or the size limits
    Resize {
        cluster: String,
        /// How --number changes the desired capacity
        #[arg(long, value_enum, requires = "number")]
        adjustment_type: Option<AdjustmentType>,
        /// The new capacity, or the change in nodes or percent
        #[arg(long, allow_negative_numbers = true, requires = "adjustment_type")]
        number: Option<f64>,
        /// New minimum size
        #[arg(long)]
        min_size: Option<i32>,
        /// New maximum size (-1 = unlimited)
        #[arg(long, allow_negative_numbers = true)]
        max_size: Option<i32>,
        /// For change-in-percentage: the smallest step
        #[arg(long, default_value_t = 0)]
        min_step: i32,
        /// Refuse a size outside min/max instead of clamping into them
        #[arg(long)]
        strict: bool,
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// Remove the named nodes (the deletion policy and its hooks apply)
    DelNodes {
        cluster: String,
        /// Node names or ids
        #[arg(required = true)]
        nodes: Vec<String>,
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// The actions the engine runs for clusters: list, show
    #[command(subcommand)]
    Action(ActionCommand),
    /// Attach a policy to a cluster
    PolicyAttach {
        cluster: String,
        /// Policy name or id
        policy: String,
        #[arg(long, default_value_t = 0)]
        priority: i32,
        /// Attach it disabled
        #[arg(long)]
        disabled: bool,
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// Check every node's physical resource: ACTIVE, or ERROR with why
    Check {
        cluster: String,
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// Lock a cluster for maintenance: nothing changes its size, members
    /// or policies (users, receivers, recover) until it is unlocked or the
    /// lock expires; locking again changes or renews the lock
    Lock {
        cluster: String,
        /// clusters (Ember's operations on it) or all (also each member's instance)
        #[arg(long, default_value = "clusters")]
        level: String,
        /// Why, shown to whoever the lock stops (1-255 characters)
        #[arg(long)]
        reason: Option<String>,
        /// Lift the lock after this long: 90s, 30m, 4h, 2d
        #[arg(long, value_parser = crate::commands::parse_seconds)]
        expires_in: Option<i64>,
    },
    /// Lift a cluster's lock (an admin's only as an admin)
    Unlock { cluster: String },
    /// Would OPERATION be accepted now? Every blocker at once (lock,
    /// state, role, quota, cooldown) and the actions it would queue behind;
    /// exits non-zero when not: scale_out, scale_in, resize, update, delete,
    /// check, recover, lock, unlock, attach_policy, detach_policy,
    /// update_policy, replace_nodes, operation
    Allowed {
        cluster: String,
        operation: String,
        /// For scale_out and scale_in: how many (default: the policy's step)
        #[arg(long, default_value_t = 0)]
        count: u32,
    },
    /// Recreate the cluster's nodes in ERROR
    Recover {
        cluster: String,
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// Detach a policy from a cluster (then `ember policy delete` may delete it)
    PolicyDetach {
        cluster: String,
        /// Policy name or id
        policy: String,
        #[command(flatten)]
        wait: WaitArgs,
    },
}

pub async fn run(command: ClusterCommand, connect: &ConnectArgs) -> Result<(), CliError> {
    // Every command but these few starts a change the engine runs as an
    // action, and all of those end the same way.
    let (change, wait) = match command {
        ClusterCommand::ProfileCreate {
            name,
            spec,
            protected,
        } => {
            return specs::create_profile(connect, name, &spec, protected).await;
        }
        ClusterCommand::PolicyCreate { name, spec } => {
            return specs::create_policy(connect, name, &spec).await;
        }
        ClusterCommand::Create {
            name,
            profile,
            desired,
            min,
            max,
            wait,
        } => {
            let request = pb::CreateClusterRequest {
                name,
                profile,
                min_size: min,
                max_size: max,
                desired_capacity: desired,
                metadata: String::new(),
                timeout: None,
                config: String::new(),
            };
            (ClusterChange::Create(request), wait)
        }
        ClusterCommand::Delete { cluster, wait } => {
            return clusters::delete(&cluster, &wait, connect).await;
        }
        ClusterCommand::List {
            name,
            limit,
            output,
        } => return clusters::list(name, limit, &output, connect).await,
        ClusterCommand::Show { cluster, output } => {
            return clusters::show(&cluster, &output, connect).await;
        }
        ClusterCommand::Action(command) => return actions::run(command, connect).await,
        ClusterCommand::Lock {
            cluster,
            level,
            reason,
            expires_in,
        } => {
            let request = pb::LockClusterRequest {
                cluster,
                level,
                reason: reason.unwrap_or_default(),
                expires_in,
                expires_at: None,
            };
            return clusters::lock(request, connect).await;
        }
        ClusterCommand::Unlock { cluster } => return clusters::unlock(&cluster, connect).await,
        ClusterCommand::Allowed {
            cluster,
            operation,
            count,
        } => {
            let client =
                crate::client::Client::connect(connect, crate::client::DevIdentity::Member).await?;
            let answer =
                ember_proto::engine::v1::cluster_service_client::ClusterServiceClient::new(
                    client.channel.clone(),
                )
                .check_cluster_operation(client.request(pb::CheckClusterOperationRequest {
                    cluster: cluster.clone(),
                    operation: operation.clone(),
                    count,
                })?)
                .await?
                .into_inner();
            for action in &answer.queued_behind {
                println!(
                    "queued behind {} {} on {} ({})",
                    action.action, action.id, action.target, action.status
                );
            }
            for action in &answer.pending_lifecycle_actions {
                println!(
                    "waiting for a lifecycle hook: {} of node {}",
                    action.action, action.target
                );
            }
            return crate::commands::print_allowed(
                &format!("cluster {cluster}"),
                &operation,
                &answer.blockers,
                answer.break_glass_would_pass,
            );
        }
        ClusterCommand::ScaleIn {
            cluster,
            count,
            wait,
        } => (ClusterChange::ScaleIn(scale_request(cluster, count)), wait),
        ClusterCommand::ScaleOut {
            cluster,
            count,
            wait,
        } => (ClusterChange::ScaleOut(scale_request(cluster, count)), wait),
        ClusterCommand::Resize {
            cluster,
            adjustment_type,
            number,
            min_size,
            max_size,
            min_step,
            strict,
            wait,
        } => {
            if adjustment_type.is_none() && min_size.is_none() && max_size.is_none() {
                return Err(CliError::Usage(
                    "nothing to resize: give --adjustment-type with --number, --min-size or --max-size"
                        .to_owned(),
                ));
            }
            let request = pb::ResizeRequest {
                cluster,
                adjustment_type: adjustment_type
                    .map(|kind| kind.api_name().to_owned())
                    .unwrap_or_default(),
                number: number.unwrap_or(0.0),
                min_size,
                max_size,
                min_step,
                strict,
            };
            (ClusterChange::Resize(request), wait)
        }
        ClusterCommand::DelNodes {
            cluster,
            nodes,
            wait,
        } => (
            ClusterChange::DelNodes(pb::NodesRequest {
                cluster,
                nodes,
                destroy_after_deletion: None,
            }),
            wait,
        ),
        ClusterCommand::PolicyAttach {
            cluster,
            policy,
            priority,
            disabled,
            wait,
        } => {
            let request = pb::AttachPolicyRequest {
                cluster,
                policy,
                priority,
                enabled: disabled.then_some(false),
            };
            (ClusterChange::AttachPolicy(request), wait)
        }
        ClusterCommand::Check { cluster, wait } => (
            ClusterChange::Check(pb::GetObjectRequest { id: cluster }),
            wait,
        ),
        ClusterCommand::Recover { cluster, wait } => (
            ClusterChange::Recover(pb::GetObjectRequest { id: cluster }),
            wait,
        ),
        ClusterCommand::PolicyDetach {
            cluster,
            policy,
            wait,
        } => (
            ClusterChange::DetachPolicy(pb::DetachPolicyRequest { cluster, policy }),
            wait,
        ),
    };
    changes::start(change, &wait, connect).await
}

/// Scale in or out by `count` nodes; none given (0) lets the engine take
/// the scaling policy's adjustment, else 1.
fn scale_request(cluster: String, count: Option<u32>) -> pb::ScaleRequest {
    pb::ScaleRequest {
        cluster,
        count: count.unwrap_or(0),
    }
}
