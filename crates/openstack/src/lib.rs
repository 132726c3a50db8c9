//! Typed clients for an OpenStack cloud: Keystone (tokens, trusts), Nova,
//! Neutron, Cinder and Glance, one module per service, over one
//! authenticated [`Session`] per set of credentials.
//!
//! The session does what keystoneauth does for Python clients: it asks
//! Keystone for a token once and renews it before it expires (or when a
//! service refuses it), finds each service in the token's catalog (by
//! interface and region), negotiates microversions once per endpoint, sends
//! a request id with each call and keeps the one the service logged, and
//! retries a call only where doing it twice does it once. Every failure is
//! an [`Error`] classified once (the service's own status and message, no
//! answer, no endpoint, refused credentials).
//!
//! Why not a crate from crates.io: `openstack_sdk` (generated from the
//! services' OpenAPI specs) brings interactive authentication (browser
//! single sign-on, prompts) as non-optional dependencies and returns
//! untyped JSON, and neither it nor `openstack` (0.6, reqwest 0.12, no
//! trusts) classifies retryable failures or authenticates a service user
//! through many trusts; Ember needs a few dozen calls, written here
//! against the services' API references.
#![forbid(unsafe_code)]

pub mod auth;
pub mod catalog;
pub mod cinder;
pub mod error;
pub mod glance;
pub mod keystone;
pub mod microversion;
pub mod neutron;
pub mod nova;
pub mod session;
#[cfg(feature = "testing")]
pub mod testing;

pub use auth::{Credentials, Domain, Method, Named, Scope, Secret, Token};
pub use catalog::Interface;
pub use error::{Error, Result, Service};
pub use microversion::Microversion;
pub use session::{Cloud, CloudConfig, Session};
