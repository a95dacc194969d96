//! Regenerates include/shaledb.h from the exported functions with cbindgen, writing the file only
//! when its text changes, so the committed header always matches the library.

fn main() {
    let crate_dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    println!("cargo:rerun-if-changed=src/lib.rs");
    println!("cargo:rerun-if-changed=cbindgen.toml");
    let config = cbindgen::Config::from_file(format!("{crate_dir}/cbindgen.toml"))
        .expect("cbindgen.toml parses");
    let bindings = cbindgen::Builder::new()
        .with_crate(&crate_dir)
        .with_config(config)
        .generate()
        .expect("the C API can be described by cbindgen");
    let mut text = Vec::new();
    bindings.write(&mut text);
    let path = format!("{crate_dir}/include/shaledb.h");
    if std::fs::read(&path).ok().as_deref() != Some(&text[..]) {
        std::fs::write(&path, text).expect("include/shaledb.h is writable");
    }
}
