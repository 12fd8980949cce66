#!/usr/bin/python3
"""Writes the prompts of `kakeya bench`'s shipped workloads (models/prompts/).

code.jsonl: function starts cut from the files held out of the shipped model's training corpus
(tools/train/corpus.py: the Python 3.11 standard library, a file held out by the hash of its path),
one per file that has a `def` (top level or method) with enough lines before it: the 24 lines
before the middle one of its `def` lines plus that line. The model never saw these lines.
prose.jsonl: paragraphs of English (/usr/share/common-licenses/GPL-3, whose licence allows verbatim
copies), where no drafter should help, as scripts/drafter-speed.py --source prose uses.

    scripts/make-bench-prompts.py [--root /usr/lib/python3.11] [--out models/prompts]
"""
import argparse
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools", "train"))
import corpus  # noqa: E402

LINES_BEFORE = 24
PROMPTS = 8


def code_prompts(root):
    out = []
    for rel in corpus.list_files(root):
        if not corpus.is_heldout(rel) or rel.startswith("encodings/"):  # codec tables, no functions to write
            continue
        lines = corpus.read_text(root, rel).split("\n")
        starts = [i for i, line in enumerate(lines) if line.lstrip().startswith("def ") and i >= LINES_BEFORE]
        if len(starts) < 2:
            continue
        i = starts[len(starts) // 2]
        out.append({"source": rel, "prompt": "\n".join(lines[i - LINES_BEFORE:i + 1]) + "\n"})
    return out[:PROMPTS]


def prose_prompts():
    with open("/usr/share/common-licenses/GPL-3", encoding="utf-8") as f:
        paragraphs = [p.strip() for p in f.read().split("\n\n") if len(p.strip()) > 400]
    picked = paragraphs[::max(1, len(paragraphs) // PROMPTS)][:PROMPTS]
    return [{"source": "GPL-3", "prompt": p + "\n"} for p in picked]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", default=corpus.DEFAULT_ROOT)
    ap.add_argument("--out", default=os.path.join(ROOT, "models", "prompts"))
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    for name, prompts in (("code", code_prompts(a.root)), ("prose", prose_prompts())):
        with open(os.path.join(a.out, name + ".jsonl"), "w", encoding="utf-8") as f:
            for p in prompts:
                f.write(json.dumps(p, ensure_ascii=False) + "\n")
        print(f"{name}: {len(prompts)} prompts ({', '.join(sorted({p['source'] for p in prompts}))})")


if __name__ == "__main__":
    main()
