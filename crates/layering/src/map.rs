//! The module map: a markdown table saying which top-level modules each one may touch.

use crate::{strongly_connected, top_level, ModuleGraph};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::PathBuf;

/// For each top-level module, the other top-level modules it may refer to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LayerMap {
    rows: BTreeMap<String, Vec<String>>,
}

/// One way the code or the map breaks the layering.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Violation {
    /// `from` refers to `to`, but the map does not let `from`'s top-level module touch `to`'s.
    Forbidden {
        from: String,
        to: String,
        file: PathBuf,
        line: usize,
        allowed: Vec<String>,
    },
    /// `from` refers to an item through the crate root (`crate::Error`), a re-export.
    RootReexport {
        from: String,
        file: PathBuf,
        line: usize,
    },
    /// A top-level module of the crate has no row in the map.
    Unmapped {
        module: String,
        file: Option<PathBuf>,
    },
    /// A row of the map names no module of the crate.
    UnknownRow { module: String },
    /// A may-touch entry of `module`'s row is not a module of the map.
    UnknownMayTouch { module: String, entry: String },
    /// These modules of the map may touch each other in a cycle.
    MapCycle { modules: Vec<String> },
}

impl LayerMap {
    /// Reads the first table after the line equal to `heading` (both trimmed). The table needs
    /// a `module` column (one top-level module per row, backticks and a trailing `/` allowed)
    /// and a `may touch` column (comma-separated modules; `—`, `-` or empty for none).
    pub fn from_markdown(text: &str, heading: &str) -> Result<LayerMap, String> {
        let mut lines = text.lines().skip_while(|l| l.trim() != heading.trim());
        if lines.next().is_none() {
            return Err(format!("no line `{}` in the document", heading.trim()));
        }
        let mut table = Vec::new();
        for line in lines {
            let line = line.trim();
            if line.starts_with('|') {
                table.push(line);
            } else if !table.is_empty() || line.starts_with('#') {
                break;
            }
        }
        if table.len() < 2 {
            return Err(format!("no table under `{}`", heading.trim()));
        }
        let header = cells(table[0]);
        let column = |name: &str| {
            header
                .iter()
                .position(|h| h.eq_ignore_ascii_case(name))
                .ok_or_else(|| {
                    format!(
                        "the table under `{}` has no `{name}` column",
                        heading.trim()
                    )
                })
        };
        let (module_col, touch_col) = (column("module")?, column("may touch")?);
        if !cells(table[1])
            .iter()
            .all(|c| c.chars().all(|ch| matches!(ch, '-' | ':' | ' ')))
        {
            return Err(format!(
                "the table under `{}` has no `|---|` line",
                heading.trim()
            ));
        }
        let mut rows = BTreeMap::new();
        for row in &table[2..] {
            let cells = cells(row);
            let cell = |col: usize| cells.get(col).map(String::as_str).unwrap_or("");
            let module = module_name(cell(module_col));
            if module.is_empty() {
                return Err(format!("row without a module: {row}"));
            }
            let touches = match cell(touch_col) {
                "" | "—" | "–" | "-" => Vec::new(),
                list => list
                    .split(',')
                    .map(module_name)
                    .filter(|m| !m.is_empty())
                    .collect(),
            };
            if rows.insert(module.clone(), touches).is_some() {
                return Err(format!("module `{module}` has two rows in the module map"));
            }
        }
        Ok(LayerMap { rows })
    }

    /// The modules of the map, sorted.
    pub fn modules(&self) -> impl Iterator<Item = &str> {
        self.rows.keys().map(String::as_str)
    }

    /// What `module` may touch, as written in its row.
    pub fn may_touch(&self, module: &str) -> Option<&[String]> {
        self.rows.get(module).map(Vec::as_slice)
    }

    /// Every way `graph` and this map break the layering (empty if none): problems of the map
    /// first, then modules missing from it, then forbidden edges in file and line order.
    pub fn check(&self, graph: &ModuleGraph) -> Vec<Violation> {
        let mut found = Vec::new();
        let crate_modules: BTreeSet<&str> = graph
            .modules()
            .iter()
            .map(|m| top_level(&m.name))
            .filter(|m| *m != "crate")
            .collect();
        for (module, touches) in &self.rows {
            if !crate_modules.contains(module.as_str()) {
                found.push(Violation::UnknownRow {
                    module: module.clone(),
                });
            }
            for entry in touches.iter().filter(|e| !self.rows.contains_key(*e)) {
                let (module, entry) = (module.clone(), entry.clone());
                found.push(Violation::UnknownMayTouch { module, entry });
            }
        }
        let map_edges = self.rows.iter().flat_map(|(m, touches)| {
            touches
                .iter()
                .filter(|e| self.rows.contains_key(*e))
                .map(move |e| (m.as_str(), e.as_str()))
        });
        for modules in strongly_connected(map_edges) {
            found.push(Violation::MapCycle { modules });
        }
        for module in crate_modules
            .iter()
            .filter(|m| !self.rows.contains_key(**m))
        {
            let file = graph.module(module).map(|m| m.file.clone());
            found.push(Violation::Unmapped {
                module: module.to_string(),
                file,
            });
        }

        let mut edges = Vec::new();
        for edge in graph.edges() {
            let (from, to) = (top_level(&edge.from), top_level(&edge.to));
            let file = graph
                .module(&edge.from)
                .map(|m| m.file.clone())
                .unwrap_or_default();
            let (line, edge_from) = (edge.line, edge.from.clone());
            if from == "crate" || from == to {
                continue; // the root declares and re-exports everything
            }
            if to == "crate" {
                edges.push(Violation::RootReexport {
                    from: edge_from,
                    file,
                    line,
                });
            } else if let Some(allowed) = self.rows.get(from) {
                if !allowed.iter().any(|a| a == to) {
                    let (to, allowed) = (edge.to.clone(), allowed.clone());
                    edges.push(Violation::Forbidden {
                        from: edge_from,
                        to,
                        file,
                        line,
                        allowed,
                    });
                }
            }
        }
        edges.sort_by_key(|v| match v {
            Violation::Forbidden { file, line, .. }
            | Violation::RootReexport { file, line, .. } => (file.clone(), *line),
            _ => (PathBuf::new(), 0),
        });
        found.extend(edges);
        found
    }
}

/// The cells of a table row, trimmed, without the outer pipes.
fn cells(row: &str) -> Vec<String> {
    let row = row.trim();
    let row = row.strip_prefix('|').unwrap_or(row);
    let row = row.strip_suffix('|').unwrap_or(row);
    row.split('|').map(|c| c.trim().to_string()).collect()
}

/// "`media/`" -> "media"
fn module_name(cell: &str) -> String {
    cell.replace('`', "")
        .trim()
        .trim_end_matches('/')
        .to_string()
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Violation::Forbidden {
                from,
                to,
                file,
                line,
                allowed,
            } => {
                let (from_top, to_top) = (top_level(from), top_level(to));
                let allowed = if allowed.is_empty() {
                    "no other module".to_string()
                } else {
                    allowed.join(", ")
                };
                write!(
                    f,
                    "{}:{line}: `{from}` uses `{to}`, but the module map lets `{from_top}` touch only: \
                     {allowed}. Remove the dependency, or, if the layering should change, \
                     add `{to_top}` to the may-touch cell of `{from_top}` in the module map",
                    file.display()
                )
            }
            Violation::RootReexport { from, file, line } => write!(
                f,
                "{}:{line}: `{from}` uses an item re-exported by the crate root (`crate::Item`); \
                 name the defining module instead (`crate::module::Item`), not a root re-export",
                file.display()
            ),
            Violation::Unmapped { module, file } => {
                let file = file
                    .as_ref()
                    .map(|p| format!(" ({})", p.display()))
                    .unwrap_or_default();
                write!(
                    f,
                    "module `{module}`{file} is not in the module map: add a row for it, \
                     with the modules it may touch"
                )
            }
            Violation::UnknownRow { module } => write!(
                f,
                "the module map has a row for `{module}`, but the crate has no top-level module \
                 `{module}`: remove or rename the row"
            ),
            Violation::UnknownMayTouch { module, entry } => write!(
                f,
                "the module map lets `{module}` touch `{entry}`, which is not a module of the map: \
                 list module names from its `module` column"
            ),
            Violation::MapCycle { modules } if modules.len() == 1 => write!(
                f,
                "the module map lets `{}` touch itself: remove that may-touch entry",
                modules[0]
            ),
            Violation::MapCycle { modules } => write!(
                f,
                "the module map is not layered: `{}` may touch each other in a cycle; \
                 remove one of these may-touch entries",
                modules.join("`, `")
            ),
        }
    }
}
