//! The cluster's objects by kind, as the simulator reads them from files:
//! one list per watched kind, declared by the kinds table, and the events
//! a watch's first lists would make of them.

use k8s_openapi::Metadata;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::de::DeserializeOwned;

use crate::scheduler::ClusterEvent;

/// What reads one object of a kind from where the simulator is reading.
pub trait ObjectReader {
    /// The object, as a `K` of `kind`; `None` (and a problem said) when it
    /// cannot be used.
    fn read<K: DeserializeOwned + Metadata<Ty = ObjectMeta>>(&mut self, kind: &str, namespaced: bool) -> Option<K>;
}

macro_rules! cluster_objects {
    ($(
        $(#[$doc:meta])* $variant:ident($kind:ty) {
            api: $api:literal, resource: $resource:literal, kind: $name:literal, scope: $scope:ident,
            field: $field:ident, $($rest:tt)*
        },
    )*) => {
        /// Every object read of each watched kind.
        #[derive(Debug, Default)]
        pub struct ClusterObjects {
            $($(#[$doc])* pub $field: Vec<$kind>,)*
        }

        impl ClusterObjects {
            /// Reads an object of the kind called `kind` into its list (of
            /// its `api_version`, where the table has the kind in several;
            /// else the kind's first, which says when the version is not
            /// its own); `false` when no watched kind is called that.
            pub fn read(&mut self, api_version: &str, kind: &str, reader: &mut impl ObjectReader) -> bool {
                let listed = [$(($name, $api)),*].contains(&(kind, api_version));
                $(if kind == $name && (!listed || api_version == $api) {
                    self.$field.extend(reader.read::<$kind>($name, cluster_objects!(@namespaced $scope)));
                    return true;
                })*
                false
            }

            /// The objects as the events a watch's first lists would be,
            /// kind by kind in the table's order.
            pub fn into_events(self) -> impl Iterator<Item = ClusterEvent> {
                std::iter::empty()
                    $(.chain(self.$field.into_iter().map(ClusterEvent::applied::<$kind>)))*
            }
        }
    };
    (@namespaced namespaced) => { true };
    (@namespaced cluster) => { false };
}

wasmsched_kinds::watched_kinds!(cluster_objects);
