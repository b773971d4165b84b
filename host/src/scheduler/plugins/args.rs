//! The arguments a profile gives kube's plugins (kube's `pluginConfig`),
//! resolved: those of PodTopologySpread and DynamicResources. The core
//! hands each profile's to the tables its plugins read, keyed by the
//! profile's scheduler name, so an attempt finds its pod's.

use crate::cluster::ClusterState;
use crate::cluster::default_spread::SpreadDefaulting;
use crate::scheduler::plugins::dynamic_resources::FilterTimeout;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PluginArgs {
    /// PodTopologySpreadArgs: `defaultingType` and `defaultConstraints`.
    pub spread: SpreadDefaulting,
    /// DynamicResourcesArgs' `filterTimeout`.
    pub dra_filter_timeout: FilterTimeout,
}

impl PluginArgs {
    /// Makes these the args of the profile `scheduler_name` in `state`.
    pub fn apply_to(&self, scheduler_name: &str, state: &mut ClusterState) {
        state.default_spread_mut().set_profile(scheduler_name, self.spread.clone());
        state.devices_mut().set_filter_timeout(scheduler_name, self.dra_filter_timeout);
    }
}
