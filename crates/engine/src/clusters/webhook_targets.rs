//! A lifecycle hook's webhook (deletion or launch policy) is checked when the policy is made or
//! validated: its host, once resolved, must be an address the operator's
//! egress rules admit (`ember_runtime::egress`), so a tenant learns at once
//! that `http://169.254.169.254/…` or `http://localhost:…` will never be
//! called. The lifecycle-hook checks again at every delivery (DNS may have
//! changed since), and connects only to the address it vetted.

use ember_runtime::egress::EgressRefusal;

use super::ClusterService;
use crate::domain::cluster::{HookTarget, PolicyKind};
use crate::error::{Error, Result};

impl ClusterService {
    /// `Ok` unless `kind` has a hook webhook the rules refuse (400 naming
    /// the host and why). A host that does not resolve now is accepted:
    /// it may exist by the time a scale-in needs it, and every delivery is
    /// vetted anyway.
    pub(super) async fn vet_hook_webhook(&self, kind: &PolicyKind) -> Result<()> {
        let Some(HookTarget::Webhook(url)) = kind.hooks().map(|hooks| &hooks.target) else {
            return Ok(());
        };
        match self.webhook_targets.vet_url(url).await {
            Ok(_) => Ok(()),
            Err(EgressRefusal::Unresolved { host, reason }) => {
                tracing::info!(%host, %reason, "a hook webhook's host does not resolve yet: accepted, vetted at delivery");
                Ok(())
            }
            Err(refusal) => Err(Error::InvalidInput(format!("hooks.params.url: {refusal}"))),
        }
    }
}
