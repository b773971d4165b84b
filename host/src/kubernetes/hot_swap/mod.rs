//! A profile's policies swapped at run time: read from a ConfigMap
//! (`configmap`) or a directory (`dir`), validated and offered to the loop
//! or refused (`profile_updates`), and warmed off the scheduling thread
//! before they go in (`warm`).

pub mod configmap;
pub mod dir;
pub mod profile_updates;
pub mod warm;
