//! What a pod and a node carry, listed from the contract's records
//! (`pod-info`, `node-info` and their `resources`) in each language's
//! spelling: the attributes an author reads, which the helpers' list
//! (`toolkit.rs`) does not hold.

/// The contract whose records every SDK's views carry: 0.4, which the
/// Python and JavaScript interpreters speak (the Rust SDK's 0.5 adds only
/// the score scale to `policy-info`).
const CONTRACT: &str = "wit/0.4.0/policy.wit";

/// (view, record, what the view is called in a policy's code).
const VIEWS: &[(&str, &str, &str)] = &[("pod", "pod-info", "the pod"), ("node", "node-info", "a candidate node")];

/// One field of a record: its name as WIT spells it, its type, its doc.
struct Field {
    name: String,
    ty: String,
    doc: String,
}

/// The fields of `record NAME { ... }` in `wit`, with their `///` lines.
fn record(wit: &str, name: &str) -> Vec<Field> {
    let start = wit.find(&format!("record {name} {{")).unwrap_or_else(|| panic!("no record {name} in the contract"));
    let body = &wit[start..];
    let body = &body[body.find('{').unwrap() + 1..body.find('}').unwrap()];
    let mut doc = Vec::new();
    let mut fields = Vec::new();
    for line in body.lines().map(str::trim) {
        if let Some(text) = line.strip_prefix("///") {
            doc.push(text.trim().to_string());
        } else if let Some((field, ty)) = line.trim_end_matches(',').split_once(':') {
            fields.push(Field { name: field.trim().into(), ty: ty.trim().into(), doc: doc.join(" ") });
            doc.clear();
        }
    }
    fields
}

/// A WIT name as the language spells a field: `milli-cpu` is `milli_cpu`
/// in Rust and Python, `milliCpu` in JavaScript.
fn spelled(name: &str, language: &str) -> String {
    match language {
        "JavaScript" => {
            let mut parts = name.split('-');
            let first = parts.next().unwrap_or_default().to_string();
            parts.fold(first, |all, part| all + &part[..1].to_uppercase() + &part[1..])
        }
        _ => name.replace('-', "_"),
    }
}

/// How the language hands over a WIT `list<tuple<string, string>>` field
/// of a view (labels, annotations, the node selector).
fn map_type(language: &str) -> &'static str {
    match language {
        "Rust" => "BTreeMap<String, String>",
        "Python" => "dict[str, str]",
        _ => "Map<string, string>",
    }
}

/// A WIT type as the language hands it over; `list<tuple<string,
/// string>>` fields of a view (labels, annotations, the node selector)
/// are maps. Other types keep the contract's names.
fn typed(ty: &str, language: &str) -> String {
    let spelled = match (ty, language) {
        ("list<tuple<string, string>>", _) => map_type(language),
        ("string", "Rust") => "String",
        ("s32", "Rust") => "i32",
        ("string", "Python") => "str",
        ("u64" | "u32" | "s32" | "node-id", "Python") => "int",
        ("u64", "JavaScript") => "bigint",
        ("u32" | "s32" | "node-id", "JavaScript") => "number",
        ("bool", "Python") => "bool",
        ("bool", "JavaScript") => "boolean",
        ("list<tuple<string, u64>>", "Rust") => "Vec<(String, u64)>",
        ("option<group-info>", "Rust") => "Option<GroupInfo>",
        ("list<tuple<string, u64>>", "Python") => "list[tuple[str, int]]",
        ("list<tuple<string, u64>>", "JavaScript") => "[string, bigint][]",
        _ => ty,
    };
    spelled.to_string()
}

/// The page's section, and each view's fields as the language spells
/// them (for the check that the views carry them).
pub(super) fn section(language: &str, root: &std::path::Path) -> (String, Vec<(&'static str, String)>) {
    let path = CONTRACT;
    let wit = std::fs::read_to_string(root.join(path)).unwrap();
    let resources = record(&wit, "resources");
    let mut page = format!(
        "\n## What a pod and a node carry\n\n\
         Read as fields of the pod and node views, from the contract's records (`{path}`); amounts are integers \
         in the units given{}.\n",
        if language == "JavaScript" {
            " (a u64 is a BigInt: `Number(pod.requests.memory)` for arithmetic with Numbers)"
        } else {
            ""
        }
    );
    let mut names = Vec::new();
    for (view, name, what) in VIEWS {
        page += &format!("\n`{view}`, {what} (`{name}`):\n\n");
        for field in record(&wit, name) {
            let name = spelled(&field.name, language);
            let ty = typed(&field.ty, language);
            let doc = if field.doc.is_empty() { String::new() } else { format!(": {}", field.doc) };
            page += &format!("- `{view}.{name}` ({ty}){doc}\n");
            if ty == "resources" {
                for amount in &resources {
                    let doc = if amount.doc.is_empty() { String::new() } else { format!(": {}", amount.doc) };
                    let inner = spelled(&amount.name, language);
                    page += &format!("  - `{view}.{name}.{inner}` ({}){doc}\n", typed(&amount.ty, language));
                }
            }
            names.push((*view, name));
        }
    }
    (page, names)
}
