pub mod check;
pub mod run;
pub mod simulate;
pub mod watch;
