#!/usr/bin/python3
"""Passkey recall in code: does a model complete, at the end of a long Python file, a value
assigned once near its start (or anywhere in it)?

    /usr/bin/python3 tools/train/recall.py MODEL.gguf --text /work/corpus/text/heldout.jsonl \
        [--engine kakeya|torch] [--ctx 4096] [--trials 100] [--json OUT]

Each trial is one prompt of about --ctx tokens (less --margin for the answer):
* filler: whole held-out Python files (a different run of files per trial), concatenated and
  cut at a line end so that the prompt fits;
* the needle, inserted at depth d = i / (trials - 1) of the filler's lines (0 = before the
  first line, 1 = after the last), trial i: `SESSION_KEY_<n> = "<8 hex digits>"`, at the
  nearest top-level line boundary, or, when none is within 5% of the lines, at that line with
  its indentation (`indented`); `by_depth` counts by the depth where it landed;
* the question at the end: `\n\nassert SESSION_KEY_<n> == "`.
Score: exact match, i.e. the greedy completion starts with the 8 hex digits and the closing
quote. Plain greedy decoding, by `kakeya run --spec none --temp 0` (which tokenizes; any GGUF
model it loads) or by PyTorch (`--engine torch`, gemma3 files, `--tokenizer` needed). The
needle's name and value come from a seeded generator (a value never seen in training).
"""
import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_KAKEYA = os.path.join(HERE, "..", "..", "build", "bin", "kakeya")


def load_files(path, limit=400):
    """Texts of the first `limit` documents of a jsonl (debian_corpus.py) or the *.py under a folder."""
    out = []
    if os.path.isdir(path):
        for dirpath, _, names in sorted(os.walk(path)):
            for n in sorted(names):
                if n.endswith(".py"):
                    with open(os.path.join(dirpath, n), encoding="utf-8", errors="replace") as f:
                        out.append(f.read())
                if len(out) >= limit:
                    return out
        return out
    with open(path, encoding="utf-8") as f:
        for line in f:
            out.append(json.loads(line)["text"])
            if len(out) >= limit:
                break
    return out


class Counter:
    """Token counts: the engine's own tokenizer (kakeya tokenize) or SentencePiece."""

    def __init__(self, args):
        self.args, self.sp = args, None
        if args.tokenizer:
            import sentencepiece as spm
            self.sp = spm.SentencePieceProcessor(model_file=args.tokenizer)

    def __call__(self, text):
        if self.sp is not None:
            return 1 + len(self.sp.encode(text))  # BOS
        with tempfile.NamedTemporaryFile("w", suffix=".py", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            out = subprocess.run([self.args.kakeya, "tokenize", "-m", self.args.model, "-f", f.name, "--json"],
                                 check=True, capture_output=True, text=True).stdout
        return len(json.loads(out)["tokens"])


def make_trial(files, i, trials, budget, count, seed):
    rng = random.Random(seed * 7919 + i)
    name = f"SESSION_KEY_{rng.randrange(10, 100)}"
    value = "".join(rng.choice("0123456789abcdef") for _ in range(8))
    needle = f'{name} = "{value}"\n'
    question = f'\n\nassert {name} == "'
    start = (i * 37) % len(files)
    lines = []
    for k in range(len(files)):
        lines += files[(start + k) % len(files)].rstrip("\n").split("\n") + ["", ""]
        if sum(len(l) + 1 for l in lines) > budget * 6:  # enough bytes for any tokenizer here
            break
    # Cut the filler to the token budget by whole lines: proportional steps on the line count,
    # keeping the longest prompt that fits (within 3% of the budget, or after 8 tries).
    depth = i / max(1, trials - 1)

    def build(keep):
        filler = lines[:keep]
        # top-level boundaries: before a line at column 0 that is not a continuation
        tops = [j for j, l in enumerate(filler) if l and not l[0].isspace() and not l.startswith((")", "]", "}"))]
        want = min(len(filler), round(depth * len(filler)))
        at = min(tops + [len(filler)], key=lambda j: abs(j - want))
        indent = ""
        if abs(at - want) > 0.05 * len(filler):  # no top-level line near: indent like the line there
            at = want
            line = filler[at] if at < len(filler) else ""
            indent = line[:len(line) - len(line.lstrip())]
        text = "\n".join(filler[:at]) + ("\n" if at else "") + indent + needle + "\n".join(filler[at:]) + question
        return text, count(text), at, len(filler), indent

    keep, best = len(lines), None
    for _ in range(8):
        cand = build(keep)
        n = cand[1]
        if n <= budget and (best is None or n > best[1]):
            best = cand
        if budget * 0.97 <= n <= budget or keep < 10:
            break
        keep = max(1, min(len(lines), int(keep * budget / n * (0.99 if n > budget else 1.0))
                          + (0 if n > budget else 1)))
    text, n, at, n_lines, indent = best or cand
    return {"trial": i, "depth": round(depth, 4), "needle_line": at, "lines": n_lines,
            "actual_depth": round(at / max(1, n_lines), 4), "indented": bool(indent), "tokens": n,
            "value": value, "name": name, "prompt": text}


def run_kakeya(args, prompt):
    with tempfile.NamedTemporaryFile("w", suffix=".py", encoding="utf-8") as f:
        f.write(prompt)
        f.flush()
        out = subprocess.run([args.kakeya, "run", "-m", args.model, "-f", f.name, "-n", str(args.n_predict),
                              "--temp", "0", "--spec", "none", "--json", "-c", str(args.ctx),
                              "-t", str(args.threads), *args.kakeya_args.split()],
                             check=True, capture_output=True, text=True).stdout
    return json.loads(out)["text"]


class TorchEngine:
    def __init__(self, args):
        import torch
        import gguf_reader
        self.torch = torch
        self.device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        self.model, _ = gguf_reader.load_gemma3(args.model)
        self.model.to(self.device)
        import sentencepiece as spm
        self.sp = spm.SentencePieceProcessor(model_file=args.tokenizer)
        self.n = args.n_predict

    def __call__(self, prompt):
        from target_data import greedy
        ids = self.torch.tensor([[self.sp.bos_id()] + self.sp.encode(prompt)], device=self.device)
        out = greedy(self.model, ids, self.n, self.device)[0, ids.shape[1]:].tolist()
        return self.sp.decode(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", help="GGUF file")
    ap.add_argument("--text", required=True, help="held-out text: debian_corpus.py's heldout.jsonl or a folder of .py")
    ap.add_argument("--engine", choices=["kakeya", "torch"], default="kakeya")
    ap.add_argument("--kakeya", default=DEFAULT_KAKEYA)
    ap.add_argument("--kakeya-args", default="", metavar="ARGS",
                    help="more options for `kakeya run`, e.g. \"-ctk kakeya4 -ctv kakeya3\" (the codec's recall "
                         "against the exact cache's, trial by trial: the same --seed gives the same prompts)")
    ap.add_argument("--tokenizer", help="tokenizer.model (required by --engine torch; else kakeya tokenizes)")
    ap.add_argument("--ctx", type=int, default=4096)
    ap.add_argument("--margin", type=int, default=24, help="tokens left for the answer")
    ap.add_argument("--trials", type=int, default=100)
    ap.add_argument("-n", "--n-predict", type=int, default=12)
    ap.add_argument("-t", "--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--json", help="write the trials and the score here")
    ap.add_argument("--only-recalled-in", metavar="JSON",
                    help="run only the trials that this earlier --json (same --seed, --trials, --ctx) recalled: the "
                         "recall gate of a KV cache type against the exact cache's run")
    args = ap.parse_args()
    if args.engine == "torch" and not args.tokenizer:
        sys.exit("--engine torch needs --tokenizer")
    files = load_files(args.text)
    count = Counter(args)
    engine = TorchEngine(args) if args.engine == "torch" else (lambda p: run_kakeya(args, p))
    wanted = range(args.trials)
    if args.only_recalled_in:
        with open(args.only_recalled_in) as f:
            wanted = [t["trial"] for t in json.load(f)["trials_detail"] if t["ok"]]
    t0, hits, rows = time.time(), 0, []
    for i in wanted:
        trial = make_trial(files, i, args.trials, args.ctx - args.margin, count, args.seed)
        completion = engine(trial.pop("prompt"))
        ok = completion.startswith(trial["value"] + '"')
        hits += ok
        rows.append(dict(trial, completion=completion, ok=ok))
        print(f"[recall] {i + 1}/{args.trials} depth {trial['depth']:.2f} tokens {trial['tokens']} "
              f"{'ok ' if ok else 'MISS'} {completion[:20]!r} ({time.time() - t0:.0f} s)", flush=True)
    by_depth = {}
    for r in rows:
        b = min(4, int(r["actual_depth"] * 5))
        by_depth.setdefault(f"{b * 20}-{b * 20 + 20}%", []).append(r["ok"])
    report = {"model": args.model, "engine": args.engine, "kakeya_args": args.kakeya_args, "ctx": args.ctx,
              "trials": len(rows), "exact": hits, "rate": hits / max(1, len(rows)),
              "by_depth": {k: f"{sum(v)}/{len(v)}" for k, v in sorted(by_depth.items())},
              "mean_prompt_tokens": sum(r["tokens"] for r in rows) / len(rows),
              "seconds": round(time.time() - t0, 1), "trials_detail": rows}
    print(json.dumps({k: v for k, v in report.items() if k != "trials_detail"}, indent=2))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=2)


if __name__ == "__main__":
    main()
