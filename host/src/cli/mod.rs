pub mod bench;
pub mod check;
pub mod policy_args;
pub mod run;
pub mod simulate;
pub mod watch;
