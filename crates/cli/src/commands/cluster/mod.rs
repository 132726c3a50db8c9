//! `ember cluster …`: profiles, policies and clusters through the gateway's
//! `ProfileService`, `PolicyService` and `ClusterService`. Clusters,
//! profiles and policies are named by name or id. Operations that change a
//! cluster are actions the engine runs later; `--wait` polls the action
//! until it ends and fails when it does not succeed.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ember_proto::engine::v1 as pb;
use ember_proto::engine::v1::action_service_client::ActionServiceClient;
use ember_proto::engine::v1::cluster_service_client::ClusterServiceClient;
use ember_proto::engine::v1::node_service_client::NodeServiceClient;
use ember_proto::engine::v1::policy_service_client::PolicyServiceClient;
use ember_proto::engine::v1::profile_service_client::ProfileServiceClient;
use tonic::transport::Channel;

mod display;
mod progress;

use self::display::{action_record, action_row, cluster_record, cluster_row, print_cluster};
use crate::client::{Client, ConnectArgs, DevIdentity, describe};
use crate::commands::output::OutputArgs;
pub use crate::commands::wait::WaitArgs;

const POLL_INTERVAL: Duration = Duration::from_millis(200);

/// Action statuses after which nothing more happens.
const FINAL_ACTION_STATUSES: [&str; 3] = ["SUCCEEDED", "FAILED", "CANCELLED"];

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

#[derive(Debug, clap::Subcommand)]
pub enum ActionCommand {
    /// Your project's cluster actions, newest first
    List {
        /// Only this cluster's (name or id)
        #[arg(long)]
        cluster: Option<String>,
        /// Only actions in this status (READY, RUNNING, WAITING, SUCCEEDED, FAILED, …)
        #[arg(long)]
        status: Option<String>,
        /// At most this many
        #[arg(long, default_value_t = 100)]
        limit: u32,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// One action: what it does, its status and why
    Show {
        action: String,
        #[command(flatten)]
        output: OutputArgs,
    },
}

pub async fn run(command: ClusterCommand, connect: &ConnectArgs) -> Result<(), String> {
    match command {
        ClusterCommand::ProfileCreate { name, spec } => {
            let spec = read_spec(&spec)?;
            let client = Client::connect(connect, DevIdentity::Member).await?;
            let profile = ProfileServiceClient::new(client.channel.clone())
                .create_profile(client.request(pb::CreateProfileRequest {
                    name,
                    spec,
                    metadata: String::new(),
                })?)
                .await
                .map_err(describe)?
                .into_inner();
            println!(
                "profile {} created ({}, id {})",
                profile.name, profile.r#type, profile.id
            );
            Ok(())
        }
        ClusterCommand::PolicyCreate { name, spec } => {
            let spec = read_spec(&spec)?;
            let client = Client::connect(connect, DevIdentity::Member).await?;
            let policy = PolicyServiceClient::new(client.channel.clone())
                .create_policy(client.request(pb::CreatePolicyRequest { name, spec })?)
                .await
                .map_err(describe)?
                .into_inner();
            println!(
                "policy {} created ({}, id {})",
                policy.name, policy.r#type, policy.id
            );
            Ok(())
        }
        ClusterCommand::Create {
            name,
            profile,
            desired,
            min,
            max,
            wait,
        } => {
            let client = Client::connect(connect, DevIdentity::Member).await?;
            let request = pb::CreateClusterRequest {
                name,
                profile,
                min_size: min,
                max_size: max,
                desired_capacity: desired,
                metadata: String::new(),
            };
            let response = service(&client)
                .create_cluster(client.request(request)?)
                .await
                .map_err(describe)?
                .into_inner();
            finish(&client, response, &wait).await
        }
        ClusterCommand::Delete { cluster, wait } => {
            let client = Client::connect(connect, DevIdentity::Member).await?;
            let response = service(&client)
                .delete_cluster(client.request(pb::GetObjectRequest {
                    id: cluster.clone(),
                })?)
                .await
                .map_err(describe)?
                .into_inner();
            if !wait.wait {
                print_accepted(&cluster, &response.action_id);
                return Ok(());
            }
            match wait_for_action(&client, &response.action_id, &wait).await {
                Ok(_) => {
                    println!("cluster {cluster} deleted");
                    Ok(())
                }
                Err(failed) => {
                    // Show what is left of it, then say how the action ended.
                    if let Ok(current) = get(&client, &cluster).await {
                        print_changed(&current, &response.action_id)?;
                    }
                    Err(failed)
                }
            }
        }
        ClusterCommand::List {
            name,
            limit,
            output,
        } => {
            let client = Client::connect(connect, DevIdentity::Member).await?;
            let response = service(&client)
                .list_clusters(client.request(pb::ListObjectsRequest {
                    limit,
                    marker: String::new(),
                    name: name.unwrap_or_default(),
                })?)
                .await
                .map_err(describe)?
                .into_inner();
            output.print_list(&response.clusters, cluster_row)
        }
        ClusterCommand::Show { cluster, output } => {
            let client = Client::connect(connect, DevIdentity::Member).await?;
            let cluster = get(&client, &cluster).await?;
            let nodes = NodeServiceClient::new(client.channel.clone())
                .list_nodes(client.request(pb::ListNodesRequest {
                    cluster: cluster.id.clone(),
                    limit: 1000,
                    marker: String::new(),
                })?)
                .await
                .map_err(describe)?
                .into_inner()
                .nodes;
            let policies = service(&client)
                .list_cluster_policies(client.request(pb::GetObjectRequest {
                    id: cluster.id.clone(),
                })?)
                .await
                .map_err(describe)?
                .into_inner()
                .policies;
            print_cluster(&output, &cluster, &nodes, &policies)
        }
        ClusterCommand::Action(command) => {
            let client = Client::connect(connect, DevIdentity::Member).await?;
            let mut actions = ActionServiceClient::new(client.channel.clone());
            match command {
                ActionCommand::List {
                    cluster,
                    status,
                    limit,
                    output,
                } => {
                    let listed = actions
                        .list_actions(client.request(pb::ListActionsRequest {
                            cluster: cluster.unwrap_or_default(),
                            status: status.unwrap_or_default().to_ascii_uppercase(),
                            limit,
                            marker: String::new(),
                        })?)
                        .await
                        .map_err(describe)?
                        .into_inner()
                        .actions;
                    output.print_list(&listed, action_row)
                }
                ActionCommand::Show { action, output } => {
                    let action = actions
                        .get_action(client.request(pb::GetObjectRequest { id: action })?)
                        .await
                        .map_err(describe)?
                        .into_inner();
                    output.print_record(&action_record(&action))
                }
            }
        }
        ClusterCommand::ScaleIn {
            cluster,
            count,
            wait,
        } => {
            let client = Client::connect(connect, DevIdentity::Member).await?;
            let request = pb::ScaleRequest {
                cluster,
                count: count.unwrap_or(0),
            };
            let response = service(&client)
                .scale_in(client.request(request)?)
                .await
                .map_err(describe)?
                .into_inner();
            finish(&client, response, &wait).await
        }
        ClusterCommand::ScaleOut {
            cluster,
            count,
            wait,
        } => {
            let client = Client::connect(connect, DevIdentity::Member).await?;
            let request = pb::ScaleRequest {
                cluster,
                count: count.unwrap_or(0),
            };
            let response = service(&client)
                .scale_out(client.request(request)?)
                .await
                .map_err(describe)?
                .into_inner();
            finish(&client, response, &wait).await
        }
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
                return Err(
                    "nothing to resize: give --adjustment-type with --number, --min-size or --max-size"
                        .to_owned(),
                );
            }
            let client = Client::connect(connect, DevIdentity::Member).await?;
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
            let response = service(&client)
                .resize(client.request(request)?)
                .await
                .map_err(describe)?
                .into_inner();
            finish(&client, response, &wait).await
        }
        ClusterCommand::DelNodes {
            cluster,
            nodes,
            wait,
        } => {
            let client = Client::connect(connect, DevIdentity::Member).await?;
            let response = service(&client)
                .del_nodes(client.request(pb::NodesRequest { cluster, nodes })?)
                .await
                .map_err(describe)?
                .into_inner();
            finish(&client, response, &wait).await
        }
        ClusterCommand::PolicyAttach {
            cluster,
            policy,
            priority,
            disabled,
            wait,
        } => {
            let client = Client::connect(connect, DevIdentity::Member).await?;
            let request = pb::AttachPolicyRequest {
                cluster,
                policy,
                priority,
                enabled: disabled.then_some(false),
            };
            let response = service(&client)
                .attach_policy(client.request(request)?)
                .await
                .map_err(describe)?
                .into_inner();
            finish(&client, response, &wait).await
        }
        ClusterCommand::Check { cluster, wait } => {
            let client = Client::connect(connect, DevIdentity::Member).await?;
            let response = service(&client)
                .check(client.request(pb::GetObjectRequest { id: cluster })?)
                .await
                .map_err(describe)?
                .into_inner();
            finish(&client, response, &wait).await
        }
        ClusterCommand::Recover { cluster, wait } => {
            let client = Client::connect(connect, DevIdentity::Member).await?;
            let response = service(&client)
                .recover(client.request(pb::GetObjectRequest { id: cluster })?)
                .await
                .map_err(describe)?
                .into_inner();
            finish(&client, response, &wait).await
        }
        ClusterCommand::PolicyDetach {
            cluster,
            policy,
            wait,
        } => {
            let client = Client::connect(connect, DevIdentity::Member).await?;
            let response = service(&client)
                .detach_policy(client.request(pb::DetachPolicyRequest { cluster, policy })?)
                .await
                .map_err(describe)?
                .into_inner();
            finish(&client, response, &wait).await
        }
    }
}

fn service(client: &Client) -> ClusterServiceClient<Channel> {
    ClusterServiceClient::new(client.channel.clone())
}

async fn get(client: &Client, name_or_id: &str) -> Result<pb::Cluster, String> {
    Ok(service(client)
        .get_cluster(client.request(pb::GetObjectRequest {
            id: name_or_id.to_owned(),
        })?)
        .await
        .map_err(describe)?
        .into_inner())
}

/// The spec file as the JSON text the API takes; YAML is accepted too
/// (JSON is YAML).
fn read_spec(path: &Path) -> Result<String, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|error| format!("--spec {}: {error}", path.display()))?;
    let document: serde_json::Value = serde_yaml_ng::from_str(&text)
        .map_err(|error| format!("--spec {}: not YAML or JSON: {error}", path.display()))?;
    if !document.is_object() {
        return Err(format!(
            "--spec {}: write a mapping with type, version and properties",
            path.display()
        ));
    }
    serde_json::to_string(&document).map_err(|error| format!("--spec {}: {error}", path.display()))
}

/// Prints the cluster and the action it started, after waiting for the
/// action to end if asked.
async fn finish(
    client: &Client,
    response: pb::ClusterActionResponse,
    wait: &WaitArgs,
) -> Result<(), String> {
    let cluster = response
        .cluster
        .ok_or("the engine answered without the cluster")?;
    if !wait.wait {
        // The cluster as it was when the action was accepted would be
        // stale: say what runs and how to follow it instead.
        print_accepted(&cluster.name, &response.action_id);
        return Ok(());
    }
    let action = wait_for_action(client, &response.action_id, wait).await;
    // Show the cluster as the action left it, then say how the action ended.
    let current = get(client, &cluster.id).await.unwrap_or(cluster);
    print_changed(&current, &response.action_id)?;
    action.map(|_| ())
}

/// What a change without `--wait` prints: the action the engine accepted
/// and how to follow it.
fn print_accepted(cluster: &str, action_id: &str) {
    println!("cluster {cluster}: action {action_id} accepted");
    println!(
        "follow it with `ember cluster action show {action_id}` (or run the command with --wait)"
    );
}

/// A cluster a command changed, with the action it started.
fn print_changed(cluster: &pb::Cluster, action_id: &str) -> Result<(), String> {
    OutputArgs::default()
        .print_record(&cluster_record(cluster, &[], &[]).field("action", action_id))
}

/// Tells the user (on stderr) which lifecycle hooks a waiting removal
/// waits for and how to complete them; true once told.
fn tell_about_hooks(action: &pb::Action) -> bool {
    let outputs: serde_json::Value = serde_json::from_str(&action.outputs).unwrap_or_default();
    let tokens: Vec<&str> = outputs["lifecycle_action_tokens"]
        .as_array()
        .map(|tokens| {
            tokens
                .iter()
                .filter_map(serde_json::Value::as_str)
                .collect()
        })
        .unwrap_or_default();
    if tokens.is_empty() {
        return false;
    }
    eprintln!(
        "waiting for the lifecycle hooks of {} node(s); the application completes each with \
         `ember hook complete {} TOKEN` (or its deadline passes):",
        tokens.len(),
        action.cluster_id
    );
    for token in tokens {
        eprintln!("  {token}");
    }
    true
}

/// Polls an action until it reaches a final status; an error unless it
/// SUCCEEDED.
pub(super) async fn wait_for_action(
    client: &Client,
    action_id: &str,
    wait: &WaitArgs,
) -> Result<pb::Action, String> {
    let deadline = Instant::now() + wait.timeout();
    let mut actions = ActionServiceClient::new(client.channel.clone());
    let mut told_about_hooks = false;
    let mut progress = progress::Progress::new();
    loop {
        let action = actions
            .get_action(client.request(pb::GetObjectRequest {
                id: action_id.to_owned(),
            })?)
            .await
            .map_err(describe)?
            .into_inner();
        progress.report(client, &action).await?;
        if FINAL_ACTION_STATUSES.contains(&action.status.as_str()) {
            if action.status == "SUCCEEDED" {
                return Ok(action);
            }
            return Err(format!(
                "action {} ({}) is {}: {}",
                action.id, action.action, action.status, action.status_reason
            ));
        }
        if !told_about_hooks && action.status == "WAITING" {
            told_about_hooks = tell_about_hooks(&action);
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "action {} ({}) still {} after {} s: stopped waiting (it goes on)",
                action.id, action.action, action.status, wait.wait_timeout
            ));
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}
