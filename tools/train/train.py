#!/usr/bin/python3
"""Train kakeya's default model (gemma3, ~6.6M params) and its draft (~1.4M), export GGUF.

    /usr/bin/python3 tools/train/train.py --out /tmp/kakeya-train   # full run (~80 min, 2 cores)
    /usr/bin/python3 tools/train/train.py --out /tmp/smoke --smoke # tiny end-to-end check

Stages (each skipped when its output already exists in --out, so a run resumes):
corpus -> tokenizer.model -> target.pt -> draft.pt (corpus, then distilled on the target's
logits) -> target.gguf, draft.gguf -> verify.json (tools/train/verify.py).
Seeds are fixed; batches depend only on (seed, step), so a resumed run sees the same data.
"""
import argparse
import functools
import json
import math
import os
import time

import torch
import torch.nn.functional as F

import corpus
import export_gguf
import tokenizer as tk
import verify
from model import Config, Gemma3


def target_config(n_vocab, smoke):
    if smoke:
        return Config(n_vocab=n_vocab, n_embd=128, n_layer=6, n_head=2, n_head_kv=1, n_ff=384, n_ctx=256)
    return Config(n_vocab=n_vocab, n_embd=256, n_layer=6, n_head=4, n_head_kv=1, n_ff=768, n_ctx=512)


def draft_config(n_vocab, smoke):
    # Two layers, the second one global (period 2), same window and rope as the target.
    return Config(n_vocab=n_vocab, n_embd=64 if smoke else 128, n_layer=2, n_head=2, n_head_kv=1,
                  n_ff=192 if smoke else 384, n_ctx=256 if smoke else 512, swa_period=2)


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="output folder (checkpoints, tokenizer, GGUF files)")
    ap.add_argument("--corpus", default=corpus.DEFAULT_ROOT)
    ap.add_argument("--smoke", action="store_true", help="tiny models, 1/8 of the corpus, few steps")
    ap.add_argument("--steps", type=int, help="target steps (default 2000; smoke 40)")
    ap.add_argument("--draft-steps", type=int, help="draft steps on the corpus (default 800; smoke 20)")
    ap.add_argument("--distill-steps", type=int, help="draft distillation steps (default 1200; smoke 20)")
    ap.add_argument("--batch", type=int, help="sequences per step (default 8; smoke 4)")
    ap.add_argument("--vocab", type=int, help="tokenizer vocabulary (default 8000; smoke 2000)")
    ap.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--f16", action="store_true", help="export matrices as F16 (default F32)")
    ap.add_argument("--kakeya", default=verify.DEFAULT_KAKEYA, help="kakeya binary for verification")
    a = ap.parse_args()
    defaults = dict(steps=(40, 2000), draft_steps=(20, 800), distill_steps=(20, 1200), batch=(4, 8), vocab=(2000, 8000))
    for name, (smoke, full) in defaults.items():
        if getattr(a, name) is None:
            setattr(a, name, smoke if a.smoke else full)
    return a


def pick_device(name):
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    return torch.device(name)


@functools.lru_cache(maxsize=None)
def cpu_has_bf16():
    with open("/proc/cpuinfo") as f:
        return "avx512_bf16" in f.read()


def autocast(device):
    """bf16 autocast where the hardware does bf16 matmuls natively; f32 elsewhere."""
    enabled = device.type == "cuda" or cpu_has_bf16()
    return torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=enabled)


def batch(stream, n_ctx, batch_size, seed, step, device):
    """batch_size random windows of n_ctx + 1 tokens; depends only on (seed, step)."""
    g = torch.Generator().manual_seed(seed * 1_000_003 + step)
    starts = torch.randint(0, len(stream) - n_ctx - 1, (batch_size,), generator=g)
    rows = torch.stack([stream[s:s + n_ctx + 1] for s in starts.tolist()]).to(device)
    return rows[:, :-1], rows[:, 1:]


def lr_at(step, total, peak):
    """Linear warm-up over 5% of the steps, cosine decay to 10% of the peak."""
    warm = max(1, total // 20)
    if step < warm:
        return peak * (step + 1) / warm
    progress = (step - warm) / max(1, total - warm)
    return peak * (0.1 + 0.45 * (1 + math.cos(math.pi * progress)))


def make_optimizer(model, lr):
    # No weight decay on norms (1-D): their weights are used as is and start at 1.
    decay = [p for p in model.parameters() if p.ndim > 1]
    keep = [p for p in model.parameters() if p.ndim == 1]
    return torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": keep, "weight_decay": 0.0}],
                             lr=lr, betas=(0.9, 0.95))


def train_loop(name, model, loss_fn, steps, peak_lr, ckpt_path, args, device, start=None):
    """Runs steps of loss_fn(step) with AdamW, printing progress and checkpointing."""
    opt = make_optimizer(model, peak_lr)
    first = 0
    if start is not None:
        model.load_state_dict(start["model"])
        opt.load_state_dict(start["optim"])
        first = start["step"]
    tokens_per_step = args.batch * model.cfg.n_ctx
    t0, losses = time.time(), []
    for step in range(first, steps):
        for group in opt.param_groups:
            group["lr"] = lr_at(step, steps, peak_lr)
        with autocast(device):
            loss = loss_fn(step)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
        done = step + 1 - first
        if done % 10 == 0 or step + 1 == steps:
            rate = done * tokens_per_step / (time.time() - t0)
            eta = (steps - step - 1) * tokens_per_step / rate
            print(f"[{name}] step {step + 1}/{steps} loss {sum(losses[-10:]) / len(losses[-10:]):.3f} "
                  f"{rate:,.0f} tok/s ETA {eta / 60:.1f} min", flush=True)
        if (step + 1) % 100 == 0 or step + 1 == steps:
            save(ckpt_path, model, opt, step + 1)
    return losses


def save(path, model, opt, step):
    tmp = path + ".tmp"
    torch.save({"config": model.cfg.to_dict(), "model": model.state_dict(), "optim": opt.state_dict(), "step": step}, tmp)
    os.replace(tmp, path)  # never leave a half-written checkpoint


def resume_state(path, steps):
    """(state to continue from or None, finished?)"""
    if not os.path.exists(path):
        return None, False
    state = torch.load(path, map_location="cpu")
    return state, state["step"] >= steps


def train_target(args, stream, n_vocab, device, path):
    state, finished = resume_state(path, args.steps)
    torch.manual_seed(args.seed)
    model = Gemma3(target_config(n_vocab, args.smoke)).to(device)
    if finished:
        model.load_state_dict(state["model"])
        return model, {}
    print(f"target: {model.n_params() / 1e6:.2f}M params, {model.cfg}", flush=True)

    def loss_fn(step):
        x, y = batch(stream, model.cfg.n_ctx, args.batch, args.seed, step, device)
        return F.cross_entropy(model(x).flatten(0, 1), y.flatten())

    losses = train_loop("target", model, loss_fn, args.steps, 3e-3, path, args, device, state)
    return model, {"first_loss": losses[0], "last_loss": sum(losses[-10:]) / len(losses[-10:])}


def train_draft(args, stream, target, device, path):
    """Corpus cross-entropy first, then KL(target || draft) on the same kind of windows."""
    total = args.draft_steps + args.distill_steps
    state, finished = resume_state(path, total)
    torch.manual_seed(args.seed + 1)
    model = Gemma3(draft_config(target.cfg.n_vocab, args.smoke)).to(device)
    if finished:
        model.load_state_dict(state["model"])
        return model, {}
    print(f"draft: {model.n_params() / 1e6:.2f}M params, {model.cfg}", flush=True)
    target.eval()

    def loss_fn(step):
        x, y = batch(stream, model.cfg.n_ctx, args.batch, args.seed + 7, step, device)
        logits = model(x).flatten(0, 1)
        if step < args.draft_steps:
            return F.cross_entropy(logits, y.flatten())
        with torch.no_grad():
            teacher = target(x).flatten(0, 1).log_softmax(-1)
        return F.kl_div(logits.log_softmax(-1), teacher, log_target=True, reduction="batchmean")

    losses = train_loop("draft", model, loss_fn, total, 3e-3, path, args, device, state)
    return model, {"last_distill_kl": sum(losses[-10:]) / len(losses[-10:])}


def main():
    args = parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.set_num_threads(args.threads)
    device = pick_device(args.device)
    t_start = time.time()

    split, stats = corpus.load(args.corpus)
    if args.smoke:  # every 8th training file keeps the smoke run short
        split["train"] = split["train"][::8]
        stats["smoke_train_files"] = len(split["train"])
    print(f"corpus: {stats}", flush=True)

    sp_path = os.path.join(args.out, "tokenizer.model")
    if not os.path.exists(sp_path):
        tk.train(split["train"], args.out, args.vocab)
    sp = tk.load(sp_path)
    stream = torch.tensor([t for doc in tk.encode_docs(sp, split["train"]) for t in doc], dtype=torch.long)
    heldout = tk.encode_docs(sp, split["heldout"])
    print(f"tokens: train {len(stream):,}, held-out {sum(map(len, heldout)):,}", flush=True)

    target, target_log = train_target(args, stream, sp.get_piece_size(), device, os.path.join(args.out, "target.pt"))
    draft, draft_log = train_draft(args, stream, target, device, os.path.join(args.out, "draft.pt"))

    paths, shipped = {}, {}
    for name, model in (("target", target), ("draft", draft)):
        model.cpu().eval()
        paths[name] = os.path.join(args.out, f"{name}.gguf")
        export_gguf.export(model, sp, paths[name], f"kakeya-pystdlib-{name}", f16=args.f16)
        # The files that ship in models/: Q8_0 matrices (F32 norms), ~1/4 of F32.
        suffix = "" if name == "target" else "-draft"
        shipped[name] = os.path.join(args.out, f"kakeya-pystdlib{suffix}.gguf")
        export_gguf.export(model, sp, shipped[name], f"kakeya-pystdlib{suffix}", matrix_type="q8_0")

    heldout_bytes = stats["heldout"]["bytes"]
    report = {
        "corpus": stats,
        "train_tokens": len(stream),
        "target": {"params": target.n_params(), "config": target.cfg.to_dict(), **target_log,
                   "heldout": verify.heldout_loss(target, heldout, heldout_bytes)},
        "draft": {"params": draft.n_params(), "config": draft.cfg.to_dict(), **draft_log,
                  "heldout": verify.heldout_loss(draft, heldout, heldout_bytes)},
        "train_minutes": (time.time() - t_start) / 60,
    }
    report["kakeya"] = verify.against_kakeya(args.kakeya, paths["target"], paths["draft"], target, sp,
                                             split["heldout"], f16=args.f16,
                                             shipped=(shipped["target"], shipped["draft"]),
                                             torch_heldout=report["target"]["heldout"])
    with open(os.path.join(args.out, "report.json"), "w") as f:
        json.dump(report, f, indent=2)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
