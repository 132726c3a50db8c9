//! What a build needs before its container can be made: the network
//! (created if missing, once per process, again if it vanished) and the
//! image (never pulled unless `pull = "missing"`; a missing one is a build
//! failure naming it).

use std::collections::HashMap;
use std::sync::atomic::Ordering;

use bollard::Docker;
use bollard::models::NetworkCreateRequest;
use bollard::query_parameters::CreateImageOptions;
use futures::StreamExt;
use tracing::info;

use super::{DockerEngine, PullPolicy, state};
use crate::compute::ComputeError;
use crate::domain::instance::Instance;

impl DockerEngine {
    /// Makes sure the configured network exists (once per process; again
    /// after a create found it gone).
    pub(super) async fn ensure_network(&self, docker: &Docker) -> Result<(), ComputeError> {
        if self.config.network.is_empty() {
            return Ok(());
        }
        if self.network_ready.load(Ordering::Acquire) {
            return Ok(());
        }
        let network = &self.config.network;
        match docker.inspect_network(network, None).await {
            Ok(_) => {
                self.network_ready.store(true, Ordering::Release);
                return Ok(());
            }
            Err(error) if state::status_code(&error) == Some(404) => {}
            Err(error) => {
                return Err(self.failure(&format!("cannot inspect network {network:?}"), &error));
            }
        }
        let request = NetworkCreateRequest {
            name: network.clone(),
            driver: Some("bridge".to_owned()),
            labels: Some(HashMap::from([(
                "ember.managed".to_owned(),
                "true".to_owned(),
            )])),
            ..NetworkCreateRequest::default()
        };
        match docker.create_network(request).await {
            Ok(_) => info!(network = %network, "created the container network"),
            // Made meanwhile by another engine or build (Docker answers
            // 409, Podman 500): there now, which is all that matters.
            Err(error) => {
                if docker.inspect_network(network, None).await.is_err() {
                    return Err(self.failure(&format!("cannot create network {network:?}"), &error));
                }
            }
        }
        self.network_ready.store(true, Ordering::Release);
        Ok(())
    }

    /// Whether the engine has `image`.
    async fn has_image(&self, docker: &Docker, image: &str) -> Result<bool, ComputeError> {
        match docker.inspect_image(image).await {
            Ok(_) => Ok(true),
            Err(error) if state::status_code(&error) == Some(404) => Ok(false),
            Err(error) => Err(self.failure(&format!("cannot inspect image {image:?}"), &error)),
        }
    }

    async fn pull(&self, docker: &Docker, image: &str) -> Result<(), ComputeError> {
        info!(image, "pulling an image the engine does not have");
        let options = CreateImageOptions {
            from_image: Some(image.to_owned()),
            ..CreateImageOptions::default()
        };
        let mut progress = docker.create_image(Some(options), None, None);
        while let Some(step) = progress.next().await {
            let step = step
                .map_err(|error| self.failure(&format!("cannot pull image {image:?}"), &error))?;
            if let Some(detail) = step.error_detail.and_then(|detail| detail.message) {
                return Err(ComputeError(format!(
                    "cannot pull image {image:?}: {detail}"
                )));
            }
        }
        Ok(())
    }

    /// Why a create answered 404: the image (pulled when allowed), or
    /// something else. `Ok(())` when the create should be tried again.
    pub(super) async fn missing_image(
        &self,
        docker: &Docker,
        instance: &Instance,
        error: &bollard::errors::Error,
    ) -> Result<(), ComputeError> {
        let image = &instance.image;
        if self.has_image(docker, image).await? {
            return Err(self.failure("cannot create the container", error));
        }
        match self.config.pull {
            PullPolicy::Never => Err(ComputeError(format!(
                "image {image:?} is not on the container engine and engine.compute.pull = \"never\": build or load it there first (e.g. `podman build -t {image} …`), or set pull = \"missing\""
            ))),
            PullPolicy::Missing => self.pull(docker, image).await,
        }
    }
}
