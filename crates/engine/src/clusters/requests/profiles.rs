//! Profiles: made (spec checked, quota counted), validated without being
//! stored, listed, renamed, deleted when no cluster or node uses them.

use ember_runtime::Identity;
use serde_json::{Map, Value};
use uuid::Uuid;

use super::super::ClusterService;
use super::{list_scope, nothing_to_update};
use crate::domain::admission::cluster::ClusterOperation;
use crate::domain::cluster::{Profile, ProfileSpec, validate_name};
use crate::error::{Error, Result};
use crate::store::clusters::ObjectQuery;

impl ClusterService {
    pub async fn create_profile(
        &self,
        caller: &Identity,
        name: &str,
        spec: Value,
        metadata: Map<String, Value>,
        protected: bool,
    ) -> Result<Profile> {
        self.admit(ClusterOperation::CreateProfile, caller).await?;
        validate_name("profile", name)?;
        // Senlin reports what the type's schema refuses as a failed
        // create (an unknown type, a 404, and a spec without a type or
        // version are said as they are).
        crate::domain::cluster::policy::spec_type_and_version(&spec)?;
        let spec = ProfileSpec::parse(spec).map_err(|error| match error {
            Error::InvalidInput(message) => {
                Error::InvalidInput(format!("Failed in creating profile {name}: {message}"))
            }
            other => other,
        })?;
        // Senlin validates a profile's flavor when it is made: an unknown
        // one is a 400 now, not a cluster of failed nodes later.
        if let Some(flavor) = spec.flavor() {
            self.instances.check_flavor(flavor)?;
        }
        let profile = Profile {
            id: Uuid::now_v7(),
            name: name.to_owned(),
            spec,
            metadata,
            protected,
            project_id: caller.project_id.clone(),
            user_id: caller.user_id.clone(),
            created_at: ember_runtime::time::now(),
            updated_at: None,
        };
        self.store.insert_profile(&profile).await?;
        Ok(profile)
    }

    pub async fn list_profiles(
        &self,
        caller: &Identity,
        global_project: bool,
        mut query: ObjectQuery,
    ) -> Result<Vec<Profile>> {
        query.project_id = list_scope(caller, global_project)?;
        self.store.list_profiles(&query).await
    }

    pub async fn delete_profile(&self, caller: &Identity, name_or_id: &str) -> Result<()> {
        self.admit(ClusterOperation::DeleteProfile, caller).await?;
        let profile = self.find_profile(caller, name_or_id).await?;
        // The store refuses while a cluster or node uses it: said in
        // Senlin's words, naming the profile by id as Senlin does.
        self.store
            .delete_profile(profile.id)
            .await
            .map_err(|error| match error {
                Error::Conflict(_) => Error::Conflict(format!(
                    "The profile '{}' cannot be deleted: still referenced by some clusters and/or nodes.",
                    profile.id
                )),
                other => other,
            })
    }

    pub async fn update_profile(
        &self,
        caller: &Identity,
        name_or_id: &str,
        name: Option<String>,
        metadata: Option<Map<String, Value>>,
    ) -> Result<Profile> {
        self.admit(ClusterOperation::UpdateProfile, caller).await?;
        let profile = self.find_profile(caller, name_or_id).await?;
        let name = name.filter(|name| *name != profile.name);
        let metadata = metadata.filter(|metadata| *metadata != profile.metadata);
        if name.is_none() && metadata.is_none() {
            return Err(nothing_to_update());
        }
        if let Some(name) = &name {
            validate_name("profile", name)?;
        }
        self.store
            .update_profile(profile.id, name, metadata)
            .await?
            .ok_or_else(|| {
                Error::NotFound(format!("The profile '{name_or_id}' could not be found."))
            })
    }

    /// The profile `spec` makes, checked as a create checks it and not
    /// stored (Senlin names it `validated_profile`).
    pub async fn validate_profile(&self, caller: &Identity, spec: Value) -> Result<Profile> {
        let spec = ProfileSpec::parse(spec)?;
        if let Some(flavor) = spec.flavor() {
            self.instances.check_flavor(flavor)?;
        }
        Ok(Profile {
            id: Uuid::nil(),
            name: "validated_profile".into(),
            spec,
            metadata: Map::new(),
            protected: false,
            project_id: caller.project_id.clone(),
            user_id: caller.user_id.clone(),
            created_at: ember_runtime::time::now(),
            updated_at: None,
        })
    }
}
