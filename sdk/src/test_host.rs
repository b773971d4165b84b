//! What the host imports return in native builds, per thread: the
//! [`crate::testing`] harness fills it, the native side of
//! [`crate::host`] reads it. A module of its own, so that neither of the
//! two imports the other.

use std::cell::RefCell;
use std::collections::HashMap;

use crate::{MetricSample, NodeId};

#[derive(Default)]
pub(crate) struct TestHost {
    pub config: String,
    pub metrics: HashMap<(NodeId, String), MetricSample>,
    pub logs: Vec<String>,
}

thread_local! {
    pub(crate) static TEST_HOST: RefCell<TestHost> = RefCell::new(TestHost::default());
}
