//! The openstack backend's resource types against a real OpenStack
//! (tests/openstack/cloud.sh): each type made, read, changed and deleted on
//! the services themselves, as the stack's owner through a real trust.
//! Without the cloud these tests say so and do nothing (see
//! `ember_openstack::testing`).

mod harness;
mod network;
mod storage;
