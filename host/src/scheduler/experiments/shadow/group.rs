//! A gang's group cycle judged as one decision. The deciding policies
//! placed the gang (at least `minCount` together) or left all of it
//! pending; a candidate is asked, member by member in the cycle's order,
//! where it would put each, on the built-in pass that member's attempt
//! had (the cluster with the members before it placed as the deciding
//! policies placed them). The gang's verdict: both leave it pending, or
//! both place it with every member on the same node (agree); both place
//! it and the members that differ differ only by tie-breaks (tie); one
//! places it and the other does not, or a member's node differs
//! (differ). A member's failed call fails the whole evaluation.

use serde::{Deserialize, Serialize};

use super::{Judge, PodDecision, ShadowResult, ShadowVerdict};

/// A group cycle, as the deciding policies decided it.
pub(crate) struct GroupDecision {
    /// `namespace/name` of the PodGroup.
    pub(crate) group: String,
    pub(crate) min_count: u32,
    /// Members placed before the cycle.
    pub(crate) already_placed: u32,
    /// Whether the deciding policies placed the gang.
    pub(crate) placed: bool,
    /// Each member's attempt, in the cycle's order; `decided` is where it
    /// ended (`None` for a placement undone with the gang).
    pub(crate) members: Vec<PodDecision>,
}

/// A gang's evaluation, member by member.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GroupShadow {
    pub min_count: u32,
    pub already_placed: u32,
    pub members: Vec<MemberShadow>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MemberShadow {
    pub pod: String,
    pub decided: Option<String>,
    pub would_choose: Option<String>,
    /// Its node differs from the one decided, which it scores as high.
    #[serde(default)]
    pub tie: bool,
}

impl GroupShadow {
    /// The gang's verdict, given whether the deciding policies and the
    /// candidate place it.
    pub(super) fn verdict(&self, placed: bool, would_place: bool) -> ShadowVerdict {
        let differing: Vec<&MemberShadow> = self.members.iter().filter(|m| m.decided != m.would_choose).collect();
        match (placed, would_place) {
            // Both leave it pending: where each member would go does not
            // matter, as nothing of it is placed.
            (false, false) => ShadowVerdict::Agree,
            (true, true) if differing.is_empty() => ShadowVerdict::Agree,
            (true, true) if differing.iter().all(|m| m.tie) => ShadowVerdict::Tie,
            _ => ShadowVerdict::Differ,
        }
    }
}

impl Judge<'_> {
    /// The candidate's answer for a gang's group cycle.
    pub(super) fn group(&self, decision: GroupDecision) -> ShadowResult {
        let GroupDecision { group, min_count, already_placed, placed, members } = decision;
        let attempt = members.first().map_or(0, |m| m.attempt);
        let (mut judged, mut failure) = (Vec::with_capacity(members.len()), None);
        for member in members {
            let result = self.pod(member, false);
            if let Some(why) = &result.failure {
                failure = Some(format!("member {}: {why}", result.pod));
                break;
            }
            let tie = result.verdict() == ShadowVerdict::Tie;
            judged.push(MemberShadow {
                pod: result.pod,
                decided: result.decided,
                would_choose: result.would_choose,
                tie,
            });
        }
        let count = |node: fn(&MemberShadow) -> bool| judged.iter().filter(|m| node(m)).count();
        let (decided, would) = (count(|m| m.decided.is_some()), count(|m| m.would_choose.is_some()));
        let reaches = u64::from(already_placed) + would as u64 >= u64::from(min_count);
        ShadowResult {
            profile: String::new(),
            tenant: None,
            candidate: String::new(),
            pod: group,
            attempt,
            decided: placed.then(|| members_placed(decided)),
            would_choose: (failure.is_none() && reaches).then(|| members_placed(would)),
            rank_of_decided: None,
            regret: None,
            failure,
            top: Vec::new(),
            parts: Vec::new(),
            group: Some(GroupShadow { min_count, already_placed, members: judged }),
        }
    }
}

fn members_placed(count: usize) -> String {
    format!("{count} member{} placed", if count == 1 { "" } else { "s" })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(decided: Option<&str>, would: Option<&str>, tie: bool) -> MemberShadow {
        MemberShadow { pod: "t/m".into(), decided: decided.map(Into::into), would_choose: would.map(Into::into), tie }
    }

    fn gang(members: Vec<MemberShadow>) -> GroupShadow {
        GroupShadow { min_count: 2, already_placed: 0, members }
    }

    #[test]
    fn a_gang_agrees_only_where_every_member_does_or_both_leave_it_pending() {
        let same = gang(vec![member(Some("a"), Some("a"), false), member(Some("b"), Some("b"), false)]);
        assert_eq!(same.verdict(true, true), ShadowVerdict::Agree);
        let tied = gang(vec![member(Some("a"), Some("c"), true), member(Some("b"), Some("b"), false)]);
        assert_eq!(tied.verdict(true, true), ShadowVerdict::Tie);
        let moved = gang(vec![member(Some("a"), Some("c"), true), member(Some("b"), Some("d"), false)]);
        assert_eq!(moved.verdict(true, true), ShadowVerdict::Differ);
        // Where the members would go does not matter to a gang neither places.
        let pending = gang(vec![member(None, Some("a"), false), member(None, None, false)]);
        assert_eq!(pending.verdict(false, false), ShadowVerdict::Agree);
        assert_eq!(pending.verdict(false, true), ShadowVerdict::Differ);
        assert_eq!(same.verdict(true, false), ShadowVerdict::Differ);
    }
}
