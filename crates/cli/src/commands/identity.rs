//! `ember identity …`: the built-in identity behind the Keystone v3 front
//! door — projects, users (with passwords), roles, groups and role
//! assignments. Admins only; under `ember dev` these act as the dev admin.
//!
//! `role add|remove|list` are role assignments (as they were before roles
//! were objects: scripts rely on them); the roles themselves are
//! `role create|definitions|show|set|delete`.

use ember_proto::identity::v1 as pb;
use ember_proto::identity::v1::identity_admin_service_client::IdentityAdminServiceClient;

use crate::client::{Client, ConnectArgs, DevIdentity};
use crate::commands::output::{Cell, OutputArgs, Record};
use crate::error::CliError;

#[derive(Debug, clap::Subcommand)]
pub enum IdentityCommand {
    /// Projects: create, list, show, set, delete
    #[command(subcommand)]
    Project(ProjectCommand),
    /// Users: create (with a password), list, show, set, delete, password, unlock
    #[command(subcommand)]
    User(UserCommand),
    /// Role assignments (add, remove, list) and roles (create, definitions, show, set, delete)
    #[command(subcommand)]
    Role(RoleCommand),
    /// Groups of users: create, list, show, set, delete, add-user, remove-user, members
    #[command(subcommand)]
    Group(GroupCommand),
}

/// `--enable` / `--disable`, as `openstack project set` spells them.
#[derive(Debug, Clone, Copy, Default, clap::Args)]
pub struct EnabledArgs {
    /// Enable it: its logins work again
    #[arg(long, conflicts_with = "disable")]
    enable: bool,
    /// Disable it: its logins are refused and its tokens stop working
    #[arg(long)]
    disable: bool,
}

/// What `set` says after an update: that this command disabled the
/// object, whose tokens then no longer work.
fn disabled_note(asked: EnabledArgs, enabled_now: bool) -> &'static str {
    if asked.chosen() == Some(false) && !enabled_now {
        " (disabled: its tokens no longer work)"
    } else {
        ""
    }
}

impl EnabledArgs {
    /// What to set: `None` when neither flag was given.
    fn chosen(self) -> Option<bool> {
        match (self.enable, self.disable) {
            (true, _) => Some(true),
            (_, true) => Some(false),
            _ => None,
        }
    }
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
        /// Create it disabled (no logins scoped to it until enabled)
        #[arg(long)]
        disable: bool,
    },
    /// List projects
    List {
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Show a project (by name or id)
    Show {
        project: String,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Rename, describe, enable or disable a project; a disabled project's tokens stop working
    Set {
        project: String,
        #[arg(long)]
        name: Option<String>,
        #[arg(long)]
        description: Option<String>,
        #[command(flatten)]
        enabled: EnabledArgs,
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
        #[arg(long, default_value = "")]
        description: String,
        #[arg(long, default_value = "")]
        email: String,
        /// Create it disabled (its logins refused until enabled)
        #[arg(long)]
        disable: bool,
    },
    /// List users
    List {
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Show a user (by name or id)
    Show {
        user: String,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Rename, describe, enable or disable a user, or change its email or default project;
    /// a disabled user's tokens stop working
    Set {
        user: String,
        #[arg(long)]
        name: Option<String>,
        /// An empty one clears it
        #[arg(long)]
        description: Option<String>,
        /// An empty one clears it
        #[arg(long)]
        email: Option<String>,
        /// The project a token request without a scope gets (an empty one: none)
        #[arg(long)]
        project: Option<String>,
        #[command(flatten)]
        enabled: EnabledArgs,
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
    /// Give a role on a project: `ember identity role add USER PROJECT ROLE`, or to a
    /// group's members: `ember identity role add --group GROUP PROJECT ROLE`
    #[command(
        override_usage = "ember identity role add USER PROJECT ROLE\n       ember identity role add --group GROUP PROJECT ROLE"
    )]
    Add {
        #[command(flatten)]
        assignment: AssignmentArgs,
    },
    /// Take a role away; the user's (or the group's members') tokens for the project stop working
    #[command(
        override_usage = "ember identity role remove USER PROJECT ROLE\n       ember identity role remove --group GROUP PROJECT ROLE"
    )]
    Remove {
        #[command(flatten)]
        assignment: AssignmentArgs,
    },
    /// List role assignments (of one user or group, and/or one project); a user's roles
    /// through its groups are listed under the group
    List {
        #[arg(long, default_value = "", conflicts_with = "group")]
        user: String,
        #[arg(long, default_value = "")]
        group: String,
        #[arg(long, default_value = "")]
        project: String,
        /// Show users, groups and projects by name instead of id (as
        /// `openstack role assignment list --names`)
        #[arg(long)]
        names: bool,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Create a role, to give it then: `ember identity role create NAME`
    Create {
        name: String,
        /// The role's id [default: generated, 32 hex digits]
        #[arg(long, default_value = "")]
        id: String,
    },
    /// List the roles there are (admin, member and reader always are)
    Definitions {
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Show a role (by name or id)
    Show {
        role: String,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Rename a role; its assignments follow it (tokens holding it stop working)
    Set {
        role: String,
        #[arg(long)]
        name: String,
    },
    /// Delete a role and every assignment of it; the tokens holding it stop working
    Delete { role: String },
}

/// Who gets (or loses) which role where.
#[derive(Debug, Clone, clap::Args)]
pub struct AssignmentArgs {
    /// USER PROJECT ROLE; with --group, PROJECT ROLE
    #[arg(value_name = "NAMES", num_args = 2..=3, required = true)]
    names: Vec<String>,
    /// The group whose members hold the role, instead of a user
    #[arg(long)]
    group: Option<String>,
}

impl AssignmentArgs {
    /// The assignment named, or why the words do not name one.
    fn assignment(self) -> Result<pb::RoleAssignment, CliError> {
        match (self.group, <[String; 3]>::try_from(self.names)) {
            (None, Ok([user, project, role])) => Ok(pb::RoleAssignment {
                user,
                project,
                role,
                group: String::new(),
            }),
            (Some(group), Err(names)) => match <[String; 2]>::try_from(names) {
                Ok([project, role]) => Ok(pb::RoleAssignment {
                    user: String::new(),
                    project,
                    role,
                    group,
                }),
                Err(_) => Err(CliError::Usage(
                    "with --group, give PROJECT ROLE".to_owned(),
                )),
            },
            (Some(_), Ok(_)) => Err(CliError::Usage(
                "with --group, give PROJECT ROLE: a role goes to a user or a group, not both"
                    .to_owned(),
            )),
            (None, Err(_)) => Err(CliError::Usage(
                "give USER PROJECT ROLE (or --group GROUP PROJECT ROLE)".to_owned(),
            )),
        }
    }
}

/// Whom an assignment names, and what it gives, as the messages say them:
/// `group ops` and `role admin on project web`.
fn described(assignment: &pb::RoleAssignment) -> (String, String) {
    let holder = if assignment.group.is_empty() {
        assignment.user.clone()
    } else {
        format!("group {}", assignment.group)
    };
    let given = format!("role {} on project {}", assignment.role, assignment.project);
    (holder, given)
}

#[derive(Debug, clap::Subcommand)]
pub enum GroupCommand {
    /// Create a group: `ember identity group create NAME`
    Create {
        name: String,
        #[arg(long, default_value = "")]
        description: String,
        /// The group's id [default: generated, 32 hex digits]
        #[arg(long, default_value = "")]
        id: String,
    },
    /// List groups
    List {
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Show a group (by name or id)
    Show {
        group: String,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Rename or describe a group
    Set {
        group: String,
        #[arg(long)]
        name: Option<String>,
        #[arg(long)]
        description: Option<String>,
    },
    /// Delete a group, its memberships and role assignments; its members' tokens for those
    /// projects stop working
    Delete { group: String },
    /// Add a user to a group: `ember identity group add-user GROUP USER`
    AddUser { group: String, user: String },
    /// Take a user out of a group; its tokens for the group's projects stop working
    RemoveUser { group: String, user: String },
    /// List a group's members
    Members {
        group: String,
        #[command(flatten)]
        output: OutputArgs,
    },
}

fn enabled_cell(enabled: bool) -> Cell {
    Cell::shown_as(enabled, if enabled { "yes" } else { "no" })
}

fn project_row(project: &pb::Project) -> Record {
    Record::new()
        .field("name", project.name.as_str())
        .field("id", project.id.as_str())
        .field("enabled", enabled_cell(project.enabled))
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
        .field("enabled", enabled_cell(user.enabled))
        .field("email", user.email.as_str())
        .field("description", user.description.as_str())
}

/// The names of the users, groups and projects there are, by id.
struct Names {
    users: std::collections::HashMap<String, String>,
    groups: std::collections::HashMap<String, String>,
    projects: std::collections::HashMap<String, String>,
}

impl Names {
    async fn read(
        service: &mut IdentityAdminServiceClient<tonic::transport::Channel>,
        client: &Client,
    ) -> Result<Names, CliError> {
        let users = service
            .list_users(client.request(pb::ListUsersRequest {})?)
            .await?
            .into_inner()
            .users;
        let groups = service
            .list_groups(client.request(pb::ListGroupsRequest {})?)
            .await?
            .into_inner()
            .groups;
        let projects = service
            .list_projects(client.request(pb::ListProjectsRequest {})?)
            .await?
            .into_inner()
            .projects;
        Ok(Names {
            users: users.into_iter().map(|user| (user.id, user.name)).collect(),
            groups: groups
                .into_iter()
                .map(|group| (group.id, group.name))
                .collect(),
            projects: projects
                .into_iter()
                .map(|project| (project.id, project.name))
                .collect(),
        })
    }

    /// `assignment` with names for ids (an id with no name stays).
    fn apply(&self, assignment: &mut pb::RoleAssignment) {
        let rename = |id: &mut String, names: &std::collections::HashMap<String, String>| {
            if let Some(name) = names.get(id.as_str()) {
                id.clone_from(name);
            }
        };
        rename(&mut assignment.user, &self.users);
        rename(&mut assignment.group, &self.groups);
        rename(&mut assignment.project, &self.projects);
    }
}

fn role_row(assignment: &pb::RoleAssignment) -> Record {
    Record::new()
        .field("user", assignment.user.as_str())
        .field("group", assignment.group.as_str())
        .field("project", assignment.project.as_str())
        .field("role", assignment.role.as_str())
}

fn role_definition_row(role: &pb::Role) -> Record {
    Record::new()
        .field("name", role.name.as_str())
        .field("id", role.id.as_str())
        .field(
            "built_in",
            Cell::shown_as(role.built_in, if role.built_in { "yes" } else { "no" }),
        )
}

fn group_row(group: &pb::Group) -> Record {
    Record::new()
        .field("name", group.name.as_str())
        .field("id", group.id.as_str())
        .field("created", Cell::time(group.created_at.as_ref()))
        .field("description", group.description.as_str())
}

async fn admin(
    connect: &ConnectArgs,
) -> Result<
    (
        IdentityAdminServiceClient<tonic::transport::Channel>,
        Client,
    ),
    CliError,
> {
    let client = Client::connect(connect, DevIdentity::Admin).await?;
    Ok((
        IdentityAdminServiceClient::new(client.channel.clone())
            .max_decoding_message_size(ember_runtime::server::MAX_MESSAGE_BYTES),
        client,
    ))
}

pub async fn run(command: IdentityCommand, connect: &ConnectArgs) -> Result<(), CliError> {
    match command {
        IdentityCommand::Project(command) => project(command, connect).await,
        IdentityCommand::User(command) => user(command, connect).await,
        IdentityCommand::Role(command) => role(command, connect).await,
        IdentityCommand::Group(command) => group(command, connect).await,
    }
}

async fn project(command: ProjectCommand, connect: &ConnectArgs) -> Result<(), CliError> {
    let (mut service, client) = admin(connect).await?;
    match command {
        ProjectCommand::Create {
            name,
            description,
            id,
            disable,
        } => {
            let project = service
                .create_project(client.request(pb::CreateProjectRequest {
                    name,
                    description,
                    id,
                    enabled: Some(!disable),
                })?)
                .await?
                .into_inner();
            println!("project {} created (id {})", project.name, project.id);
        }
        ProjectCommand::List { output } => {
            let projects = service
                .list_projects(client.request(pb::ListProjectsRequest {})?)
                .await?
                .into_inner()
                .projects;
            output.print_list(&projects, project_row)?;
        }
        ProjectCommand::Show { project, output } => {
            let project = service
                .get_project(client.request(pb::GetProjectRequest { project })?)
                .await?
                .into_inner();
            output.print_record(&project_row(&project))?;
        }
        ProjectCommand::Set {
            project,
            name,
            description,
            enabled,
        } => {
            let updated = service
                .update_project(client.request(pb::UpdateProjectRequest {
                    project,
                    name,
                    description,
                    enabled: enabled.chosen(),
                })?)
                .await?
                .into_inner();
            println!(
                "project {} updated{}",
                updated.name,
                disabled_note(enabled, updated.enabled)
            );
        }
        ProjectCommand::Delete { project } => {
            service
                .delete_project(client.request(pb::DeleteProjectRequest {
                    project: project.clone(),
                })?)
                .await?;
            println!("project {project} deleted");
        }
    }
    Ok(())
}

async fn user(command: UserCommand, connect: &ConnectArgs) -> Result<(), CliError> {
    let (mut service, client) = admin(connect).await?;
    match command {
        UserCommand::Create {
            name,
            password,
            project,
            id,
            description,
            email,
            disable,
        } => {
            let user = service
                .create_user(client.request(pb::CreateUserRequest {
                    name,
                    password,
                    id,
                    default_project: project,
                    description,
                    email,
                    enabled: Some(!disable),
                })?)
                .await?
                .into_inner();
            println!("user {} created (id {})", user.name, user.id);
        }
        UserCommand::List { output } => {
            let users = service
                .list_users(client.request(pb::ListUsersRequest {})?)
                .await?
                .into_inner()
                .users;
            output.print_list(&users, user_row)?;
        }
        UserCommand::Show { user, output } => {
            let user = service
                .get_user(client.request(pb::GetUserRequest { user })?)
                .await?
                .into_inner();
            output.print_record(&user_row(&user))?;
        }
        UserCommand::Set {
            user,
            name,
            description,
            email,
            project,
            enabled,
        } => {
            let updated = service
                .update_user(client.request(pb::UpdateUserRequest {
                    user,
                    name,
                    description,
                    email,
                    enabled: enabled.chosen(),
                    default_project: project,
                })?)
                .await?
                .into_inner();
            println!(
                "user {} updated{}",
                updated.name,
                disabled_note(enabled, updated.enabled)
            );
        }
        UserCommand::Delete { user } => {
            service
                .delete_user(client.request(pb::DeleteUserRequest { user: user.clone() })?)
                .await?;
            println!("user {user} deleted");
        }
        UserCommand::Password { user, password } => {
            service
                .set_password(client.request(pb::SetPasswordRequest {
                    user: user.clone(),
                    password,
                })?)
                .await?;
            println!("password of {user} changed; its earlier tokens no longer work");
        }
        UserCommand::Unlock { user } => {
            service
                .unlock_user(client.request(pb::UnlockUserRequest { user: user.clone() })?)
                .await?;
            println!("{user} unlocked: its password logins work again");
        }
    }
    Ok(())
}

async fn role(command: RoleCommand, connect: &ConnectArgs) -> Result<(), CliError> {
    match command {
        RoleCommand::Add { assignment } => {
            let assignment = assignment.assignment()?;
            let (holder, given) = described(&assignment);
            let (mut service, client) = admin(connect).await?;
            service.add_role(client.request(assignment)?).await?;
            println!("{holder} has {given}");
        }
        RoleCommand::Remove { assignment } => {
            let assignment = assignment.assignment()?;
            let (holder, given) = described(&assignment);
            let (mut service, client) = admin(connect).await?;
            service.remove_role(client.request(assignment)?).await?;
            println!("{holder} no longer has {given}");
        }
        RoleCommand::List {
            user,
            group,
            project,
            names,
            output,
        } => {
            let (mut service, client) = admin(connect).await?;
            let mut assignments = service
                .list_role_assignments(client.request(pb::ListRoleAssignmentsRequest {
                    user,
                    project,
                    group,
                })?)
                .await?
                .into_inner()
                .assignments;
            if names {
                let names = Names::read(&mut service, &client).await?;
                for assignment in &mut assignments {
                    names.apply(assignment);
                }
            }
            output.print_list(&assignments, role_row)?;
        }
        RoleCommand::Create { name, id } => {
            let (mut service, client) = admin(connect).await?;
            let role = service
                .create_role(client.request(pb::CreateRoleRequest { name, id })?)
                .await?
                .into_inner();
            println!("role {} created (id {})", role.name, role.id);
        }
        RoleCommand::Definitions { output } => {
            let (mut service, client) = admin(connect).await?;
            let roles = service
                .list_roles(client.request(pb::ListRolesRequest {})?)
                .await?
                .into_inner()
                .roles;
            output.print_list(&roles, role_definition_row)?;
        }
        RoleCommand::Show { role, output } => {
            let (mut service, client) = admin(connect).await?;
            let role = service
                .get_role(client.request(pb::GetRoleRequest { role })?)
                .await?
                .into_inner();
            output.print_record(&role_definition_row(&role))?;
        }
        RoleCommand::Set { role, name } => {
            let (mut service, client) = admin(connect).await?;
            let renamed = service
                .update_role(client.request(pb::UpdateRoleRequest {
                    role: role.clone(),
                    name,
                })?)
                .await?
                .into_inner();
            println!("role {role} renamed {}", renamed.name);
        }
        RoleCommand::Delete { role } => {
            let (mut service, client) = admin(connect).await?;
            service
                .delete_role(client.request(pb::DeleteRoleRequest { role: role.clone() })?)
                .await?;
            println!("role {role} deleted, with its assignments");
        }
    }
    Ok(())
}

async fn group(command: GroupCommand, connect: &ConnectArgs) -> Result<(), CliError> {
    let (mut service, client) = admin(connect).await?;
    match command {
        GroupCommand::Create {
            name,
            description,
            id,
        } => {
            let group = service
                .create_group(client.request(pb::CreateGroupRequest {
                    name,
                    description,
                    id,
                })?)
                .await?
                .into_inner();
            println!("group {} created (id {})", group.name, group.id);
        }
        GroupCommand::List { output } => {
            let groups = service
                .list_groups(client.request(pb::ListGroupsRequest {})?)
                .await?
                .into_inner()
                .groups;
            output.print_list(&groups, group_row)?;
        }
        GroupCommand::Show { group, output } => {
            let group = service
                .get_group(client.request(pb::GetGroupRequest { group })?)
                .await?
                .into_inner();
            output.print_record(&group_row(&group))?;
        }
        GroupCommand::Set {
            group,
            name,
            description,
        } => {
            let updated = service
                .update_group(client.request(pb::UpdateGroupRequest {
                    group,
                    name,
                    description,
                })?)
                .await?
                .into_inner();
            println!("group {} updated", updated.name);
        }
        GroupCommand::Delete { group } => {
            service
                .delete_group(client.request(pb::DeleteGroupRequest {
                    group: group.clone(),
                })?)
                .await?;
            println!("group {group} deleted");
        }
        GroupCommand::AddUser { group, user } => {
            service
                .add_group_member(client.request(pb::GroupMembership {
                    group: group.clone(),
                    user: user.clone(),
                })?)
                .await?;
            println!("{user} is a member of group {group}");
        }
        GroupCommand::RemoveUser { group, user } => {
            service
                .remove_group_member(client.request(pb::GroupMembership {
                    group: group.clone(),
                    user: user.clone(),
                })?)
                .await?;
            println!("{user} is no longer a member of group {group}");
        }
        GroupCommand::Members { group, output } => {
            let users = service
                .list_group_members(client.request(pb::ListGroupMembersRequest { group })?)
                .await?
                .into_inner()
                .users;
            output.print_list(&users, user_row)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::commands::{Cli, Command};

    /// `ember identity <line>` as parsed.
    fn identity(line: &[&str]) -> Result<IdentityCommand, String> {
        let mut args = vec!["ember", "identity"];
        args.extend_from_slice(line);
        match Cli::try_parse_from(args)
            .map_err(|error| error.to_string())?
            .command
        {
            Command::Identity(command) => Ok(command),
            other => Err(format!("not an identity command: {other:?}")),
        }
    }

    /// The assignment `ember identity role add <line>` names.
    fn added(line: &[&str]) -> Result<pb::RoleAssignment, String> {
        let mut args = vec!["role", "add"];
        args.extend_from_slice(line);
        match identity(&args)? {
            IdentityCommand::Role(RoleCommand::Add { assignment }) => {
                assignment.assignment().map_err(|error| error.to_string())
            }
            other => Err(format!("not role add: {other:?}")),
        }
    }

    #[test]
    fn a_role_goes_to_a_user_or_with_group_to_a_group() {
        assert_eq!(
            added(&["alice", "web", "member"]),
            Ok(pb::RoleAssignment {
                user: "alice".into(),
                project: "web".into(),
                role: "member".into(),
                group: String::new(),
            })
        );
        for line in [
            &["--group", "ops", "web", "admin"][..],
            &["web", "admin", "--group", "ops"],
        ] {
            assert_eq!(
                added(line),
                Ok(pb::RoleAssignment {
                    user: String::new(),
                    project: "web".into(),
                    role: "admin".into(),
                    group: "ops".into(),
                }),
                "{line:?}"
            );
        }
        let refusals = [
            (
                &["web", "member"][..],
                "give USER PROJECT ROLE (or --group GROUP PROJECT ROLE)",
            ),
            (&["--group", "ops", "alice", "web", "admin"], "not both"),
            (&["alice"], "2 values required"),
            (&["a", "b", "c", "d"], "unexpected value 'd'"),
        ];
        for (line, expected) in refusals {
            let refusal = added(line).expect_err("refused");
            assert!(refusal.contains(expected), "{line:?}: {refusal}");
        }
        match identity(&["role", "remove", "--group", "ops", "web", "admin"]) {
            Ok(IdentityCommand::Role(RoleCommand::Remove { assignment })) => {
                assert_eq!(assignment.assignment().map(|a| a.group), Ok("ops".into()));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn set_changes_only_what_it_names_and_enable_excludes_disable() {
        match identity(&["project", "set", "web", "--disable"]) {
            Ok(IdentityCommand::Project(ProjectCommand::Set {
                name,
                description,
                enabled,
                ..
            })) => {
                assert_eq!((name, description), (None, None));
                assert_eq!(enabled.chosen(), Some(false));
            }
            other => panic!("{other:?}"),
        }
        match identity(&["user", "set", "alice", "--email", "", "--project", ""]) {
            Ok(IdentityCommand::User(UserCommand::Set {
                email,
                project,
                description,
                enabled,
                ..
            })) => {
                assert_eq!(email.as_deref(), Some(""), "an empty email clears it");
                assert_eq!(project.as_deref(), Some(""), "an empty project: none");
                assert_eq!(description, None);
                assert_eq!(enabled.chosen(), None);
            }
            other => panic!("{other:?}"),
        }
        let refusal = identity(&["user", "set", "alice", "--enable", "--disable"])
            .expect_err("one or the other");
        assert!(refusal.contains("cannot be used with"), "{refusal}");
        let refusal = identity(&["role", "list", "--user", "alice", "--group", "ops"])
            .expect_err("one or the other");
        assert!(refusal.contains("cannot be used with"), "{refusal}");
        assert!(matches!(
            identity(&["role", "definitions", "-f", "json"]),
            Ok(IdentityCommand::Role(RoleCommand::Definitions { .. }))
        ));
        assert!(matches!(
            identity(&["group", "add-user", "ops", "alice"]),
            Ok(IdentityCommand::Group(GroupCommand::AddUser { group, user })) if group == "ops" && user == "alice"
        ));
    }
}
