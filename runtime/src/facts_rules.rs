//! The facts as `wasmsched-rules` reads them: the scheduler's built-in
//! filters apply the same rule functions the SDK gives policies.

use wasmsched_rules::{NodeLabels, RequirementFields, TaintFields, TermFields, TolerationFields};

use crate::facts::{
    NodeFacts, NodeSelectorTerm, SelectorOperator, SelectorRequirement, Taint, TaintEffect, Toleration,
    TolerationOperator,
};

impl TaintFields for Taint {
    fn key(&self) -> &str {
        &self.key
    }
    fn value(&self) -> &str {
        &self.value
    }
    fn effect(&self) -> TaintEffect {
        self.effect
    }
}

impl TolerationFields for Toleration {
    fn key(&self) -> &str {
        &self.key
    }
    fn operator(&self) -> TolerationOperator {
        self.operator
    }
    fn value(&self) -> &str {
        &self.value
    }
    fn effect(&self) -> Option<TaintEffect> {
        self.effect
    }
}

impl RequirementFields for SelectorRequirement {
    fn key(&self) -> &str {
        &self.key
    }
    fn operator(&self) -> SelectorOperator {
        self.operator
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

impl NodeLabels for NodeFacts {
    fn name(&self) -> &str {
        &self.name
    }
    fn label(&self, key: &str) -> Option<&str> {
        self.labels.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }
}
