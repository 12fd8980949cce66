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
def heldout_loss(model, docs, n_bytes, device="cpu"):
    """Every token after BOS of every held-out document predicted once, in windows of n_ctx."""
    model.eval()
    n_ctx, nats, count = model.cfg.n_ctx, 0.0, 0
    for ids in docs:
        for s in range(0, len(ids) - 1, n_ctx):
            window = torch.tensor(ids[s:s + n_ctx + 1], device=device)[None]
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


def speculative_identity(binary, target, draft, prompt, n_predict, block=None):
    """--spec draft against --spec none (greedy): same ids?, and the draft's acceptance.
    block=None: the adaptive default."""
    common = ["run", "-m", target, "-p", prompt, "-n", str(n_predict), "--temp", "0"]
    plain = kakeya_json(binary, *common, "--spec", "none")
    spec = kakeya_json(binary, *common, "--spec", "draft", "--draft", draft,
                       *([] if block is None else ["--block", str(block)]))
    s = spec["spec"]
    return {"identical": plain["tokens"] == spec["tokens"], "steps": s["steps"], "drafted": s["drafted"],
            "accepted": s["accepted"], "mean_accept_len": s["mean_accept_len"],
            "plain_tok_s": plain["timings"]["decode_tok_s"], "spec_tok_s": spec["timings"]["decode_tok_s"]}


def acceptance_at_blocks(binary, target, draft, prompt_list, n_predict, blocks=(4, 8, None)):
    """Mean accepted length per block size over the prompts (tokens committed per verify step)."""
    out = {}
    for block in blocks:
        runs = [speculative_identity(binary, target, draft, p, n_predict, block) for p in prompt_list]
        steps = sum(r["steps"] for r in runs)
        committed = sum(r["mean_accept_len"] * r["steps"] for r in runs)
        out["adaptive" if block is None else str(block)] = {
            "identical": all(r["identical"] for r in runs),
            "mean_accept_len": committed / max(1, steps),
            "draft_acceptance": sum(r["accepted"] for r in runs) / max(1, sum(r["drafted"] for r in runs)),
            "plain_tok_s": [r["plain_tok_s"] for r in runs], "spec_tok_s": [r["spec_tok_s"] for r in runs]}
    return out


def signature_prompts(docs, n=5):
    """One top-level `def name(...):` line from each of the first n held-out files that have one
    (distinct lines: several encodings/*.py files define the same getregentry())."""
    out = []
    for _, text in docs:
        for line in text.splitlines():
            if line.startswith("def ") and line.rstrip().endswith(":") and line.rstrip() + "\n" not in out:
                out.append(line.rstrip() + "\n")
                break
        if len(out) == n:
            break
    return out


def degenerate(text):
    """Runaway repetition: a non-trivial line repeated 4+ times in a row, a character repeated
    24+ times in a row (other than the runs of ' ', '=', '-', '#', '*' that code uses for layout),
    or few distinct word 4-grams."""
    import re
    if re.search(r"([^ =#*\-])\1{23,}", text):
        return True
    lines = [l.strip() for l in text.splitlines() if len(l.strip()) > 3]
    run = longest = 1
    for a, b in zip(lines, lines[1:]):
        run = run + 1 if a == b else 1
        longest = max(longest, run)
    words = text.split()
    grams = [tuple(words[i:i + 4]) for i in range(len(words) - 3)]
    distinct = len(set(grams)) / max(1, len(grams))
    return longest >= 4 or (len(grams) >= 20 and distinct < 0.3)


def greedy_samples(binary, gguf, prompt_list, n_predict=96):
    samples = []
    for p in prompt_list:
        r = kakeya_json(binary, "run", "-m", gguf, "-p", p, "-n", str(n_predict), "--temp", "0", "--spec", "none")
        samples.append({"prompt": p, "text": r["text"], "degenerate": degenerate(p + r["text"])})
    return samples


def kakeya_cross_entropy(binary, gguf, docs, window):
    """`kakeya perplexity` on the held-out files (written out as UTF-8, as the corpus read them)."""
    with tempfile.TemporaryDirectory() as d:
        files = []
        for i, (_, text) in enumerate(docs):
            files.append(os.path.join(d, f"{i:03d}.py"))
            with open(files[-1], "w", encoding="utf-8", newline="") as f:
                f.write(text)
        return kakeya_json(binary, "perplexity", "-m", gguf, "-w", str(window), "-f", *files)


def round_to_export(model, f16):
    """A CPU float32 copy holding exactly the exported weights (F16 matrices if f16)."""
    copy = Gemma3(model.cfg)
    copy.load_state_dict(model.state_dict())
    if f16:
        for p in copy.parameters():
            if p.ndim > 1:
                p.data = p.data.half().float()
    return copy.eval()


def against_kakeya(binary, target_gguf, draft_gguf, target, sp, heldout_docs, f16=False, n_predict=32,
                   shipped=None, torch_heldout=None):
    """shipped: (target, draft) GGUF paths of the files that ship (Q8_0); torch_heldout: PyTorch's
    heldout_loss() of the target, compared with kakeya's own measurement of the exported file."""
    reference = round_to_export(target, f16)
    logit_rows = [logit_difference(binary, target_gguf, reference, p, n_predict) for p in prompts(heldout_docs)]
    spec = [speculative_identity(binary, target_gguf, draft_gguf, p, 4 * n_predict) for p in prompts(heldout_docs)]
    drafted = sum(s["drafted"] for s in spec)
    report = {
        "tokenizer": tokenizer_parity(binary, target_gguf, sp, heldout_docs),
        "max_abs_logit_diff": max(w for w, _, _ in logit_rows),
        "greedy_agreement": f"{sum(a for _, a, _ in logit_rows)}/{sum(n for _, _, n in logit_rows)}",
        "speculative": spec,
        "all_speculative_identical": all(s["identical"] for s in spec),
        "draft_acceptance": sum(s["accepted"] for s in spec) / max(1, drafted),
    }
    window = target.cfg.n_ctx
    ce = kakeya_cross_entropy(binary, target_gguf, heldout_docs, window)
    report["heldout_kakeya"] = ce
    if torch_heldout is not None:
        report["heldout_kakeya_vs_torch_rel"] = abs(ce["nats_per_token"] / torch_heldout["nats_per_token"] - 1)
    if shipped is not None:
        ship_target, ship_draft = shipped
        report["shipped"] = {
            "heldout_kakeya": kakeya_cross_entropy(binary, ship_target, heldout_docs, window),
            "samples": greedy_samples(binary, ship_target, signature_prompts(heldout_docs)),
            "acceptance": acceptance_at_blocks(binary, ship_target, ship_draft,
                                               signature_prompts(heldout_docs) + prompts(heldout_docs),
                                               4 * n_predict),
        }
    return report


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
