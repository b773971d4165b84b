//! Whether binding cycles may go on: this replica leads and is not
//! shutting down. Every write of a binding cycle asks it first, and a
//! PreBind wait gives up the moment it closes.

use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::watch;

#[derive(Debug)]
pub struct BindGate {
    leader: AtomicBool,
    stopping: AtomicBool,
    open: watch::Sender<bool>,
}

impl BindGate {
    /// A gate for a replica that leads from the start (`leader`: leader
    /// election is off) or must win a Lease first.
    pub fn new(leader: bool) -> Self {
        BindGate { leader: AtomicBool::new(leader), stopping: AtomicBool::new(false), open: watch::Sender::new(leader) }
    }

    pub fn set_leader(&self, leader: bool) {
        self.leader.store(leader, Ordering::SeqCst);
        self.update();
    }

    pub fn set_stopping(&self) {
        self.stopping.store(true, Ordering::SeqCst);
        self.update();
    }

    /// Under the watch's lock, from both flags as they are now: a leader
    /// change racing a shutdown cannot leave it open.
    fn update(&self) {
        self.open.send_modify(|open| *open = self.is_leader() && !self.is_stopping());
    }

    /// Follows whether binding cycles may go on.
    pub fn subscribe(&self) -> watch::Receiver<bool> {
        self.open.subscribe()
    }

    /// Whether this replica may schedule and bind now.
    pub fn is_leader(&self) -> bool {
        self.leader.load(Ordering::SeqCst)
    }

    pub fn is_stopping(&self) -> bool {
        self.stopping.load(Ordering::SeqCst)
    }

    /// Why the gate is closed, as an abandoned binding says it.
    pub fn why_closed(&self) -> &'static str {
        if self.is_stopping() { "shutting down" } else { "not the leader any more" }
    }
}
