#!/usr/bin/python3
"""Writes the prompts of `kakeya bench`'s shipped workloads (models/prompts/).

code.jsonl: function starts cut from the files held out of the shipped model's training corpus
(tools/train/corpus.py: the Python 3.11 standard library, a file held out by the hash of its path),
one per file that has a `def` (top level or method) with enough lines before it: the 24 lines
before the middle one of its `def` lines plus that line. The model never saw these lines.
code-edit.jsonl: a coding agent's edit as a base model continues it: a whole function from the same
held-out files, a comment naming a small change (a parameter renamed, or a keyword argument added),
and the function's signature with the change; the continuation is the function again, changed, so
prompt lookup (--spec ngram) can propose whole lines of the prompt. One function per file in turn,
500 to 900 characters long (with the prompt about twice that, prompt and 128 generated tokens fit the
model's 512-token training context), the edits alternating between the two kinds.
prose.jsonl: paragraphs of English (/usr/share/common-licenses/GPL-3, whose licence allows verbatim
copies), where no drafter should help, as scripts/drafter-speed.py --source prose uses.

    scripts/make-bench-prompts.py [--root /usr/lib/python3.11] [--out models/prompts]
"""
import argparse
import ast
import io
import json
import os
import sys
import textwrap
import tokenize

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


EDIT_MIN_CHARS, EDIT_MAX_CHARS = 500, 900
ADDED_ARGUMENT = "timeout=None"


def renamed(source, old, new):
    """source with every name `old` renamed (not attributes `x.old`, strings or comments)."""
    lines = source.split("\n")
    tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    hits = [t.start for k, t in enumerate(tokens)
            if t.type == tokenize.NAME and t.string == old and (k == 0 or tokens[k - 1].string != ".")]
    for row, col in reversed(hits):
        line = lines[row - 1]
        lines[row - 1] = line[:col] + new + line[col + len(old):]
    return "\n".join(lines)


def edit_of(function, kind):
    """(comment, changed function) for a function's source, or None when the edit does not apply."""
    tree = ast.parse(function).body[0]
    signature = function.split("\n")[0]
    if tree.body[0].lineno != 2 or not signature.endswith("):"):
        return None  # the signature is not one line
    if kind == "rename":
        params = [a.arg for a in tree.args.posonlyargs + tree.args.args + tree.args.kwonlyargs
                  if a.arg not in ("self", "cls")]
        uses = {p: sum(isinstance(n, ast.Name) and n.id == p for n in ast.walk(tree)) for p in params}
        used = [p for p in params if uses[p] >= 2]
        if not used:
            return None
        old = max(used, key=lambda p: uses[p])
        new = old + "_value"
        return f"# The same function, with {old} renamed to {new}:", renamed(function, old, new)
    if "*" in signature or "=" in signature.split("(", 1)[1]:
        return None  # a keyword argument goes after *args or defaults: keep the edit trivial to read
    head = signature[:-2]
    changed = head + ("" if head.endswith("(") else ", ") + ADDED_ARGUMENT + "):"
    return (f"# The same function, with a new keyword argument {ADDED_ARGUMENT}:",
            "\n".join([changed] + function.split("\n")[1:]))


def functions_of(text):
    """The dedented source of every function and method of a module, in order."""
    lines = text.split("\n")
    out = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out.append(textwrap.dedent("\n".join(lines[node.lineno - 1:node.end_lineno])))
    return sorted(out, key=text.find)


def code_edit_prompts(root):
    per_file = []
    for rel in corpus.list_files(root):
        if not corpus.is_heldout(rel) or rel.startswith("encodings/"):
            continue
        sized = [f for f in functions_of(corpus.read_text(root, rel)) if EDIT_MIN_CHARS <= len(f) <= EDIT_MAX_CHARS]
        if sized:
            per_file.append((rel, sized))
    out = []
    while len(out) < PROMPTS:  # one function per file per round, from the middle of each file outwards
        before = len(out)
        for rel, sized in per_file:
            if len(out) == PROMPTS:
                break
            kind = ("rename", "argument")[len(out) % 2]
            order = sorted(range(len(sized)), key=lambda k: abs(k - len(sized) // 2))
            taken = sum(p["source"].startswith(rel + ":") for p in out)
            for k in order[taken:]:
                edit = edit_of(sized[k], kind)
                if edit:
                    comment, changed = edit
                    signature = changed.split("\n")[0]
                    out.append({"source": f"{rel}:{sized[k].split('(')[0][4:]}", "edit": kind,
                                "prompt": f"{sized[k]}\n\n{comment}\n{signature}\n"})
                    break
        if len(out) == before:
            break
    return out


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
    for name, prompts in (("code", code_prompts(a.root)), ("code-edit", code_edit_prompts(a.root)),
                          ("prose", prose_prompts())):
        with open(os.path.join(a.out, name + ".jsonl"), "w", encoding="utf-8") as f:
            for p in prompts:
                f.write(json.dumps(p, ensure_ascii=False) + "\n")
        print(f"{name}: {len(prompts)} prompts ({', '.join(p['source'] for p in prompts)})")


if __name__ == "__main__":
    main()
