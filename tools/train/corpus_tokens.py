#!/usr/bin/python3
"""Tokenizer and token ids of the second-generation corpus (debian_corpus.py's DIR/text).

    # a SentencePiece BPE tokenizer (tokenizer.py's options) on a fixed sample of the training
    # and validation text; the held-out packages are never read
    corpus_tokens.py train-tokenizer DIR --vocab 16000 --sample-mb 40 --out DIR/tok/bpe16k
    # bytes per token of several tokenizers on the held-out text (and the validation text)
    corpus_tokens.py measure DIR DIR/tok/stdlib8k/tokenizer.model DIR/tok/bpe16k/tokenizer.model ...
    # every split as token ids: DIR/tokens/{train,validation,heldout}.u16 (uint16, each document
    # BOS + ids + EOS, concatenated) + .idx (int64 document start offsets, then the total)
    corpus_tokens.py encode DIR --tokenizer DIR/tok/bpe16k/tokenizer.model [--limit-mb N]

The sample: every k-th document of train.jsonl + validation.jsonl (k fixed so that the sample
is about --sample-mb), cut into newline-ending chunks as tokenizer.py does. Deterministic.
"""
import argparse
import json
import os
import shutil
import sys
import time

import numpy as np
import sentencepiece as spm

import tokenizer as tk

SPLITS = ("train", "validation", "heldout")


def read_docs(root, split, limit_bytes=None, every=1):
    """(path, text) of one split's documents, in file order; every k-th; stops after limit_bytes."""
    n = 0
    with open(os.path.join(root, "text", split + ".jsonl"), encoding="utf-8") as f:
        for i, line in enumerate(f):
            if i % every:
                continue
            d = json.loads(line)
            yield d["pkg"] + "/" + d["path"], d["text"]
            n += len(d["text"].encode("utf-8"))
            if limit_bytes is not None and n >= limit_bytes:
                return


def split_bytes(root, split):
    return os.path.getsize(os.path.join(root, "text", split + ".jsonl"))


def train_tokenizer(root, vocab, sample_mb, out):
    total = split_bytes(root, "train") + split_bytes(root, "validation")
    every = max(1, int(total / (sample_mb * 1e6)))
    docs = [d for s in ("train", "validation") for d in read_docs(root, s, every=every)]
    n = sum(len(t.encode("utf-8")) for _, t in docs)
    print(f"[tokenizer] {len(docs)} documents, {n / 1e6:.1f} MB (every {every}th), vocab {vocab}", flush=True)
    os.makedirs(out, exist_ok=True)
    t0 = time.time()
    path = tk.train(docs, out, vocab, threads=1)
    print(f"[tokenizer] {path}: {time.time() - t0:.0f} s", flush=True)
    return path


def measure(root, models, splits=("heldout", "validation"), limit_mb=20):
    rows = []
    for split in splits:
        docs = list(read_docs(root, split, limit_bytes=limit_mb * 1e6))
        n_bytes = sum(len(t.encode("utf-8")) for _, t in docs)
        for m in models:
            sp = tk.load(m)
            n_tok = sum(len(ids) for ids in sp.encode([t for _, t in docs]))
            rows.append({"split": split, "tokenizer": m, "vocab": sp.get_piece_size(), "files": len(docs),
                         "bytes": n_bytes, "tokens": n_tok, "bytes_per_token": round(n_bytes / n_tok, 4)})
            print(json.dumps(rows[-1]), flush=True)
    return rows


def encode(root, model, limit_mb=None, out_dir=None, batch=2000):
    """Token ids of every split into out_dir (default DIR/tokens); with limit_mb, only the first
    limit_mb MB of text of each split (the smoke run's slice). The held-out text of the first
    documents is copied beside them (heldout-text.jsonl: recall.py's filler)."""
    sp = tk.load(model)
    if sp.get_piece_size() > 65535:
        raise SystemExit("uint16 ids need a vocabulary of at most 65,535 pieces")
    out_dir = out_dir or os.path.join(root, "tokens")
    os.makedirs(out_dir, exist_ok=True)
    shutil.copy(model, os.path.join(out_dir, "tokenizer.model"))
    stats = {}
    for split in SPLITS:
        t0, n_bytes, offsets, pos = time.time(), 0, [], 0
        limit = None if limit_mb is None else limit_mb * 1e6
        with open(os.path.join(out_dir, split + ".u16.tmp"), "wb") as f:
            docs = []
            for doc in list(read_docs(root, split, limit_bytes=limit)) + [None]:
                if doc is not None:
                    docs.append(doc[1])
                    n_bytes += len(doc[1].encode("utf-8"))
                if docs and (doc is None or len(docs) == batch):
                    for ids in tk.encode_docs(sp, [(None, t) for t in docs]):
                        offsets.append(pos)
                        pos += len(ids)
                        f.write(np.asarray(ids, dtype=np.uint16).tobytes())
                    docs = []
        os.replace(os.path.join(out_dir, split + ".u16.tmp"), os.path.join(out_dir, split + ".u16"))
        np.asarray(offsets + [pos], dtype=np.int64).tofile(os.path.join(out_dir, split + ".idx"))
        stats[split] = {"documents": len(offsets), "bytes": n_bytes, "tokens": pos,
                        "bytes_per_token": round(n_bytes / max(1, pos), 4), "seconds": round(time.time() - t0)}
        print(f"[encode] {split}: {stats[split]}", flush=True)
    with open(os.path.join(root, "text", "heldout.jsonl"), encoding="utf-8") as f, \
            open(os.path.join(out_dir, "heldout-text.jsonl"), "w", encoding="utf-8") as g:
        for _, line in zip(range(400), f):
            g.write(line)
    with open(os.path.join(out_dir, "stats.json"), "w") as f:
        json.dump(stats, f, indent=2)
    return stats


def load_split(tokens_dir, split):
    """(ids uint16 memmap, document offsets int64 [n + 1])"""
    ids = np.memmap(os.path.join(tokens_dir, split + ".u16"), dtype=np.uint16, mode="r")
    idx = np.fromfile(os.path.join(tokens_dir, split + ".idx"), dtype=np.int64)
    return ids, idx


def eval_docs(tokens_dir, split, limit_tokens, sp):
    """The first whole documents of a split, up to limit_tokens (at least one): (id lists, [(name, text)])."""
    ids, idx = load_split(tokens_dir, split)
    out_ids, out_docs = [], []
    for k in range(len(idx) - 1):
        doc = ids[idx[k]:idx[k + 1]].astype(np.int64).tolist()
        if out_ids and sum(map(len, out_ids)) + len(doc) > limit_tokens:
            break
        out_ids.append(doc)
        out_docs.append((f"{split}/{k:06d}.py", sp.decode(doc[1:-1])))
    return out_ids, out_docs


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("train-tokenizer")
    t.add_argument("dir")
    t.add_argument("--vocab", type=int, default=16000)
    t.add_argument("--sample-mb", type=float, default=40)
    t.add_argument("--out", required=True)
    m = sub.add_parser("measure")
    m.add_argument("dir")
    m.add_argument("models", nargs="+")
    m.add_argument("--limit-mb", type=float, default=20)
    m.add_argument("--json")
    e = sub.add_parser("encode")
    e.add_argument("dir")
    e.add_argument("--tokenizer", required=True)
    e.add_argument("--limit-mb", type=float)
    e.add_argument("--out", help="output folder (default DIR/tokens)")
    a = ap.parse_args()
    if a.cmd == "train-tokenizer":
        train_tokenizer(a.dir, a.vocab, a.sample_mb, a.out)
    elif a.cmd == "measure":
        rows = measure(a.dir, a.models, limit_mb=a.limit_mb)
        if a.json:
            with open(a.json, "w") as f:
                json.dump(rows, f, indent=2)
    else:
        encode(a.dir, a.tokenizer, a.limit_mb, a.out)


if __name__ == "__main__":
    sys.exit(main())
