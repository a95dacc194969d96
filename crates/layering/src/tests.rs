use super::*;
use std::path::Path;
use tempfile::TempDir;

/// Writes a crate's source files (paths relative to `src/`) into a temporary directory.
fn fixture(files: &[(&str, &str)]) -> TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (path, text) in files {
        let path = dir.path().join(path);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }
    dir
}

fn read(dir: &TempDir) -> ModuleGraph {
    read_crate(dir.path()).unwrap()
}

/// The edges from `from`, as (to, line).
fn edges_from<'a>(graph: &'a ModuleGraph, from: &str) -> Vec<(&'a str, usize)> {
    graph
        .edges()
        .iter()
        .filter(|e| e.from == from)
        .map(|e| (e.to.as_str(), e.line))
        .collect()
}

fn names(graph: &ModuleGraph) -> Vec<&str> {
    graph.modules().iter().map(|m| m.name.as_str()).collect()
}

fn cycles(list: &[&[&str]]) -> Vec<Vec<String>> {
    list.iter()
        .map(|c| c.iter().map(|s| s.to_string()).collect())
        .collect()
}

const SMALL_LIB: &str = "mod a;\nmod b;\nmod e;\nmod k;\nmod user;\npub struct Error;\n";
const SMALL_FILES: [(&str, &str); 6] = [
    ("lib.rs", SMALL_LIB),
    ("a.rs", "pub struct X;\n"),
    ("b.rs", "pub mod c;\npub mod d;\npub struct Thing;\n"),
    ("b/c.rs", "pub fn f() {}\n"),
    ("b/d.rs", "pub struct Y;\n"),
    ("e.rs", "pub fn g() {}\n"),
];

fn small_crate(user: &str) -> TempDir {
    let mut files = SMALL_FILES.to_vec();
    files.push(("k.rs", "pub fn h() {}\n"));
    files.push(("user.rs", user));
    fixture(&files)
}

#[test]
fn use_trees_with_braces_and_nesting() {
    let dir = small_crate(
        "use crate::{a::X, b::{c, d::Y}, e};\n\
         use crate::b::{\n    self,\n    Thing as Renamed,\n};\n\
         use crate::k::*;\n\
         use crate::{b::{c::f, Thing}};\n",
    );
    let graph = read(&dir);
    let expected = [
        ("a", 1),
        ("b", 3),
        ("b::c", 1),
        ("b::d", 1),
        ("e", 1),
        ("k", 6),
    ];
    assert_eq!(edges_from(&graph, "user"), expected);
}

#[test]
fn inline_paths_point_to_the_longest_module_prefix() {
    let dir = small_crate(
        "fn run() -> Result<(), crate::Error> {\n\
         \x20   crate::b::c::f(1);\n\
         \x20   let _ = crate::b::Thing;\n\
         \x20   let x = crate::a::Foo::<u8>::new();\n\
         \x20   match x { crate::Error::Io { .. } => {} }\n\
         \x20   crate::b::c::f(2);\n\
         }\n\
         pub(in crate::e) fn hidden() {}\n",
    );
    let graph = read(&dir);
    let expected = [("a", 4), ("b", 3), ("b::c", 2), ("crate", 1)];
    assert_eq!(edges_from(&graph, "user"), expected);
}

#[test]
fn super_and_self_at_several_depths() {
    let dir = fixture(&[
        (
            "lib.rs",
            "mod a;\nmod b;\nmod e;\nmod k;\nfn z() { self::a::h(); super::nothing(); }\n",
        ),
        ("a.rs", ""),
        (
            "b.rs",
            "pub mod c;\npub mod d;\nfn f() { self::c::g(); super::a::h(); }\n",
        ),
        (
            "b/c.rs",
            "use super::d::Y;\n\
             use super::super::e;\n\
             pub fn g() {}\n\
             #[cfg(test)]\n\
             mod tests {\n\
             \x20   use super::*;\n\
             \x20   use super::super::Thing;\n\
             \x20   fn t() { super::super::super::a::h(); }\n\
             \x20   mod deeper {\n\
             \x20       use super::super::super::super::e::Z;\n\
             \x20       use self::super::helper;\n\
             \x20   }\n\
             \x20   fn helper() {}\n\
             }\n\
             fn after() { super::super::k::f(); }\n",
        ),
        ("b/d.rs", ""),
        ("e.rs", ""),
        ("k.rs", ""),
    ]);
    let graph = read(&dir);
    assert_eq!(edges_from(&graph, "crate"), [("a", 5)]);
    assert_eq!(edges_from(&graph, "b"), [("a", 3), ("b::c", 3)]);
    assert_eq!(
        edges_from(&graph, "b::c"),
        [("a", 8), ("b", 7), ("b::d", 1), ("e", 2), ("k", 15)]
    );
}

#[test]
fn comments_and_literals_are_ignored_and_lifetimes_are_not_chars() {
    let dir = small_crate(
        "//! crate::a::X in an inner doc comment\n\
         /// crate::a::X in a doc comment\n\
         // crate::a::X in a comment\n\
         /* crate::a::X /* nested crate::a::X */ still a comment crate::a::X */\n\
         const S: &str = \"crate::a::X \\\" crate::a::X\";\n\
         const R: &str = r#\"crate::a::X \" crate::a::X\"#;\n\
         const B: &[u8] = b\"crate::a::X\";\n\
         const BR: &[u8] = br##\"crate::a::X \"# crate::a::X\"##;\n\
         const Q: char = '\"'; fn f1() { crate::b::one(); }\n\
         const E: char = '\\''; const BQ: u8 = b'\"'; fn f2() { crate::b::two(); }\n\
         fn longest<'a, 'b: 'a>(x: &'a str, _y: &'b str) -> &'a str { crate::e::g(); x }\n\
         static T: &'static str = \"x\"; const L: char = '{'; const A: char = 'a';\n\
         fn label() { 'outer: loop { break 'outer; } }\n\
         const M: &str = \"multi\n\
         line crate::a::X\";\n\
         fn r#match() { let c = '\\u{7f}'; crate::k::h(); }\n",
    );
    let graph = read(&dir);
    assert_eq!(edges_from(&graph, "user"), [("b", 9), ("e", 11), ("k", 16)]);
    assert_eq!(graph.module("user").unwrap().lines, 16);
}

#[test]
fn inline_module_depth_survives_braces_in_literals() {
    let dir = small_crate(
        "mod tests {\n\
         \x20   const C: char = '}';\n\
         \x20   const S: &str = \"}}\";\n\
         \x20   fn t() { super::super::a::X; }\n\
         }\n",
    );
    assert_eq!(edges_from(&read(&dir), "user"), [("a", 4)]);
}

#[test]
fn folder_modules_and_declarations_with_attributes() {
    let dir = fixture(&[
        (
            "lib.rs",
            "#[cfg(test)]\npub(crate) mod a;\npub mod b;\nmod c {\n    pub mod inner;\n}\n",
        ),
        ("a/mod.rs", "mod x;\n"),
        ("a/x.rs", "use super::super::b::y::z::Deep;\n\n\n"),
        ("b.rs", "pub mod y;\n"),
        ("b/y.rs", "pub mod z;\n"),
        ("b/y/z.rs", "pub struct Deep;\n"),
        ("c/inner.rs", "use super::super::a::x;\n"),
    ]);
    let graph = read(&dir);
    assert_eq!(
        names(&graph),
        ["crate", "a", "a::x", "b", "b::y", "b::y::z", "c::inner"]
    );
    let file = |name: &str| {
        graph
            .module(name)
            .unwrap()
            .file
            .strip_prefix(dir.path())
            .unwrap()
            .to_path_buf()
    };
    assert_eq!(file("crate"), Path::new("lib.rs"));
    assert_eq!(file("a"), Path::new("a/mod.rs"));
    assert_eq!(file("a::x"), Path::new("a/x.rs"));
    assert_eq!(file("b::y::z"), Path::new("b/y/z.rs"));
    assert_eq!(file("c::inner"), Path::new("c/inner.rs"));
    assert_eq!(graph.module("a::x").unwrap().lines, 3);
    assert_eq!(edges_from(&graph, "a::x"), [("b::y::z", 1)]);
    assert_eq!(edges_from(&graph, "c::inner"), [("a::x", 1)]);
    let largest: Vec<&str> = graph
        .largest_files(2)
        .iter()
        .map(|m| m.name.as_str())
        .collect();
    assert_eq!(largest, ["crate", "a::x"]);
}

#[test]
fn main_rs_is_a_root_and_missing_or_ambiguous_files_are_errors() {
    let dir = fixture(&[
        ("main.rs", "mod a;\nfn main() { a::run() }\n"),
        ("a.rs", ""),
    ]);
    assert_eq!(names(&read(&dir)), ["crate", "a"]);

    let dir = fixture(&[("lib.rs", "mod a;\nmod gone;\n"), ("a.rs", "")]);
    let err = read_crate(dir.path()).unwrap_err();
    assert!(err.contains("lib.rs:2: `mod gone;`"), "{err}");

    let dir = fixture(&[("lib.rs", "mod a;\n"), ("a.rs", ""), ("a/mod.rs", "")]);
    let err = read_crate(dir.path()).unwrap_err();
    assert!(err.contains("but both"), "{err}");

    let dir = fixture(&[("other.rs", "")]);
    assert!(read_crate(dir.path())
        .unwrap_err()
        .contains("no lib.rs or main.rs"));
}

#[test]
fn cycles_between_files_and_between_top_level_modules() {
    let dir = fixture(&[
        ("lib.rs", "mod a;\nmod b;\nmod c;\nmod d;\n"),
        ("a.rs", "use crate::b::B;\npub struct A;\n"),
        ("b.rs", "use crate::a::A;\npub struct B;\n"),
        ("c.rs", "mod x;\npub struct C;\n"),
        ("c/x.rs", "use crate::d::D;\n"),
        (
            "d.rs",
            "mod inner;\nuse crate::c::C;\nuse self::inner::I;\npub struct D;\n",
        ),
        ("d/inner.rs", "use super::D;\npub struct I;\n"),
    ]);
    let graph = read(&dir);
    assert_eq!(graph.cycles(), cycles(&[&["a", "b"], &["d", "d::inner"]]));
    assert_eq!(
        graph.top_level_cycles(),
        cycles(&[&["a", "b"], &["c", "d"]])
    );
    assert_eq!(top_level("c::x"), "c");
    assert_eq!(top_level("crate"), "crate");
}

const DOC: &str = "# Architecture

## Other

| module | may touch |
|---|---|
| `zzz` | — |

## Module map (`src`)

Some text first.

| Module | holds | May Touch | notes |
|:--|---|---|---|
| `error` | errors | — | |
| `media/` | files | `error`, stats | x |
| stats | counters | - | |
| `db` | everything | media,`error` , stats/ | |
| `idle` | nothing |  | |

After the table.
";

#[test]
fn map_from_markdown() {
    let map = LayerMap::from_markdown(DOC, "  ## Module map (`src`) ").unwrap();
    assert_eq!(
        map.modules().collect::<Vec<_>>(),
        ["db", "error", "idle", "media", "stats"]
    );
    assert_eq!(map.may_touch("error").unwrap(), [] as [String; 0]);
    assert_eq!(map.may_touch("media").unwrap(), ["error", "stats"]);
    assert_eq!(map.may_touch("stats").unwrap(), [] as [String; 0]);
    assert_eq!(map.may_touch("db").unwrap(), ["media", "error", "stats"]);
    assert_eq!(map.may_touch("idle").unwrap(), [] as [String; 0]);
    assert_eq!(map.may_touch("zzz"), None);
}

#[test]
fn map_errors() {
    let err = LayerMap::from_markdown(DOC, "## Module map").unwrap_err();
    assert!(err.contains("no line `## Module map`"), "{err}");

    let err = LayerMap::from_markdown(
        "## Map\n\nno table\n\n## Next\n\n| module | may touch |\n|-|-|\n",
        "## Map",
    )
    .unwrap_err();
    assert!(err.contains("no table"), "{err}");

    let err = LayerMap::from_markdown("## Map\n| module | uses |\n|-|-|\n| a | b |\n", "## Map")
        .unwrap_err();
    assert!(err.contains("no `may touch` column"), "{err}");

    let err = LayerMap::from_markdown(
        "## Map\n| module | may touch |\n|-|-|\n| a | — |\n| `a/` | — |\n",
        "## Map",
    )
    .unwrap_err();
    assert!(err.contains("`a` has two rows"), "{err}");
}

/// error <- media (with a child file) <- db, plus `stray` which the map does not know.
const LAYERED: [(&str, &str); 6] = [
    ("lib.rs", "mod db;\nmod error;\nmod media;\nmod stray;\npub use error::Error;\nfn f() { crate::db::open(); }\n"),
    ("error.rs", "pub struct Error;\n"),
    ("media.rs", "mod file;\npub struct Thing;\n"),
    ("media/file.rs", "use crate::error::Error;\nuse crate::Error as E2;\nuse super::Thing;\n"),
    ("db.rs", "use crate::media::file::F;\nuse crate::stray::S;\nuse crate::error;\n"),
    ("stray.rs", "use crate::db::Db;\n"),
];

const LAYERED_MAP: &str = "## Map
| module | may touch |
|---|---|
| `error` | — |
| `media` | error |
| `db` | media, error, ghost |
| `cache` | db |
| `lower` | upper |
| `upper` | lower |
";

#[test]
fn every_kind_of_violation() {
    let dir = fixture(&LAYERED);
    let map = LayerMap::from_markdown(LAYERED_MAP, "## Map").unwrap();
    let violations = map.check(&read(&dir));
    let file = |name: &str| dir.path().join(name);
    let expected = vec![
        Violation::UnknownRow {
            module: "cache".into(),
        },
        Violation::UnknownMayTouch {
            module: "db".into(),
            entry: "ghost".into(),
        },
        Violation::UnknownRow {
            module: "lower".into(),
        },
        Violation::UnknownRow {
            module: "upper".into(),
        },
        Violation::MapCycle {
            modules: vec!["lower".into(), "upper".into()],
        },
        Violation::Unmapped {
            module: "stray".into(),
            file: Some(file("stray.rs")),
        },
        Violation::Forbidden {
            from: "db".into(),
            to: "stray".into(),
            file: file("db.rs"),
            line: 2,
            allowed: vec!["media".into(), "error".into(), "ghost".into()],
        },
        Violation::RootReexport {
            from: "media::file".into(),
            file: file("media/file.rs"),
            line: 2,
        },
    ];
    assert_eq!(violations, expected);

    let forbidden = violations[6].to_string();
    assert!(
        forbidden.starts_with(&format!("{}:2: `db` uses `stray`", file("db.rs").display())),
        "{forbidden}"
    );
    assert!(
        forbidden.contains("touch only: media, error, ghost"),
        "{forbidden}"
    );
    let root = violations[7].to_string();
    assert!(
        root.contains("file.rs:2: `media::file`") && root.contains("not a root re-export"),
        "{root}"
    );
    for v in &violations {
        assert!(!v.to_string().is_empty());
    }
}

#[test]
fn a_forbidden_edge_between_nested_files_names_both_top_level_modules() {
    let dir = fixture(&[
        ("lib.rs", "mod high;\nmod low;\n"),
        ("high.rs", ""),
        ("low.rs", "mod deep;\n"),
        ("low/deep.rs", "\nfn f() { crate::high::g(); }\n"),
    ]);
    let map = LayerMap::from_markdown(
        "## M\n| module | may touch |\n|-|-|\n| high | low |\n| low | |\n",
        "## M",
    )
    .unwrap();
    let violations = map.check(&read(&dir));
    assert_eq!(violations.len(), 1);
    let message = violations[0].to_string();
    assert!(
        message.contains("deep.rs:2: `low::deep` uses `high`"),
        "{message}"
    );
    assert!(
        message.contains("lets `low` touch only: no other module"),
        "{message}"
    );
}

#[test]
fn a_module_listing_itself_is_a_map_cycle() {
    let map = LayerMap::from_markdown("## M\n| module | may touch |\n|-|-|\n| a | a |\n", "## M")
        .unwrap();
    let dir = fixture(&[("lib.rs", "mod a;\n"), ("a.rs", "")]);
    assert_eq!(
        map.check(&read(&dir)),
        [Violation::MapCycle {
            modules: vec!["a".into()]
        }]
    );
}

#[test]
fn a_clean_crate_has_no_violations() {
    let dir = fixture(&[
        ("lib.rs", "mod db;\nmod error;\nmod media;\npub use error::Error;\nfn f() { crate::db::open(); }\n"),
        ("error.rs", "pub struct Error;\n"),
        ("media.rs", "mod file;\npub struct Thing;\n"),
        ("media/file.rs", "use crate::error::Error;\nuse super::Thing;\n"),
        ("db.rs", "mod commit;\nuse crate::media::file::F;\nuse crate::error;\n"),
        ("db/commit.rs", "use crate::media::Thing;\nuse super::super::db::open;\n"),
    ]);
    let map = LayerMap::from_markdown(
        "## Map\n| module | may touch |\n|---|---|\n| `error` | — |\n| `media/` | `error` |\n| db | media, error |\n",
        "## Map",
    )
    .unwrap();
    let graph = read(&dir);
    assert_eq!(map.check(&graph), []);
    assert!(graph.cycles().is_empty() && graph.top_level_cycles().is_empty());
}

#[test]
fn a_parent_using_its_declared_child_is_an_edge_and_can_close_a_cycle() {
    let dir = fixture(&[
        ("lib.rs", "mod a;\n"),
        (
            "a/mod.rs",
            "mod head;\nmod tail;\npub use head::Head;\nfn f() { tail::g(); }\n\
             mod tests { fn t() { head::x(); } }\nfn h() { std::head::y(); }\n",
        ),
        ("a/head.rs", "use super::Shared;\npub struct Head;\n"),
        ("a/tail.rs", "pub fn g() {}\n"),
    ]);
    let graph = read(&dir);
    assert_eq!(
        edges_from(&graph, "a"),
        vec![("a::head", 3), ("a::tail", 4)],
        "relative paths to declared children count; inside an inline module or after `::` they do not"
    );
    assert_eq!(graph.cycles(), cycles(&[&["a", "a::head"]]));
    assert!(graph.top_level_cycles().is_empty());
}

#[test]
fn check_crate_names_every_violation_and_circle_or_returns_the_graph() {
    let doc = "# Doc\n\n## Map\n\n| module | may touch |\n|---|---|\n| `a` | — |\n| `b` | `a` |\n";
    let clean = fixture(&[
        ("lib.rs", "mod a;\nmod b;\n"),
        ("a.rs", "pub struct X;\n"),
        ("b.rs", "use crate::a::X;\n"),
        ("DOC.md", doc),
    ]);
    let checked = check_crate(clean.path(), &clean.path().join("DOC.md"), "## Map");
    assert_eq!(checked.map(|graph| graph.edges().len()), Ok(1));
    let tangled = fixture(&[
        ("lib.rs", "mod a;\nmod b;\n"),
        ("a.rs", "use crate::b::Y;\npub struct X;\n"),
        ("b.rs", "use crate::a::X;\npub struct Y;\n"),
        ("DOC.md", doc),
    ]);
    let problems = check_crate(tangled.path(), &tangled.path().join("DOC.md"), "## Map")
        .expect_err("a uses b against the map, in a circle");
    assert!(problems.contains("`a` uses `b`"), "{problems}");
    assert!(
        problems.contains("files import each other in a circle: a, b"),
        "{problems}"
    );
    assert!(
        problems.contains("modules import each other in a circle: a, b"),
        "{problems}"
    );
    assert!(check_crate(clean.path(), &clean.path().join("DOC.md"), "## Other").is_err());
}
