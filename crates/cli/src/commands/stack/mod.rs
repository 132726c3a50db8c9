//! `ember stack …`: stacks through the gateway's gRPC services
//! (StackService, ResourceService, EventService). Reading commands live in
//! `inspect`, changing ones in `lifecycle`; templates and environments are
//! read from disk by `template_files`, and `--wait` is `watch`.

mod detail;
mod inspect;
mod lifecycle;
mod template_files;
mod watch;

use crate::client::{Client, ConnectArgs, DevIdentity};
use crate::commands::output::OutputArgs;
pub use crate::commands::wait::WaitArgs;
use crate::error::CliError;

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
        output: OutputArgs,
    },
    /// Show one stack by name or id: status, lock, parameters, outputs
    Show {
        stack: String,
        #[command(flatten)]
        output: OutputArgs,
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
    },
    /// What happened to a stack and its resources, oldest first
    ///
    /// One line per event, as `openstack stack event list` prints them;
    /// with -f or -c, records with their ids (for `stack event show`).
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
        output: OutputArgs,
    },
    /// A stack's outputs, or the value of one
    Outputs {
        stack: String,
        /// Print only this output's value
        key: Option<String>,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// A stack's resources
    Resources {
        stack: String,
        /// Include nested stacks' resources down to this depth
        #[arg(long, default_value_t = 0)]
        nested_depth: u32,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// One resource of a stack: show
    #[command(subcommand)]
    Resource(detail::ResourceCommand),
    /// One event of a stack: show
    #[command(subcommand)]
    Event(detail::EventCommand),
    /// The template a stack was created or last updated from (YAML)
    Template { stack: String },
    /// Delete a stack's records but keep its resources; prints the data adopt takes
    Abandon { stack: String },
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
    ///
    /// Exits 0 when it would be, non-zero when not (or when it cannot tell).
    Allowed { stack: String, operation: String },
    /// Validate a template (and environments, parameters) without creating anything
    Validate(ValidateArgs),
    /// Wait until the operation in progress on a stack ends — one started
    /// over REST, gRPC or by another client — printing its events
    ///
    /// Exits non-zero when it ends *_FAILED, or is still running after
    /// --wait-timeout. A stack with nothing in progress returns at once.
    Wait {
        stack: String,
        /// Stop waiting after this many seconds (the operation goes on)
        #[arg(long, value_name = "SECONDS", default_value_t = 3600)]
        wait_timeout: u64,
    },
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
    /// Unlock after this long (90s, 30m, 4h, 2d); locking again renews it
    #[arg(long, value_parser = crate::commands::parse_seconds)]
    expires_in: Option<i64>,
    #[command(flatten)]
    wait: WaitArgs,
}

#[derive(Debug, Clone, clap::Args)]
pub struct ActionArgs {
    stack: String,
    #[command(flatten)]
    wait: WaitArgs,
}

async fn client(connect: &ConnectArgs) -> Result<Client, CliError> {
    Client::connect(connect, DevIdentity::Member).await
}

pub async fn run(command: StackCommand, connect: &ConnectArgs) -> Result<(), CliError> {
    use ember_proto::engine::v1::StackActionKind;
    match command {
        StackCommand::List {
            nested,
            limit,
            output,
        } => inspect::list(&client(connect).await?, nested, limit, &output).await,
        StackCommand::Show { stack, output } => {
            inspect::show(&client(connect).await?, stack, &output).await
        }
        StackCommand::Create(args) => lifecycle::create(&client(connect).await?, args).await,
        StackCommand::Update(args) => lifecycle::update(&client(connect).await?, args).await,
        StackCommand::Delete { stack, wait } => {
            lifecycle::delete(&client(connect).await?, stack, &wait).await
        }
        StackCommand::Events {
            stack,
            resource,
            nested_depth,
            limit,
            output,
        } => {
            inspect::events(
                &client(connect).await?,
                stack,
                resource,
                nested_depth,
                limit,
                &output,
            )
            .await
        }
        StackCommand::Outputs { stack, key, output } => {
            inspect::outputs(&client(connect).await?, stack, key, &output).await
        }
        StackCommand::Resources {
            stack,
            nested_depth,
            output,
        } => inspect::resources(&client(connect).await?, stack, nested_depth, &output).await,
        StackCommand::Resource(command) => detail::resource(&client(connect).await?, command).await,
        StackCommand::Event(command) => detail::event(&client(connect).await?, command).await,
        StackCommand::Template { stack } => inspect::template(&client(connect).await?, stack).await,
        StackCommand::Abandon { stack } => lifecycle::abandon(&client(connect).await?, stack).await,
        StackCommand::Adopt(args) => lifecycle::adopt(&client(connect).await?, args).await,
        StackCommand::Suspend(args) => run_action(connect, args, StackActionKind::Suspend).await,
        StackCommand::Resume(args) => run_action(connect, args, StackActionKind::Resume).await,
        StackCommand::Check(args) => run_action(connect, args, StackActionKind::Check).await,
        StackCommand::CancelUpdate(args) => {
            run_action(connect, args, StackActionKind::CancelUpdate).await
        }
        StackCommand::Lock(args) => {
            let client = client(connect).await?;
            let request = ember_proto::engine::v1::LockStackRequest {
                stack: args.stack,
                level: args.level,
                reason: args.reason.unwrap_or_default(),
                expires_in: args.expires_in,
                expires_at: None,
            };
            lifecycle::lock(&client, request, &args.wait).await
        }
        StackCommand::Unlock(args) => {
            let client = client(connect).await?;
            lifecycle::unlock(&client, args.stack, &args.wait).await
        }
        StackCommand::Allowed { stack, operation } => {
            lifecycle::allowed(&client(connect).await?, stack, operation).await
        }
        StackCommand::Validate(args) => lifecycle::validate(&client(connect).await?, args).await,
        StackCommand::Wait {
            stack,
            wait_timeout,
        } => {
            let client = client(connect).await?;
            lifecycle::wait(&client, stack, std::time::Duration::from_secs(wait_timeout)).await
        }
    }
}

async fn run_action(
    connect: &ConnectArgs,
    args: ActionArgs,
    kind: ember_proto::engine::v1::StackActionKind,
) -> Result<(), CliError> {
    let client = client(connect).await?;
    lifecycle::action(&client, args.stack, kind, &args.wait).await
}

pub fn format_time(timestamp: Option<&prost_types::Timestamp>) -> String {
    timestamp
        .and_then(|time| chrono::DateTime::from_timestamp(time.seconds, 0))
        .map(|time| time.format("%Y-%m-%dT%H:%M:%SZ").to_string())
        .unwrap_or_default()
}
