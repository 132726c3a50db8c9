//! `ember identity …`: the built-in identity behind the Keystone v3 front
//! door — projects, users (with passwords) and role assignments. Admins
//! only; under `ember dev` these act as the dev admin.

use ember_proto::identity::v1 as pb;
use ember_proto::identity::v1::identity_admin_service_client::IdentityAdminServiceClient;

use crate::client::{Client, ConnectArgs, DevIdentity, describe};
use crate::commands::output::{Cell, OutputArgs, Record};

#[derive(Debug, clap::Subcommand)]
pub enum IdentityCommand {
    /// Projects: create, list, delete
    #[command(subcommand)]
    Project(ProjectCommand),
    /// Users: create (with a password), list, delete, password
    #[command(subcommand)]
    User(UserCommand),
    /// Role assignments: add, remove, list
    #[command(subcommand)]
    Role(RoleCommand),
}

#[derive(Debug, clap::Subcommand)]
pub enum ProjectCommand {
    /// Create a project: `ember identity project create NAME`
    Create {
        name: String,
        #[arg(long, default_value = "")]
        description: String,
        /// The project's id [default: generated, 32 hex digits]
        #[arg(long, default_value = "")]
        id: String,
    },
    /// List projects
    List {
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Delete a project (by name or id) and its role assignments; its tokens stop working
    Delete { project: String },
}

#[derive(Debug, clap::Subcommand)]
pub enum UserCommand {
    /// Create a user: `ember identity user create NAME --password PW`
    Create {
        name: String,
        /// At least 8 characters (or set EMBER_IDENTITY_PASSWORD)
        #[arg(long, env = "EMBER_IDENTITY_PASSWORD", hide_env_values = true)]
        password: String,
        /// The project a token request without a scope gets
        #[arg(long, default_value = "")]
        project: String,
        /// The user's id [default: generated, 32 hex digits]
        #[arg(long, default_value = "")]
        id: String,
    },
    /// List users
    List {
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Delete a user (by name or id); its tokens stop working
    Delete { user: String },
    /// Set a user's password; its tokens stop working (and a lockout is lifted)
    Password {
        user: String,
        #[arg(long, env = "EMBER_IDENTITY_PASSWORD", hide_env_values = true)]
        password: String,
    },
    /// Lift a user's lockout (too many wrong passwords): its wrong passwords are forgotten
    Unlock { user: String },
}

#[derive(Debug, clap::Subcommand)]
pub enum RoleCommand {
    /// Give USER the role ROLE on PROJECT: `ember identity role add USER PROJECT ROLE`
    Add {
        user: String,
        project: String,
        role: String,
    },
    /// Take a role away; the user's tokens for the project stop working
    Remove {
        user: String,
        project: String,
        role: String,
    },
    /// List role assignments (of one user and/or project)
    List {
        #[arg(long, default_value = "")]
        user: String,
        #[arg(long, default_value = "")]
        project: String,
        #[command(flatten)]
        output: OutputArgs,
    },
}

fn project_row(project: &pb::Project) -> Record {
    Record::new()
        .field("name", project.name.as_str())
        .field("id", project.id.as_str())
        .field("created", Cell::time(project.created_at.as_ref()))
        .field("description", project.description.as_str())
}

fn user_row(user: &pb::User) -> Record {
    Record::new()
        .field("name", user.name.as_str())
        .field("id", user.id.as_str())
        .field("default_project", user.default_project_id.as_str())
        .field("created", Cell::time(user.created_at.as_ref()))
        .field("failed_logins", user.failed_auth_count)
        .field(
            "locked",
            Cell::shown_as(
                user.locked,
                match (user.locked, user.locked_until.as_ref()) {
                    (false, _) => "no".to_owned(),
                    (true, Some(until)) => format!("until {}", Cell::time(Some(until)).text()),
                    (true, None) => "until unlocked".to_owned(),
                },
            ),
        )
}

fn role_row(assignment: &pb::RoleAssignment) -> Record {
    Record::new()
        .field("user", assignment.user.as_str())
        .field("project", assignment.project.as_str())
        .field("role", assignment.role.as_str())
}

async fn admin(
    connect: &ConnectArgs,
) -> Result<
    (
        IdentityAdminServiceClient<tonic::transport::Channel>,
        Client,
    ),
    String,
> {
    let client = Client::connect(connect, DevIdentity::Admin).await?;
    Ok((
        IdentityAdminServiceClient::new(client.channel.clone())
            .max_decoding_message_size(ember_runtime::server::MAX_MESSAGE_BYTES),
        client,
    ))
}

pub async fn run(command: IdentityCommand, connect: &ConnectArgs) -> Result<(), String> {
    match command {
        IdentityCommand::Project(command) => project(command, connect).await,
        IdentityCommand::User(command) => user(command, connect).await,
        IdentityCommand::Role(command) => role(command, connect).await,
    }
}

async fn project(command: ProjectCommand, connect: &ConnectArgs) -> Result<(), String> {
    match command {
        ProjectCommand::Create {
            name,
            description,
            id,
        } => {
            let (mut service, client) = admin(connect).await?;
            let project = service
                .create_project(client.request(pb::CreateProjectRequest {
                    name,
                    description,
                    id,
                })?)
                .await
                .map_err(describe)?
                .into_inner();
            println!("project {} created (id {})", project.name, project.id);
        }
        ProjectCommand::List { output } => {
            let (mut service, client) = admin(connect).await?;
            let projects = service
                .list_projects(client.request(pb::ListProjectsRequest {})?)
                .await
                .map_err(describe)?
                .into_inner()
                .projects;
            output.print_list(&projects, project_row)?;
        }
        ProjectCommand::Delete { project } => {
            let (mut service, client) = admin(connect).await?;
            service
                .delete_project(client.request(pb::DeleteProjectRequest {
                    project: project.clone(),
                })?)
                .await
                .map_err(describe)?;
            println!("project {project} deleted");
        }
    }
    Ok(())
}

async fn user(command: UserCommand, connect: &ConnectArgs) -> Result<(), String> {
    match command {
        UserCommand::Create {
            name,
            password,
            project,
            id,
        } => {
            let (mut service, client) = admin(connect).await?;
            let user = service
                .create_user(client.request(pb::CreateUserRequest {
                    name,
                    password,
                    id,
                    default_project: project,
                })?)
                .await
                .map_err(describe)?
                .into_inner();
            println!("user {} created (id {})", user.name, user.id);
        }
        UserCommand::List { output } => {
            let (mut service, client) = admin(connect).await?;
            let users = service
                .list_users(client.request(pb::ListUsersRequest {})?)
                .await
                .map_err(describe)?
                .into_inner()
                .users;
            output.print_list(&users, user_row)?;
        }
        UserCommand::Delete { user } => {
            let (mut service, client) = admin(connect).await?;
            service
                .delete_user(client.request(pb::DeleteUserRequest { user: user.clone() })?)
                .await
                .map_err(describe)?;
            println!("user {user} deleted");
        }
        UserCommand::Password { user, password } => {
            let (mut service, client) = admin(connect).await?;
            service
                .set_password(client.request(pb::SetPasswordRequest {
                    user: user.clone(),
                    password,
                })?)
                .await
                .map_err(describe)?;
            println!("password of {user} changed; its earlier tokens no longer work");
        }
        UserCommand::Unlock { user } => {
            let (mut service, client) = admin(connect).await?;
            service
                .unlock_user(client.request(pb::UnlockUserRequest { user: user.clone() })?)
                .await
                .map_err(describe)?;
            println!("{user} unlocked: its password logins work again");
        }
    }
    Ok(())
}

async fn role(command: RoleCommand, connect: &ConnectArgs) -> Result<(), String> {
    match command {
        RoleCommand::Add {
            user,
            project,
            role,
        } => {
            let (mut service, client) = admin(connect).await?;
            service
                .add_role(client.request(pb::RoleAssignment {
                    user: user.clone(),
                    project: project.clone(),
                    role: role.clone(),
                })?)
                .await
                .map_err(describe)?;
            println!("{user} has role {role} on project {project}");
        }
        RoleCommand::Remove {
            user,
            project,
            role,
        } => {
            let (mut service, client) = admin(connect).await?;
            service
                .remove_role(client.request(pb::RoleAssignment {
                    user: user.clone(),
                    project: project.clone(),
                    role: role.clone(),
                })?)
                .await
                .map_err(describe)?;
            println!("{user} no longer has role {role} on project {project}");
        }
        RoleCommand::List {
            user,
            project,
            output,
        } => {
            let (mut service, client) = admin(connect).await?;
            let assignments = service
                .list_role_assignments(
                    client.request(pb::ListRoleAssignmentsRequest { user, project })?,
                )
                .await
                .map_err(describe)?
                .into_inner()
                .assignments;
            output.print_list(&assignments, role_row)?;
        }
    }
    Ok(())
}
