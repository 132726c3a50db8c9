//! `OS::Neutron::SecurityGroup`: a security group and its rules
//! (`/work/heat-schemas.md` §9). The rules are reconciled on create and
//! on update (see [`super::rules`]): the group ends with exactly the rules
//! asked for — plus Neutron's default egress rules when no egress rule is
//! given, as Heat keeps them.

use async_trait::async_trait;
use ember_openstack::neutron::{Kind, Neutron, id_of};
use serde_json::{Map, Value, json};

use super::rules::{group_rules, reconcile, resolve_remote_groups, with_default_egress};
use super::{Change, Settling, TaggedObject, copy_name_and_given, maps};
use crate::resources::openstack::{failure, text};
use crate::resources::{
    PropertySchema, PropertyType, ResourceFailure, ResourceRequest, ResourceTypeSchema,
};

pub struct SecurityGroup;

#[async_trait]
impl TaggedObject for SecurityGroup {
    const KIND: Kind = Kind::SecurityGroup;
    const CREATE_SETTLING: Settling = Settling::AsAnswered;

    fn schema(&self) -> ResourceTypeSchema {
        ResourceTypeSchema {
            type_name: "OS::Neutron::SecurityGroup",
            description: "A Neutron security group and its rules.",
            properties: vec![
                PropertySchema::new(
                    "name",
                    PropertyType::String,
                    "A string specifying a symbolic name for the security group, which is not required to be unique.",
                )
                .update_allowed(),
                PropertySchema::new("description", PropertyType::String, "Description of the security group.")
                    .update_allowed(),
                PropertySchema::new(
                    "rules",
                    PropertyType::List,
                    "List of security group rules: maps {direction (ingress), ethertype (IPv4), port_range_min, port_range_max, protocol, remote_mode (remote_ip_prefix), remote_group_id, remote_ip_prefix, description}.",
                )
                .default(json!([]))
                .update_allowed(),
                PropertySchema::new(
                    "stateful",
                    PropertyType::Boolean,
                    "Whether to create this security group as stateful or stateless.",
                )
                .update_allowed(),
            ],
            // Only `show` (every type's), as Heat.
            attributes: Vec::new(),
            accepts_any_properties: false,
            accepts_any_attributes: false,
        }
    }

    async fn create_body(
        &self,
        _neutron: &Neutron,
        request: &ResourceRequest,
        name: &str,
    ) -> Result<Map<String, Value>, ResourceFailure> {
        let properties = &request.properties;
        check_name(properties)?;
        // The rules are checked before anything is made.
        group_rules(&maps(properties, "rules")?, "")?;
        let mut body = Map::new();
        copy_name_and_given(&mut body, properties, name, &["description", "stateful"]);
        Ok(body)
    }

    async fn update_body(
        &self,
        neutron: &Neutron,
        change: &Change<'_>,
    ) -> Result<Map<String, Value>, ResourceFailure> {
        check_name(change.after())?;
        let mut body = Map::new();
        change.changed_name(&mut body, Self::KIND);
        change.copy_changed(&mut body, &["description"]);
        if let Some(stateful) = change.changed("stateful") {
            // Neutron refuses the change while ports use the group: say
            // so before anything changes, as Heat does.
            let ports = neutron
                .list(Kind::Port, &[("security_groups", change.id)])
                .await
                .map_err(failure)?;
            if !ports.is_empty() {
                return Err(ResourceFailure::new(format!(
                    "Updating the \"stateful\" property while security group \"{}\" is attached to ports. Detach all ports from the security group and retry. is not supported.",
                    change.id
                )));
            }
            body.insert("stateful".to_owned(), stateful);
        }
        Ok(body)
    }

    async fn after_create(
        &self,
        neutron: &Neutron,
        request: &ResourceRequest,
        object: &Value,
    ) -> Result<(), ResourceFailure> {
        let id = id_of(object).map_err(failure)?;
        apply_rules(neutron, &request.project_id, &id, &request.properties).await
    }

    async fn after_update(
        &self,
        neutron: &Neutron,
        change: &Change<'_>,
    ) -> Result<(), ResourceFailure> {
        if change.changed("rules").is_none() {
            return Ok(());
        }
        apply_rules(
            neutron,
            &change.request.project_id,
            change.id,
            change.after(),
        )
        .await
    }
}

/// Heat's `validate`: a group may not be named `default`.
fn check_name(properties: &Map<String, Value>) -> Result<(), ResourceFailure> {
    if text(properties, "name").as_deref() == Some("default") {
        return Err(ResourceFailure::new(
            "Security groups cannot be assigned the name \"default\".".to_owned(),
        ));
    }
    Ok(())
}

/// Makes the group's rules the ones `rules` lists (and the default egress
/// ones unless an egress rule is listed).
async fn apply_rules(
    neutron: &Neutron,
    project_id: &str,
    id: &str,
    properties: &Map<String, Value>,
) -> Result<(), ResourceFailure> {
    let mut desired = with_default_egress(group_rules(&maps(properties, "rules")?, id)?);
    resolve_remote_groups(neutron, project_id, &mut desired).await?;
    reconcile(neutron, id, &desired).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::openstack::neutron::fields;

    #[test]
    fn a_group_may_not_be_named_default() {
        assert_eq!(
            check_name(&fields(json!({"name": "default"})))
                .expect_err("refused")
                .to_string(),
            "Security groups cannot be assigned the name \"default\"."
        );
        assert!(check_name(&fields(json!({"name": "web"}))).is_ok());
        assert!(check_name(&fields(json!({}))).is_ok());
    }
}
