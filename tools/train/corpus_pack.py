#!/usr/bin/python3
"""Pack the tokenized corpus (corpus_tokens.py encode) into a compressed shard set that fits a
byte budget, for a training machine that receives only a copy of the working tree (64 MiB in
all on the GPU machines here), and unpack it there.

    corpus_pack.py pack /work/corpus/tokens .devcarry/corpus --budget-mib 40
    corpus_pack.py unpack .devcarry/corpus /tmp/tokens      # on the training machine
    corpus_pack.py measure /work/corpus --mb 32             # compression ratios (text, ids; xz, zstd)

What a pack holds: tokenizer.model; the validation and held-out ids (the first EVAL_TOKENS
of each, whole documents, .u16.xz + .idx); the held-out text of the documents recall.py and
verify.py read (heldout-text.jsonl.xz); then train.NNN.u16.xz, shards of SHARD_TOKENS ids in
the order corpus_tokens.py wrote them (packages in hash order, so any prefix is a sample of
whole packages), added while the budget allows; the last one is cut to what is left (its
size estimated from the ratio of the shards before it). pack.json records the counts.
xz (LZMA2, -9e) because Python's own lzma module unpacks it: the training machine needs no
zstd binary.
"""
import argparse
import json
import lzma
import os
import shutil
import subprocess
import sys
import time

import numpy as np

SHARD_TOKENS = 1 << 25          # 32 Mi ids = 64 MiB raw, the size of xz -9's dictionary
EVAL_TOKENS = 1 << 21           # validation and held-out ids carried (2 Mi each)
HELDOUT_TEXT_DOCS = 400
PRESET = 9 | lzma.PRESET_EXTREME


def xz(data):
    return lzma.compress(data, format=lzma.FORMAT_XZ, preset=PRESET)


def prefix_docs(ids, idx, limit):
    """ids and offsets of the first whole documents that fit in limit ids."""
    k = int(np.searchsorted(idx, limit, side="right")) - 1
    k = max(1, k)
    return ids[:idx[k]], idx[:k + 1]


def pack(tokens_dir, out, budget_mib, heldout_text=None):
    os.makedirs(out, exist_ok=True)
    budget = int(budget_mib * (1 << 20))
    shutil.copy(os.path.join(tokens_dir, "tokenizer.model"), os.path.join(out, "tokenizer.model"))
    info = {"budget_bytes": budget, "eval": {}, "train_shards": []}
    for split in ("validation", "heldout"):
        ids = np.memmap(os.path.join(tokens_dir, split + ".u16"), dtype=np.uint16, mode="r")
        idx = np.fromfile(os.path.join(tokens_dir, split + ".idx"), dtype=np.int64)
        ids, idx = prefix_docs(ids, idx, EVAL_TOKENS)
        with open(os.path.join(out, split + ".u16.xz"), "wb") as f:
            f.write(xz(np.ascontiguousarray(ids).tobytes()))
        idx.tofile(os.path.join(out, split + ".idx"))
        info["eval"][split] = {"tokens": int(len(ids)), "documents": int(len(idx) - 1)}
    if heldout_text:
        with open(heldout_text, encoding="utf-8") as f:
            lines = [next(f) for _ in range(HELDOUT_TEXT_DOCS)]
        with open(os.path.join(out, "heldout-text.jsonl.xz"), "wb") as f:
            f.write(xz("".join(lines).encode("utf-8")))
    used = sum(os.path.getsize(os.path.join(out, n)) for n in os.listdir(out))
    train = np.memmap(os.path.join(tokens_dir, "train.u16"), dtype=np.uint16, mode="r")
    pos, ratio, t0 = 0, None, time.time()
    while pos < len(train) and used < budget:
        n = min(SHARD_TOKENS, len(train) - pos)
        if ratio is not None and used + n * 2 / ratio > budget:
            n = int((budget - used) * ratio / 2 * 0.97)   # the last shard: what is left, with a margin
        blob = None
        for _ in range(4):  # the last shard's ratio may differ from the others': shrink and retry
            if n < (1 << 20):
                break
            blob = xz(np.ascontiguousarray(train[pos:pos + n]).tobytes())
            if used + len(blob) <= budget:
                break
            n, blob = int(n * (budget - used) / len(blob) * 0.97), None
        if blob is None:
            break
        name = f"train.{len(info['train_shards']):03d}.u16.xz"
        with open(os.path.join(out, name), "wb") as f:
            f.write(blob)
        used += len(blob)
        ratio = n * 2 / len(blob)
        pos += n
        info["train_shards"].append({"file": name, "tokens": int(n), "bytes": len(blob)})
        print(f"[pack] {name}: {n:,} ids -> {len(blob):,} bytes (x{ratio:.2f}), {used / 2**20:.1f} MiB used, "
              f"{time.time() - t0:.0f} s", flush=True)
    info.update(train_tokens=int(pos), train_tokens_available=int(len(train)), bytes=used)
    with open(os.path.join(out, "pack.json"), "w") as f:
        json.dump(info, f, indent=2)
    print(json.dumps(info, indent=2))


def unpack(src, dst):
    """A tokens folder as corpus_tokens.py writes it (train.idx: one document, the whole stream)."""
    os.makedirs(dst, exist_ok=True)
    info = json.load(open(os.path.join(src, "pack.json")))
    shutil.copy(os.path.join(src, "tokenizer.model"), os.path.join(dst, "tokenizer.model"))
    for split in ("validation", "heldout"):
        with open(os.path.join(src, split + ".u16.xz"), "rb") as f, open(os.path.join(dst, split + ".u16"), "wb") as g:
            g.write(lzma.decompress(f.read()))
        shutil.copy(os.path.join(src, split + ".idx"), os.path.join(dst, split + ".idx"))
    with open(os.path.join(dst, "train.u16"), "wb") as g:
        for shard in info["train_shards"]:
            with open(os.path.join(src, shard["file"]), "rb") as f:
                g.write(lzma.decompress(f.read()))
    np.asarray([0, info["train_tokens"]], dtype=np.int64).tofile(os.path.join(dst, "train.idx"))
    if os.path.exists(os.path.join(src, "heldout-text.jsonl.xz")):
        with open(os.path.join(src, "heldout-text.jsonl.xz"), "rb") as f, \
                open(os.path.join(dst, "heldout-text.jsonl"), "wb") as g:
            g.write(lzma.decompress(f.read()))
    print(f"[unpack] {info['train_tokens']:,} training ids in {dst}")


def measure(root, mb):
    """Compressed sizes of the first `mb` MB of the training text (documents joined by NUL) and of
    the same documents' ids (uint16), by xz -9e and zstd --ultra -22 --long=31, single-threaded."""
    text_path = os.path.join(root, "text", "train.jsonl")
    ids_path = os.path.join(root, "tokens", "train.u16")
    idx = np.fromfile(os.path.join(root, "tokens", "train.idx"), dtype=np.int64)
    docs, n = [], 0
    with open(text_path, encoding="utf-8") as f:
        for line in f:
            docs.append(json.loads(line)["text"].encode("utf-8"))
            n += len(docs[-1])
            if n >= mb * 1e6:
                break
    text = b"\0".join(docs)
    ids = np.memmap(ids_path, dtype=np.uint16, mode="r")[:idx[len(docs)]].tobytes()
    rows = {}
    for name, blob in (("text", text), ("ids_u16", ids)):
        for tool, cmd in (("xz -9e", ["xz", "-9e", "-T1", "-c"]),
                          ("zstd -22 --long=31", ["zstd", "--ultra", "-22", "--long=31", "-T1", "-c"])):
            t0 = time.time()
            out = subprocess.run(cmd, input=blob, capture_output=True, check=True).stdout
            rows[f"{name} {tool}"] = {"raw": len(blob), "compressed": len(out), "ratio": round(len(blob) / len(out), 3),
                                      "seconds": round(time.time() - t0, 1)}
            print(name, tool, rows[f"{name} {tool}"], flush=True)
    rows["text_bytes_per_token"] = len(text) / (len(ids) / 2)
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("pack")
    p.add_argument("tokens_dir")
    p.add_argument("out")
    p.add_argument("--budget-mib", type=float, default=40)
    p.add_argument("--heldout-text", help="debian_corpus.py's text/heldout.jsonl (recall.py's filler)")
    u = sub.add_parser("unpack")
    u.add_argument("src")
    u.add_argument("dst")
    m = sub.add_parser("measure")
    m.add_argument("root")
    m.add_argument("--mb", type=float, default=32)
    m.add_argument("--json")
    a = ap.parse_args()
    if a.cmd == "pack":
        pack(a.tokens_dir, a.out, a.budget_mib, a.heldout_text)
    elif a.cmd == "unpack":
        unpack(a.src, a.dst)
    else:
        rows = measure(a.root, a.mb)
        if a.json:
            with open(a.json, "w") as f:
                json.dump(rows, f, indent=2)


if __name__ == "__main__":
    sys.exit(main())
