//! Goal: the harness's modules keep one direction.
//! Method: read every source file's imports with the `layering` dev crate and check them
//! against the harness module map of docs/BENCHMARKS.md and for import circles.

use std::path::Path;

#[test]
fn imports_follow_the_harness_module_map_without_circles() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    if let Err(problems) = layering::check_crate(
        &crate_dir.join("src"),
        &crate_dir.join("../../docs/BENCHMARKS.md"),
        "## Harness module map",
    ) {
        panic!("{problems}");
    }
}
