//! The WIT types as `wasmsched-rules` reads them, so [`crate::Pod`]'s
//! `tolerates` and `matches_node` answer as the scheduler's own filters do.

use wasmsched_rules::{Effect, Operator, RequirementFields, TaintFields, TermFields, TolerationFields};

use crate::{
    NodeSelectorTerm, SelectorOperator, SelectorRequirement, Taint, TaintEffect, Toleration, TolerationOperator,
};

fn effect(e: TaintEffect) -> Effect {
    match e {
        TaintEffect::NoSchedule => Effect::NoSchedule,
        TaintEffect::PreferNoSchedule => Effect::PreferNoSchedule,
        TaintEffect::NoExecute => Effect::NoExecute,
    }
}

impl TaintFields for Taint {
    fn key(&self) -> &str {
        &self.key
    }
    fn value(&self) -> &str {
        &self.value
    }
    fn effect(&self) -> Effect {
        effect(self.effect)
    }
}

impl TolerationFields for Toleration {
    fn key(&self) -> &str {
        &self.key
    }
    fn operator(&self) -> wasmsched_rules::TolerationOperator {
        match self.operator {
            TolerationOperator::Exists => wasmsched_rules::TolerationOperator::Exists,
            TolerationOperator::Equal => wasmsched_rules::TolerationOperator::Equal,
        }
    }
    fn value(&self) -> &str {
        &self.value
    }
    fn effect(&self) -> Option<Effect> {
        self.effect.map(effect)
    }
}

impl RequirementFields for SelectorRequirement {
    fn key(&self) -> &str {
        &self.key
    }
    fn operator(&self) -> Operator {
        match self.operator {
            SelectorOperator::In => Operator::In,
            SelectorOperator::NotIn => Operator::NotIn,
            SelectorOperator::Exists => Operator::Exists,
            SelectorOperator::DoesNotExist => Operator::DoesNotExist,
            SelectorOperator::Gt => Operator::Gt,
            SelectorOperator::Lt => Operator::Lt,
        }
    }
    fn values(&self) -> &[String] {
        &self.values
    }
}

impl TermFields for NodeSelectorTerm {
    type Requirement = SelectorRequirement;
    fn match_expressions(&self) -> &[SelectorRequirement] {
        &self.match_expressions
    }
    fn match_fields(&self) -> &[SelectorRequirement] {
        &self.match_fields
    }
}
