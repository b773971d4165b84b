//! What the backend writes to the API server: bindings (`binder`) and the
//! volume writes before them (`prebind`),
//! Events and the `PodScheduled` condition (`reporter`, `pod_condition`),
//! preemption's evictions (`evictions`), and how a forbidden write is
//! said once (`denied`).

pub mod binder;
pub mod denied;
pub mod evictions;
pub mod pod_condition;
pub mod pod_ref;
pub mod prebind;
pub mod reporter;
