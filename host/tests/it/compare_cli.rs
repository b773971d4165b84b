//! `wasmsched compare` as a user runs it: two policies on the bundled
//! scenario, the terminal summary, and the HTML report opened by headless
//! Chromium (Debian's package): it renders with no error, and every number
//! in its summary is the terminal's.

use std::path::{Path, PathBuf};
use std::process::Command;

use wasmsched::compare::SUMMARY_ROWS;
use wasmsched_test_support::policy_wasm;

/// Debian's Chromium; under `CI=true` its absence fails the test.
fn chromium() -> Option<PathBuf> {
    let found = ["/usr/bin/chromium", "/usr/bin/chromium-browser"].into_iter().map(PathBuf::from).find(|p| p.exists());
    if found.is_none() {
        if std::env::var("CI").as_deref() == Ok("true") {
            panic!("CI=true and Chromium is missing: .ci/run installs Debian's chromium");
        }
        eprintln!("SKIPPED (chromium missing): apt-get install chromium");
    }
    found
}

fn compare(html: &Path, output: &str) -> String {
    let spot = policy_wasm("spot-first");
    let out = Command::new(env!("CARGO_BIN_EXE_wasmsched"))
        .args(["compare", "--variant", "spread=embedded", "--variant"])
        .arg(format!("spot={}", spot.display()))
        .arg("--html")
        .arg(html)
        .args(["-o", output])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// Headless Chromium's DOM of `page`, after scripts ran, and its log.
fn render(chromium: &Path, page: &Path, screenshot: &Path) -> (String, String) {
    let profile = tempfile::tempdir().unwrap();
    let run = |extra: &[&str]| {
        // Its helpers (crashpad) are ended with it.
        wasmsched_test_support::process::output(
            Command::new(chromium)
                .args(["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run"])
                .args(["--disable-background-networking", "--disable-component-update", "--disable-sync"])
                .arg(format!("--user-data-dir={}", profile.path().display()))
                .args(["--enable-logging=stderr", "--v=0"])
                .args(extra)
                .arg(format!("file://{}", page.display())),
        )
        .unwrap()
    };
    let shot = run(&[&format!("--screenshot={}", screenshot.display()), "--window-size=1300,1800"]);
    assert!(shot.status.success(), "{}", String::from_utf8_lossy(&shot.stderr));
    let dom = run(&["--dump-dom"]);
    assert!(dom.status.success(), "{}", String::from_utf8_lossy(&dom.stderr));
    (String::from_utf8_lossy(&dom.stdout).into_owned(), String::from_utf8_lossy(&dom.stderr).into_owned())
}

/// Every `<td data-variant=V data-metric=M>TEXT</td>` of the summary.
fn summary_cells(dom: &str) -> Vec<(String, String, String)> {
    let mut cells = Vec::new();
    for chunk in dom.split("<td data-variant=\"").skip(1) {
        let (variant, rest) = chunk.split_once('"').unwrap();
        let rest = rest.split_once("data-metric=\"").unwrap().1;
        let (metric, rest) = rest.split_once('"').unwrap();
        let text = rest.split_once('>').unwrap().1.split_once("</td>").unwrap().0;
        cells.push((variant.to_string(), metric.to_string(), text.replace("&amp;", "&")));
    }
    cells
}

#[test]
fn the_html_report_renders_in_chromium_with_the_terminals_numbers() {
    let out = tempfile::tempdir().unwrap();
    let page = out.path().join("report.html");
    let terminal = compare(&page, "table");
    let json: serde_json::Value = serde_json::from_str(&compare(&page, "json")).unwrap();
    // The two policies differ: spot-first fills the spot nodes first.
    let spot = &json["summaries"][1];
    assert!(spot["placedDifferently"].as_u64().unwrap() > 0, "{terminal}");
    assert!(spot["cpu"]["stddev"].as_f64() > json["summaries"][0]["cpu"]["stddev"].as_f64(), "{terminal}");
    let page_text = std::fs::read_to_string(&page).unwrap();
    for fetch in ["src=", "href=", "<link", "url(", "@import"] {
        assert!(!page_text.contains(fetch), "the page fetches nothing, yet has {fetch}");
    }

    let Some(chromium) = chromium() else { return };
    let screenshot = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("compare-report.png");
    let (dom, log) = render(&chromium, &page, &screenshot);
    assert!(std::fs::metadata(&screenshot).unwrap().len() > 10_000, "a screenshot at {}", screenshot.display());
    eprintln!("screenshot: {}", screenshot.display());
    assert!(dom.contains("data-rendered=\"yes\""), "the page's script did not run:\n{dom}");
    assert!(dom.contains("<pre id=\"errors\"></pre>"), "errors on the page:\n{dom}");
    assert!(!log.contains("Uncaught") && !log.contains(":CONSOLE"), "console:\n{log}");

    // Each node's row says both figures, on an axis marked 0-100 %.
    let rows = dom.matches("% · mem ").count();
    assert_eq!(rows, 2 * 9, "a cpu and memory figure per Ready node (9) and variant:\n{dom}");
    assert!(dom.matches(">100%</text>").count() >= 2, "the per-node axis is marked:\n{dom}");

    let cells = summary_cells(&dom);
    assert_eq!(cells.len(), 2 * SUMMARY_ROWS.len(), "{dom}");
    for (key, label, _) in SUMMARY_ROWS {
        let row = terminal.lines().find(|l| l.starts_with(label)).unwrap_or_else(|| panic!("{label} in\n{terminal}"));
        let values: Vec<&str> = ["spread", "spot"]
            .iter()
            .map(|v| cells.iter().find(|(cv, m, _)| cv == v && m == key).map(|(_, _, t)| t.as_str()).unwrap())
            .collect();
        let at = |text: &str| row[label.len()..].find(text).unwrap_or_else(|| panic!("{text:?} not in {row:?}"));
        assert!(at(values[0]) < at(values[1]) || values[0] == values[1], "{row:?}: {values:?}");
    }
}

/// Gangs in the compared cluster: each variant's gangs placed whole, of
/// all, on the terminal and in the JSON.
#[test]
fn compare_counts_the_gangs_each_variant_places_whole() {
    use crate::common::gang_manifests::{gang, nodes};
    let dir = tempfile::tempdir().unwrap();
    let cluster = dir.path().join("cluster.yaml");
    std::fs::write(&cluster, nodes(3) + &gang("fits", 4, 4, "2") + &gang("too-big", 3, 3, "2")).unwrap();
    let run = |output: &str| {
        let out = Command::new(env!("CARGO_BIN_EXE_wasmsched"))
            .args(["compare", "--variant", "a=embedded", "--variant", "b=embedded", "-o", output])
            .arg(&cluster)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    let table = run("table");
    let line = table.lines().find(|l| l.starts_with("gangs placed whole")).unwrap_or_else(|| panic!("{table}"));
    assert_eq!(
        line.split_whitespace().collect::<Vec<_>>(),
        ["gangs", "placed", "whole", "1", "of", "2", "1", "of", "2"]
    );
    let json: serde_json::Value = serde_json::from_str(&run("json")).unwrap();
    assert_eq!((&json["summaries"][0]["gangsPlaced"], &json["summaries"][0]["gangs"]), (&1.into(), &2.into()));
}
