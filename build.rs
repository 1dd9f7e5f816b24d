//! The binary is linked as a position-dependent executable on Linux.
//!
//! As a position-independent one (the toolchain's default), the dynamic
//! loader applied some 179,000 relative relocations at every start
//! (polars' vtables and constant tables, 4.3 MB of them), writing the
//! 2.4 MB of pages they point into: 2.1 ms of a 3.4 ms `telemeter
//! --version`, and as much of every command, a store answer of 45 ms
//! included. Linked at a fixed address there is nothing to relocate
//! (1.3 ms, 170 page faults against 780: docs/performance.md "Round 20").
//! The cost is that the executable's own code and data are not at a
//! random address (ASLR still places the heap, stack, libraries and maps).
//!
//! The objects stay position-independent (rustc's default), so only the
//! link changes; the library, tests and benches are untouched.

fn main() {
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let env = std::env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    if os == "linux" && env == "gnu" {
        println!("cargo:rustc-link-arg-bins=-no-pie");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
