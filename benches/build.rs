//! Builds the count guest for `wasm32-unknown-unknown` in release, so the benchmarks measure
//! the operator built from this tree's sources; its path reaches them as `WEIR_GUEST_COUNT`.

use weir_guest_build::Guest;

fn main() {
    let count = Guest {
        package: "weir-example-count",
        env: "WEIR_GUEST_COUNT",
    };
    weir_guest_build::build(&[count], &[]);
}
