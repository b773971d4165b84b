//! A gang's binding cycles held together: no member placed in a group
//! cycle is bound until every one of them has passed PreBind (its claims
//! and volumes written and ready), and one member's failure fails the
//! others before any is bound. Each member waits here holding no binding
//! slot, so a gang larger than the binder's concurrency cannot wedge it.
//! Where the PodGroup bounds the wait (coscheduling's
//! `scheduleTimeoutSeconds`, counted from the group cycle), the gang fails
//! once that time passes with a member still in PreBind; members still in
//! PreBind when the gang fails stop there (`failed`).

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

/// Where a gang's binding cycles stand.
#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    /// Members still in PreBind (or not yet in the binder).
    Waiting { arrived: usize, expected: usize },
    /// Every member passed PreBind: bind.
    Go,
    /// A member will not be bound, and why: none is.
    Failed(String),
}

/// The barrier of one group cycle's placed members.
#[derive(Debug)]
pub struct GroupBarrier {
    /// `namespace/name` of the PodGroup.
    group: String,
    /// When the members must all have passed PreBind, counted from the
    /// group cycle's end, where the PodGroup bounds the wait
    /// (coscheduling's `scheduleTimeoutSeconds`), and that bound.
    deadline: Option<(Instant, Duration)>,
    state: watch::Sender<State>,
}

impl GroupBarrier {
    /// For the `expected` members that one group cycle of `group` placed,
    /// who have `timeout` from now to pass PreBind, where it is bounded.
    pub fn new(group: String, expected: usize, timeout: Option<Duration>) -> Arc<Self> {
        let state = if expected == 0 { State::Go } else { State::Waiting { arrived: 0, expected } };
        let deadline = timeout.map(|t| (Instant::now() + t, t));
        Arc::new(GroupBarrier { group, deadline, state: watch::Sender::new(state) })
    }

    pub fn group(&self) -> &str {
        &self.group
    }

    /// One member passed PreBind: waits until all have (`Ok`), or until one
    /// failed or the time allowed passed (`Err`: why, in words for the
    /// members' messages).
    pub async fn arrive(&self) -> Result<(), String> {
        self.state.send_modify(|state| {
            if let State::Waiting { arrived, expected } = state {
                *arrived += 1;
                if *arrived >= *expected {
                    *state = State::Go;
                }
            }
        });
        let mut state = self.state.subscribe();
        tokio::select! {
            // Only Go lets a member on (the sender is ours, alive while
            // `self` is, but a closed channel would not count as Go).
            Ok(_) = state.wait_for(|s| *s == State::Go) => Ok(()),
            why = self.failed() => Err(why),
        }
    }

    /// Resolves, with why, once the gang will not be bound: a member
    /// failed, or the time allowed passed with members still in PreBind
    /// (which fails it). Never, once every member passed.
    pub async fn failed(&self) -> String {
        if let Some((deadline, timeout)) = self.deadline {
            tokio::select! {
                why = self.settled_failure() => return why,
                () = tokio::time::sleep_until(deadline) => {
                    self.settle(format!(
                        "pod group {} was not bound: its members did not all pass PreBind within {timeout:?} \
                         (its scheduleTimeoutSeconds)",
                        self.group
                    ));
                }
            }
        }
        self.settled_failure().await
    }

    /// Why the gang failed, once it settles so; never if it goes on.
    async fn settled_failure(&self) -> String {
        let mut state = self.state.subscribe();
        match state.wait_for(|s| !matches!(s, State::Waiting { .. })).await.map(|s| s.clone()) {
            Ok(State::Failed(why)) => why,
            _ => std::future::pending().await,
        }
    }

    /// Fails the gang with `message` unless it settled already; whether
    /// this did.
    fn settle(&self, message: String) -> bool {
        self.state.send_if_modified(|state| match state {
            State::Waiting { .. } => {
                *state = State::Failed(message);
                true
            }
            _ => false,
        })
    }

    /// Member `pod` will not be bound (`why`, its own message): the members
    /// waiting, and those still to come, are not either. Once every member
    /// passed, a late failure changes nothing (they are being bound).
    pub fn fail(&self, pod: &str, why: &str) {
        self.settle(format!("pod group {} was not bound: member {pod} failed: {why}", self.group));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn members_go_on_together_once_every_one_has_arrived() {
        let barrier = GroupBarrier::new("ns/train".into(), 3, None);
        let early = [barrier.clone(), barrier.clone()].map(|b| tokio::spawn(async move { b.arrive().await }));
        tokio::task::yield_now().await;
        assert!(early.iter().all(|task| !task.is_finished()), "nobody goes on before the last member arrives");
        assert_eq!(barrier.arrive().await, Ok(()));
        for task in early {
            assert_eq!(task.await.unwrap(), Ok(()));
        }
    }

    #[tokio::test]
    async fn one_members_failure_fails_those_waiting_and_those_to_come() {
        let barrier = GroupBarrier::new("ns/train".into(), 3, None);
        let waiting = {
            let b = barrier.clone();
            tokio::spawn(async move { b.arrive().await })
        };
        tokio::task::yield_now().await;
        barrier.fail("train-1", "running PreBind plugin \"DynamicResources\": refused");
        let said = "pod group ns/train was not bound: member train-1 failed: running PreBind plugin \"DynamicResources\": refused";
        assert_eq!(waiting.await.unwrap(), Err(said.to_string()));
        assert_eq!(barrier.arrive().await, Err(said.to_string()), "a member arriving later is told too");
        barrier.fail("train-2", "another reason");
        assert_eq!(barrier.arrive().await, Err(said.to_string()), "the first failure is the one said");
    }

    #[tokio::test]
    async fn a_pod_groups_timeout_fails_members_waiting_and_those_still_in_prebind() {
        let timeout = Duration::from_millis(50);
        let started = Instant::now();
        let barrier = GroupBarrier::new("ns/train".into(), 2, Some(timeout));
        let still_in_prebind = {
            let b = barrier.clone();
            tokio::spawn(async move { b.failed().await })
        };
        let said = barrier.arrive().await.unwrap_err();
        assert!(started.elapsed() >= timeout, "failed before its time");
        assert_eq!(
            said,
            "pod group ns/train was not bound: its members did not all pass PreBind within 50ms (its \
             scheduleTimeoutSeconds)"
        );
        assert_eq!(still_in_prebind.await.unwrap(), said, "a member still in PreBind is stopped with the same words");
        barrier.fail("train-1", "late");
        assert_eq!(barrier.arrive().await, Err(said), "the timeout is the failure said");
    }

    #[tokio::test]
    async fn a_gang_through_its_barrier_never_fails_by_its_timeout() {
        let barrier = GroupBarrier::new("ns/train".into(), 1, Some(Duration::from_millis(10)));
        assert_eq!(barrier.arrive().await, Ok(()));
        let failed = tokio::time::timeout(Duration::from_millis(100), barrier.failed()).await;
        assert!(failed.is_err(), "a gang that went on failed afterwards: {failed:?}");
    }

    #[tokio::test]
    async fn a_failure_after_every_member_passed_changes_nothing() {
        let barrier = GroupBarrier::new("ns/train".into(), 1, None);
        assert_eq!(barrier.arrive().await, Ok(()));
        barrier.fail("train-1", "binding refused");
        assert_eq!(barrier.arrive().await, Ok(()));
    }
}
