//! The plug-ins' circuits as gauges for `/metrics` (through the service's
//! readiness report, which the gateway renders): whether each circuit is
//! open and how many consecutive failures it counts, as the registry
//! shared by every replica holds them.

use std::sync::Arc;

use ember_runtime::readiness::{Check, Finding, Gauge};

use super::RegistryCache;
use crate::domain::Circuit;

pub fn circuit_check(cache: Arc<RegistryCache>) -> Check {
    Check::new("plugin circuits", move || {
        let cache = Arc::clone(&cache);
        async move {
            match cache.current().await {
                Ok(snapshot) => circuit_finding(&snapshot.plugins),
                Err(error) => Finding {
                    healthy: false,
                    detail: format!("cannot read the registry: {error}"),
                    gauges: Vec::new(),
                },
            }
        }
    })
}

/// An open circuit is the plug-in's trouble, not this service's: the
/// finding is healthy and says which are open.
fn circuit_finding(plugins: &[crate::domain::Plugin]) -> Finding {
    let now = ember_runtime::time::now();
    let mut open = Vec::new();
    let mut gauges = Vec::with_capacity(plugins.len() * 2);
    for plugin in plugins {
        let is_open = plugin.circuit_at(now) != Circuit::Closed;
        if is_open {
            open.push(plugin.name.as_str());
        }
        gauges.push(Gauge {
            name: "ember_plugin_circuit_open",
            help: "1 while a lifecycle plug-in's circuit is open or half-open (it is not called)",
            labels: vec![("plugin", plugin.name.clone())],
            value: if is_open { 1.0 } else { 0.0 },
        });
        gauges.push(Gauge {
            name: "ember_plugin_consecutive_failures",
            help: "errors and timeouts of a lifecycle plug-in since its last answer",
            labels: vec![("plugin", plugin.name.clone())],
            value: f64::from(plugin.circuit.consecutive_failures),
        });
    }
    Finding {
        healthy: true,
        detail: if open.is_empty() {
            "every circuit is closed".to_owned()
        } else {
            format!("open: {}", open.join(", "))
        },
        gauges,
    }
}
