#!/usr/bin/env python3
"""Checks that #includes follow the layers of docs/architecture.md.

The layer table there lists each layer's directory, top (lowest) first; a file
may include headers of its own layer and of the layers listed before it, never
of a later one. Within the whole of src/ and apps/, no two units (a .cc file
and its header) may depend on each other, directly or through others: every
cycle is reported. A header without a .cc belongs to whoever includes it (its
own includes count as theirs). Tests, benchmarks, fuzzers and tools sit on top and are not checked.

    scripts/check-layers.py [--root DIR] [--plant FILE:HEADER ...]

--plant pretends FILE includes HEADER (a path under src/, as written in an
#include), so that the check can be shown to catch a bad include without
editing the tree: ctest runs it that way and expects it to fail.
Exits 1 and lists each violation; 0 when there are none.
"""
import argparse
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
TABLE_ROW = re.compile(r"^\|\s*([a-z]+)\s*\|\s*`([^`]+)`\s*\|", re.M)
CHECKED_TOPS = ("src/", "apps/")


def read_layers(root):
    """[(layer name, directory prefix)] in the order of docs/architecture.md's table."""
    with open(os.path.join(root, "docs/architecture.md"), encoding="utf-8") as f:
        text = f.read()
    layers = [(name, directory.rstrip("/") + "/") for name, directory in TABLE_ROW.findall(text)]
    if not layers:
        sys.exit("check-layers: no layer table (| layer | `dir/` | ...) in docs/architecture.md")
    return layers


def layer_of(path, layers):
    """Index of the layer whose directory holds path (the longest match), or None."""
    best, best_len = None, -1
    for i, (_, directory) in enumerate(layers):
        if path.startswith(directory) and len(directory) > best_len:
            best, best_len = i, len(directory)
    return best


def source_files(root):
    for top in CHECKED_TOPS:
        for dirpath, _, names in os.walk(os.path.join(root, top)):
            for name in sorted(names):
                if name.endswith((".h", ".cc")):
                    yield os.path.relpath(os.path.join(dirpath, name), root)


def resolve(include, including_file, root):
    """The repository path of an #include "..." (src/ first, then beside the file), or None."""
    for candidate in (os.path.join("src", include), os.path.join(os.path.dirname(including_file), include)):
        if os.path.exists(os.path.join(root, candidate)):
            return os.path.normpath(candidate)
    return None


def unit(path):
    return os.path.splitext(path)[0]


def unit_edges(includes):
    """unit -> units it depends on; a header-only unit's includes count for its includer."""
    compiled = {unit(p) for p in includes if p.endswith(".cc")}
    reached = {}

    def units_through(header, seen):
        u = unit(header)
        if u in compiled:
            return {u}
        if header in seen:
            return set()
        seen.add(header)
        if header not in reached:
            out = set()
            for h in includes.get(header, ()):
                out |= units_through(h, seen)
            reached[header] = out
        return reached[header]

    edges = {}
    for path, headers in includes.items():
        u = unit(path)
        if u not in compiled:
            continue
        for header in headers:
            edges.setdefault(u, set()).update(units_through(header, set()) - {u})
    return edges


def find_cycles(edges):
    """Strongly connected components of more than one unit (Tarjan)."""
    index, low, on_stack, stack, out = {}, {}, set(), [], []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    parser.add_argument("--plant", action="append", default=[], metavar="FILE:HEADER")
    args = parser.parse_args()
    root = os.path.abspath(args.root)
    layers = read_layers(root)

    includes = {}  # file -> [resolved header]
    for path in source_files(root):
        with open(os.path.join(root, path), encoding="utf-8") as f:
            found = INCLUDE.findall(f.read())
        includes[path] = [r for r in (resolve(i, path, root) for i in found) if r is not None]
    for plant in args.plant:
        path, _, header = plant.partition(":")
        if path not in includes or resolve(header, path, root) is None:
            sys.exit(f"check-layers: --plant {plant}: no such file or header")
        includes[path].append(resolve(header, path, root))

    problems = []
    unplaced = []
    for path, headers in sorted(includes.items()):
        own = layer_of(path, layers)
        if own is None:
            unplaced.append(path)
            continue
        for header in headers:
            theirs = layer_of(header, layers)
            if theirs is not None and theirs > own:
                problems.append(f"{path} ({layers[own][0]}) includes {header} ({layers[theirs][0]}), "
                                f"a later layer in docs/architecture.md")
    for path in unplaced:
        problems.append(f"{path} is in no layer's directory of docs/architecture.md")
    for component in find_cycles(unit_edges(includes)):
        problems.append("units that include each other: " + ", ".join(component))

    for p in problems:
        print("check-layers:", p)
    if problems:
        print(f"check-layers: {len(problems)} problem(s); the layers are listed in docs/architecture.md")
        return 1
    print(f"check-layers: {len(includes)} files follow the {len(layers)} layers of docs/architecture.md; no cycles")
    return 0


if __name__ == "__main__":
    sys.exit(main())
