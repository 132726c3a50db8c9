//! Static analysis of a parsed template: which resources each resource
//! depends on, whether every reference points at something that exists,
//! and the dependency graph with cycle detection and parallel levels.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::definition::Template;
use super::error::{TemplateError, child_path, index_path};
use super::parameter_values::PSEUDO_PARAMETERS;
use super::resource_definition::{DeletionPolicySetting, ResourceDefinition};
use super::version::FunctionName;
use super::walk::{Visitor, Walker};

/// A reference found in a snippet: what refers, to what, and where.
struct Reference {
    kind: ReferenceKind,
    name: String,
    path: String,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum ReferenceKind {
    GetResource,
    GetAttr,
    GetParam,
    Condition,
}

#[derive(Default)]
struct ReferenceCollector {
    references: Vec<Reference>,
}

impl ReferenceCollector {
    fn push(&mut self, kind: ReferenceKind, name: &str, path: &str) {
        self.references.push(Reference {
            kind,
            name: name.to_string(),
            path: path.to_string(),
        });
    }
}

impl Visitor for ReferenceCollector {
    fn function_call(
        &mut self,
        function: FunctionName,
        args: &Value,
        path: &str,
    ) -> Result<(), TemplateError> {
        // Only literal names can be checked statically; computed names are
        // left to resolution time.
        let first = match args {
            Value::Array(items) => items.first(),
            other => Some(other),
        };
        let Some(Value::String(name)) = first else {
            return Ok(());
        };
        match function {
            FunctionName::GetResource if !args.is_array() => {
                self.push(ReferenceKind::GetResource, name, path)
            }
            FunctionName::GetAttr if args.is_array() => {
                self.push(ReferenceKind::GetAttr, name, path)
            }
            FunctionName::GetParam => self.push(ReferenceKind::GetParam, name, path),
            _ => {}
        }
        Ok(())
    }

    fn condition_reference(&mut self, name: &str, path: &str) -> Result<(), TemplateError> {
        self.push(ReferenceKind::Condition, name, path);
        Ok(())
    }
}

impl Template {
    /// The resources `resource_name` depends on: its `depends_on` plus every
    /// literal `get_resource`/`get_attr` in its definition, counting all
    /// branches of `if`. Names of unknown resources are included so callers
    /// can see them; `validate_references` reports them.
    pub fn dependencies(&self, resource_name: &str) -> BTreeSet<String> {
        let Some(resource) = self.resources.get(resource_name) else {
            return BTreeSet::new();
        };
        let mut dependencies: BTreeSet<String> = resource.depends_on.iter().cloned().collect();
        // The template was walked successfully when parsed, so errors here
        // cannot happen; ignoring them keeps this method infallible.
        let collector = self.resource_references(resource).unwrap_or_default();
        for reference in collector.references {
            if matches!(
                reference.kind,
                ReferenceKind::GetResource | ReferenceKind::GetAttr
            ) {
                dependencies.insert(reference.name);
            }
        }
        dependencies.extend(self.implicit_dependencies(resource));
        dependencies
    }

    /// Heat's implicit dependencies among network resources, which
    /// templates written for Heat rely on without saying so: a port, and a
    /// server with an interface on a network, wait for every subnet of the
    /// template on that network (a port made before its subnet gets no
    /// address); a router with a gateway waits for the subnets of the
    /// gateway's network; a floating IP waits for the routers whose gateway
    /// is on its floating network and for every router interface (its port
    /// must be reachable from that network). Networks are compared as
    /// written (`{get_resource: net}` on both sides, or the same name).
    fn implicit_dependencies(&self, resource: &ResourceDefinition) -> Vec<String> {
        let property = |definition: &ResourceDefinition, name: &str| -> Option<Value> {
            definition
                .properties
                .get(name)
                .cloned()
                .filter(|value| !value.is_null())
        };
        let of_type = |type_name: &'static str| {
            self.resources
                .values()
                .filter(move |other| other.resource_type == type_name)
        };
        let subnets_on = |networks: &[Value]| -> Vec<String> {
            of_type("OS::Neutron::Subnet")
                .filter(|subnet| {
                    property(subnet, "network")
                        .or_else(|| property(subnet, "network_id"))
                        .is_some_and(|network| networks.contains(&network))
                })
                .map(|subnet| subnet.name.clone())
                .collect()
        };
        match resource.resource_type.as_str() {
            "OS::Neutron::Port" => {
                let networks: Vec<Value> = ["network", "network_id"]
                    .iter()
                    .filter_map(|name| property(resource, name))
                    .collect();
                subnets_on(&networks)
            }
            "OS::Nova::Server" | "Ember::Compute::Instance" => {
                let networks: Vec<Value> = match property(resource, "networks") {
                    Some(Value::Array(entries)) => entries
                        .iter()
                        .filter_map(|entry| entry.get("network").or_else(|| entry.get("uuid")))
                        .cloned()
                        .collect(),
                    _ => Vec::new(),
                };
                subnets_on(&networks)
            }
            "OS::Neutron::Router" => {
                let gateway = property(resource, "external_gateway_info")
                    .and_then(|gateway| gateway.get("network").cloned());
                subnets_on(&gateway.into_iter().collect::<Vec<_>>())
            }
            "OS::Neutron::FloatingIP" => {
                let floating = property(resource, "floating_network")
                    .or_else(|| property(resource, "floating_network_id"));
                let mut dependencies: Vec<String> = of_type("OS::Neutron::RouterInterface")
                    .map(|interface| interface.name.clone())
                    .collect();
                if let Some(floating) = floating {
                    dependencies.extend(
                        of_type("OS::Neutron::Router")
                            .filter(|router| {
                                property(router, "external_gateway_info")
                                    .and_then(|gateway| gateway.get("network").cloned())
                                    .is_some_and(|network| network == floating)
                            })
                            .map(|router| router.name.clone()),
                    );
                }
                dependencies
            }
            _ => Vec::new(),
        }
        .into_iter()
        .filter(|name| *name != resource.name)
        .collect()
    }

    fn resource_references(
        &self,
        resource: &ResourceDefinition,
    ) -> Result<ReferenceCollector, TemplateError> {
        let path = child_path("resources", &resource.name);
        let mut collector = ReferenceCollector::default();
        let mut walker = Walker::new(self.version, &mut collector);
        walker.walk_value(&resource.properties, &child_path(&path, "properties"))?;
        let deletion_policy = match &resource.deletion_policy {
            DeletionPolicySetting::Expression(expression) => Some(expression),
            DeletionPolicySetting::Literal(_) => None,
        };
        for (key, value) in [
            ("metadata", resource.metadata.as_ref()),
            ("update_policy", resource.update_policy.as_ref()),
            ("external_id", resource.external_id.as_ref()),
            ("deletion_policy", deletion_policy),
        ] {
            if let Some(value) = value {
                walker.walk_value(value, &child_path(&path, key))?;
            }
        }
        if let Some(condition) = &resource.condition {
            walker.walk_condition(condition, &child_path(&path, "condition"))?;
        }
        Ok(collector)
    }

    /// Checks that every `depends_on`, `get_resource`, `get_attr`,
    /// `get_param` and condition name refers to something the template
    /// declares, then that resources do not depend on each other in a
    /// cycle. The first problem is returned, with its path.
    pub fn validate_references(&self) -> Result<(), TemplateError> {
        let mut references = Vec::new();
        for (name, resource) in &self.resources {
            let path = child_path(&child_path("resources", name), "depends_on");
            for (index, target) in resource.depends_on.iter().enumerate() {
                if !self.resources.contains_key(target) {
                    return Err(TemplateError::new(
                        index_path(&path, index),
                        format!("depends_on refers to unknown resource '{target}'"),
                    ));
                }
            }
            references.extend(self.resource_references(resource)?.references);
        }
        for (name, output) in &self.outputs {
            let path = child_path("outputs", name);
            let mut collector = ReferenceCollector::default();
            let mut walker = Walker::new(self.version, &mut collector);
            walker.walk_value(&output.value, &child_path(&path, "value"))?;
            if let Some(condition) = &output.condition {
                walker.walk_condition(condition, &child_path(&path, "condition"))?;
            }
            // An output's value is resolved when it is read, as Heat
            // resolves it: a parameter it names that the stack does not
            // have is that output's error then, not the stack's now.
            let value_path = child_path(&path, "value");
            references.extend(collector.references.into_iter().filter(|reference| {
                reference.kind != ReferenceKind::GetParam
                    || !reference.path.starts_with(&value_path)
            }));
        }
        for (name, definition) in &self.conditions {
            let mut collector = ReferenceCollector::default();
            Walker::new(self.version, &mut collector)
                .walk_condition(definition, &child_path("conditions", name))?;
            references.extend(collector.references);
        }
        for reference in references {
            let (known, function) = match reference.kind {
                ReferenceKind::GetResource => {
                    (self.resources.contains_key(&reference.name), "get_resource")
                }
                ReferenceKind::GetAttr => {
                    (self.resources.contains_key(&reference.name), "get_attr")
                }
                ReferenceKind::GetParam => (
                    self.parameters.contains_key(&reference.name)
                        || PSEUDO_PARAMETERS.contains(&reference.name.as_str())
                        // A CFN lookup's failure branch, which fails only
                        // when a value chooses it.
                        || reference.name.starts_with(super::cfn::NOT_A_KEY),
                    "get_param",
                ),
                ReferenceKind::Condition => {
                    (self.conditions.contains_key(&reference.name), "condition")
                }
            };
            if !known {
                let what = match reference.kind {
                    ReferenceKind::GetParam => "parameter",
                    ReferenceKind::Condition => "condition",
                    _ => "resource",
                };
                if reference.kind == ReferenceKind::GetParam {
                    return Err(unknown_parameter(&reference.path, &reference.name));
                }
                let message = if reference.kind == ReferenceKind::Condition {
                    format!("unknown condition '{}'", reference.name)
                } else {
                    format!("{function} refers to unknown {what} '{}'", reference.name)
                };
                return Err(TemplateError::new(reference.path, message));
            }
        }
        self.dependency_graph().levels().map(|_| ())
    }

    /// The dependency graph of every resource.
    pub fn dependency_graph(&self) -> DependencyGraph {
        let all: BTreeSet<String> = self.resources.keys().cloned().collect();
        self.dependency_graph_for(&all)
    }

    /// The dependency graph restricted to `enabled` resources (for example
    /// those whose condition holds); dependencies on other resources are
    /// dropped, as Heat drops `depends_on` entries of disabled resources.
    pub fn dependency_graph_for(&self, enabled: &BTreeSet<String>) -> DependencyGraph {
        let mut dependencies = BTreeMap::new();
        for name in self.resources.keys().filter(|name| enabled.contains(*name)) {
            let targets = self
                .dependencies(name)
                .into_iter()
                .filter(|target| enabled.contains(target))
                .collect();
            dependencies.insert(name.clone(), targets);
        }
        DependencyGraph::indexed(dependencies)
    }

    /// Resources grouped so that each group only depends on earlier groups;
    /// the members of a group can be created in parallel.
    pub fn topological_levels(&self) -> Result<Vec<Vec<String>>, TemplateError> {
        self.dependency_graph().levels()
    }
}

/// Which resource depends on which.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DependencyGraph {
    /// Each resource with the resources it depends on.
    dependencies: BTreeMap<String, BTreeSet<String>>,
    /// The same edges reversed, built once: asking for the dependents of
    /// each resource of a run by scanning every edge made runs O(n²).
    dependents: BTreeMap<String, BTreeSet<String>>,
}

impl DependencyGraph {
    fn indexed(dependencies: BTreeMap<String, BTreeSet<String>>) -> Self {
        let mut dependents: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (dependent, targets) in &dependencies {
            for target in targets {
                dependents
                    .entry(target.clone())
                    .or_default()
                    .insert(dependent.clone());
            }
        }
        Self {
            dependencies,
            dependents,
        }
    }

    /// Builds a graph from explicit edges; dependencies on names that are
    /// not keys of the map are ignored.
    pub fn from_dependencies(dependencies: BTreeMap<String, BTreeSet<String>>) -> Self {
        let names: BTreeSet<String> = dependencies.keys().cloned().collect();
        let dependencies = dependencies
            .into_iter()
            .map(|(name, targets)| (name, targets.intersection(&names).cloned().collect()))
            .collect();
        Self::indexed(dependencies)
    }

    pub fn resources(&self) -> impl Iterator<Item = &String> {
        self.dependencies.keys()
    }

    pub fn dependencies_of(&self, name: &str) -> Option<&BTreeSet<String>> {
        self.dependencies.get(name)
    }

    /// The resources that depend on `name` directly.
    pub fn dependents_of(&self, name: &str) -> BTreeSet<String> {
        self.dependents.get(name).cloned().unwrap_or_default()
    }

    /// A cycle as `[a, b, ..., a]`, if there is one.
    pub fn find_cycle(&self) -> Option<Vec<String>> {
        #[derive(Clone, Copy, PartialEq)]
        enum Mark {
            Unvisited,
            OnPath,
            Done,
        }
        let mut marks: BTreeMap<&str, Mark> = self
            .dependencies
            .keys()
            .map(|name| (name.as_str(), Mark::Unvisited))
            .collect();
        for start in self.dependencies.keys() {
            if marks.get(start.as_str()) != Some(&Mark::Unvisited) {
                continue;
            }
            // Iterative depth-first search, so long chains cannot overflow
            // the stack.
            let mut path: Vec<(&str, Vec<&str>)> = Vec::new();
            let children = |name: &str| -> Vec<&str> {
                self.dependencies
                    .get(name)
                    .map(|targets| targets.iter().map(String::as_str).collect())
                    .unwrap_or_default()
            };
            marks.insert(start, Mark::OnPath);
            path.push((start, children(start)));
            while let Some((current, pending)) = path.last_mut() {
                let current = *current;
                match pending.pop() {
                    Some(next) => match marks.get(next).copied() {
                        Some(Mark::Unvisited) => {
                            marks.insert(next, Mark::OnPath);
                            path.push((next, children(next)));
                        }
                        Some(Mark::OnPath) => {
                            let start_index =
                                path.iter().position(|(name, _)| *name == next).unwrap_or(0);
                            let mut cycle: Vec<String> = path[start_index..]
                                .iter()
                                .map(|(name, _)| (*name).to_string())
                                .collect();
                            cycle.push(next.to_string());
                            return Some(cycle);
                        }
                        _ => {}
                    },
                    None => {
                        marks.insert(current, Mark::Done);
                        path.pop();
                    }
                }
            }
        }
        None
    }

    /// Groups in creation order: every resource comes after everything it
    /// depends on; names within a group are sorted.
    pub fn levels(&self) -> Result<Vec<Vec<String>>, TemplateError> {
        let mut waiting_on: BTreeMap<&str, usize> = BTreeMap::new();
        let mut dependents: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (name, targets) in &self.dependencies {
            waiting_on.insert(name.as_str(), targets.len());
            for target in targets {
                dependents
                    .entry(target.as_str())
                    .or_default()
                    .push(name.as_str());
            }
        }
        let mut current: Vec<&str> = waiting_on
            .iter()
            .filter(|(_, count)| **count == 0)
            .map(|(name, _)| *name)
            .collect();
        let mut levels = Vec::new();
        let mut placed = 0;
        while !current.is_empty() {
            current.sort_unstable();
            placed += current.len();
            let mut next = Vec::new();
            for name in &current {
                for dependent in dependents.get(name).map(Vec::as_slice).unwrap_or_default() {
                    if let Some(count) = waiting_on.get_mut(dependent) {
                        *count = count.saturating_sub(1);
                        if *count == 0 {
                            next.push(*dependent);
                        }
                    }
                }
            }
            levels.push(current.iter().map(|name| (*name).to_string()).collect());
            current = next;
        }
        if placed < self.dependencies.len() {
            let cycle = self.find_cycle().unwrap_or_default();
            let first = cycle.first().cloned().unwrap_or_default();
            return Err(TemplateError::new(
                child_path("resources", &first),
                format!(
                    "resources depend on each other in a cycle: {}",
                    cycle.join(" -> ")
                ),
            ));
        }
        Ok(levels)
    }

    /// Groups in deletion order: dependents before what they depend on.
    pub fn reverse_levels(&self) -> Result<Vec<Vec<String>>, TemplateError> {
        let mut levels = self.levels()?;
        levels.reverse();
        Ok(levels)
    }
}

/// A `get_param` of a parameter the template does not declare, in Heat's
/// words (clients and Heat's own tests match them): inside a resource's
/// properties Heat says `Property error: : <property path>: : The
/// Parameter (<name>) was not provided.`
fn unknown_parameter(path: &str, name: &str) -> TemplateError {
    let at = path.strip_suffix(".get_param").unwrap_or(path);
    let said = format!("The Parameter ({name}) was not provided.");
    if at.contains(".properties") {
        TemplateError::new("", format!("Property error: : {at}: : {said}"))
    } else {
        TemplateError::new(at, said)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn template(resources: &str) -> Template {
        Template::parse(&format!(
            "heat_template_version: 2021-04-16\nparameters:\n  p: {{type: string, default: x}}\nconditions:\n  c: true\nresources:\n{resources}"
        ))
        .unwrap()
    }

    fn names(set: BTreeSet<String>) -> Vec<String> {
        set.into_iter().collect()
    }

    #[test]
    fn network_resources_wait_for_what_heat_makes_them_wait_for() {
        let template = template(concat!(
            "  net: {type: OS::Neutron::Net}\n",
            "  other_net: {type: OS::Neutron::Net}\n",
            "  subnet: {type: OS::Neutron::Subnet, properties: {network: {get_resource: net}, cidr: 10.0.0.0/24}}\n",
            "  other_subnet: {type: OS::Neutron::Subnet, properties: {network: {get_resource: other_net}, cidr: 10.1.0.0/24}}\n",
            "  public_subnet: {type: OS::Neutron::Subnet, properties: {network: public, cidr: 10.2.0.0/24}}\n",
            "  port: {type: OS::Neutron::Port, properties: {network: {get_resource: net}}}\n",
            "  server: {type: OS::Nova::Server, properties: {networks: [{network: {get_resource: other_net}}]}}\n",
            "  router: {type: OS::Neutron::Router, properties: {external_gateway_info: {network: public}}}\n",
            "  interface: {type: OS::Neutron::RouterInterface, properties: {router: {get_resource: router}, subnet: {get_resource: subnet}}}\n",
            "  fip: {type: OS::Neutron::FloatingIP, properties: {floating_network: public, port_id: {get_resource: port}}}\n",
        ));
        assert_eq!(names(template.dependencies("port")), vec!["net", "subnet"]);
        assert_eq!(
            names(template.dependencies("server")),
            vec!["other_net", "other_subnet"]
        );
        assert_eq!(
            names(template.dependencies("router")),
            vec!["public_subnet"]
        );
        assert_eq!(
            names(template.dependencies("fip")),
            vec!["interface", "port", "router"]
        );
        assert!(
            template
                .dependencies("subnet")
                .iter()
                .all(|name| name == "net")
        );
    }

    #[test]
    fn dependencies_combine_depends_on_and_references_in_all_branches() {
        let template = template(
            "  net: {type: N}\n  subnet: {type: S, properties: {network: {get_resource: net}}}\n  port: {type: P, depends_on: [subnet], properties: {ip: {if: [c, {get_attr: [fip, ip]}, {get_attr: [other, ip]}]}}}\n  fip: {type: F}\n  other: {type: O}\n",
        );
        assert_eq!(
            names(template.dependencies("port")),
            vec!["fip", "other", "subnet"]
        );
        assert_eq!(names(template.dependencies("subnet")), vec!["net"]);
        assert!(template.dependencies("net").is_empty());
        assert!(template.dependencies("ghost").is_empty());
    }

    #[test]
    fn levels_allow_parallel_creation() {
        let template = template(
            "  a: {type: X}\n  b: {type: X, depends_on: a}\n  c: {type: X, properties: {x: {get_resource: a}}}\n  d: {type: X, depends_on: [b, c]}\n  e: {type: X}\n",
        );
        assert_eq!(
            template.topological_levels().unwrap(),
            vec![vec!["a", "e"], vec!["b", "c"], vec!["d"]]
        );
        let graph = template.dependency_graph();
        assert_eq!(names(graph.dependents_of("a")), vec!["b", "c"]);
        assert_eq!(graph.reverse_levels().unwrap()[0], vec!["d"]);
    }

    #[test]
    fn cycles_are_named() {
        let template = template(
            "  a: {type: X, depends_on: c}\n  b: {type: X, properties: {x: {get_attr: [a, id]}}}\n  c: {type: X, depends_on: b}\n  d: {type: X}\n",
        );
        let error = template.topological_levels().unwrap_err();
        assert_eq!(error.path, "resources.a");
        assert_eq!(
            error.message,
            "resources depend on each other in a cycle: a -> c -> b -> a"
        );
        let error = template.validate_references().unwrap_err();
        assert!(error.message.contains("cycle"));
        let selfish = self::template("  a: {type: X, properties: {me: {get_resource: a}}}\n");
        assert!(
            selfish
                .validate_references()
                .unwrap_err()
                .message
                .ends_with("a -> a")
        );
    }

    #[test]
    fn disabled_resources_drop_out_of_the_graph() {
        let template = template("  a: {type: X}\n  b: {type: X, depends_on: a}\n");
        let enabled: BTreeSet<String> = ["b".to_string()].into_iter().collect();
        let graph = template.dependency_graph_for(&enabled);
        assert_eq!(graph.levels().unwrap(), vec![vec!["b"]]);
    }

    #[test]
    fn validate_references_reports_unknown_names_with_paths() {
        let cases = [
            (
                "  a: {type: X, depends_on: [ghost]}\n",
                "resources.a.depends_on[0]",
                "depends_on refers to unknown resource 'ghost'",
            ),
            (
                "  a: {type: X, properties: {x: [{get_resource: ghost}]}}\n",
                "resources.a.properties.x[0].get_resource",
                "get_resource refers to unknown resource 'ghost'",
            ),
            (
                "  a: {type: X, metadata: {x: {get_attr: [ghost, ip]}}}\n",
                "resources.a.metadata.x.get_attr",
                "get_attr refers to unknown resource 'ghost'",
            ),
            (
                "  a: {type: X, properties: {x: {get_param: [nope, k]}}}\n",
                "",
                "Property error: : resources.a.properties.x: : The Parameter (nope) was not provided.",
            ),
            (
                "  a: {type: X, condition: nope}\n",
                "resources.a.condition",
                "unknown condition 'nope'",
            ),
            (
                "  a: {type: X, properties: {x: {if: [nope, 1, 2]}}}\n",
                "resources.a.properties.x.if[0]",
                "unknown condition 'nope'",
            ),
        ];
        for (resources, path, message) in cases {
            let error = template(resources).validate_references().unwrap_err();
            assert_eq!(error.path, path, "{error}");
            assert_eq!(error.message, message);
        }
    }

    #[test]
    fn validate_references_checks_outputs_conditions_and_accepts_pseudo_parameters() {
        let template = Template::parse(
            "heat_template_version: 2021-04-16\nconditions:\n  a: {equals: [{get_param: ghost}, 1]}\n",
        )
        .unwrap();
        let error = template.validate_references().unwrap_err();
        assert_eq!(error.path, "conditions.a.equals[0]");
        assert_eq!(error.message, "The Parameter (ghost) was not provided.");
        let template = Template::parse(
            "heat_template_version: 2021-04-16\noutputs:\n  o: {value: {get_attr: [ghost, x]}}\n",
        )
        .unwrap();
        assert_eq!(
            template.validate_references().unwrap_err().path,
            "outputs.o.value.get_attr"
        );
        let template = Template::parse(
            "heat_template_version: 2021-04-16\nresources:\n  a: {type: X, properties: {n: {get_param: OS::stack_name}, dyn: {get_resource: {get_param: OS::stack_id}}}}\n",
        )
        .unwrap();
        assert!(template.validate_references().is_ok());
    }

    #[test]
    fn explicit_graphs_ignore_unknown_targets_and_handle_long_chains() {
        let mut edges = BTreeMap::new();
        for index in 0..20_000 {
            let mut targets = BTreeSet::new();
            targets.insert(format!("r{:05}", index + 1));
            edges.insert(format!("r{index:05}"), targets);
        }
        let graph = DependencyGraph::from_dependencies(edges.clone());
        assert!(graph.find_cycle().is_none());
        assert_eq!(graph.levels().unwrap().len(), 20_000);
        if let Some(targets) = edges.get_mut("r19999") {
            targets.insert("r00000".to_string());
        }
        let graph = DependencyGraph::from_dependencies(edges);
        assert_eq!(graph.find_cycle().map(|cycle| cycle.len()), Some(20_001));
    }
}
