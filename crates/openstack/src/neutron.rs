//! Neutron (network): networks, subnets, ports, routers and their
//! interfaces, security groups and rules, floating IPs. Neutron's objects
//! share one shape — a collection, create/show/update/delete, filters,
//! tags — so one set of calls serves every [`Kind`]; the objects stay JSON
//! (their attributes are what templates read back).
//!
//! Ember tags what it makes (see [`Neutron::create`]), and finds it again
//! by the tag.

use serde_json::{Map, Value, json};

use crate::error::{Error, Result, Service};
use crate::session::{Call, Session, segment};

/// The kinds of Neutron object Ember makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    Network,
    Subnet,
    Port,
    Router,
    SecurityGroup,
    SecurityGroupRule,
    FloatingIp,
    /// Found by name or id only (a port's or network's `qos_policy`).
    QosPolicy,
    /// Found by name or id only (a subnet's `subnetpool`).
    SubnetPool,
    /// Found by name or id only (a subnet's `segment`), and listed for a
    /// network's `segments`.
    Segment,
}

impl Kind {
    /// The collection's path segment.
    pub fn collection(self) -> &'static str {
        match self {
            Kind::Network => "networks",
            Kind::Subnet => "subnets",
            Kind::Port => "ports",
            Kind::Router => "routers",
            Kind::SecurityGroup => "security-groups",
            Kind::SecurityGroupRule => "security-group-rules",
            Kind::FloatingIp => "floatingips",
            Kind::QosPolicy => "qos/policies",
            Kind::SubnetPool => "subnetpools",
            Kind::Segment => "segments",
        }
    }

    /// The key one object is wrapped in.
    pub fn member(self) -> &'static str {
        match self {
            Kind::Network => "network",
            Kind::Subnet => "subnet",
            Kind::Port => "port",
            Kind::Router => "router",
            Kind::SecurityGroup => "security_group",
            Kind::SecurityGroupRule => "security_group_rule",
            Kind::FloatingIp => "floatingip",
            Kind::QosPolicy => "policy",
            Kind::SubnetPool => "subnetpool",
            Kind::Segment => "segment",
        }
    }

    /// The key a listing is wrapped in.
    fn listing(self) -> &'static str {
        match self {
            Kind::SecurityGroup => "security_groups",
            Kind::SecurityGroupRule => "security_group_rules",
            Kind::QosPolicy => "policies",
            other => other.collection(),
        }
    }

    /// How messages name it.
    pub fn noun(self) -> &'static str {
        match self {
            Kind::Network => "network",
            Kind::Subnet => "subnet",
            Kind::Port => "port",
            Kind::Router => "router",
            Kind::SecurityGroup => "security group",
            Kind::SecurityGroupRule => "security group rule",
            Kind::FloatingIp => "floating IP",
            Kind::QosPolicy => "QoS policy",
            Kind::SubnetPool => "subnet pool",
            Kind::Segment => "segment",
        }
    }

    /// Whether the kind carries tags (rules do not).
    pub fn has_tags(self) -> bool {
        self != Kind::SecurityGroupRule
    }
}

/// Neutron, through one session.
#[derive(Debug, Clone)]
pub struct Neutron {
    session: Session,
}

/// The most objects one listing page asks for.
const PAGE: usize = 500;

impl Neutron {
    pub fn new(session: &Session) -> Neutron {
        Neutron {
            session: session.clone(),
        }
    }

    /// Makes an object from `attributes` (the member's fields), tagged
    /// with `tags`. Returns what Neutron made.
    ///
    /// The tags are set right after the create (Neutron drops tags in a
    /// create body unless an extension driver takes them), so a caller
    /// that may find one made but untagged looks for it by name too.
    pub async fn create(
        &self,
        kind: Kind,
        attributes: Map<String, Value>,
        tags: &[String],
    ) -> Result<Value> {
        let answer = self
            .session
            .call(Call::post(
                Service::Network,
                format!("/{}", kind.collection()),
                json!({ kind.member(): attributes }),
            ))
            .await?;
        let mut created = member(kind, answer.json()?)?;
        if kind.has_tags() && !tags.is_empty() {
            let id = id_of(&created)?;
            self.set_tags(kind, &id, tags).await?;
            created["tags"] = json!(tags);
        }
        Ok(created)
    }

    /// Replaces the object's tags.
    pub async fn set_tags(&self, kind: Kind, id: &str, tags: &[String]) -> Result<()> {
        self.session
            .call(Call::put(
                Service::Network,
                format!("/{}/{}/tags", kind.collection(), segment(id)),
                json!({ "tags": tags }),
            ))
            .await?;
        Ok(())
    }

    /// The object, or `None` when Neutron no longer has it.
    pub async fn get(&self, kind: Kind, id: &str) -> Result<Option<Value>> {
        match self
            .session
            .call_found(Call::get(
                Service::Network,
                format!("/{}/{}", kind.collection(), segment(id)),
            ))
            .await?
        {
            Some(answer) => Ok(Some(member(kind, answer.json()?)?)),
            None => Ok(None),
        }
    }

    /// Changes the object's `attributes`; returns it as it is now.
    pub async fn update(
        &self,
        kind: Kind,
        id: &str,
        attributes: Map<String, Value>,
    ) -> Result<Value> {
        let answer = self
            .session
            .call(Call::put(
                Service::Network,
                format!("/{}/{}", kind.collection(), segment(id)),
                json!({ kind.member(): attributes }),
            ))
            .await?;
        member(kind, answer.json()?)
    }

    /// Deletes the object; one already gone is deleted.
    pub async fn delete(&self, kind: Kind, id: &str) -> Result<()> {
        self.session
            .call_removing(Call::delete(
                Service::Network,
                format!("/{}/{}", kind.collection(), segment(id)),
            ))
            .await
    }

    /// Every object matching `filters` (Neutron's query filters: `name`,
    /// `tags`, `network_id`, `device_id`, …), page by page.
    pub async fn list(&self, kind: Kind, filters: &[(&str, &str)]) -> Result<Vec<Value>> {
        let mut objects = Vec::new();
        let mut marker: Option<String> = None;
        loop {
            let mut call = Call::get(Service::Network, format!("/{}", kind.collection()))
                .query("limit", PAGE.to_string());
            for (name, value) in filters {
                call = call.query(name, *value);
            }
            if let Some(marker) = &marker {
                call = call.query("marker", marker.clone());
            }
            let page: Value = self.session.call(call).await?.json()?;
            let items = page[kind.listing()].as_array().cloned().unwrap_or_default();
            let full = items.len() >= PAGE;
            objects.extend(items);
            match objects.last() {
                Some(last) if full => marker = Some(id_of(last)?),
                _ => return Ok(objects),
            }
        }
    }

    /// The id of the object `name_or_id` names: itself if it is an id of
    /// one, else the one object of that name (none or several is an error
    /// naming it, as Heat's `find_resourceid_by_name_or_id` says).
    /// Remembered for a minute (see [`Session::remembered_id`]).
    pub async fn find_id(&self, kind: Kind, name_or_id: &str) -> Result<String> {
        self.session
            .remembered_id(kind.collection(), name_or_id, || {
                self.look_up_id(kind, name_or_id)
            })
            .await
    }

    async fn look_up_id(&self, kind: Kind, name_or_id: &str) -> Result<String> {
        if let Some(object) = self.get(kind, name_or_id).await? {
            return id_of(&object);
        }
        let named = self.list(kind, &[("name", name_or_id)]).await?;
        match named.as_slice() {
            [one] => id_of(one),
            [] => Err(Error::Api(crate::error::ApiError {
                service: Service::Network,
                method: "GET".to_owned(),
                path: format!("/{}", kind.collection()),
                status: 404,
                message: format!(
                    "Unable to find {} with name or id '{name_or_id}'",
                    kind.member()
                ),
                request_id: None,
            })),
            _ => Err(Error::Api(crate::error::ApiError {
                service: Service::Network,
                method: "GET".to_owned(),
                path: format!("/{}", kind.collection()),
                status: 409,
                message: format!(
                    "Multiple {} matches found for name '{name_or_id}', use an ID to be more specific.",
                    kind.member()
                ),
                request_id: None,
            })),
        }
    }

    /// The ids of the agents `agents` names that host the object `id` (a
    /// network's DHCP agents, a router's L3 agents). Admin only.
    pub async fn hosting_agents(&self, agents: AgentKind, id: &str) -> Result<Vec<String>> {
        let answer: Value = self
            .session
            .call(Call::get(Service::Network, agents.hosting_path(id)))
            .await?
            .json()?;
        answer["agents"]
            .as_array()
            .map(|listed| listed.iter().map(id_of).collect())
            .unwrap_or_else(|| Ok(Vec::new()))
    }

    /// Has the agent `agent_id` host the object `id`. Admin only.
    pub async fn add_to_agent(&self, agents: AgentKind, agent_id: &str, id: &str) -> Result<()> {
        self.session
            .call(Call::post(
                Service::Network,
                format!(
                    "/agents/{}/{}",
                    segment(agent_id),
                    agents.agent_collection()
                ),
                json!({ agents.object_field(): id }),
            ))
            .await?;
        Ok(())
    }

    /// Takes the object `id` off the agent `agent_id`; an agent or object
    /// gone is taken off. Admin only.
    pub async fn remove_from_agent(
        &self,
        agents: AgentKind,
        agent_id: &str,
        id: &str,
    ) -> Result<()> {
        self.session
            .call_removing(Call::delete(
                Service::Network,
                format!(
                    "/agents/{}/{}/{}",
                    segment(agent_id),
                    agents.agent_collection(),
                    segment(id)
                ),
            ))
            .await
    }

    /// Plugs a subnet or a port into a router.
    pub async fn add_router_interface(
        &self,
        router_id: &str,
        interface: &RouterInterface,
    ) -> Result<Value> {
        let answer = self
            .session
            .call(Call::put(
                Service::Network,
                format!("/routers/{}/add_router_interface", segment(router_id)),
                interface.body(),
            ))
            .await?;
        answer.json()
    }

    /// Unplugs it; one not plugged (or a router gone) is unplugged.
    pub async fn remove_router_interface(
        &self,
        router_id: &str,
        interface: &RouterInterface,
    ) -> Result<()> {
        self.session
            .call_removing(Call::put(
                Service::Network,
                format!("/routers/{}/remove_router_interface", segment(router_id)),
                interface.body(),
            ))
            .await
    }
}

/// The agents that host Neutron objects: DHCP agents host networks, L3
/// agents routers (Heat's `dhcp_agent_ids` and `l3_agent_ids`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AgentKind {
    Dhcp,
    L3,
}

impl AgentKind {
    /// Where the agents hosting the object `id` are listed.
    fn hosting_path(self, id: &str) -> String {
        match self {
            AgentKind::Dhcp => format!("/networks/{}/dhcp-agents", segment(id)),
            AgentKind::L3 => format!("/routers/{}/l3-agents", segment(id)),
        }
    }

    /// An agent's collection of what it hosts.
    fn agent_collection(self) -> &'static str {
        match self {
            AgentKind::Dhcp => "dhcp-networks",
            AgentKind::L3 => "l3-routers",
        }
    }

    /// The field naming the hosted object when adding it to an agent.
    fn object_field(self) -> &'static str {
        match self {
            AgentKind::Dhcp => "network_id",
            AgentKind::L3 => "router_id",
        }
    }
}

/// What plugs into a router.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RouterInterface {
    Subnet(String),
    Port(String),
}

impl RouterInterface {
    fn body(&self) -> Value {
        match self {
            RouterInterface::Subnet(id) => json!({ "subnet_id": id }),
            RouterInterface::Port(id) => json!({ "port_id": id }),
        }
    }
}

fn member(kind: Kind, mut answer: Value) -> Result<Value> {
    match answer.get_mut(kind.member()) {
        Some(object) if object.is_object() => Ok(object.take()),
        _ => Err(Error::Decode {
            service: Service::Network,
            message: format!("no {} in the answer", kind.member()),
        }),
    }
}

/// An object's `id`.
pub fn id_of(object: &Value) -> Result<String> {
    object
        .get("id")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| Error::Decode {
            service: Service::Network,
            message: "an object without an id".to_owned(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_name_their_paths_and_wrappers_as_neutron_does() {
        assert_eq!(Kind::SecurityGroup.collection(), "security-groups");
        assert_eq!(Kind::SecurityGroup.member(), "security_group");
        assert_eq!(Kind::SecurityGroup.listing(), "security_groups");
        assert_eq!(Kind::FloatingIp.collection(), "floatingips");
        assert_eq!(Kind::FloatingIp.listing(), "floatingips");
        assert!(!Kind::SecurityGroupRule.has_tags());
        assert_eq!(Kind::QosPolicy.collection(), "qos/policies");
        assert_eq!(Kind::QosPolicy.member(), "policy");
        assert_eq!(Kind::QosPolicy.listing(), "policies");
        assert_eq!(Kind::SubnetPool.listing(), "subnetpools");
    }

    #[test]
    fn agents_are_reached_by_the_scheduler_extensions_paths() {
        assert_eq!(
            AgentKind::Dhcp.hosting_path("n 1"),
            "/networks/n%201/dhcp-agents"
        );
        assert_eq!(AgentKind::L3.hosting_path("r"), "/routers/r/l3-agents");
        assert_eq!(AgentKind::Dhcp.agent_collection(), "dhcp-networks");
        assert_eq!(AgentKind::L3.agent_collection(), "l3-routers");
        assert_eq!(AgentKind::Dhcp.object_field(), "network_id");
        assert_eq!(AgentKind::L3.object_field(), "router_id");
    }

    #[test]
    fn an_answer_without_its_member_is_an_error() {
        assert_eq!(
            member(Kind::Port, json!({"port": {"id": "p"}})).expect("a port"),
            json!({"id": "p"})
        );
        assert!(member(Kind::Port, json!({"network": {"id": "p"}})).is_err());
        assert!(id_of(&json!({"name": "x"})).is_err());
    }
}
