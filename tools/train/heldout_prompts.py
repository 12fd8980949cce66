#!/usr/bin/python3
"""Function starts cut from the held-out packages of the second-generation corpus: the prompts
that scripts/drafter-speed.py, `bench`'s `code` workload and the quality gate (greedy
continuations that must parse) are to use, so that nothing is measured on code the target or a
drafter trained on. Committed as tools/train/heldout-prompts.jsonl, because the engine's tools
must not fetch anything at run time.

    heldout_prompts.py /work/corpus/text/heldout.jsonl tools/train/heldout-prompts.jsonl [--n 100]

A prompt is the (up to) 24 lines before a `def` at the start of a line (a top-level function),
plus the `def` line itself, as drafter-speed.py cuts them; packages take turns (round-robin, in
the order of the file) so that no single package dominates; at most 4 per file. Each line:
{"pkg", "path", "line" (1-based line of the def), "prompt"}. Tests are skipped.
"""
import argparse
import json

LINES_BEFORE = 24


def cuts(text, per_file=4):
    lines = text.split("\n")
    starts = [i for i, l in enumerate(lines) if l.startswith("def ") and i >= LINES_BEFORE and l.rstrip().endswith(":")]
    if not starts:
        return []
    step = max(1, len(starts) // per_file)
    return [(i + 1, "\n".join(lines[i - LINES_BEFORE:i + 1]) + "\n") for i in starts[::step][:per_file]]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("heldout_jsonl")
    ap.add_argument("out")
    ap.add_argument("--n", type=int, default=100)
    a = ap.parse_args()
    by_pkg = {}
    with open(a.heldout_jsonl, encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            if "/test" in d["path"] or d["path"].rsplit("/", 1)[-1].startswith("test_"):
                continue
            for lineno, prompt in cuts(d["text"]):
                by_pkg.setdefault(d["pkg"], []).append({"pkg": d["pkg"], "path": d["path"], "line": lineno,
                                                         "prompt": prompt})
    out, k = [], 0
    while len(out) < a.n and any(k < len(v) for v in by_pkg.values()):
        for v in by_pkg.values():
            if k < len(v) and len(out) < a.n:
                out.append(v[k])
        k += 1
    with open(a.out, "w", encoding="utf-8") as f:
        for p in out:
            f.write(json.dumps(p) + "\n")
    print(f"{len(out)} prompts from {len({p['pkg'] for p in out})} held-out packages -> {a.out}")


if __name__ == "__main__":
    main()
