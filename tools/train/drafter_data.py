"""Drafter training data: the target's own greedy continuations of corpus windows, generated
by kakeya (`run --spec none --temp 0 --json`), which is exact and fast on a CPU.

A prompt is a window of whole lines of one corpus file (random file, weighted by size;
random first line; random length in bytes, ~64-256 tokens at ~4 bytes/token). Sequence =
prompt_tokens (BOS included) + the generated tokens, cut at the target's context (512).
Train prompts come from the training files of corpus.py's split (held-out and validation
files excluded), evaluation prompts from the held-out files.

Generation appends one JSON line per finished prompt to a .jsonl file, so an interrupted
run resumes; pack() then writes one .npz:
  {split}_tokens uint16 (all sequences concatenated), {split}_offsets int64 [n+1],
  {split}_n_prompt int32 [n] (prompt tokens, BOS included), for split in train, heldout.
"""
import json
import os
import random
import subprocess
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

import corpus

BYTES_PER_TOKEN = 4.07  # models/README.md: the 8k tokenizer on the training files
BOS = 1


def split_docs(root=corpus.DEFAULT_ROOT):
    """(train docs, held-out docs): train = not held-out and not validation."""
    split, _ = corpus.load(root)
    train = [d for d in split["train"] if not corpus.is_validation(d[0])]
    return train, split["heldout"]


def make_prompts(docs, n, seed, min_tokens=64, max_tokens=256):
    """n prompt texts: whole lines of a random file (weighted by size), ending with a newline,
    about min_tokens..max_tokens long. Deterministic in (docs, n, seed)."""
    rng = random.Random(seed)
    docs = [(p, t.splitlines(keepends=True)) for p, t in docs if len(t) > 400]
    weights = [sum(len(l) for l in lines) for _, lines in docs]
    out = []
    while len(out) < n:
        path, lines = rng.choices(docs, weights)[0]
        target = rng.uniform(min_tokens, max_tokens) * BYTES_PER_TOKEN
        start = rng.randrange(len(lines))
        text = ""
        for line in lines[start:]:
            if len(text) + len(line) > target * 1.15 and len(text) >= min_tokens * BYTES_PER_TOKEN:
                break
            text += line
        if len(text) < min_tokens * BYTES_PER_TOKEN or not text.strip():
            continue  # too close to the end of the file
        if not text.endswith("\n"):
            text += "\n"
        out.append({"path": path, "text": text})
    return out


def run_kakeya(binary, model, prompt_text, n_predict, n_ctx):
    """kakeya's greedy continuation; a prompt with more tokens than n_ctx / 2 (byte-dense text
    such as escaped tables) is cut to its first lines until it fits. None if nothing fits."""
    for _ in range(6):
        with tempfile.NamedTemporaryFile("w", suffix=".py", encoding="utf-8", delete=False) as f:
            f.write(prompt_text)
            name = f.name
        try:
            p = subprocess.run([binary, "run", "-m", model, "--spec", "none", "--temp", "0", "--json",
                                "-n", str(n_predict), "-t", "1", "-c", str(n_ctx), "-f", name],
                               capture_output=True, text=True)
        finally:
            os.unlink(name)
        if p.returncode == 0:
            r = json.loads(p.stdout)
            if len(r["prompt_tokens"]) <= n_ctx // 2:
                break
        elif "context holds" not in p.stderr:
            raise RuntimeError(f"kakeya failed: {p.stderr.strip()}")
        lines = prompt_text.splitlines(keepends=True)
        if len(lines) < 2:
            return None
        prompt_text = "".join(lines[:len(lines) // 2])
    else:
        return None
    out = p.stdout
    r = json.loads(out)
    seq = (r["prompt_tokens"] + r["tokens"])[:n_ctx]
    return {"n_prompt": len(r["prompt_tokens"]), "tokens": seq, "stop": r["stop"],
            "decode_tok_s": r["timings"]["decode_tok_s"]}


def generate(binary, model, prompts, jsonl_path, n_predict, n_ctx=512, workers=2, label=""):
    """Runs kakeya on every prompt not yet in jsonl_path (2 processes by default); returns
    the records in prompt order and the measured rate."""
    done = {}
    if os.path.exists(jsonl_path):
        with open(jsonl_path) as f:
            for line in f:
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError:
                    continue  # a line cut by an interruption
                done[rec["i"]] = rec
    todo = [i for i in range(len(prompts)) if i not in done]
    lock = threading.Lock()
    t0, new_tokens, finished = time.time(), 0, 0

    def one(i):
        nonlocal new_tokens, finished
        rec = run_kakeya(binary, model, prompts[i]["text"], n_predict, n_ctx) or {"skip": True}
        rec["i"] = i
        with lock:
            with open(jsonl_path, "a") as f:
                f.write(json.dumps(rec) + "\n")
            done[i] = rec
            new_tokens += len(rec["tokens"]) - rec["n_prompt"] if "tokens" in rec else 0
            finished += 1
            if finished % 50 == 0 or finished == len(todo):
                dt = time.time() - t0
                print(f"[data{label}] {finished}/{len(todo)} sequences, {dt:.0f} s, "
                      f"{finished / dt:.2f} seq/s, {new_tokens / dt:.0f} generated tok/s", flush=True)

    if todo:
        with ThreadPoolExecutor(workers) as ex:
            list(ex.map(one, todo))
    dt = time.time() - t0
    rate = {"sequences": len(todo), "seconds": round(dt, 1),
            "seq_per_s": round(len(todo) / dt, 3) if todo else None,
            "generated_tok_per_s": round(new_tokens / dt, 1) if todo else None, "workers": workers}
    return [done[i] for i in range(len(prompts)) if "tokens" in done[i]], rate


def package_files(root, exclude, min_bytes=2000, max_bytes=300_000):
    """Python files of the packages in root (a site-packages folder), except the packages
    named in exclude (lower case, '-' as '_'): the files of code the target never saw."""
    out = []
    for name in sorted(os.listdir(root)):
        key = name.split("-")[0].split(".")[0].lower().replace("-", "_")
        if key.startswith("_") or key in exclude or name.endswith((".dist-info", ".egg-info")):
            continue
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, name)):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
            for f in sorted(filenames):
                path = os.path.join(dirpath, f)
                if f.endswith(".py") and min_bytes <= os.path.getsize(path) <= max_bytes:
                    out.append(path)
    return out


def tokenize_file(binary, model, path):
    """kakeya's token ids of a file (no BOS) and, per token, whether it ends a line."""
    p = subprocess.run([binary, "tokenize", "-m", model, "-f", path, "--json", "--no-special"],
                       capture_output=True, text=True)
    if p.returncode != 0:
        return None  # not UTF-8, say: such files are skipped
    r = json.loads(p.stdout)
    return np.array(r["tokens"], dtype=np.int64), np.array([x.endswith("\n") for x in r["pieces"]])


def package_prompts(binary, model, root, exclude, n_files, seed, lengths, per_file=8, workers=None):
    """Prompt pools {length c: [BOS + the c-1 tokens before a line end]} from n_files random
    files of the packages in root (package_files). Tokenizing whole files and cutting windows at
    line ends in token space is one kakeya call per file instead of per prompt; a window's first
    token may differ from what tokenizing its text alone gives, which is harmless in training data."""
    files = package_files(root, exclude)
    rng = random.Random(seed)
    picked = rng.sample(files, min(n_files, len(files)))
    t0 = time.time()
    with ThreadPoolExecutor(workers or os.cpu_count()) as ex:
        tokenized = [t for t in ex.map(lambda f: tokenize_file(binary, model, f), picked) if t is not None]
    pools = {c: [] for c in lengths}
    for toks, line_end in tokenized:
        ends = np.nonzero(line_end)[0] + 1  # a window ends after a line's last token
        for c in lengths:
            ok = ends[ends >= c - 1]
            for e in rng.sample(list(ok), min(per_file, len(ok))):
                pools[c].append(np.concatenate([[BOS], toks[e - c + 1:e]]))
    print(f"[prompts] {len(files)} files in {root} outside the excluded packages; {len(tokenized)} tokenized in "
          f"{time.time() - t0:.0f} s; windows per length: {[len(v) for v in pools.values()]}", flush=True)
    return pools


def pack(path, splits):
    """splits: {name: [records]} -> one .npz (see the module docstring)."""
    arrays = {}
    for name, recs in splits.items():
        lens = [len(r["tokens"]) for r in recs]
        arrays[f"{name}_tokens"] = np.array([t for r in recs for t in r["tokens"]], dtype=np.uint16)
        arrays[f"{name}_offsets"] = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
        arrays[f"{name}_n_prompt"] = np.array([r["n_prompt"] for r in recs], dtype=np.int32)
    tmp = path + ".tmp.npz"
    np.savez(tmp, **arrays)
    os.replace(tmp, path)


def load(path):
    """{split: [(tokens int64 array, n_prompt)]}"""
    z = np.load(path)
    out = {}
    for name in ("train", "heldout"):
        if f"{name}_tokens" not in z:
            continue
        toks, offs, npr = z[f"{name}_tokens"].astype(np.int64), z[f"{name}_offsets"], z[f"{name}_n_prompt"]
        out[name] = [(toks[offs[i]:offs[i + 1]], int(npr[i])) for i in range(len(npr))]
    return out


def build(npz_path, binary, model, n_train, n_heldout, n_predict=256, n_ctx=512, seed=20240, workers=2,
          root=corpus.DEFAULT_ROOT):
    """Generates (resumably, next to npz_path) and packs the train and held-out sequences.
    Returns the generation rates measured."""
    work = os.path.splitext(npz_path)[0]
    train_docs, heldout_docs = split_docs(root)
    rates = {}
    splits = {}
    # Held-out first: it is small, and an interrupted run then already has its evaluation set.
    for name, docs, n, s in (("heldout", heldout_docs, n_heldout, seed + 1), ("train", train_docs, n_train, seed)):
        prompts = make_prompts(docs, n, s)
        splits[name], rates[name] = generate(binary, model, prompts, f"{work}-{name}.jsonl", n_predict, n_ctx,
                                             workers, label=f" {name}")
    pack(npz_path, splits)
    with open(f"{work}-rates.json", "w") as f:
        json.dump(rates, f, indent=1)
    return rates


if __name__ == "__main__":
    import argparse
    ap = argparse.ArgumentParser(description="generate drafter training data with kakeya")
    ap.add_argument("out", help="the .npz to write (the .jsonl files go next to it)")
    ap.add_argument("--train", type=int, required=True)
    ap.add_argument("--heldout", type=int, default=48)
    ap.add_argument("-n", type=int, default=256, help="tokens generated per prompt")
    ap.add_argument("--kakeya", default=os.path.join(os.path.dirname(__file__), "..", "..", "build", "bin", "kakeya"))
    ap.add_argument("--model", default=os.path.join(os.path.dirname(__file__), "..", "..", "models",
                                                    "kakeya-pystdlib.gguf"))
    ap.add_argument("--workers", type=int, default=2)
    a = ap.parse_args()
    print(build(a.out, a.kakeya, a.model, a.train, a.heldout, a.n, workers=a.workers))
