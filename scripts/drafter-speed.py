#!/usr/bin/python3
"""Drafters on unseen code: tokens/s of each --spec against plain decoding, side by side.

    scripts/drafter-speed.py [--kakeya build/bin/kakeya] [--specs none,ngram,draft,dflash,mtp,auto]
                             [--blocks 0,2,4,8] [--prompts 8] [-n 128] [--rounds 3] [-t 2]

--source code (default): prompts are function starts cut from Python files outside the shipped
model's training corpus (the Python standard library): Debian's /usr/lib/python3/dist-packages.
Each prompt is the 24 lines before a top-level `def` plus the `def` line. --source heldout: the
same cuts from the packages no second-generation model was trained on
(tools/train/heldout-prompts.jsonl; -m/--draft pick that pair). --source code-edit: a function
from the files held out of the shipped model's training, a comment naming a small edit and the
edited signature (models/prompts/code-edit.jsonl, as `kakeya bench spec --workload code-edit`):
the continuation a coding agent wants is the function again, where prompt lookup (ngram) should
propose whole lines. --source prose:
paragraphs of English (/usr/share/common-licenses/GPL-3), where no drafter should help;
--source shuffled: the same words in random order. Every configuration
runs every prompt once per round, rounds alternate the configurations, and the figures are
medians over rounds of the totals (tokens / decode seconds). Every speculative run's tokens
are compared with plain decoding's; a difference is reported and fails the script.
Block 0 means the adaptive block (the default).
"""
import argparse
import glob
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def prompts(n, lines_before=24):
    files = sorted(glob.glob("/usr/lib/python3/dist-packages/*/*.py"))
    files = [f for f in files if "/test" not in f and os.path.getsize(f) > 4000]
    out = []
    step = max(1, len(files) // (n * 2))
    for path in files[::step]:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = f.read().split("\n")
        starts = [i for i, line in enumerate(lines) if line.startswith("def ") and i >= lines_before]
        if not starts:
            continue
        i = starts[len(starts) // 2]
        out.append((path, "\n".join(lines[i - lines_before:i + 1]) + "\n"))
        if len(out) == n:
            break
    if len(out) < n:
        sys.exit(f"found only {len(out)} prompts in /usr/lib/python3/dist-packages")
    return out


def heldout_prompts(n):
    with open(os.path.join(ROOT, "tools", "train", "heldout-prompts.jsonl"), encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    if len(rows) < n:
        sys.exit(f"tools/train/heldout-prompts.jsonl holds {len(rows)} prompts, fewer than --prompts {n}")
    return [(r["pkg"] + "/" + r["path"], r["prompt"]) for r in rows[:n]]


def code_edit_prompts(n):
    with open(os.path.join(ROOT, "models", "prompts", "code-edit.jsonl"), encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    if len(rows) < n:
        sys.exit(f"models/prompts/code-edit.jsonl holds {len(rows)} prompts, fewer than --prompts {n}")
    return [(r["source"], r["prompt"]) for r in rows[:n]]


def prose_prompts(n, shuffled):
    import random
    with open("/usr/share/common-licenses/GPL-3", encoding="utf-8") as f:
        paragraphs = [p.strip() for p in f.read().split("\n\n") if len(p.strip()) > 400]
    out = []
    rng = random.Random(1)
    for p in paragraphs[::max(1, len(paragraphs) // n)][:n]:
        if shuffled:
            words = p.split()
            rng.shuffle(words)
            p = " ".join(words)
        out.append(("GPL-3", p + "\n"))
    return out


def run(kakeya, prompt_file, spec, block, n, threads, model=None, draft=None):
    cmd = [kakeya, "run", "-f", prompt_file, "-n", str(n), "--temp", "0", "--json", "-t", str(threads),
           "--ignore-eos", "--spec", spec]
    if model:
        cmd += ["-m", model]
    if draft and spec not in ("none", "ngram"):  # prompt lookup takes no file
        cmd += ["--draft", draft]
    if block > 0:
        cmd += ["--block", str(block)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kakeya", default=os.path.join(ROOT, "build/bin/kakeya"))
    ap.add_argument("--specs", default="none,ngram,draft,dflash,mtp,auto")
    ap.add_argument("--blocks", default="0", help="block sizes for the drafters (0: adaptive)")
    ap.add_argument("--prompts", type=int, default=8)
    ap.add_argument("-n", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("--source", choices=["code", "heldout", "code-edit", "prose", "shuffled"], default="code")
    ap.add_argument("-m", "--model", help="target GGUF (default: kakeya's default model)")
    ap.add_argument("--draft", help="drafter GGUF passed to every speculative run (--draft)")
    ap.add_argument("--json", help="also write the results here")
    a = ap.parse_args()

    configs = [("none", 0)]
    for spec in a.specs.split(","):
        if spec != "none":
            configs += [(spec, int(b)) for b in a.blocks.split(",")]
    if a.source == "code":
        cases = prompts(a.prompts)
    elif a.source == "heldout":
        cases = heldout_prompts(a.prompts)
    elif a.source == "code-edit":
        cases = code_edit_prompts(a.prompts)
    else:
        cases = prose_prompts(a.prompts, a.source == "shuffled")
    tmp = tempfile.mkdtemp(prefix="kakeya-drafters-")
    files = []
    for k, (_, text) in enumerate(cases):
        files.append(os.path.join(tmp, f"p{k}.py"))
        with open(files[-1], "w") as f:
            f.write(text)

    rates = {c: [] for c in configs}
    stats = {c: None for c in configs}
    plain_tokens = {}
    failed = False
    for r in range(a.rounds):
        for c in configs:
            tokens = ms = steps = accepted = 0
            for k, pf in enumerate(files):
                d = run(a.kakeya, pf, c[0], c[1], a.n, a.threads, a.model, a.draft)
                tokens += len(d["tokens"]) - 1
                ms += d["timings"]["decode_ms"]
                if c[0] == "none":
                    plain_tokens[k] = d["tokens"]
                else:
                    steps += d["spec"]["steps"]
                    accepted += d["spec"]["accepted"]
                    if k in plain_tokens and d["tokens"] != plain_tokens[k]:
                        first = next(i for i, (x, y) in enumerate(zip(d["tokens"], plain_tokens[k])) if x != y)
                        print(f"DIFFERENT OUTPUT: {c} prompt {k} ({cases[k][0]}) first at token {first}")
                        failed = True
            rates[c].append(tokens * 1000.0 / ms)
            if c[0] != "none":
                stats[c] = (steps + accepted) / max(1, steps)
        print(f"round {r + 1}/{a.rounds} done", file=sys.stderr)

    plain = statistics.median(rates[("none", 0)])
    results = []
    print(f"{'spec':8} {'block':>8} {'tok/s':>8} {'speedup':>8} {'tokens/step':>12}")
    for c in configs:
        tok_s = statistics.median(rates[c])
        results.append({"spec": c[0], "block": c[1] or "adaptive", "tok_s": tok_s, "speedup": tok_s / plain,
                        "tokens_per_step": stats[c], "rounds": rates[c]})
        tps = f"{stats[c]:.2f}" if stats[c] else "-"
        print(f"{c[0]:8} {c[1] or 'adaptive':>8} {tok_s:8.1f} {tok_s / plain:7.2f}x {tps:>12}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"source": a.source, "prompts": [p for p, _ in cases], "n": a.n, "threads": a.threads, "results": results}, f,
                      indent=1)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
