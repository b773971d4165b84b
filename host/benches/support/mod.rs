//! What the benchmarks share (the workloads themselves live in
//! `wasmsched::bench`, shared with `wasmsched bench`).

/// Peak resident set size of this process (VmHWM), in MiB.
#[allow(dead_code)] // not every bench uses it
pub fn peak_rss_mib() -> f64 {
    wasmsched::bench::peak_rss_mib()
}

#[allow(dead_code)]
pub fn cluster(nodes: usize, pods: usize) -> wasmsched::sim::Manifests {
    wasmsched::bench::cluster::cluster(nodes, pods)
}
