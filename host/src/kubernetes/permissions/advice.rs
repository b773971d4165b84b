//! What to tell a person about the permissions reviewed: the RBAC rule and
//! the kubectl commands that grant a missing one, the writes the
//! scheduling core must keep pods out of, and the table `wasmsched auth
//! check` prints.

use super::needs::{Gate, Permission};
use super::review::{Reviewed, Verdict};
use crate::scheduler::DeniedWrites;

/// `kubectl create` lines granting `p` to `subject` (`system:serviceaccount:NS:NAME`
/// or a user name), and the rule to add to an existing role instead.
pub fn grant(p: &Permission, subject: &str) -> String {
    let name = format!("wasmsched-{}-{}", p.verb, p.rule_resource().replace('/', "-"));
    let who = match subject.strip_prefix("system:serviceaccount:") {
        Some(account) => format!("--serviceaccount={account}"),
        None => format!("--user={subject}"),
    };
    let resource_name = p.name.as_ref().map(|n| format!(" --resource-name={n}")).unwrap_or_default();
    let (role, binding, ns) = match &p.namespace {
        Some(ns) => ("role", "rolebinding", format!(" -n {ns}")),
        None => ("clusterrole", "clusterrolebinding", String::new()),
    };
    format!(
        "kubectl{ns} create {role} {name} --verb={verb} --resource={resource}{resource_name} && \
         kubectl{ns} create {binding} {name} --{role}={name} {who} (or add to its {kind} the rule \
         {{apiGroups: [\"{group}\"], resources: [{rule}]{names}, verbs: [{verb}]}})",
        verb = p.verb,
        resource = p.kubectl_resource(),
        kind = if p.namespace.is_some() { "Role" } else { "ClusterRole" },
        group = p.group,
        rule = p.rule_resource(),
        names = p.name.as_ref().map(|n| format!(", resourceNames: [{n}]")).unwrap_or_default(),
    )
}

/// The writes to keep pods out of: per gate, the permissions missing, in
/// the words the pods' `FailedScheduling` message carries.
pub fn denied_writes(reviewed: &[Reviewed]) -> DeniedWrites {
    let missing = |gate: Gate| {
        let names: Vec<String> = reviewed
            .iter()
            .filter(|r| r.need.gate == gate && matches!(r.verdict, Verdict::Missing(_)))
            .map(|r| r.need.permission.to_string())
            .collect();
        (!names.is_empty()).then(|| {
            format!(
                "this scheduler's identity may not {}; grant it (`wasmsched auth check` lists what is missing)",
                names.join(", nor ")
            )
        })
    };
    DeniedWrites {
        binding: missing(Gate::Binding),
        volumes: missing(Gate::Volumes),
        devices: missing(Gate::Devices),
        extended_resources: missing(Gate::ExtendedResources),
        preemption: missing(Gate::Preemption),
    }
}

/// What a missing permission stops, for a person.
pub fn consequence(gate: Gate) -> &'static str {
    match gate {
        Gate::Binding => "no pod can be bound",
        Gate::Volumes => "pods whose volumes wait for their first consumer are refused (FailedScheduling)",
        Gate::Devices => "pods with ResourceClaims are refused (FailedScheduling)",
        Gate::ExtendedResources => {
            "pods with extended resources backed by devices are refused (FailedScheduling); other pods are scheduled \
             without that report"
        }
        Gate::Preemption => "no pod preempts another",
        Gate::Watch => "the watch retries, and no pod is scheduled until it lists",
        Gate::OptionalWatch => {
            "where the API server serves them, none are known and pods that need one wait; the watch retries, and \
             every other pod is scheduled"
        }
        Gate::Reporting => "pods are scheduled, without that report",
        Gate::LeaderElection => "this replica never leads",
        Gate::Policies => "the profile's pods are placed by the built-in scoring",
        Gate::Tenants => "tenants' policies are not loaded",
        Gate::NodeMetrics => "policies see no metrics.k8s.io values",
        Gate::Experiments => "/experiments turns every caller away (503): it cannot check who asks",
    }
}

/// The table `wasmsched auth check` prints: one row per permission.
pub fn table(reviewed: &[Reviewed]) -> String {
    let rows: Vec<[String; 4]> = reviewed
        .iter()
        .map(|r| {
            let p = &r.need.permission;
            let verdict = match &r.verdict {
                Verdict::Granted => "yes".to_string(),
                Verdict::Missing(_) => "MISSING".to_string(),
                Verdict::Unknown(why) => format!("unknown ({why})"),
            };
            let mut resource = p.kubectl_resource();
            if let Some(name) = &p.name {
                resource.push_str(&format!(" [{name}]"));
            }
            let scope = p.namespace.clone().unwrap_or_else(|| "*".into());
            [format!("{} {resource}", p.verb), scope, verdict, r.need.used_for.to_string()]
        })
        .collect();
    let header = ["PERMISSION", "NAMESPACE", "GRANTED", "USED FOR"].map(String::from);
    let widths: Vec<usize> =
        (0..3).map(|i| rows.iter().chain([&header]).map(|r| r[i].len()).max().unwrap_or(0)).collect();
    let line = |r: &[String; 4]| {
        format!("{:w0$}  {:w1$}  {:w2$}  {}\n", r[0], r[1], r[2], r[3], w0 = widths[0], w1 = widths[1], w2 = widths[2])
    };
    std::iter::once(&header).chain(&rows).map(line).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kubernetes::permissions::needs::Need;

    fn permission(namespace: Option<&str>, name: Option<&str>) -> Permission {
        Permission {
            verb: "update",
            group: "coordination.k8s.io",
            resource: "leases",
            subresource: "",
            namespace: namespace.map(String::from),
            name: name.map(String::from),
        }
    }

    #[test]
    fn the_grant_names_the_subject_the_scope_and_the_rule() {
        let line = grant(&permission(Some("ops"), Some("wasmsched")), "system:serviceaccount:ops:sched");
        assert_eq!(
            line,
            "kubectl -n ops create role wasmsched-update-leases --verb=update --resource=leases.coordination.k8s.io \
             --resource-name=wasmsched && kubectl -n ops create rolebinding wasmsched-update-leases \
             --role=wasmsched-update-leases --serviceaccount=ops:sched (or add to its Role the rule \
             {apiGroups: [\"coordination.k8s.io\"], resources: [leases], resourceNames: [wasmsched], verbs: [update]})"
        );
        let line = grant(&permission(None, None), "alice");
        assert!(line.starts_with("kubectl create clusterrole wasmsched-update-leases"), "{line}");
        assert!(line.contains("--clusterrole=wasmsched-update-leases --user=alice"), "{line}");
    }

    #[test]
    fn missing_permissions_deny_the_writes_of_their_gate_only() {
        let reviewed = |gate, verdict| Reviewed {
            need: Need { permission: permission(None, None), gate, used_for: "x" },
            verdict,
        };
        let all = [
            reviewed(Gate::Devices, Verdict::Missing("no rule".into())),
            reviewed(Gate::Volumes, Verdict::Unknown("timeout".into())),
            reviewed(Gate::Reporting, Verdict::Missing(String::new())),
        ];
        let denied = denied_writes(&all);
        assert!(denied.devices.as_deref().unwrap().contains("may not update leases (coordination.k8s.io)"));
        assert_eq!((denied.volumes, denied.binding, denied.preemption), (None, None, None));
        let table = table(&all);
        assert!(table.lines().next().unwrap().starts_with("PERMISSION"), "{table}");
        assert_eq!(table.lines().filter(|l| l.contains("MISSING")).count(), 2, "{table}");
        assert!(table.contains("unknown (timeout)"), "{table}");
    }
}
