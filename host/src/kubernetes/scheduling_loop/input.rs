//! What the loop hears, one variant per producer, each turned into an
//! input by a `From` of its own type.

use crate::kubernetes::hot_swap::profile_updates::ProfilePolicies;
use crate::kubernetes::hot_swap::warm::Warmed;
use crate::kubernetes::tenants::namespace::TenantPolicies;
use crate::kubernetes::watch::sources::Watched;
use crate::kubernetes::writes::binder::BindResult;
use crate::scheduler::{ClusterEvent, DeniedWrites, KindInfo, TenantVerdict};

/// Everything the loop hears, each from the producer that owns its type.
#[derive(Debug)]
pub enum Input {
    /// From the watches (`watch::sources`).
    Cluster(ClusterEvent),
    /// A watch's initial list (or a relist) has been applied.
    Synced(String),
    /// Whether the API server serves a watched kind that may be off.
    Served(KindInfo, bool),
    /// From the binder.
    Bound(BindResult),
    /// From a profile's policy source (`profile_updates`).
    Policies(ProfilePolicies),
    /// From the warmer, for a set offered as `Policies`.
    Warmed(Warmed),
    /// From a tenant's policy thread (`tenants::workers`).
    TenantVerdict(Box<TenantVerdict>),
    /// From the tenants' ConfigMaps.
    TenantPolicies(TenantPolicies),
    /// From the permission preflight: the writes this identity may not make.
    Permissions(DeniedWrites),
    /// Stop taking pods (shutdown).
    Stop,
    /// Stop waiting for the bindings still out: shutdown's bound on the
    /// writes in flight has passed.
    Abandon,
}

impl From<Watched> for Input {
    fn from(watched: Watched) -> Self {
        match watched {
            Watched::Event(event) => Input::Cluster(event),
            Watched::Synced(source) => Input::Synced(source),
            Watched::Served(kind, served) => Input::Served(kind, served),
        }
    }
}

impl From<BindResult> for Input {
    fn from(r: BindResult) -> Self {
        Input::Bound(r)
    }
}

impl From<ProfilePolicies> for Input {
    fn from(p: ProfilePolicies) -> Self {
        Input::Policies(p)
    }
}

impl From<Warmed> for Input {
    fn from(w: Warmed) -> Self {
        Input::Warmed(w)
    }
}

impl From<Box<TenantVerdict>> for Input {
    fn from(v: Box<TenantVerdict>) -> Self {
        Input::TenantVerdict(v)
    }
}

impl From<TenantPolicies> for Input {
    fn from(p: TenantPolicies) -> Self {
        Input::TenantPolicies(p)
    }
}
