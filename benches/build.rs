//! Builds the benchmarks' guests (`count`, `host-count`, `uppercase`, `window`, `split`) for `wasm32-unknown-unknown` in
//! release, so the benchmarks measure the operators built from this tree's sources; their paths
//! reach them as `WEIR_GUEST_COUNT` and `WEIR_GUEST_UPPERCASE`.

use weir_guest_build::Guest;

fn main() {
    // Each guest's package, and the variable its path reaches the benchmarks in.
    let guests = [
        ("weir-example-count", "WEIR_GUEST_COUNT"),
        ("weir-example-host-count", "WEIR_GUEST_HOST_COUNT"),
        ("weir-example-uppercase", "WEIR_GUEST_UPPERCASE"),
        ("weir-example-window", "WEIR_GUEST_WINDOW"),
        ("weir-example-split", "WEIR_GUEST_SPLIT"),
    ]
    .map(|(package, env)| Guest { package, env });
    weir_guest_build::build(&guests, &[]);
}
