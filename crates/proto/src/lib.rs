//! Ember's protobuf messages and gRPC clients/servers. Generated code only:
//! no logic lives here. Domain crates convert these types at their edges.
#![forbid(unsafe_code)]

/// Every Ember service's file descriptors, for gRPC server reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/ember_descriptor.bin"));

pub mod common {
    // Generated code: proto comments are prose for grpcurl readers, not
    // rustdoc, so clippy's doc lints do not apply.
    #[allow(clippy::all)]
    pub mod v1 {
        tonic::include_proto!("ember.common.v1");
    }
}

pub mod engine {
    // Generated code: proto comments are prose for grpcurl readers, not
    // rustdoc, so clippy's doc lints do not apply.
    #[allow(clippy::all)]
    pub mod v1 {
        tonic::include_proto!("ember.engine.v1");
    }
}

pub mod lifecyclehook {
    // Generated code: proto comments are prose for grpcurl readers, not
    // rustdoc, so clippy's doc lints do not apply.
    #[allow(clippy::all)]
    pub mod v1 {
        tonic::include_proto!("ember.lifecyclehook.v1");
    }
}

pub mod pluginregistry {
    // Generated code: proto comments are prose for grpcurl readers, not
    // rustdoc, so clippy's doc lints do not apply.
    #[allow(clippy::all)]
    pub mod v1 {
        tonic::include_proto!("ember.pluginregistry.v1");
    }
}

pub mod identity {
    // Generated code: proto comments are prose for grpcurl readers, not
    // rustdoc, so clippy's doc lints do not apply.
    #[allow(clippy::all)]
    pub mod v1 {
        tonic::include_proto!("ember.identity.v1");
    }
}

pub mod readiness {
    // Generated code: proto comments are prose for grpcurl readers, not
    // rustdoc, so clippy's doc lints do not apply.
    #[allow(clippy::all)]
    pub mod v1 {
        tonic::include_proto!("ember.readiness.v1");
    }
}

pub mod plugin {
    // Generated code: proto comments are prose for grpcurl readers, not
    // rustdoc, so clippy's doc lints do not apply.
    #[allow(clippy::all)]
    pub mod v1 {
        tonic::include_proto!("ember.plugin.v1");
    }
}
