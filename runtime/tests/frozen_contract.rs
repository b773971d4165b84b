//! A released contract version is frozen: policies built against it must
//! keep loading in every later scheduler. Changing `wit/0.1.0`,
//! `wit/0.2.0`, `wit/0.3.0` or `wit/0.4.0` by a byte fails here; a change to the contract is a new
//! version in a sibling directory, with its own module under
//! `runtime/src/contract/`. So does changing the interpreters' addition,
//! `wit/interpreter/0.1.0` or `0.2.0` (each one's `deps/` is the policy
//! contract it extends).

use sha2::{Digest, Sha256};

/// Every file of the frozen directory, with the sha256 it was released with.
const FROZEN: &[(&str, &str)] = &[
    ("0.1.0/policy.wit", "6c8b2d009c1f87f81adde5ea1d52dc8832c7895190c8e56152c481bc32a1a340"),
    ("0.2.0/policy.wit", "7da1b47d9a9df771c30d09be2c7b5b9e25ea518c83a8163166182f21f0f7ab20"),
    ("0.3.0/policy.wit", "6c5a8c5b80cd7000b06fe39fceeb575e5432ec19ea0cee5156627185d47fed49"),
    ("0.4.0/policy.wit", "70c9a3e8353ead8e7dd694e448998c0d86001bea09448f5334d01d9d7ca22bff"),
    ("interpreter/0.1.0/source.wit", "e382b0338abbe0e5b7a3d3d4a1de34fbbfb49ea47d1ea353549bdd90b0b39ba0"),
    ("interpreter/0.2.0/source.wit", "648f71313c8a6c6a5b02c277a3b570675ee6f30e711c6971c5e8fd6a30b5db37"),
];

#[test]
fn released_contract_versions_are_unchanged() {
    let wit = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../wit");
    let mut versions: Vec<&str> = FROZEN.iter().filter_map(|(path, _)| path.rsplit_once('/').map(|(d, _)| d)).collect();
    versions.dedup();
    let mut found: Vec<String> = Vec::new();
    for version in versions {
        for entry in std::fs::read_dir(wit.join(version)).unwrap() {
            let entry = entry.unwrap();
            // An interpreter's `deps/policy` is a frozen policy contract itself.
            if entry.file_name() == "deps" {
                continue;
            }
            found.push(format!("{version}/{}", entry.file_name().to_string_lossy()));
        }
    }
    found.sort();
    let expected: Vec<&str> = FROZEN.iter().map(|(path, _)| *path).collect();
    assert_eq!(found, expected, "files were added to or removed from a released contract version");
    for (path, sha256) in FROZEN {
        let bytes = std::fs::read(wit.join(path)).unwrap();
        assert_eq!(
            hex::encode(Sha256::digest(&bytes)),
            *sha256,
            "wit/{path} changed: a released contract is frozen; put the change in a new version's directory"
        );
    }
}
