//! A node's raw score as named parts ([`crate::Policy::score_parts`]): the
//! score is their sum, and `--explain` shows them beside it.

/// The named parts of one node's raw score, in the order added.
///
/// ```ignore
/// ScoreParts::new().add("free memory", free_gib).add("zone bonus", bonus)
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ScoreParts {
    parts: Vec<(String, f64)>,
}

impl ScoreParts {
    pub fn new() -> Self {
        ScoreParts::default()
    }

    /// One more part: a short name (at most 64 bytes; at most 16 parts a
    /// node) and its value.
    pub fn add(mut self, name: &str, value: f64) -> Self {
        self.parts.push((name.to_string(), value));
        self
    }

    /// The raw score: the sum of the parts.
    pub fn total(&self) -> f64 {
        self.parts.iter().map(|(_, value)| value).sum()
    }

    /// Each part's name and value, in the order added.
    pub fn parts(&self) -> &[(String, f64)] {
        &self.parts
    }

    #[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))] // the wasm export's
    pub(crate) fn into_parts(self) -> impl Iterator<Item = (String, f64)> {
        self.parts.into_iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_total_is_the_sum_of_the_parts_in_order() {
        let parts = ScoreParts::new().add("free memory", 23.0).add("zone bonus", 20.0);
        assert_eq!(parts.total(), 43.0);
        assert_eq!(parts.parts()[1], ("zone bonus".to_string(), 20.0));
        assert_eq!(ScoreParts::new().total(), 0.0);
    }
}
