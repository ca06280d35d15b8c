#!/usr/bin/env bash
# Restore of host-kept keyed state into a new process, with and without local recovery
# (docs/STATE.md, "Local recovery"; the figures are in docs/BENCHMARKS.md §12).
#
#   bash scripts/bench-local-recovery.sh [KEYS] [RUNS] [PER_KEY]   # default 10000000, 3, 3
#
# A keyed count whose counts live in the host's store (examples/rust/host-count) counts a
# generator's records over KEYS distinct keys, checkpointing every second, until it has taken
# in PER_KEY records per key (the generator draws keys at random: with 3, 1 - e^-3 = 95 % of
# them are counted) and two more checkpoints completed; then it is killed with SIGKILL. Each run restores
# its last checkpoint with `weir run --restore PATH` in a new process, timed from the spawn to the first record the
# count takes in (`weir_task_records_in_total` on the control endpoint, polled every 2 ms),
# twice: with the killed run's local copies of its checkpoints present, and with them removed
# (every table file then read from the checkpoint directory). Each restored run is killed as
# soon as it has its first record; the folders it leaves are removed before the next.
#
# Release builds; other work on the machine skews the numbers: the load is printed.
set -euo pipefail
cd "$(dirname "$0")/.."
keys="${1:-10000000}"
runs="${2:-3}"
per_key="${3:-3}"
source scripts/lib/host-build.sh
cargo build --release -p weir --bin weir
cargo build --release --target wasm32-unknown-unknown -p weir-example-host-count
target=${CARGO_TARGET_DIR:-target}
case $target in /*) ;; *) target=$PWD/$target ;; esac

work=$(mktemp -d "${TMPDIR:-/tmp}/weir-local-recovery.XXXXXX")
trap 'pkill -9 -f "$work/job.toml" 2>/dev/null || true; rm -rf "$work"' EXIT
cat >"$work/job.toml" <<EOF
name = "recovery"

[checkpoint]
interval = "1s"
directory = '$work/checkpoints'

[state]
directory = '$work/state'

[restart]
strategy = "none"

[[source]]
name = "gen"
type = "generator"
seed = 3
keys = $keys

[[operator]]
name = "count"
module = '$target/wasm32-unknown-unknown/release/weir_example_host_count.wasm'
inputs = [{ from = "gen", partition = "key-hash" }]

[[sink]]
name = "out"
type = "blackhole"
inputs = [{ from = "count" }]
EOF

echo "== load before: $(cat /proc/loadavg)"
WEIR="$target/release/weir" WORK="$work" KEYS="$keys" RUNS="$runs" PER_KEY="$per_key" python3 - <<'PY'
import os, re, signal, socket, statistics, subprocess, time, urllib.request, shutil, glob

weir, work = os.environ["WEIR"], os.environ["WORK"]
keys, runs, per_key = int(os.environ["KEYS"]), int(os.environ["RUNS"]), int(os.environ["PER_KEY"])
job = os.path.join(work, "job.toml")
token = "local-recovery-bench"
env = dict(os.environ, WEIR_CONTROL_TOKEN=token)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def records_in(port, vertex):
    """The records `vertex`'s tasks took in, or None while the endpoint does not answer."""
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/metrics", headers={"Authorization": f"Bearer {token}"}
    )
    try:
        text = urllib.request.urlopen(request, timeout=1).read().decode()
    except OSError:
        return None
    pattern = re.compile(r'^weir_task_records_in_total\{[^}]*vertex="%s"[^}]*\} (\S+)$' % vertex)
    values = [float(m.group(1)) for line in text.splitlines() if (m := pattern.match(line))]
    return sum(values) if values else None


def start(*args, log):
    port = free_port()
    process = subprocess.Popen(
        [weir, "run", job, "--control", f"127.0.0.1:{port}", *args],
        stdout=subprocess.DEVNULL, stderr=open(log, "w"), env=env,
    )
    return process, port


def newest_checkpoint():
    """The directory of the newest completed checkpoint, and its id (0 for none)."""
    done = sorted(glob.glob(os.path.join(work, "checkpoints", "chk-*", "_metadata")))
    if not done:
        return None, 0
    newest = os.path.dirname(done[-1])
    return newest, int(os.path.basename(newest)[len("chk-"):])


# The run that fills the state: every key counted at least once, then one more checkpoint.
process, port = start(log=os.path.join(work, "fill.log"))
began = time.time()
while True:
    time.sleep(0.5)
    counted = records_in(port, "count")
    if process.poll() is not None:
        raise SystemExit(f"the filling run ended: {open(os.path.join(work, 'fill.log')).read()}")
    if counted is not None and counted >= per_key * keys:
        break
_, seen = newest_checkpoint()
while newest_checkpoint()[1] < seen + 2:
    time.sleep(0.05)
process.send_signal(signal.SIGKILL)
process.wait()
checkpoint, _ = newest_checkpoint()
print(f"filled: {keys} keys, {counted:.0f}+ records in {time.time() - began:.1f} s; "
      f"killed after {os.path.basename(checkpoint)}")
local = glob.glob(os.path.join(work, "state", "weir-local-*"))[0]
aside = os.path.join(work, "local-copies")
shutil.copytree(local, aside, copy_function=os.link)
size = sum(os.path.getsize(f) for f in glob.glob(os.path.join(aside, "*", "*", "*")))
print(f"the local copy of the count's last checkpoint: {size / 1e6:.0f} MB")


def restore(with_local, i):
    shutil.rmtree(local, ignore_errors=True)
    for left in glob.glob(os.path.join(work, "state", "weir-state-*")):
        shutil.rmtree(left)
    if with_local:
        shutil.copytree(aside, local, copy_function=os.link)
    log = os.path.join(work, f"restore-{'local' if with_local else 'read'}-{i}.log")
    t0 = time.perf_counter()
    process, port = start("--restore", checkpoint, log=log)
    while True:
        counted = records_in(port, "count")
        if counted:
            break
        if process.poll() is not None:
            raise SystemExit(f"the restored run ended: {open(log).read()}")
        time.sleep(0.002)
    elapsed = time.perf_counter() - t0
    process.send_signal(signal.SIGKILL)
    process.wait()
    said = [line.split("keyed state: ")[1].strip() for line in open(log) if "keyed state: " in line]
    return elapsed * 1000, said[0] if said else "(no keyed state restored?)"


for with_local in (True, False):
    times = []
    for i in range(runs):
        ms, said = restore(with_local, i)
        times.append(ms)
        print(f"  {'local copies' if with_local else 'read back   '} run {i + 1}: {ms:.0f} ms ({said})")
    print(f"{'with local copies' if with_local else 'without'}: spawn → first record, median "
          f"{statistics.median(times):.0f} ms (min {min(times):.0f}, max {max(times):.0f})")
PY
echo "== load after: $(cat /proc/loadavg)"
