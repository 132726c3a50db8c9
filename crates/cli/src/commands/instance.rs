//! `ember instance …`: compute instances through the gateway's
//! `InstanceService`. Instances are named by uuid or by name (a name must
//! match exactly one live instance). `--wait` polls until the driver is done
//! and fails when the instance ends in ERROR.

use std::time::{Duration, Instant};

use ember_proto::engine::v1 as pb;
use ember_proto::engine::v1::instance_service_client::InstanceServiceClient;
use tonic::transport::Channel;

mod display;

use self::display::{
    instance_record, instance_row, locked_by_name, power_state_name, print_instance, status_name,
};
use crate::client::{Client, ConnectArgs, DevIdentity, print_table};
use crate::commands::output::OutputArgs;
use crate::commands::wait::WaitArgs;
use crate::error::CliError;

const POLL_INTERVAL: Duration = Duration::from_millis(200);

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum PowerTarget {
    On,
    Off,
    Reboot,
}

#[derive(Debug, clap::Subcommand)]
pub enum InstanceCommand {
    /// Create an instance in your project (it starts BUILDING)
    Create {
        name: String,
        #[arg(long)]
        flavor: String,
        #[arg(long)]
        image: String,
        /// Metadata item KEY=VALUE (repeatable); container labels with the docker driver
        #[arg(long = "meta", value_name = "KEY=VALUE")]
        metadata: Vec<String>,
        /// Environment variable NAME=VALUE of the machine (repeatable)
        #[arg(long = "env", value_name = "NAME=VALUE")]
        env: Vec<String>,
        /// A file of user data (a script starting with #! runs as the container's process)
        #[arg(long, value_name = "FILE")]
        user_data: Option<std::path::PathBuf>,
        /// An interface (repeatable; openstack backend): `NETWORK`, or
        /// `net=NETWORK,fixed_ip=IP`, `port=PORT`, `subnet=SUBNET` (names or ids)
        #[arg(long = "nic", value_name = "NIC")]
        networks: Vec<String>,
        /// A security group by name or id (repeatable; openstack backend)
        #[arg(long = "security-group", value_name = "GROUP")]
        security_groups: Vec<String>,
        /// The key pair injected into the machine (openstack backend)
        #[arg(long, value_name = "NAME")]
        key_name: Option<String>,
        #[command(flatten)]
        wait: WaitArgs,
        /// The command the machine runs, after `--` (default: the image's own)
        #[arg(last = true, value_name = "COMMAND")]
        command: Vec<String>,
    },
    /// What happened to an instance's machine: task outcomes and observations (it died, was removed…)
    Events {
        instance: String,
        /// The newest this many (at most 1000)
        #[arg(long, default_value_t = 100)]
        limit: u32,
    },
    /// List your project's instances, newest first
    List {
        /// Only this status (BUILDING, ACTIVE, STOPPED, REBOOTING, ERROR, DELETING)
        #[arg(long)]
        status: Option<String>,
        /// Only locked (true) or unlocked (false) instances
        #[arg(long)]
        locked: Option<bool>,
        /// Only instances with exactly this name
        #[arg(long)]
        name: Option<String>,
        /// At most this many
        #[arg(long, default_value_t = 100)]
        limit: u32,
        /// Every project's instances (admins)
        #[arg(long)]
        all_projects: bool,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Show one instance by uuid or name
    Show {
        instance: String,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Delete an instance (DELETING, then gone: not found)
    Delete {
        instance: String,
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// Power an instance on or off, or reboot it
    Power {
        instance: String,
        #[arg(value_enum)]
        target: PowerTarget,
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// Lock an instance against changes (locked_by owner, or admin for another project's admin)
    Lock {
        instance: String,
        /// Why, shown to whoever the lock stops (1-255 characters)
        #[arg(long)]
        reason: Option<String>,
        /// Lift the lock after this long (90s, 30m, 4h, 2d); on a locked
        /// instance, renews its lock until then
        #[arg(long, value_parser = crate::commands::parse_seconds)]
        expires_in: Option<i64>,
    },
    /// Lift an instance's lock (an admin lock only as an admin)
    Unlock { instance: String },
    /// Would OPERATION (delete, update, power_on, power_off, reboot, lock,
    /// unlock) be accepted now? Every blocker at once; exits non-zero when not
    Allowed { instance: String, operation: String },
}

pub async fn run(command: InstanceCommand, connect: &ConnectArgs) -> Result<(), CliError> {
    match command {
        InstanceCommand::Create {
            name,
            flavor,
            image,
            metadata,
            env,
            user_data,
            networks,
            security_groups,
            key_name,
            wait,
            command,
        } => {
            let client = Client::connect(connect, DevIdentity::Member).await?;
            let pairs = |flag: &str, items: &[String]| {
                items
                    .iter()
                    .map(|item| {
                        item.split_once('=')
                            .map(|(key, value)| (key.to_owned(), value.to_owned()))
                            .ok_or_else(|| {
                                CliError::Usage(format!("{flag} {item:?}: write KEY=VALUE"))
                            })
                    })
                    .collect::<Result<std::collections::HashMap<_, _>, _>>()
            };
            let user_data = match user_data {
                None => String::new(),
                Some(path) => std::fs::read_to_string(&path).map_err(|error| {
                    CliError::Usage(format!("--user-data {}: {error}", path.display()))
                })?,
            };
            let request = pb::CreateInstanceRequest {
                name,
                flavor,
                image,
                metadata: pairs("--meta", &metadata)?,
                user_data,
                command,
                env: pairs("--env", &env)?,
                networks: networks
                    .iter()
                    .map(|nic| parse_nic(nic).map_err(CliError::Usage))
                    .collect::<Result<_, _>>()?,
                security_groups,
                key_name: key_name.unwrap_or_default(),
            };
            let instance = service(&client)
                .create_instance(client.request(request)?)
                .await?
                .into_inner();
            finish(&client, instance, &wait).await
        }
        InstanceCommand::List {
            status,
            locked,
            name,
            limit,
            all_projects,
            output,
        } => {
            let client = Client::connect(connect, DevIdentity::Member).await?;
            let status = match status {
                None => pb::InstanceStatus::Unspecified,
                Some(text) => pb::InstanceStatus::from_str_name(&format!(
                    "INSTANCE_STATUS_{}",
                    text.to_ascii_uppercase()
                ))
                .filter(|status| *status != pb::InstanceStatus::Unspecified)
                .ok_or_else(|| {
                    CliError::Usage(format!("--status {text:?} is not an instance status"))
                })?,
            };
            let request = pb::ListInstancesRequest {
                limit,
                marker: String::new(),
                name: name.unwrap_or_default(),
                status: status as i32,
                locked,
                all_projects,
            };
            let response = service(&client)
                .list_instances(client.request(request)?)
                .await?
                .into_inner();
            output.print_list(&response.instances, instance_row)
        }
        InstanceCommand::Events { instance, limit } => {
            let client = Client::connect(connect, DevIdentity::Member).await?;
            let uuid = resolve(&client, &instance).await?;
            let events = service(&client)
                .list_instance_events(
                    client.request(pb::ListInstanceEventsRequest { uuid, limit })?,
                )
                .await?
                .into_inner()
                .events;
            let rows: Vec<Vec<String>> = events
                .iter()
                .map(|event| {
                    vec![
                        event
                            .at
                            .as_ref()
                            .and_then(|at| chrono::DateTime::from_timestamp(at.seconds, 0))
                            .map(|at| at.format("%Y-%m-%dT%H:%M:%SZ").to_string())
                            .unwrap_or_default(),
                        event.kind.clone(),
                        status_name(event.status),
                        power_state_name(event.power_state),
                        event.reason.clone(),
                    ]
                })
                .collect();
            print_table(&["at", "kind", "status", "power", "reason"], &rows);
            Ok(())
        }
        InstanceCommand::Show { instance, output } => {
            let client = Client::connect(connect, DevIdentity::Member).await?;
            let uuid = resolve(&client, &instance).await?;
            let instance = get(&client, &uuid).await?;
            output.print_record(&instance_record(&instance))
        }
        InstanceCommand::Delete { instance, wait } => {
            let client = Client::connect(connect, DevIdentity::Member).await?;
            let uuid = resolve(&client, &instance).await?;
            let instance = service(&client)
                .delete_instance(client.request(pb::DeleteInstanceRequest { uuid })?)
                .await?
                .into_inner();
            finish(&client, instance, &wait).await
        }
        InstanceCommand::Power {
            instance,
            target,
            wait,
        } => {
            let client = Client::connect(connect, DevIdentity::Member).await?;
            let uuid = resolve(&client, &instance).await?;
            let target = match target {
                PowerTarget::On => pb::PowerAction::On,
                PowerTarget::Off => pb::PowerAction::Off,
                PowerTarget::Reboot => pb::PowerAction::Reboot,
            };
            let request = pb::SetPowerStateRequest {
                uuid,
                target: target as i32,
            };
            let instance = service(&client)
                .set_power_state(client.request(request)?)
                .await?
                .into_inner();
            finish(&client, instance, &wait).await
        }
        InstanceCommand::Lock {
            instance,
            reason,
            expires_in,
        } => {
            let client = Client::connect(connect, DevIdentity::Member).await?;
            let uuid = resolve(&client, &instance).await?;
            let request = pb::LockInstanceRequest {
                uuid,
                reason,
                expires_in,
                expires_at: None,
            };
            let instance = service(&client)
                .lock_instance(client.request(request)?)
                .await?
                .into_inner();
            println!(
                "instance {} locked (by {})",
                instance.name,
                locked_by_name(&instance)
            );
            Ok(())
        }
        InstanceCommand::Allowed {
            instance,
            operation,
        } => {
            let client = Client::connect(connect, DevIdentity::Member).await?;
            let uuid = resolve(&client, &instance).await?;
            let answer = service(&client)
                .check_instance_operation(client.request(pb::CheckInstanceOperationRequest {
                    uuid,
                    operation: operation.clone(),
                })?)
                .await?
                .into_inner();
            crate::commands::print_allowed(
                &format!("instance {instance}"),
                &operation,
                &answer.blockers,
                false,
            )
        }
        InstanceCommand::Unlock { instance } => {
            let client = Client::connect(connect, DevIdentity::Member).await?;
            let uuid = resolve(&client, &instance).await?;
            let instance = service(&client)
                .unlock_instance(client.request(pb::UnlockInstanceRequest { uuid })?)
                .await?
                .into_inner();
            println!("instance {} unlocked", instance.name);
            Ok(())
        }
    }
}

fn service(client: &Client) -> InstanceServiceClient<Channel> {
    InstanceServiceClient::new(client.channel.clone())
        .max_decoding_message_size(ember_runtime::server::MAX_MESSAGE_BYTES)
}

async fn get(client: &Client, uuid: &str) -> Result<pb::Instance, CliError> {
    Ok(service(client)
        .get_instance(client.request(pb::GetInstanceRequest {
            uuid: uuid.to_owned(),
        })?)
        .await?
        .into_inner())
}

/// The uuid of the instance `name_or_uuid` names.
async fn resolve(client: &Client, name_or_uuid: &str) -> Result<String, CliError> {
    if uuid::Uuid::parse_str(name_or_uuid).is_ok() {
        return Ok(name_or_uuid.to_owned());
    }
    let matches = service(client)
        .list_instances(client.request(pb::ListInstancesRequest {
            name: name_or_uuid.to_owned(),
            limit: 2,
            ..pb::ListInstancesRequest::default()
        })?)
        .await?
        .into_inner()
        .instances;
    match matches.as_slice() {
        [only] => Ok(only.uuid.clone()),
        [] => Err(CliError::NotFound(format!(
            "not found: no instance named {name_or_uuid:?}"
        ))),
        _ => Err(CliError::Usage(format!(
            "several instances are named {name_or_uuid:?}: give the uuid (ember instance list --name {name_or_uuid})"
        ))),
    }
}

/// Prints the instance, after waiting for it to settle if asked.
async fn finish(client: &Client, instance: pb::Instance, wait: &WaitArgs) -> Result<(), CliError> {
    if !wait.wait {
        return print_instance(&instance);
    }
    let started = Instant::now();
    let deadline = started + wait.timeout();
    let mut current = instance;
    // Progress on stderr (stdout stays the result): each change of status
    // or power state, with the time since the wait began.
    let mut shown = String::new();
    while in_progress(&current) {
        let state = format!(
            "{} (power {})",
            status_name(current.status),
            power_state_name(current.power_state)
        );
        if state != shown {
            eprintln!(
                "[{:>5.1} s] instance {}: {state}",
                started.elapsed().as_secs_f64(),
                current.name
            );
            shown = state;
        }
        if Instant::now() >= deadline {
            return Err(CliError::TimedOut(format!(
                "instance {} still {} after {} s: stopped waiting (it goes on)",
                current.name,
                status_name(current.status),
                wait.wait_timeout
            )));
        }
        tokio::time::sleep(POLL_INTERVAL).await;
        let deleting = current.status == pb::InstanceStatus::Deleting as i32;
        current = match service(client)
            .get_instance(client.request(pb::GetInstanceRequest {
                uuid: current.uuid.clone(),
            })?)
            .await
        {
            Ok(response) => response.into_inner(),
            // A completed delete answers NotFound (as Nova's 404).
            Err(status) if deleting && status.code() == tonic::Code::NotFound => {
                eprintln!(
                    "[{:>5.1} s] instance {}: deleted",
                    started.elapsed().as_secs_f64(),
                    current.name
                );
                println!("instance {:?} ({}) deleted", current.name, current.uuid);
                return Ok(());
            }
            Err(status) => return Err(CliError::from(status)),
        };
    }
    if !shown.is_empty() {
        eprintln!(
            "[{:>5.1} s] instance {}: {} (power {})",
            started.elapsed().as_secs_f64(),
            current.name,
            status_name(current.status),
            power_state_name(current.power_state)
        );
    }
    print_instance(&current)?;
    if current.status == pb::InstanceStatus::Error as i32 {
        return Err(CliError::Failed(format!(
            "instance {} is ERROR: {}",
            current.name, current.status_reason
        )));
    }
    Ok(())
}

fn in_progress(instance: &pb::Instance) -> bool {
    use pb::InstanceStatus::{Building, Deleting, Rebooting};
    [Building, Deleting, Rebooting]
        .iter()
        .any(|status| instance.status == *status as i32)
        || [pb::PowerState::PoweringOn, pb::PowerState::PoweringOff]
            .iter()
            .any(|state| instance.power_state == *state as i32)
}

/// One `--nic`: a network's name or id alone, or `key=value` pairs of
/// `net`, `port`, `subnet` and `fixed_ip` (as `openstack server create
/// --nic` takes them).
fn parse_nic(nic: &str) -> Result<pb::InstanceNetwork, String> {
    if !nic.contains('=') {
        return Ok(pb::InstanceNetwork {
            network: nic.to_owned(),
            ..pb::InstanceNetwork::default()
        });
    }
    let mut network = pb::InstanceNetwork::default();
    for pair in nic.split(',') {
        let (key, value) = pair
            .split_once('=')
            .ok_or_else(|| format!("--nic {nic:?}: {pair:?} is not KEY=VALUE"))?;
        let slot = match key {
            "net" | "net-id" | "network" => &mut network.network,
            "port" | "port-id" => &mut network.port,
            "subnet" => &mut network.subnet,
            "fixed_ip" | "v4-fixed-ip" | "v6-fixed-ip" => &mut network.fixed_ip,
            other => {
                return Err(format!(
                    "--nic {nic:?}: unknown key {other:?} (net, port, subnet, fixed_ip)"
                ));
            }
        };
        *slot = value.to_owned();
    }
    Ok(network)
}

#[cfg(test)]
mod nic_tests {
    use super::*;

    #[test]
    fn nics_are_read_as_openstack_server_create_takes_them() {
        assert_eq!(parse_nic("private").expect("a name").network, "private");
        let nic = parse_nic("net=private,v4-fixed-ip=10.0.0.7").expect("pairs");
        assert_eq!(
            (nic.network.as_str(), nic.fixed_ip.as_str()),
            ("private", "10.0.0.7")
        );
        assert_eq!(parse_nic("port-id=p1").expect("a port").port, "p1");
        assert!(
            parse_nic("vlan=3")
                .expect_err("unknown")
                .contains("unknown key \"vlan\"")
        );
    }
}
