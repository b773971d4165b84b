//! Reading Prometheus' text format, as the API server and wasmsched
//! serve their `/metrics`: a metric's series with their labels, and a
//! label's value.

use std::collections::BTreeMap;

/// Every series of `metric` (labelled or not): its labels (empty when
/// none) and value.
pub fn series<'a>(text: &'a str, metric: &'a str) -> impl Iterator<Item = (&'a str, f64)> + 'a {
    text.lines().filter_map(move |line| {
        let rest = line.strip_prefix(metric)?;
        let (labels, value) = match rest.strip_prefix('{') {
            Some(labelled) => labelled.rsplit_once("} ")?,
            None => ("", rest.strip_prefix(' ')?),
        };
        Some((labels, value.trim().parse().ok()?))
    })
}

/// `metric` summed by the value of its label `by` (`unknown` where a
/// series lacks it).
pub fn sum_by(text: &str, metric: &str, by: &str) -> BTreeMap<String, f64> {
    let mut sums = BTreeMap::new();
    for (labels, value) in series(text, metric) {
        *sums.entry(label(labels, by).unwrap_or("unknown").to_string()).or_default() += value;
    }
    sums
}

/// The value of `name="…"` among a series' labels.
pub fn label<'a>(labels: &'a str, name: &str) -> Option<&'a str> {
    labels.split(',').find_map(|pair| pair.strip_prefix(name)?.strip_prefix("=\"")?.split('"').next())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn series_are_read_with_and_without_labels_and_summed_by_one() {
        let text = "# HELP m x\n\
            m_total{result=\"bound\",le=\"1\"} 3\n\
            m_total{result=\"error\"} 1e1\n\
            m_total{result=\"bound\"} 2\n\
            m_total_sum 9\n\
            m 7\n";
        assert_eq!(series(text, "m").collect::<Vec<_>>(), vec![("", 7.0)], "a longer name is another metric");
        assert_eq!(series(text, "m_total_sum").next(), Some(("", 9.0)));
        let sums = sum_by(text, "m_total", "result");
        assert_eq!(sums.get("bound"), Some(&5.0));
        assert_eq!(sums.get("error"), Some(&10.0));
        assert_eq!(label("a=\"x\",le=\"1\"", "le"), Some("1"));
    }
}
