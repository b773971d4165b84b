//! The public functions and methods of each SDK's sources, read from the
//! code as an author's editor would show them: a key (`Owner::name` in
//! Rust, `Owner.name` in Python and JavaScript, constructors included) and
//! its signature, whitespace collapsed.

/// One public function or method.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    pub key: String,
    pub signature: String,
}

fn collapse(text: &str) -> String {
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    text.replace("( ", "(").replace(", )", ")").replace(",)", ")").replace(" )", ")")
}

/// The text from `lines[start]` up to and including the first line that
/// ends with `end` (a signature over several lines).
fn until(lines: &[&str], start: usize, end: &str) -> String {
    let mut text = String::new();
    for line in &lines[start..] {
        text.push_str(line);
        text.push(' ');
        if line.trim_end().ends_with(end) {
            break;
        }
    }
    text
}

/// Rust: `pub fn` at the top level (when `free` names the module path, ""
/// for the crate root, None when the file's free functions are private),
/// and in `impl` blocks of the `owners` given.
pub fn rust(source: &str, free: Option<&str>, owners: &[&str]) -> Vec<Item> {
    let lines: Vec<&str> = source.lines().collect();
    let (mut owner, mut items) = (None::<String>, Vec::new());
    for (i, line) in lines.iter().enumerate() {
        if line.starts_with("#[cfg(test)]") {
            break;
        }
        if line.starts_with("impl") && line.trim_end().ends_with('{') {
            let words: Vec<&str> = line.split_whitespace().collect();
            let name = words.len().checked_sub(2).map_or("", |i| words[i]);
            let name = name.split(['<', ' ']).next().unwrap_or("");
            owner = owners.contains(&name).then(|| name.to_string());
            continue;
        }
        if *line == "}" {
            owner = None;
        }
        let (indent, key_of) = match (&owner, free) {
            (Some(o), _) if line.starts_with("    pub fn ") => (4, format!("{o}::")),
            (None, Some(path)) if line.starts_with("pub fn ") => (0, path.to_string()),
            _ => continue,
        };
        let text = until(&lines, i, "{");
        let text = text.trim().trim_end_matches('{').trim();
        let name = line[indent + 7..].split(['(', '<']).next().unwrap();
        let signature = collapse(&text.replacen("pub fn ", "", 1)).replace("(mut self", "(self");
        items.push(Item { key: format!("{key_of}{name}"), signature: format!("{key_of}{signature}") });
    }
    items
}

/// Python: `def` at the top level and in classes, except names with a
/// leading underscore (`__init__` is the class's constructor).
pub fn python(source: &str) -> Vec<Item> {
    let lines: Vec<&str> = source.lines().collect();
    let (mut class, mut items) = (None::<String>, Vec::new());
    for (i, line) in lines.iter().enumerate() {
        if let Some(rest) = line.strip_prefix("class ") {
            class = Some(rest.split(['(', ':']).next().unwrap().to_string());
            continue;
        }
        let (owner, rest) = if let Some(rest) = line.strip_prefix("def ") {
            class = None;
            (None, rest)
        } else if let (Some(c), Some(rest)) = (&class, line.strip_prefix("    def ")) {
            // A private class's methods are private too.
            if c.starts_with('_') {
                continue;
            }
            (Some(c.clone()), rest)
        } else {
            continue;
        };
        let name = rest.split('(').next().unwrap();
        if name.starts_with('_') && name != "__init__" {
            continue;
        }
        let text = until(&lines, i, ":");
        let text = collapse(text.trim().trim_start_matches("def ").trim_end_matches(':')).replace('"', "");
        let text = text.replace("(self, ", "(").replace("(self)", "()");
        let (key, signature) = match owner {
            Some(o) if name == "__init__" => (format!("{o}.__init__"), text.replacen("__init__", &o, 1)),
            Some(o) => (format!("{o}.{name}"), format!("{o}.{text}")),
            None => (name.to_string(), text),
        };
        items.push(Item { key, signature });
    }
    items
}

/// JavaScript: `export function`, and the methods of `export class`es
/// (private `#` ones left out; `constructor` is `new Owner(…)`).
pub fn javascript(source: &str) -> Vec<Item> {
    let lines: Vec<&str> = source.lines().collect();
    let (mut class, mut items) = (None::<String>, Vec::new());
    for (i, line) in lines.iter().enumerate() {
        if let Some(rest) = line.strip_prefix("export class ") {
            class = Some(rest.split([' ', '{']).next().unwrap().to_string());
            continue;
        }
        if *line == "}" {
            class = None;
        }
        let text = collapse(until(&lines, i, "{").trim().trim_end_matches('{'));
        if let Some(rest) = text.strip_prefix("export function ") {
            let name = rest.split('(').next().unwrap();
            items.push(Item { key: name.to_string(), signature: rest.to_string() });
            continue;
        }
        let Some(owner) = &class else { continue };
        let is_method = line.starts_with("  ")
            && !line.starts_with("   ")
            && line.trim_end().ends_with('{')
            && line.trim_start().chars().next().is_some_and(|c| c.is_ascii_alphabetic())
            && !["static", "if", "for", "while", "switch", "return"].iter().any(|w| line.trim_start().starts_with(w));
        if !is_method {
            continue;
        }
        let name = text.split('(').next().unwrap();
        let (key, signature) = if name == "constructor" {
            (format!("{owner}.constructor"), format!("new {owner}{}", &text["constructor".len()..]))
        } else {
            (format!("{owner}.{name}"), format!("{owner}.{text}"))
        };
        items.push(Item { key, signature });
    }
    items
}
