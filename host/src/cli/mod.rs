pub mod auth;
pub mod check;
pub mod configmap;
pub mod new;
pub mod push;
pub mod run;
pub mod simulate;
pub mod watch;
