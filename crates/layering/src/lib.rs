//! Layering: a dev tool that keeps a crate's architecture honest.
//!
//! [`read_crate`] reads a crate's sources (from `lib.rs` or `main.rs`, following `mod name;`
//! declarations) and builds its module import graph: one node per source file, named by its
//! module path (`crate`, `index`, `index::packed`), and one edge per module that a file refers
//! to through a `crate::`, `super::` or `self::` path, or a path that starts with one of its
//! own child modules (a parent re-exporting its child depends on it). [`ModuleGraph::cycles`] and
//! [`ModuleGraph::top_level_cycles`] find the import cycles. [`LayerMap`] reads the "module map"
//! table of a markdown document (which top-level module may touch which) and
//! [`LayerMap::check`] reports every import the map does not allow.
//!
//! It is meant for tests of other crates (as a dev-dependency):
//!
//! ```no_run
//! let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
//! let checked = layering::check_crate(
//!     &dir.join("src"),
//!     &dir.join("../../docs/ARCHITECTURE.md"),
//!     "## Module map (`crates/shaledb/src`)",
//! );
//! if let Err(problems) = checked {
//!     panic!("{problems}");
//! }
//! ```
//!
//! The parser is a tokenizer, not a Rust parser: it ignores comments and literals, follows
//! `mod` declarations and reads paths, and knows nothing of macros, `#[path]` or name
//! resolution beyond `crate::`, `super::` and `self::` prefixes.

mod lex;
mod map;
#[cfg(test)]
mod tests;

pub use map::{LayerMap, Violation};

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// One source file of the crate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Module {
    /// Module path from the root joined with `::` (`store::commit`); the root is `crate`.
    pub name: String,
    pub file: PathBuf,
    pub lines: usize,
}

/// `from` refers to `to`; `line` is the first such reference in `from`'s file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edge {
    pub from: String,
    pub to: String,
    pub line: usize,
}

/// A crate's modules (one per file) and the imports between them.
#[derive(Debug, Clone)]
pub struct ModuleGraph {
    modules: Vec<Module>,
    edges: Vec<Edge>,
}

/// The top-level module a module belongs to: `segment::scan` -> `segment`; `crate` stays.
pub fn top_level(module: &str) -> &str {
    module.split("::").next().unwrap_or(module)
}

/// Reads the crate whose sources are in `src_dir`, starting at `lib.rs` (or `main.rs`).
pub fn read_crate(src_dir: &Path) -> Result<ModuleGraph, String> {
    let root = ["lib.rs", "main.rs"]
        .iter()
        .map(|f| src_dir.join(f))
        .find(|p| p.is_file())
        .ok_or_else(|| format!("{}: no lib.rs or main.rs", src_dir.display()))?;
    let mut modules = Vec::new();
    let mut found = Vec::new(); // (module name, absolute paths with lines)
    let mut seen = BTreeSet::new();
    // (module path, its file, the directory its `mod name;` children live in)
    let mut todo = vec![(Vec::<String>::new(), root, src_dir.to_path_buf())];
    while let Some((segments, file, child_dir)) = todo.pop() {
        let name = module_name(&segments);
        if !seen.insert(name.clone()) {
            continue; // declared twice, e.g. under two `#[cfg]`s
        }
        let text = fs::read_to_string(&file).map_err(|e| format!("{}: {e}", file.display()))?;
        let scan = lex::scan(&lex::tokenize(&text), &segments);
        for (inline, child, line) in scan.decls {
            let dir = inline.iter().fold(child_dir.clone(), |d, m| d.join(m));
            let flat = dir.join(format!("{child}.rs"));
            let nested = dir.join(&child).join("mod.rs");
            let child_file = match (flat.is_file(), nested.is_file()) {
                (true, false) => flat,
                (false, true) => nested,
                (both, _) => {
                    let problem = if both { "both" } else { "neither of" };
                    return Err(format!(
                        "{}:{line}: `mod {child};` but {problem} {} and {} exist",
                        file.display(),
                        flat.display(),
                        nested.display()
                    ));
                }
            };
            let mut child_segments = segments.clone();
            child_segments.extend(inline);
            child_segments.push(child.clone());
            todo.push((child_segments, child_file, dir.join(child)));
        }
        let lines = text.lines().count();
        modules.push(Module {
            name: name.clone(),
            file,
            lines,
        });
        found.push((name, scan.paths));
    }

    // Each path points to its longest prefix that is a module; `crate` if none is.
    let mut edges = BTreeMap::new();
    for (from, paths) in found {
        for (path, line) in paths {
            let to = (1..=path.len())
                .rev()
                .map(|k| path[..k].join("::"))
                .find(|n| seen.contains(n))
                .unwrap_or_else(|| "crate".to_string());
            if to != from {
                let first: &mut usize = edges.entry((from.clone(), to)).or_insert(line);
                *first = (*first).min(line);
            }
        }
    }
    modules.sort_by(|a, b| (a.name != "crate", &a.name).cmp(&(b.name != "crate", &b.name)));
    let edges = edges
        .into_iter()
        .map(|((from, to), line)| Edge { from, to, line })
        .collect();
    Ok(ModuleGraph { modules, edges })
}

/// Reads the crate in `src_dir` and checks it against the module map under `heading` in the
/// markdown file `doc`, and for import cycles between files and between top-level modules.
/// Returns the graph when all is well, else one message naming every problem.
pub fn check_crate(src_dir: &Path, doc: &Path, heading: &str) -> Result<ModuleGraph, String> {
    let graph = read_crate(src_dir)?;
    let text = fs::read_to_string(doc).map_err(|e| format!("{}: {e}", doc.display()))?;
    let map = LayerMap::from_markdown(&text, heading)?;
    let mut problems: Vec<String> = map.check(&graph).iter().map(ToString::to_string).collect();
    for cycle in graph.cycles() {
        problems.push(format!(
            "files import each other in a circle: {}",
            cycle.join(", ")
        ));
    }
    for cycle in graph.top_level_cycles() {
        problems.push(format!(
            "modules import each other in a circle: {}",
            cycle.join(", ")
        ));
    }
    if problems.is_empty() {
        Ok(graph)
    } else {
        Err(format!(
            "{} does not follow the module map in {}:\n  {}",
            src_dir.display(),
            doc.display(),
            problems.join("\n  ")
        ))
    }
}

fn module_name(segments: &[String]) -> String {
    if segments.is_empty() {
        "crate".to_string()
    } else {
        segments.join("::")
    }
}

impl ModuleGraph {
    /// Every module, the root (`crate`) first, then by name.
    pub fn modules(&self) -> &[Module] {
        &self.modules
    }

    pub fn module(&self, name: &str) -> Option<&Module> {
        self.modules.iter().find(|m| m.name == name)
    }

    /// Every edge, by `from` then `to`. No module has an edge to itself.
    pub fn edges(&self) -> &[Edge] {
        &self.edges
    }

    /// The import cycles between files: each strongly connected component of more than one
    /// module, sorted.
    pub fn cycles(&self) -> Vec<Vec<String>> {
        let pairs = self.edges.iter().map(|e| (e.from.as_str(), e.to.as_str()));
        strongly_connected(pairs)
    }

    /// The import cycles between top-level modules: [`Self::cycles`] after collapsing each
    /// module into its top-level module and dropping the edges inside one.
    pub fn top_level_cycles(&self) -> Vec<Vec<String>> {
        let pairs = self
            .edges
            .iter()
            .map(|e| (top_level(&e.from), top_level(&e.to)))
            .filter(|(from, to)| from != to);
        strongly_connected(pairs)
    }

    /// The `n` longest files, longest first.
    pub fn largest_files(&self, n: usize) -> Vec<&Module> {
        let mut by_size: Vec<&Module> = self.modules.iter().collect();
        by_size.sort_by(|a, b| b.lines.cmp(&a.lines).then(a.name.cmp(&b.name)));
        by_size.truncate(n);
        by_size
    }
}

/// Tarjan's algorithm: the strongly connected components of more than one node (or of one
/// node with an edge to itself), each sorted, in sorted order.
pub(crate) fn strongly_connected<'a>(
    edges: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> Vec<Vec<String>> {
    let mut next: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for (from, to) in edges {
        next.entry(from).or_default().insert(to);
        next.entry(to).or_default();
    }
    let mut tarjan = Tarjan {
        next,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        found: Vec::new(),
    };
    let nodes: Vec<&str> = tarjan.next.keys().copied().collect();
    for node in nodes {
        if !tarjan.index.contains_key(node) {
            tarjan.visit(node);
        }
    }
    let mut found = tarjan.found;
    found.sort();
    found
}

struct Tarjan<'a> {
    next: BTreeMap<&'a str, BTreeSet<&'a str>>,
    index: BTreeMap<&'a str, usize>,
    low: BTreeMap<&'a str, usize>,
    stack: Vec<&'a str>,
    found: Vec<Vec<String>>,
}

impl<'a> Tarjan<'a> {
    fn visit(&mut self, node: &'a str) {
        let index = self.index.len();
        self.index.insert(node, index);
        self.low.insert(node, index);
        self.stack.push(node);
        let next: Vec<&str> = self.next[node].iter().copied().collect();
        for to in &next {
            if !self.index.contains_key(to) {
                self.visit(to);
                let low = self.low[node].min(self.low[to]);
                self.low.insert(node, low);
            } else if self.stack.contains(to) {
                let low = self.low[node].min(self.index[to]);
                self.low.insert(node, low);
            }
        }
        if self.low[node] == index {
            let at = self.stack.iter().rposition(|n| *n == node).unwrap_or(0);
            let mut component: Vec<String> = self.stack.drain(at..).map(String::from).collect();
            if component.len() > 1 || next.contains(&node) {
                component.sort();
                self.found.push(component);
            }
        }
    }
}
