//! `InstanceService`: thin handlers over [`crate::instances::InstanceService`]
//! — decode the request, call the service with the caller's identity,
//! encode the instance.

use std::sync::Arc;

use ember_proto::engine::v1 as pb;
use ember_runtime::Identity;
use ember_runtime::ids::{parse_optional_uuid, parse_uuid};
use ember_runtime::time::{to_optional_timestamp, to_timestamp};
use tonic::{Request, Response, Status};

use crate::domain::instance::InstanceEvent;
use crate::domain::instance::placement::{NetworkRequest, Placement};
use crate::domain::instance::{
    Instance, InstanceChanges, InstanceStatus, LockedBy, NewInstance, PowerAction, PowerState,
    Workload,
};
use crate::error::Error;
use crate::instances::{InstanceFilter, InstanceService};

pub struct InstanceHandler {
    instances: Arc<InstanceService>,
}

impl InstanceHandler {
    pub fn new(instances: Arc<InstanceService>) -> Self {
        InstanceHandler { instances }
    }
}

type Reply<T> = Result<Response<T>, Status>;

fn reply(instance: &Instance) -> Reply<pb::Instance> {
    Ok(Response::new(instance_to_proto(instance)))
}

#[tonic::async_trait]
impl pb::instance_service_server::InstanceService for InstanceHandler {
    async fn create_instance(
        &self,
        request: Request<pb::CreateInstanceRequest>,
    ) -> Reply<pb::Instance> {
        let caller = Identity::of(&request)?.clone();
        let subject_token = ember_runtime::identity::SubjectToken::of(&request).cloned();
        let request = request.into_inner();
        let new = NewInstance {
            name: request.name,
            flavor: request.flavor,
            image: request.image,
            metadata: request.metadata.into_iter().collect(),
            workload: Workload {
                user_data: request.user_data,
                command: request.command,
                env: request.env.into_iter().collect(),
            },
            placement: Placement {
                networks: request
                    .networks
                    .into_iter()
                    .map(|network| {
                        let given = |text: String| (!text.is_empty()).then_some(text);
                        NetworkRequest {
                            network: given(network.network),
                            port: given(network.port),
                            subnet: given(network.subnet),
                            fixed_ip: given(network.fixed_ip),
                            tag: None,
                        }
                    })
                    .collect(),
                security_groups: request.security_groups,
                key_name: (!request.key_name.is_empty()).then_some(request.key_name),
                ..Placement::default()
            },
            delegation: None,
        };
        reply(
            &self
                .instances
                .create_delegating(&caller, subject_token.as_ref(), new)
                .await?,
        )
    }

    async fn get_instance(&self, request: Request<pb::GetInstanceRequest>) -> Reply<pb::Instance> {
        let caller = Identity::of(&request)?.clone();
        let uuid = parse_uuid("uuid", &request.get_ref().uuid)?;
        reply(&self.instances.get(&caller, uuid).await?)
    }

    async fn list_instances(
        &self,
        request: Request<pb::ListInstancesRequest>,
    ) -> Reply<pb::ListInstancesResponse> {
        let caller = Identity::of(&request)?.clone();
        let request = request.into_inner();
        let filter = InstanceFilter {
            status: status_filter(request.status)?,
            locked: request.locked,
            name: (!request.name.is_empty()).then_some(request.name),
            limit: request.limit,
            marker: parse_optional_uuid("marker", &request.marker)?,
            all_projects: request.all_projects,
        };
        let page = self.instances.list(&caller, &filter).await?;
        Ok(Response::new(pb::ListInstancesResponse {
            instances: page.instances.iter().map(instance_to_proto).collect(),
            next_marker: page
                .next_marker
                .map(|marker| marker.to_string())
                .unwrap_or_default(),
        }))
    }

    async fn update_instance(
        &self,
        request: Request<pb::UpdateInstanceRequest>,
    ) -> Reply<pb::Instance> {
        let caller = Identity::of(&request)?.clone();
        let request = request.into_inner();
        let uuid = parse_uuid("uuid", &request.uuid)?;
        let changes = InstanceChanges {
            name: request.name,
            metadata: request
                .metadata
                .map(|metadata| metadata.items.into_iter().collect()),
            networks: None,
        };
        reply(&self.instances.update(&caller, uuid, changes).await?)
    }

    async fn delete_instance(
        &self,
        request: Request<pb::DeleteInstanceRequest>,
    ) -> Reply<pb::Instance> {
        let caller = Identity::of(&request)?.clone();
        let uuid = parse_uuid("uuid", &request.get_ref().uuid)?;
        reply(&self.instances.delete(&caller, uuid).await?)
    }

    async fn set_power_state(
        &self,
        request: Request<pb::SetPowerStateRequest>,
    ) -> Reply<pb::Instance> {
        let caller = Identity::of(&request)?.clone();
        let request = request.into_inner();
        let uuid = parse_uuid("uuid", &request.uuid)?;
        let action = match pb::PowerAction::try_from(request.target) {
            Ok(pb::PowerAction::On) => PowerAction::On,
            Ok(pb::PowerAction::Off) => PowerAction::Off,
            Ok(pb::PowerAction::Reboot) => PowerAction::Reboot,
            Ok(pb::PowerAction::Unspecified) | Err(_) => {
                return Err(Error::InvalidInput(format!(
                    "target: {} is not a power action: use POWER_ACTION_ON, POWER_ACTION_OFF or POWER_ACTION_REBOOT",
                    request.target
                ))
                .into());
            }
        };
        reply(&self.instances.power(&caller, uuid, action).await?)
    }

    async fn lock_instance(
        &self,
        request: Request<pb::LockInstanceRequest>,
    ) -> Reply<pb::Instance> {
        let caller = Identity::of(&request)?.clone();
        let request = request.into_inner();
        let uuid = parse_uuid("uuid", &request.uuid)?;
        let expires_at =
            super::convert::lock_expiry(request.expires_in, request.expires_at.as_ref())?;
        let outcome = self
            .instances
            .lock_until(&caller, uuid, request.reason, expires_at)
            .await?;
        reply(&outcome.instance)
    }

    async fn list_instance_events(
        &self,
        request: Request<pb::ListInstanceEventsRequest>,
    ) -> Reply<pb::ListInstanceEventsResponse> {
        let caller = Identity::of(&request)?.clone();
        let request = request.into_inner();
        let uuid = parse_uuid("uuid", &request.uuid)?;
        let events = self
            .instances
            .events(&caller, uuid, u64::from(request.limit))
            .await?;
        Ok(Response::new(pb::ListInstanceEventsResponse {
            events: events.iter().map(event_to_proto).collect(),
        }))
    }

    async fn check_instance_operation(
        &self,
        request: Request<pb::CheckInstanceOperationRequest>,
    ) -> Reply<pb::CheckInstanceOperationResponse> {
        let caller = Identity::of(&request)?.clone();
        let uuid = parse_uuid("uuid", &request.get_ref().uuid)?;
        let blockers = self
            .instances
            .check_operation(&caller, uuid, &request.get_ref().operation)
            .await?;
        let (allowed, reason, blockers) = super::convert::dry_run_verdict(&blockers);
        Ok(tonic::Response::new(pb::CheckInstanceOperationResponse {
            allowed,
            reason,
            blockers,
        }))
    }

    async fn unlock_instance(
        &self,
        request: Request<pb::UnlockInstanceRequest>,
    ) -> Reply<pb::Instance> {
        let caller = Identity::of(&request)?.clone();
        let uuid = parse_uuid("uuid", &request.get_ref().uuid)?;
        reply(&self.instances.unlock(&caller, uuid).await?)
    }
}

fn status_filter(value: i32) -> Result<Option<InstanceStatus>, Error> {
    match pb::InstanceStatus::try_from(value) {
        Ok(pb::InstanceStatus::Unspecified) => Ok(None),
        Ok(status) => Ok(Some(status_from_proto(status))),
        Err(_) => Err(Error::InvalidInput(format!(
            "status: {value} is not an instance status"
        ))),
    }
}

fn status_from_proto(status: pb::InstanceStatus) -> InstanceStatus {
    match status {
        pb::InstanceStatus::Building | pb::InstanceStatus::Unspecified => InstanceStatus::Building,
        pb::InstanceStatus::Active => InstanceStatus::Active,
        pb::InstanceStatus::Stopped => InstanceStatus::Stopped,
        pb::InstanceStatus::Rebooting => InstanceStatus::Rebooting,
        pb::InstanceStatus::Error => InstanceStatus::Error,
        pb::InstanceStatus::Deleting => InstanceStatus::Deleting,
        pb::InstanceStatus::Deleted => InstanceStatus::Deleted,
    }
}

fn status_to_proto(status: InstanceStatus) -> pb::InstanceStatus {
    match status {
        InstanceStatus::Building => pb::InstanceStatus::Building,
        InstanceStatus::Active => pb::InstanceStatus::Active,
        InstanceStatus::Stopped => pb::InstanceStatus::Stopped,
        InstanceStatus::Rebooting => pb::InstanceStatus::Rebooting,
        InstanceStatus::Error => pb::InstanceStatus::Error,
        InstanceStatus::Deleting => pb::InstanceStatus::Deleting,
        InstanceStatus::Deleted => pb::InstanceStatus::Deleted,
    }
}

fn power_state_to_proto(power_state: PowerState) -> pb::PowerState {
    match power_state {
        PowerState::NoState => pb::PowerState::Nostate,
        PowerState::On => pb::PowerState::On,
        PowerState::Off => pb::PowerState::Off,
        PowerState::PoweringOn => pb::PowerState::PoweringOn,
        PowerState::PoweringOff => pb::PowerState::PoweringOff,
    }
}

fn event_to_proto(event: &InstanceEvent) -> pb::InstanceEvent {
    pb::InstanceEvent {
        id: event.id.to_string(),
        instance_uuid: event.instance_uuid.to_string(),
        kind: event.kind.clone(),
        status: status_to_proto(event.status) as i32,
        power_state: power_state_to_proto(event.power_state) as i32,
        reason: event.reason.clone(),
        at: Some(to_timestamp(event.at)),
    }
}

pub fn instance_to_proto(instance: &Instance) -> pb::Instance {
    let lock = instance.maintenance_lock.as_ref();
    pb::Instance {
        uuid: instance.uuid.to_string(),
        name: instance.name.clone(),
        project_id: instance.project_id.clone(),
        user_id: instance.user_id.clone(),
        flavor: instance.flavor.clone(),
        image: instance.image.clone(),
        metadata: instance
            .metadata
            .iter()
            .map(|(key, value)| (key.clone(), value.clone()))
            .collect(),
        status: status_to_proto(instance.status) as i32,
        power_state: power_state_to_proto(instance.power_state) as i32,
        status_reason: instance.status_reason.clone(),
        locked: lock.is_some(),
        locked_by: match lock.map(|lock| lock.locked_by) {
            None => pb::LockedBy::Unspecified,
            Some(LockedBy::Owner) => pb::LockedBy::Owner,
            Some(LockedBy::Admin) => pb::LockedBy::Admin,
        } as i32,
        locked_by_user: lock.map(|lock| lock.user_id.clone()).unwrap_or_default(),
        locked_at: to_optional_timestamp(lock.map(|lock| lock.locked_at)),
        locked_reason: lock
            .and_then(|lock| lock.reason.clone())
            .unwrap_or_default(),
        lock_expires_at: to_optional_timestamp(lock.and_then(|lock| lock.expires_at)),
        created_at: Some(to_timestamp(instance.created_at)),
        updated_at: Some(to_timestamp(instance.updated_at)),
        command: instance.workload.command.clone(),
        env: instance
            .workload
            .env
            .iter()
            .map(|(name, value)| (name.clone(), value.clone()))
            .collect(),
        has_user_data: !instance.workload.user_data.is_empty(),
        networks: instance
            .placement
            .networks
            .iter()
            .map(|network| pb::InstanceNetwork {
                network: network.network.clone().unwrap_or_default(),
                port: network.port.clone().unwrap_or_default(),
                subnet: network.subnet.clone().unwrap_or_default(),
                fixed_ip: network.fixed_ip.clone().unwrap_or_default(),
            })
            .collect(),
        security_groups: instance.placement.security_groups.clone(),
        key_name: instance.placement.key_name.clone().unwrap_or_default(),
    }
}
