#!/usr/bin/env python3
"""The host's import graph, checked against the layers host/src/lib.rs describes.

Reads every `.rs` file under host/src, guest-sdk/src and abi/src (product code only: a `tests.rs`, a `*_tests.rs`, and
everything from a file's first `#[cfg(test)]` on are left out), resolves each `crate::…` and
`super::…` path it names to the module file that defines it, and prints:

- imports that run back up: a file of one layer naming a layer above it (by the order of the
  table in lib.rs, bottom up); the layer rule says there are none;
- circles: groups of files that reach each other through their imports (strongly connected
  components of two or more files), each a place where two files cannot be read or changed
  one without the other.

Usage: python3 scripts/import-graph.py [REPO]   (exits 1 when an import runs back up)
"""

import os
import re
import sys

# Bottom up, as host/src/lib.rs's table lists them; the leaves beside `ids` share its floor.
LAYERS = [
    ["ids", "kill_point", "parallel"],
    ["state"],
    ["wasm"],
    ["checkpoint"],
    ["job"],
    ["dataflow"],
    ["connectors"],
    ["runtime"],
    ["control"],
    ["tools"],
    ["bin"],
]
# The crates whose files are read; only the host's are in layers.
CRATES = ["host", "guest-sdk", "abi"]
FLOOR = {name: floor for floor, names in enumerate(LAYERS) for name in names}

PATH = re.compile(r"\b(crate|super)((?:::[A-Za-z_][A-Za-z0-9_]*)+)")
GROUP = re.compile(r"\b(crate|super)((?:::[A-Za-z_][A-Za-z0-9_]*)*)::\{([^;]*?)\}", re.S)


def module_of(rel):
    """The module path of a file relative to host/src: `wasm/instance.rs` → ('wasm', 'instance')."""
    parts = rel[:-3].split("/")
    if parts[-1] in ("mod", "lib", "main"):
        parts = parts[:-1]
    return tuple(parts)


def product_text(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    cut = text.find("#[cfg(test)]")
    text = text if cut < 0 else text[:cut]
    # Comments name modules without importing them.
    return "\n".join(line.split("//")[0] for line in text.splitlines())


def paths_named(text, here, crate_root):
    """Every module path the text of module `here` names, absolute (as tuples)."""

    def absolute(root, rest):
        parts = [p for p in rest.split("::") if p]
        if root == "crate":
            return crate_root + tuple(parts)
        out = list(here[:-1])  # the first `super`
        for p in parts:
            if p == "super":
                out = out[:-1]
            else:
                out.append(p)
        return tuple(out)

    found = []
    for m in GROUP.finditer(text):
        prefix = absolute(m.group(1), m.group(2))
        for item in re.split(r"[,{}\s]+", m.group(3)):
            item = item.split(" as ")[0].strip()
            if item == "self":
                found.append(prefix)
            elif re.match(r"^[A-Za-z_][A-Za-z0-9_:]*$", item):
                found.append(prefix + tuple(item.split("::")))
    for m in PATH.finditer(text):
        # `super::super::x` is matched once, from its first `super`.
        if text[max(0, m.start() - 7) : m.start()] == "super::":
            continue
        found.append(absolute(m.group(1), m.group(2)))
    return found


def main():
    repo = sys.argv[1] if len(sys.argv) > 1 else "."
    files = {}
    for crate in CRATES:
        src = os.path.join(repo, crate, "src")
        for dirpath, _, names in os.walk(src):
            for name in names:
                if not name.endswith(".rs") or name == "tests.rs" or name.endswith("_tests.rs"):
                    continue
                rel = os.path.relpath(os.path.join(dirpath, name), src)
                if "/tests/" in "/" + rel:
                    continue
                files[(crate,) + module_of(rel)] = os.path.join(dirpath, name)

    def resolve(path):
        while path and path not in files:
            path = path[:-1]
        return path if path in files else None

    edges = {m: set() for m in files}
    back_up = []
    for module, path in files.items():
        # The `weir` binary is a crate of its own, whose `crate::` is its folder.
        crate_root = module[:3] if module[1:2] == ("bin",) else module[:1]
        for named in paths_named(product_text(path), module, crate_root):
            target = resolve(named)
            if target is None or target == module:
                continue
            edges[module].add(target)
            a, b = (module[1:] or ("lib",))[0], (target[1:] or ("lib",))[0]
            layered = module[0] == "host" and target[0] == "host"
            if layered and a in FLOOR and b in FLOOR and FLOOR[b] > FLOOR[a]:
                back_up.append(("/".join(module), "/".join(target)))

    # Strongly connected components (Tarjan, iterative).
    index, low, on_stack, stack, sccs = {}, {}, set(), [], []
    counter = [0]
    for root in edges:
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter[0]
                    counter[0] += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    sccs.append(sorted("/".join(m) for m in component))

    print(f"files: {len(files)}, imports: {sum(len(e) for e in edges.values())}")
    print(f"imports that run back up: {len(back_up)}")
    for a, b in sorted(back_up):
        print(f"  {a} -> {b}")
    print(f"circles: {len(sccs)}")
    for component in sorted(sccs):
        print("  " + " <-> ".join(component))
    return 1 if back_up else 0


if __name__ == "__main__":
    sys.exit(main())
