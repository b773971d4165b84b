//! What the backend writes to the API server: bindings (`binder`) and the
//! volume and device-claim writes before them (`prebind`,
//! `claim_reservation`),
//! Events and the `PodScheduled` condition (`reporter`, `pod_condition`,
//! what waits for them folded per pod in `report_queue`),
//! preemption's evictions (`evictions`), how a forbidden write is said
//! once (`denied`), and whether binding cycles may go on (`bind_gate`).

pub mod bind_gate;
pub mod binder;
pub mod claim_reservation;
pub mod denied;
pub mod device_binding;
pub mod events;
pub mod evictions;
pub mod group_barrier;
pub mod group_condition;
pub mod pod_condition;
pub mod pod_ref;
pub mod prebind;
pub mod report;
pub mod report_queue;
pub mod reporter;
