//! No module of this crate imports another in a circle (the pure `policy` in particular stays
//! free of `options`): the graph of `crate::` paths, comments and test modules excluded.

use std::collections::{BTreeMap, BTreeSet};

fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/src");
    let modules: BTreeSet<String> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| {
            let name = e.ok()?.file_name().into_string().ok()?;
            let module = name.strip_suffix(".rs")?.to_string();
            (module != "lib").then_some(module)
        })
        .collect();
    let mut graph = BTreeMap::new();
    for module in &modules {
        let text = std::fs::read_to_string(format!("{dir}/{module}.rs")).unwrap();
        let code = text.split("#[cfg(test)]").next().unwrap_or("");
        let mut uses = BTreeSet::new();
        for line in code.lines().filter(|l| !l.trim_start().starts_with("//")) {
            for part in line.split("crate::").skip(1) {
                let name: String = part
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if modules.contains(&name) && &name != module {
                    uses.insert(name);
                }
            }
        }
        graph.insert(module.clone(), uses);
    }
    graph
}

/// A cycle through `node`, if any (depth-first; `path` is the current chain).
fn cycle(
    graph: &BTreeMap<String, BTreeSet<String>>,
    node: &str,
    path: &mut Vec<String>,
    done: &mut BTreeSet<String>,
) -> Option<Vec<String>> {
    if let Some(at) = path.iter().position(|m| m == node) {
        return Some(path[at..].to_vec());
    }
    if done.contains(node) {
        return None;
    }
    path.push(node.to_string());
    for next in &graph[node] {
        if let Some(c) = cycle(graph, next, path, done) {
            return Some(c);
        }
    }
    path.pop();
    done.insert(node.to_string());
    None
}

#[test]
fn no_module_imports_another_in_a_circle() {
    let graph = graph();
    assert!(graph.len() > 10, "modules found: {graph:?}");
    assert!(graph["call"].contains("policy"), "the scan sees imports");
    let mut done = BTreeSet::new();
    for module in graph.keys() {
        if let Some(c) = cycle(&graph, module, &mut Vec::new(), &mut done) {
            panic!("module circle: {}", c.join(" -> "));
        }
    }
    assert!(
        !graph["policy"].contains("options"),
        "the pure policy depends on options"
    );
}
