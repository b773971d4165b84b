//! Filter: a pod labelled `app=X` may only run on nodes labelled for X
//! (`wasmsched.io/app=X`, or a comma-separated list of apps). Pods without
//! the label are not restricted. The scheduling-framework Filter example.

use wasmsched_sdk::*;

pub struct AppNodeMatch {
    pod_label: String,
    node_label: String,
}

impl Policy for AppNodeMatch {
    const NAME: &'static str = "app-node-match";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const DESCRIPTION: &'static str = "pods labelled app=X only run on nodes labelled for X";
    const PHASES: Phases = Phases::FILTER;
    const INDEPENDENT_NODES: bool = true;

    fn new(config: &Config) -> Result<Self, String> {
        Ok(AppNodeMatch {
            pod_label: config.str("podLabel")?.unwrap_or("app").to_string(),
            node_label: config.str("nodeLabel")?.unwrap_or("wasmsched.io/app").to_string(),
        })
    }

    fn filter_all(
        &self,
        _attempt: &Attempt<'_>,
        pod: &Pod,
        nodes: &[NodeView<'_>],
        verdicts: &mut Verdicts,
    ) -> Result<(), String> {
        let Some(app) = pod.label(&self.pod_label) else { return Ok(()) };
        // One reason per pod, not one string per rejected node.
        let reason = format!("node(s) didn't have label {}={app}", self.node_label);
        for node in nodes {
            let allowed = node.label(&self.node_label).is_some_and(|apps| apps.split(',').any(|a| a.trim() == app));
            if !allowed {
                verdicts.reject(node.index(), &reason);
            }
        }
        Ok(())
    }
}

export_policy!(AppNodeMatch);

#[cfg(test)]
mod tests {
    use super::*;
    use wasmsched_sdk::testing::{Harness, NodeBuilder, PodBuilder};

    #[test]
    fn only_nodes_labelled_for_the_app() {
        let mut h = Harness::<AppNodeMatch>::new();
        h.add_node(NodeBuilder::new("web-1").label("wasmsched.io/app", "web"));
        h.add_node(NodeBuilder::new("shared").label("wasmsched.io/app", "db, web"));
        h.add_node(NodeBuilder::new("plain"));
        let verdicts = h.filter(&PodBuilder::new("frontend").label("app", "web"));
        assert_eq!(verdicts[0].1, Ok(()));
        assert_eq!(verdicts[1].1, Ok(()));
        assert_eq!(verdicts[2].1, Err("node(s) didn't have label wasmsched.io/app=web".to_string()));
        assert!(h.filter(&PodBuilder::new("unlabelled")).iter().all(|(_, v)| v.is_ok()));
        let db_only = h.filter(&PodBuilder::new("cache").label("app", "cache"));
        assert!(db_only.iter().all(|(_, v)| v.is_err()));
    }
}
