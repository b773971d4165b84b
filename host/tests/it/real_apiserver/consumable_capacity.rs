//! DRAConsumableCapacity and `distinctAttribute` beside kube-scheduler:
//! network devices shared by several claims, each consuming bandwidth as
//! the request policy rounds it, until a device is full; a claim whose
//! requests must get devices on different switches; claims asking what no
//! device offers; a request's tolerations copied into its allocation. Both schedulers must bind the same pods, give each
//! claim the same devices and the same consumed capacity, each share an
//! ID, and refuse the others with the same message.

use super::devices::{add_node, create_class};
use super::*;

use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceSlice};
use kube::Api;
use kube::api::PostParams;

/// Each pod's outcome, then each claim's results as `request device
/// consumed… share` lines.
type Result = (BTreeMap<String, Outcome>, BTreeMap<String, Vec<String>>);

/// The claims, in the order their pods come: each request's bandwidth
/// (nothing asked when empty), and whether its devices must be on
/// different switches.
const CLAIMS: [(&str, &[&str], bool); 8] = [
    ("ten", &["10Gi"], false),
    ("silent", &[""], false),
    ("rest", &["24Gi"], false),
    ("more", &["8Gi"], false),
    ("apart", &["4Gi", "4Gi"], true),
    ("tolerant", &["32Gi"], false),
    ("over-max", &["33Gi"], false),
    ("memory", &["memory"], false),
];

async fn run(real: &Real, side: &str, scheduler_name: &str) -> Result {
    let own = |name: &str| real.own(&format!("{side}-{name}"));
    let (driver, class, node) = (format!("{}.example.com", own("nic")), own("nic"), own("c0"));
    add_node(real, &format!("{side}-c0"), &format!("{side}-cap")).await;
    let post = PostParams::default();
    create_class(real, &class, &driver).await;
    let nic = |name: &str, switch: &str| {
        json!({"name": name, "allowMultipleAllocations": true, "attributes": {"switch": {"string": switch}},
            "capacity": {"bandwidth": {"value": "40Gi", "requestPolicy": {"default": "4Gi",
                "validRange": {"min": "4Gi", "step": "4Gi", "max": "32Gi"}}}}})
    };
    let slice = json!({"metadata": {"name": node}, "spec": {"driver": driver, "nodeName": node,
        "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
        "devices": [nic("nic-0", "a"), nic("nic-1", "a"), nic("nic-2", "b")]}});
    let slices: Api<ResourceSlice> = Api::all(real.admin.clone());
    slices.create(&post, &serde_json::from_value(slice).unwrap()).await.unwrap();
    let claims: Api<ResourceClaim> = Api::namespaced(real.admin.clone(), &real.namespace);
    for (name, asks, apart) in CLAIMS {
        let requests: Vec<Value> = asks
            .iter()
            .enumerate()
            .map(|(n, asked)| {
                let mut exactly = json!({"deviceClassName": class});
                match *asked {
                    "" => {}
                    "memory" => exactly["capacity"] = json!({"requests": {"memory": "1Gi"}}),
                    bandwidth => exactly["capacity"] = json!({"requests": {"bandwidth": bandwidth}}),
                }
                if name == "tolerant" {
                    // Copied into the allocation for the driver.
                    exactly["tolerations"] =
                        json!([{"key": "example.com/unhealthy", "operator": "Exists", "effect": "NoSchedule"}]);
                }
                json!({"name": format!("nic-{n}"), "exactly": exactly})
            })
            .collect();
        let mut devices = json!({"requests": requests});
        if apart {
            devices["constraints"] = json!([{"distinctAttribute": format!("{driver}/switch")}]);
        }
        let body = json!({"metadata": {"name": format!("{side}-{name}")}, "spec": {"devices": devices}});
        claims.create(&post, &serde_json::from_value(body).unwrap()).await.unwrap();
    }
    real.settle().await;

    let pod = |claim: &str| {
        json!({"nodeSelector": {"wasmsched-class": format!("{side}-cap")},
            "resourceClaims": [{"name": "nic", "resourceClaimName": format!("{side}-{claim}")}],
            "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": {"cpu": "100m"}}}]})
    };
    let pods: Vec<(String, Value)> = CLAIMS.iter().map(|(c, _, _)| (c.to_string(), pod(c))).collect();
    // One at a time: which claim gets bandwidth first must not be the
    // queue's choice.
    let names = real.create_pods(&format!("{side}-"), &pods, scheduler_name, Duration::from_millis(1500)).await;
    let decided = real.wait_decided(&names).await;
    let outcomes = decided
        .iter()
        .map(|p| {
            let name = p.metadata.name.clone().unwrap_or_default();
            (name.trim_start_matches(&format!("{side}-")).to_string(), Outcome::of(p))
        })
        .collect();
    let mut allocated = BTreeMap::new();
    for (claim, _, _) in CLAIMS {
        let status = claims.get(&format!("{side}-{claim}")).await.unwrap().status.unwrap_or_default();
        let results = status.allocation.and_then(|a| a.devices).and_then(|d| d.results).unwrap_or_default();
        let lines = results
            .into_iter()
            .map(|r| {
                let consumed: Vec<String> =
                    r.consumed_capacity.iter().flatten().map(|(name, q)| format!(" {name}={}", q.0)).collect();
                let share = match r.share_id.as_deref() {
                    Some(id) if is_uuid(id) => " share",
                    Some(_) => " share (not a UUID)",
                    None => "",
                };
                let tolerations = r.tolerations.as_ref().map_or(String::new(), |t| format!(" tolerations={}", t.len()));
                format!("{} {}{}{share}{tolerations}", r.request, r.device, consumed.concat())
            })
            .collect();
        allocated.insert(claim.to_string(), lines);
    }
    super::devices::clean_up(real, std::slice::from_ref(&node), &class).await;
    (outcomes, allocated)
}

/// `8-4-4-4-12` lowercase hex digits.
fn is_uuid(id: &str) -> bool {
    let groups: Vec<&str> = id.split('-').collect();
    groups.iter().map(|g| g.len()).eq([8, 4, 4, 4, 12])
        && groups.iter().all(|g| g.chars().all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c)))
}

#[test]
fn shared_devices_are_consumed_as_kube_scheduler_consumes_them() {
    let Some(real) = Real::start("dra-capacity") else { return };
    real.block_on(async {
        let (kube, ours) = beside_kube(&real, "wasmsched-capacity", run).await;
        let (outcomes, allocated) = &kube;
        for bound in ["ten", "silent", "rest", "more", "apart", "tolerant"] {
            assert_eq!(outcomes[bound], Outcome::Bound, "{bound}: {kube:?}");
        }
        for refused in ["over-max", "memory"] {
            assert!(
                matches!(&outcomes[refused], Outcome::Unschedulable(m) if m.contains("cannot allocate all claims")),
                "{refused}: {kube:?}"
            );
        }
        assert_eq!(allocated["ten"], ["nic-0 nic-0 bandwidth=12Gi share"], "{kube:?}");
        assert_eq!(allocated["silent"], ["nic-0 nic-0 bandwidth=4Gi share"], "{kube:?}");
        assert_eq!(allocated["more"], ["nic-0 nic-1 bandwidth=8Gi share"], "{kube:?}");
        assert_eq!(
            allocated["apart"],
            ["nic-0 nic-1 bandwidth=4Gi share", "nic-1 nic-2 bandwidth=4Gi share"],
            "{kube:?}"
        );
        assert_eq!(allocated["tolerant"], ["nic-0 nic-2 bandwidth=32Gi share tolerations=1"], "{kube:?}");
        assert_eq!(ours, kube, "wasmsched shares devices differently from kube-scheduler");
    });
}
