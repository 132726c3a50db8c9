//! `ember stack …`: stacks through the gateway's gRPC services
//! (StackService, ResourceService, EventService). Reading commands live in
//! `inspect`, changing ones in `lifecycle`; templates and environments are
//! read from disk by `template_files`, and `--wait` is `watch`.

mod inspect;
mod lifecycle;
mod template_files;
mod watch;

use std::time::Duration;

use crate::client::{Client, ConnectArgs, DevIdentity};

pub use lifecycle::{AdoptArgs, CreateArgs, UpdateArgs, ValidateArgs};

#[derive(Debug, clap::Subcommand)]
pub enum StackCommand {
    /// List your project's stacks, newest first
    List {
        /// Include nested stacks
        #[arg(long)]
        nested: bool,
        /// At most this many
        #[arg(long, default_value_t = 100)]
        limit: u32,
        #[command(flatten)]
        connect: ConnectArgs,
    },
    /// Show one stack by name or id: status, parameters, outputs
    Show {
        stack: String,
        #[command(flatten)]
        connect: ConnectArgs,
    },
    /// Create a stack from a template (files it references are sent along)
    Create(CreateArgs),
    /// Update a stack: a new template, or --existing to change only what is given
    Update(UpdateArgs),
    /// Delete a stack and its resources
    Delete {
        stack: String,
        #[command(flatten)]
        wait: WaitArgs,
        #[command(flatten)]
        connect: ConnectArgs,
    },
    /// What happened to a stack and its resources, oldest first
    Events {
        stack: String,
        /// Only this resource's events
        #[arg(long)]
        resource: Option<String>,
        /// Include nested stacks' events down to this depth
        #[arg(long, default_value_t = 0)]
        nested_depth: u32,
        /// At most this many
        #[arg(long, default_value_t = 1000)]
        limit: u32,
        #[command(flatten)]
        connect: ConnectArgs,
    },
    /// A stack's outputs, or the value of one
    Outputs {
        stack: String,
        /// Print only this output's value
        key: Option<String>,
        #[command(flatten)]
        connect: ConnectArgs,
    },
    /// A stack's resources
    Resources {
        stack: String,
        /// Include nested stacks' resources down to this depth
        #[arg(long, default_value_t = 0)]
        nested_depth: u32,
        #[command(flatten)]
        connect: ConnectArgs,
    },
    /// The template a stack was created or last updated from (YAML)
    Template {
        stack: String,
        #[command(flatten)]
        connect: ConnectArgs,
    },
    /// Delete a stack's records but keep its resources; prints the data adopt takes
    Abandon {
        stack: String,
        #[command(flatten)]
        connect: ConnectArgs,
    },
    /// Create a stack that takes over the resources of abandon data
    Adopt(AdoptArgs),
    /// Suspend a stack's resources
    Suspend(ActionArgs),
    /// Resume a suspended stack
    Resume(ActionArgs),
    /// Check that a stack's resources are what the stack says
    Check(ActionArgs),
    /// Stop an update in progress and roll back to the previous template
    CancelUpdate(ActionArgs),
    /// Put a stack in maintenance: only lock (to change the level) and unlock are allowed
    Lock(LockArgs),
    /// Lift a stack's maintenance lock (an admin's lock needs an admin)
    Unlock(ActionArgs),
    /// Would an operation be allowed on a stack now? (update, delete, suspend, lock, unlock, …)
    Allowed {
        stack: String,
        operation: String,
        #[command(flatten)]
        connect: ConnectArgs,
    },
    /// Validate a template (and environments, parameters) without creating anything
    Validate(ValidateArgs),
}

/// `--wait` and how long to wait.
#[derive(Debug, Clone, clap::Args)]
pub struct WaitArgs {
    /// Show the operation's progress and wait until it ends; exit non-zero if it fails
    #[arg(long)]
    pub wait: bool,
    /// Stop waiting after this many seconds (the operation goes on)
    #[arg(long, value_name = "SECONDS", default_value_t = 3600)]
    pub wait_timeout: u64,
}

impl WaitArgs {
    pub fn timeout(&self) -> Duration {
        Duration::from_secs(self.wait_timeout)
    }
}

#[derive(Debug, clap::Args)]
pub struct LockArgs {
    stack: String,
    /// stacks: the stack and its nested stacks; all: also lock instances
    #[arg(long, default_value = "all", value_parser = ["stacks", "all"])]
    level: String,
    /// Why (shown with the lock)
    #[arg(long)]
    reason: Option<String>,
    #[command(flatten)]
    wait: WaitArgs,
    #[command(flatten)]
    connect: ConnectArgs,
}

#[derive(Debug, Clone, clap::Args)]
pub struct ActionArgs {
    stack: String,
    #[command(flatten)]
    wait: WaitArgs,
    #[command(flatten)]
    connect: ConnectArgs,
}

async fn connect(args: &ConnectArgs) -> Result<Client, String> {
    Client::connect(args, DevIdentity::Member).await
}

pub async fn run(command: StackCommand) -> Result<(), String> {
    use ember_proto::engine::v1::StackActionKind;
    match command {
        StackCommand::List {
            nested,
            limit,
            connect: args,
        } => inspect::list(&connect(&args).await?, nested, limit).await,
        StackCommand::Show {
            stack,
            connect: args,
        } => inspect::show(&connect(&args).await?, stack).await,
        StackCommand::Create(args) => lifecycle::create(&connect(&args.connect).await?, args).await,
        StackCommand::Update(args) => lifecycle::update(&connect(&args.connect).await?, args).await,
        StackCommand::Delete {
            stack,
            wait,
            connect: args,
        } => lifecycle::delete(&connect(&args).await?, stack, &wait).await,
        StackCommand::Events {
            stack,
            resource,
            nested_depth,
            limit,
            connect: args,
        } => inspect::events(&connect(&args).await?, stack, resource, nested_depth, limit).await,
        StackCommand::Outputs {
            stack,
            key,
            connect: args,
        } => inspect::outputs(&connect(&args).await?, stack, key).await,
        StackCommand::Resources {
            stack,
            nested_depth,
            connect: args,
        } => inspect::resources(&connect(&args).await?, stack, nested_depth).await,
        StackCommand::Template {
            stack,
            connect: args,
        } => inspect::template(&connect(&args).await?, stack).await,
        StackCommand::Abandon {
            stack,
            connect: args,
        } => lifecycle::abandon(&connect(&args).await?, stack).await,
        StackCommand::Adopt(args) => lifecycle::adopt(&connect(&args.connect).await?, args).await,
        StackCommand::Suspend(args) => run_action(args, StackActionKind::Suspend).await,
        StackCommand::Resume(args) => run_action(args, StackActionKind::Resume).await,
        StackCommand::Check(args) => run_action(args, StackActionKind::Check).await,
        StackCommand::CancelUpdate(args) => run_action(args, StackActionKind::CancelUpdate).await,
        StackCommand::Lock(args) => {
            let client = connect(&args.connect).await?;
            lifecycle::lock(&client, args.stack, args.level, args.reason, &args.wait).await
        }
        StackCommand::Unlock(args) => {
            let client = connect(&args.connect).await?;
            lifecycle::unlock(&client, args.stack, &args.wait).await
        }
        StackCommand::Allowed {
            stack,
            operation,
            connect: connect_args,
        } => {
            let client = connect(&connect_args).await?;
            lifecycle::allowed(&client, stack, operation).await
        }
        StackCommand::Validate(args) => {
            lifecycle::validate(&connect(&args.connect).await?, args).await
        }
    }
}

async fn run_action(
    args: ActionArgs,
    kind: ember_proto::engine::v1::StackActionKind,
) -> Result<(), String> {
    let client = connect(&args.connect).await?;
    lifecycle::action(&client, args.stack, kind, &args.wait).await
}

pub fn format_time(timestamp: Option<&prost_types::Timestamp>) -> String {
    timestamp
        .and_then(|time| chrono::DateTime::from_timestamp(time.seconds, 0))
        .map(|time| time.format("%Y-%m-%dT%H:%M:%SZ").to_string())
        .unwrap_or_default()
}
