pub mod check;
pub mod limits;
pub mod simulate;
