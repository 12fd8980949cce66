"""Checks of an exported model pair against PyTorch and the kakeya engine.

1. held-out cross-entropy in PyTorch (nats/token, bits/byte);
2. kakeya's tokenizer gives SentencePiece's ids on every held-out file;
3. kakeya's raw logits (top 20 per step) match PyTorch's on held-out prompts;
4. speculative decoding with the draft is token-identical to --spec none.

    python3 verify.py OUT_DIR   (the folder train.py wrote)
"""
import json
import math
import os
import subprocess
import sys
import tempfile

import torch

import export_gguf
from model import Gemma3
import tokenizer as tk

DEFAULT_KAKEYA = os.path.join(os.path.dirname(__file__), "..", "..", "build", "bin", "kakeya")
PROMPT_BYTES = 400   # held-out prompt length for the logit and speculation checks
N_PROMPTS = 3


@torch.no_grad()
def heldout_loss(model, docs, n_bytes):
    """Every token after BOS of every held-out document predicted once, in windows of n_ctx."""
    model.eval()
    n_ctx, nats, count = model.cfg.n_ctx, 0.0, 0
    for ids in docs:
        for s in range(0, len(ids) - 1, n_ctx):
            window = torch.tensor(ids[s:s + n_ctx + 1])[None]
            logits = model(window[:, :-1])
            nats += torch.nn.functional.cross_entropy(logits[0], window[0, 1:], reduction="sum").item()
            count += window.shape[1] - 1
    return {"tokens": count, "nats_per_token": nats / count, "bits_per_byte": nats / math.log(2) / n_bytes}


def kakeya_json(binary, *args):
    out = subprocess.run([binary, *args, "--json"], check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def tokenizer_parity(binary, gguf, sp, docs):
    """Files whose kakeya ids equal BOS + SentencePiece ids."""
    mismatched = []
    for path, text in docs:
        with tempfile.NamedTemporaryFile("w", suffix=".py", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            ids = kakeya_json(binary, "tokenize", "-m", gguf, "-f", f.name)["tokens"]
        if ids != [sp.bos_id()] + sp.encode(text):
            mismatched.append(path)
    return {"files": len(docs), "mismatched": mismatched}


def prompts(docs):
    """The first PROMPT_BYTES of a few held-out files, cut at a line end."""
    out = []
    for _, text in docs[:N_PROMPTS]:
        head = text[:PROMPT_BYTES]
        out.append(head[:head.rfind("\n") + 1] or head)
    return out


@torch.no_grad()
def logit_difference(binary, gguf, model, prompt, n_predict):
    """Max |kakeya - PyTorch| over the top-20 logits of every step, teacher-forced on kakeya's tokens."""
    r = kakeya_json(binary, "run", "-m", gguf, "-p", prompt, "-n", str(n_predict), "--temp", "0",
                    "--spec", "none", "--top", "20")
    seq = r["prompt_tokens"] + r["tokens"][:-1]
    logits = model(torch.tensor(seq)[None])[0, len(r["prompt_tokens"]) - 1:]
    worst, greedy_agree = 0.0, 0
    for step, top in enumerate(r["top"]):
        for entry in top:
            worst = max(worst, abs(logits[step, entry["id"]].item() - entry["logit"]))
        greedy_agree += int(logits[step].argmax().item() == r["tokens"][step])
    return worst, greedy_agree, len(r["top"])


def speculative_identity(binary, target, draft, prompt, n_predict):
    common = ["run", "-m", target, "-p", prompt, "-n", str(n_predict), "--temp", "0"]
    plain = kakeya_json(binary, *common, "--spec", "none")
    spec = kakeya_json(binary, *common, "--draft", draft)
    s = spec["spec"]
    return {"identical": plain["tokens"] == spec["tokens"], "steps": s["steps"], "drafted": s["drafted"],
            "accepted": s["accepted"], "mean_accept_len": s["mean_accept_len"]}


def round_to_export(model, f16):
    """A CPU float32 copy holding exactly the exported weights (F16 matrices if f16)."""
    copy = Gemma3(model.cfg)
    copy.load_state_dict(model.state_dict())
    if f16:
        for p in copy.parameters():
            if p.ndim > 1:
                p.data = p.data.half().float()
    return copy.eval()


def against_kakeya(binary, target_gguf, draft_gguf, target, sp, heldout_docs, f16=False, n_predict=32):
    reference = round_to_export(target, f16)
    logit_rows = [logit_difference(binary, target_gguf, reference, p, n_predict) for p in prompts(heldout_docs)]
    spec = [speculative_identity(binary, target_gguf, draft_gguf, p, 4 * n_predict) for p in prompts(heldout_docs)]
    drafted = sum(s["drafted"] for s in spec)
    return {
        "tokenizer": tokenizer_parity(binary, target_gguf, sp, heldout_docs),
        "max_abs_logit_diff": max(w for w, _, _ in logit_rows),
        "greedy_agreement": f"{sum(a for _, a, _ in logit_rows)}/{sum(n for _, _, n in logit_rows)}",
        "speculative": spec,
        "all_speculative_identical": all(s["identical"] for s in spec),
        "draft_acceptance": sum(s["accepted"] for s in spec) / max(1, drafted),
    }


def main():
    import corpus  # only needed when run on its own
    out = sys.argv[1]
    binary = sys.argv[2] if len(sys.argv) > 2 else DEFAULT_KAKEYA
    split, _ = corpus.load()
    sp = tk.load(os.path.join(out, "tokenizer.model"))
    target = export_gguf.load_checkpoint(os.path.join(out, "target.pt"))
    report = against_kakeya(binary, os.path.join(out, "target.gguf"), os.path.join(out, "draft.gguf"),
                            target, sp, split["heldout"])
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
