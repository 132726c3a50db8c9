//! Flavors: what an instance's `flavor` means in CPU and memory, from the
//! `[engine.compute.flavors.<name>]` table of the configuration. An unknown
//! flavor is refused when the instance is created (400), not discovered by
//! a failed build later.
//!
//! Which names are valid:
//! - a configured table is the whole truth (plus the built-in `unlimited`);
//! - with no table, the docker driver uses Nova's classic defaults
//!   (`m1.tiny` … `m1.xlarge`), and the simulated driver accepts any name
//!   (it has no limits to apply).
//!
//! `unlimited` (no CPU or memory limit, as `docker run` without flags) is
//! always known, unless the table defines it otherwise; it is what a
//! `container.dockerinc.docker-1.0` profile without a flavor gets.

use std::collections::BTreeMap;

use crate::error::{Error, Result};

/// The flavor with no limits.
pub const UNLIMITED: &str = crate::domain::instance::UNLIMITED_FLAVOR;

/// CPU and memory of one flavor.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Flavor {
    /// CPUs (fractions allowed: 0.5 is half a CPU's time); 0 = no limit.
    pub vcpus: f64,
    /// Memory in MiB; 0 = no limit.
    pub memory_mb: u64,
}

impl Flavor {
    pub const UNLIMITED: Flavor = Flavor {
        vcpus: 0.0,
        memory_mb: 0,
    };

    /// `1 vCPU, 256 MiB`.
    pub fn describe(&self) -> String {
        let cpus = if self.vcpus > 0.0 {
            format!("{} vCPU", self.vcpus)
        } else {
            "no CPU limit".to_owned()
        };
        let memory = if self.memory_mb > 0 {
            format!("{} MiB", self.memory_mb)
        } else {
            "no memory limit".to_owned()
        };
        format!("{cpus}, {memory}")
    }
}

/// The flavors instances may name.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct FlavorTable {
    flavors: BTreeMap<String, Flavor>,
    /// Any name is accepted (without limits) when it is not in the table.
    accept_any: bool,
}

impl FlavorTable {
    /// Exactly these flavors (plus `unlimited`).
    pub fn new(flavors: BTreeMap<String, Flavor>) -> FlavorTable {
        FlavorTable {
            flavors,
            accept_any: false,
        }
    }

    /// Any name, no limits: the simulated driver without a table.
    pub fn accepting_any() -> FlavorTable {
        FlavorTable {
            flavors: BTreeMap::new(),
            accept_any: true,
        }
    }

    /// Nova's classic default flavors.
    pub fn nova_defaults() -> FlavorTable {
        let flavor = |vcpus: f64, memory_mb: u64| Flavor { vcpus, memory_mb };
        FlavorTable::new(BTreeMap::from([
            ("m1.tiny".to_owned(), flavor(1.0, 512)),
            ("m1.small".to_owned(), flavor(1.0, 2048)),
            ("m1.medium".to_owned(), flavor(2.0, 4096)),
            ("m1.large".to_owned(), flavor(4.0, 8192)),
            ("m1.xlarge".to_owned(), flavor(8.0, 16384)),
        ]))
    }

    /// Checks each flavor's numbers, naming the configuration key at fault.
    pub fn validate(flavors: &BTreeMap<String, Flavor>) -> std::result::Result<(), String> {
        for (name, flavor) in flavors {
            if name.trim().is_empty() || name.chars().count() > 255 {
                return Err(format!(
                    "engine.compute.flavors: {name:?} is not a flavor name (1-255 characters)"
                ));
            }
            if !flavor.vcpus.is_finite() || flavor.vcpus < 0.0 || flavor.vcpus > 1024.0 {
                return Err(format!(
                    "engine.compute.flavors.{name}.vcpus: {} must be from 0 (no limit) to 1024",
                    flavor.vcpus
                ));
            }
            if flavor.memory_mb > 0 && flavor.memory_mb < 6 {
                // Docker refuses memory limits under 6 MiB.
                return Err(format!(
                    "engine.compute.flavors.{name}.memory_mb: {} is too small (at least 6, or 0 for no limit)",
                    flavor.memory_mb
                ));
            }
        }
        Ok(())
    }

    /// The flavor `name` stands for, or a 400 naming the known ones.
    pub fn resolve(&self, name: &str) -> Result<Flavor> {
        if let Some(flavor) = self.flavors.get(name) {
            return Ok(*flavor);
        }
        if name == UNLIMITED || self.accept_any {
            return Ok(Flavor::UNLIMITED);
        }
        let mut known: Vec<&str> = self.flavors.keys().map(String::as_str).collect();
        known.push(UNLIMITED);
        Err(Error::InvalidInput(format!(
            "flavor: {name:?} is not a flavor of this cloud: use one of {} (or configure [engine.compute.flavors.{name}])",
            known.join(", ")
        )))
    }

    pub fn names(&self) -> impl Iterator<Item = &String> {
        self.flavors.keys()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_configured_table_is_the_whole_truth() {
        let table = FlavorTable::new(BTreeMap::from([(
            "small".to_owned(),
            Flavor {
                vcpus: 1.0,
                memory_mb: 256,
            },
        )]));
        assert_eq!(table.resolve("small").expect("known").memory_mb, 256);
        assert_eq!(
            table.resolve(UNLIMITED).expect("built in"),
            Flavor::UNLIMITED
        );
        let error = table.resolve("huge").expect_err("unknown").to_string();
        assert!(error.contains("\"huge\" is not a flavor"), "{error}");
        assert!(error.contains("small, unlimited"), "{error}");
    }

    #[test]
    fn without_a_table_the_simulated_driver_accepts_any_name() {
        let table = FlavorTable::accepting_any();
        assert_eq!(table.resolve("whatever").expect("any"), Flavor::UNLIMITED);
        assert!(FlavorTable::nova_defaults().resolve("whatever").is_err());
        assert_eq!(
            FlavorTable::nova_defaults()
                .resolve("m1.small")
                .expect("nova")
                .memory_mb,
            2048
        );
    }

    #[test]
    fn bad_numbers_are_refused_by_key() {
        let bad = BTreeMap::from([(
            "tiny".to_owned(),
            Flavor {
                vcpus: -1.0,
                memory_mb: 0,
            },
        )]);
        let error = FlavorTable::validate(&bad).expect_err("negative");
        assert!(
            error.starts_with("engine.compute.flavors.tiny.vcpus"),
            "{error}"
        );
        let small = BTreeMap::from([(
            "tiny".to_owned(),
            Flavor {
                vcpus: 1.0,
                memory_mb: 2,
            },
        )]);
        assert!(FlavorTable::validate(&small).is_err());
        assert_eq!(
            Flavor {
                vcpus: 0.5,
                memory_mb: 256
            }
            .describe(),
            "0.5 vCPU, 256 MiB"
        );
    }
}
