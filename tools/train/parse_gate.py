#!/usr/bin/python3
"""Issue 42's quality gate on held-out code: greedy continuations of the function starts in
heldout-prompts.jsonl, each cut where the function ends (the first non-blank line indented no
deeper than its `def`), must parse as Python (`ast.parse` of the `def` line and the
continuation so cut) and must not trip verify.degenerate.

    /usr/bin/python3 tools/train/parse_gate.py MODEL.gguf [--draft FILE] [-n 256] [--json OUT]

Decoding is greedy; --spec auto (with --draft) only makes it faster: the tokens are those of
plain decoding.
"""
import argparse
import ast
import json
import os
import sys

import verify

HERE = os.path.dirname(os.path.abspath(__file__))


def function_text(def_line, continuation):
    """The def line and the continuation up to the function's end. A continuation that stops
    inside the function loses its last line, which the token limit may have cut mid-statement."""
    indent = len(def_line) - len(def_line.lstrip())
    lines = continuation.split("\n")
    body = []
    for line in lines:
        if line.strip() and len(line) - len(line.lstrip()) <= indent and body:
            break
        body.append(line)
    else:
        body = body[:-1]
    return def_line.lstrip() + "\n" + "\n".join(l[indent:] for l in body)


def parses(text):
    try:
        ast.parse(text)
        return True
    except (SyntaxError, ValueError):
        return False


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("--draft", help="drafter GGUF for --spec auto (speed only)")
    ap.add_argument("--kakeya", default=os.path.join(HERE, "..", "..", "build", "bin", "kakeya"))
    ap.add_argument("--prompts", default=os.path.join(HERE, "heldout-prompts.jsonl"))
    ap.add_argument("-n", type=int, default=256)
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("--json", help="write every continuation and the counts here")
    a = ap.parse_args()
    with open(a.prompts, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    results = []
    for i, row in enumerate(rows):
        spec = ["--spec", "auto", "--draft", a.draft] if a.draft else ["--spec", "none"]
        text = verify.kakeya_json(a.kakeya, "run", "-m", a.model, "-p", row["prompt"], "-n", str(a.n), "--temp", "0",
                                  "--ignore-eos", "-t", str(a.threads), *spec)["text"]
        def_line = row["prompt"].rstrip("\n").split("\n")[-1]
        ok = parses(function_text(def_line, text))
        bad = verify.degenerate(text)
        results.append({"pkg": row["pkg"], "path": row["path"], "parses": ok, "degenerate": bad, "text": text})
        print(f"[parse] {i + 1}/{len(rows)} {'parses' if ok else 'FAILS '} {'DEGENERATE' if bad else ''}",
              file=sys.stderr, flush=True)
    summary = {"model": a.model, "prompts": len(results), "tokens": a.n,
               "parse": sum(r["parses"] for r in results), "degenerate": sum(r["degenerate"] for r in results),
               "parse_and_not_degenerate": sum(r["parses"] and not r["degenerate"] for r in results)}
    print(json.dumps(summary, indent=2))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(dict(summary, results=results), f, indent=1)


if __name__ == "__main__":
    main()
