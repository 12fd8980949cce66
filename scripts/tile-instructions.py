#!/usr/bin/env python3
"""Instructions per weight byte in the packed matmul tiles, from the compiler's output.

    scripts/tile-instructions.py [--objdump OBJDUMP] OBJECT...
    scripts/tile-instructions.py --run build/bin/tile-probe          (x86: under valgrind)
    scripts/tile-instructions.py --run build-arm/bin/tile-probe      (ARM: under qemu-aarch64)

build-arm is scripts/test-arm.sh's cross-build (GCC); for clang's counts, configure
another with -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu-clang.cmake and build
its tile-probe target.

Static mode: disassembles the tile functions of matmul_packed.cc /
matmul_packed_kquant.cc objects (x86 or ARM; pass aarch64-linux-gnu-objdump
for an ARM build), takes each tile's loop over weight blocks (the outermost
loop: its backward branch spans the most code) and divides the instructions
in it by the weight bytes one trip reads. A loop with another loop inside is
flagged: its count is a lower bound (the inner trips are counted once).

--run mode counts executed instructions instead: it runs tools/tile_probe.cc
(one packed MatMul per type at 1 and at 4 rows, one thread) under valgrind's
callgrind (x86) or qemu-aarch64's execution log (ARM; KAKEYA_CPU_TARGET picks
the form), and divides each tile function's instructions by the packed bytes
it read. Exact for every tile, inner loops included.

Counts, not timings: they compare the ISAs' work per byte where no ARM
machine can be timed (#24, ADR 0011).
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

# WeightLayout's enumerators in matmul.h order, and the bytes of one block
# (32 elements) or super-block (256) of a 16-column group.
LAYOUTS = ["kRows", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q4_K", "Q5_K", "Q6_K"]
GROUP_BYTES = {"Q8_0": 544, "Q4_0": 288, "Q4_1": 320, "Q5_0": 352, "Q5_1": 384,
               "Q4_K": 2368, "Q5_K": 2880, "Q6_K": 3360}

HEADER = re.compile(r"^[0-9a-f]+ <(.*)>:$")
INSN = re.compile(r"^\s*([0-9a-f]+):\s+(\S+)\s*(.*)$")
# Branches whose operand is an address in the function: x86 j*, ARM b, b.cond, cbz/cbnz, tbz/tbnz.
BRANCH = re.compile(r"^(j[a-z]+|b|b\.[a-z]+|cbn?z|tbn?z)$")


def functions(objdump, path):
    out = subprocess.run([objdump, "-d", "-C", "--no-show-raw-insn", path], check=True,
                         capture_output=True, text=True).stdout
    name, insns = None, []
    for line in out.splitlines():
        m = HEADER.match(line)
        if m:
            if name:
                yield name, insns
            name, insns = m.group(1), []
            continue
        m = INSN.match(line)
        if m and name:
            insns.append((int(m.group(1), 16), m.group(2), m.group(3)))
    if name:
        yield name, insns


def loops(insns):
    """(start, end) address pairs of the backward branches."""
    found = []
    for addr, mnemonic, operands in insns:
        if not BRANCH.match(mnemonic):
            continue
        target = re.search(r"\b([0-9a-f]+) <", operands) or re.search(r"([0-9a-f]+)$", operands.split(",")[-1].strip())
        if not target:
            continue
        t = int(target.group(1), 16)
        if t <= addr:
            found.append((t, addr))
    return found


def describe(name):
    """(target, tile, layout, rows, bytes per trip) of a tile function, or None."""
    m = re.search(r"kakeya::(N_\w+)::(\w+)<(.*)>\(", name)
    if not m:
        return None
    ns, tile, args = m.groups()
    if "Tile" not in tile:
        return None
    layout_match = re.search(r"\(kakeya::WeightLayout\)(\d+)", args)
    numbers = [int(n) for n in re.findall(r"(?<![\w)])(\d+)(?![\w])", re.sub(r"\(kakeya::WeightLayout\)\d+", "", args))]
    if layout_match:
        layout = LAYOUTS[int(layout_match.group(1))]
    elif "Q6K" in tile:
        layout = "Q6_K"
    else:
        return None
    rows = numbers[-1] if numbers else 1
    # Tiles of half a group (8 columns: AVX2, NEON) read half of each block per trip.
    half = not ("Vnni" in tile)
    trip_bytes = GROUP_BYTES[layout] // (2 if half else 1)
    return ns, tile, layout, rows, trip_bytes


def probe_bytes(output):
    """{layout: packed bytes} from tile-probe's output."""
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\S+) packed bytes (\d+)$", output, re.M)}


def run_x86(probe):
    """{function name: executed instructions} under valgrind's callgrind, and the probe's output."""
    with tempfile.TemporaryDirectory() as tmp:
        out_file = os.path.join(tmp, "callgrind.out")
        run = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out_file}", probe],
                             check=True, capture_output=True, text=True)
        report = subprocess.run(["callgrind_annotate", "--threshold=100", out_file], check=True,
                                capture_output=True, text=True).stdout
    counts = {}
    for line in report.splitlines():
        m = re.match(r"^\s*([\d,]+)\s+\([^)]*\)\s+\?\?\?:(.*) \[[^]]*\]$", line)
        if m:
            counts[m.group(2)] = int(m.group(1).replace(",", ""))
    return counts, run.stdout


def run_arm(probe, emulator):
    """As run_x86, from qemu's log of translated blocks (in_asm) and their executions (exec)."""
    symbols = subprocess.run(["aarch64-linux-gnu-nm", "-C", "-S", "--defined-only", probe], check=True,
                             capture_output=True, text=True).stdout
    ranges = []
    for line in symbols.splitlines():
        m = re.match(r"^([0-9a-f]+) ([0-9a-f]+) [tTwW] (.*)$", line)
        if m and "Tile" in m.group(3):
            start = int(m.group(1), 16)
            ranges.append((start, start + int(m.group(2), 16), m.group(3)))
    with tempfile.TemporaryDirectory() as tmp:
        log = os.path.join(tmp, "qemu.log")
        run = subprocess.run([emulator, "-cpu", "max", "-d", "in_asm,exec,nochain", "-D", log, probe], check=True,
                             capture_output=True, text=True)
        block_size, executed = {}, {}
        current = None
        with open(log) as f:
            for line in f:
                if line.startswith("Trace "):
                    pc = int(line.split("[")[1].split("/")[1], 16)
                    executed[pc] = executed.get(pc, 0) + 1
                elif line.startswith("IN:"):
                    current = None
                elif line.startswith("0x"):
                    pc = int(line.split(":")[0], 16)
                    if current is None:
                        current = pc
                        block_size[current] = 0
                    block_size[current] += 1
                elif not line.strip():
                    current = None
    counts = {}
    for start, end, name in ranges:
        n = sum(block_size.get(pc, 0) * times for pc, times in executed.items() if start <= pc < end)
        if n:
            counts[name] = n
    return counts, run.stdout


def main_run(probe, emulator):
    is_arm = "aarch64" in subprocess.run(["file", "-L", probe], capture_output=True, text=True).stdout
    counts, output = run_arm(probe, emulator) if is_arm else run_x86(probe)
    sizes = probe_bytes(output)
    print(output.splitlines()[0])  # the CPU target
    print(f"{'layout':6} {'target':10} {'tile':22} {'rows':>4} {'insns':>8} {'bytes':>6} {'insn/B':>7} {'insn/B/row':>10}")
    rows_out = []
    for name, n in counts.items():
        info = describe(name)
        if info:
            ns, tile, layout, rows, _ = info
            rows_out.append((layout, ns, tile, rows, n, sizes[layout]))
    for layout, ns, tile, rows, n, size in sorted(rows_out):
        print(f"{layout:6} {ns:10} {tile:22} {rows:4} {n:8} {size:6} {n / size:7.3f} {n / size / rows:10.3f}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--objdump", default="objdump")
    parser.add_argument("--run", metavar="TILE_PROBE", help="count executed instructions of tools/tile_probe.cc")
    parser.add_argument("--emulator", default="qemu-aarch64")
    parser.add_argument("objects", nargs="*")
    args = parser.parse_args()
    if args.run:
        return main_run(args.run, args.emulator)
    if not args.objects:
        parser.error("give objects, or --run TILE_PROBE")
    rows_out = []
    for path in args.objects:
        for name, insns in functions(args.objdump, path):
            info = describe(name)
            if not info:
                continue
            found = loops(insns)
            if not found:
                continue
            start, end = max(found, key=lambda se: se[1] - se[0])
            body = [i for i in insns if start <= i[0] <= end]
            nested = any(s > start and e < end for s, e in found)
            ns, tile, layout, rows, trip_bytes = info
            rows_out.append((layout, ns, tile, rows, len(body), trip_bytes, nested))
    if not rows_out:
        sys.exit("no tile functions found (pass matmul_packed*.o objects)")
    print(f"{'layout':6} {'target':10} {'tile':22} {'rows':>4} {'insns':>6} {'bytes':>6} {'insn/B':>7} {'insn/B/row':>10}")
    for layout, ns, tile, rows, n, trip_bytes, nested in sorted(rows_out):
        flag = "  (inner loop: lower bound)" if nested else ""
        print(f"{layout:6} {ns:10} {tile:22} {rows:4} {n:6} {trip_bytes:6} {n / trip_bytes:7.3f} "
              f"{n / trip_bytes / rows:10.3f}{flag}")


if __name__ == "__main__":
    main()
