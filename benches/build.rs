//! Builds the benchmarks' guests (`count`, `uppercase`, `window`, `split`) for `wasm32-unknown-unknown` in
//! release, so the benchmarks measure the operators built from this tree's sources; their paths
//! reach them as `WEIR_GUEST_COUNT` and `WEIR_GUEST_UPPERCASE`.

use weir_guest_build::Guest;

fn main() {
    let count = Guest {
        package: "weir-example-count",
        env: "WEIR_GUEST_COUNT",
    };
    let uppercase = Guest {
        package: "weir-example-uppercase",
        env: "WEIR_GUEST_UPPERCASE",
    };
    let window = Guest {
        package: "weir-example-window",
        env: "WEIR_GUEST_WINDOW",
    };
    let split = Guest {
        package: "weir-example-split",
        env: "WEIR_GUEST_SPLIT",
    };
    weir_guest_build::build(&[count, uppercase, window, split], &[]);
}
