//! A gang's binding cycles held together: no member placed in a group
//! cycle is bound until every one of them has passed PreBind (its claims
//! and volumes written and ready), and one member's failure fails the
//! others before any is bound. Each member waits here holding no binding
//! slot, so a gang larger than the binder's concurrency cannot wedge it.

use std::sync::Arc;

use tokio::sync::watch;

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
    state: watch::Sender<State>,
}

impl GroupBarrier {
    /// For the `expected` members that one group cycle of `group` placed.
    pub fn new(group: String, expected: usize) -> Arc<Self> {
        let state = if expected == 0 { State::Go } else { State::Waiting { arrived: 0, expected } };
        Arc::new(GroupBarrier { group, state: watch::Sender::new(state) })
    }

    pub fn group(&self) -> &str {
        &self.group
    }

    /// One member passed PreBind: waits until all have (`Ok`), or until one
    /// failed (`Err`: why, in words for the others' messages).
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
        let settled = state.wait_for(|s| !matches!(s, State::Waiting { .. })).await.map(|s| s.clone());
        match settled {
            Ok(State::Go) => Ok(()),
            Ok(State::Failed(why)) => Err(why),
            // The sender is ours, alive while `self` is.
            _ => Err("the pod group's binding was given up".into()),
        }
    }

    /// Member `pod` will not be bound (`why`, its own message): the members
    /// waiting, and those still to come, are not either. Once every member
    /// passed, a late failure changes nothing (they are being bound).
    pub fn fail(&self, pod: &str, why: &str) {
        let message = format!("pod group {} was not bound: member {pod} failed: {why}", self.group);
        self.state.send_if_modified(|state| match state {
            State::Waiting { .. } => {
                *state = State::Failed(message);
                true
            }
            _ => false,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn members_go_on_together_once_every_one_has_arrived() {
        let barrier = GroupBarrier::new("ns/train".into(), 3);
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
        let barrier = GroupBarrier::new("ns/train".into(), 3);
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
    async fn a_failure_after_every_member_passed_changes_nothing() {
        let barrier = GroupBarrier::new("ns/train".into(), 1);
        assert_eq!(barrier.arrive().await, Ok(()));
        barrier.fail("train-1", "binding refused");
        assert_eq!(barrier.arrive().await, Ok(()));
    }
}
