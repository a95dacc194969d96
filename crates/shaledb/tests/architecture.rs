//! Goal: the engine's architecture cannot drift silently.
//! Method: read every source file's imports (`crate::`, `super::` and child-module paths) with
//! the `layering` dev crate; check them against the module map of docs/ARCHITECTURE.md (its
//! "may touch" column) and for import circles between files and between modules; and check
//! that every source file stays short enough to read whole.

use std::path::Path;

/// A file a reader can hold in mind at once (ARCHITECTURE.md, "Module map").
const FILE_LINES_MAX: usize = 600;

#[test]
fn imports_follow_the_module_map_without_circles_in_files_a_reader_can_hold() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let graph = layering::check_crate(
        &crate_dir.join("src"),
        &crate_dir.join("../../docs/ARCHITECTURE.md"),
        "## Module map (`crates/shaledb/src`)",
    )
    .unwrap_or_else(|problems| panic!("{problems}"));
    let long: Vec<String> = graph
        .modules()
        .iter()
        .filter(|module| module.lines > FILE_LINES_MAX)
        .map(|module| format!("{} ({} lines)", module.file.display(), module.lines))
        .collect();
    assert!(
        long.is_empty(),
        "split these by concept (at most {FILE_LINES_MAX} lines): {long:?}"
    );
}
