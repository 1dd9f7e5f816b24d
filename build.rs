//! Link options of the binary.
//!
//! The default build is a position-independent executable (the
//! toolchain's default), so ASLR places the binary that runs `serve` on
//! the network at a random address.
//!
//! `TELEMETER_NO_PIE=1` at build time links it position-dependent on
//! linux-gnu instead. Then the dynamic loader has no relative relocations
//! to apply at start (polars' vtables and constant tables: about 2 ms of
//! every command). It is an opt-in for benchmarks of short commands such
//! as a store answer; `bench/store-answer.sh` shows the difference.
//! The objects stay position-independent either way: only the link
//! changes.
//!
//! gzip input is decoded by ISA-L when the build finds its header
//! (`isa-l/igzip_lib.h`, Debian's `libisal-dev`): the shim
//! `src/records/decode/isal.c` is compiled and `cfg(isal)` set. Without
//! it, or with `TELEMETER_NO_ISAL=1`, flate2 (zlib-rs) decodes gzip; the
//! decoded bytes and the files refused are the same either way.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=TELEMETER_NO_PIE");
    println!("cargo:rerun-if-env-changed=TELEMETER_NO_ISAL");
    println!("cargo:rerun-if-changed=src/records/decode/isal.c");
    println!("cargo::rustc-check-cfg=cfg(isal)");
    let no_isal = std::env::var("TELEMETER_NO_ISAL").is_ok_and(|value| value == "1");
    if !no_isal
        && cc::Build::new()
            .file("src/records/decode/isal.c")
            .cargo_warnings(false)
            .try_compile("telemeter_isal")
            .is_ok()
    {
        println!("cargo:rustc-link-lib=isal");
        println!("cargo:rustc-cfg=isal");
    }
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let env = std::env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    let no_pie = std::env::var("TELEMETER_NO_PIE").is_ok_and(|value| value == "1");
    if no_pie && os == "linux" && env == "gnu" {
        println!("cargo:rustc-link-arg-bins=-no-pie");
    }
}
