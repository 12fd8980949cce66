#!/usr/bin/python3
"""Train kakeya's default model (gemma3) and its draft model, export GGUF, check them.

    /usr/bin/python3 tools/train/train.py --out /tmp/kakeya-train   # full run
    /usr/bin/python3 tools/train/train.py --out /tmp/smoke --smoke # tiny end-to-end check

Presets (--preset; the default follows --device): "gpu", the shipped pair (20.2M-parameter
target, 2.4M draft; ~10 min of H100 time), and "cpu", a 6.6M / 1.4M pair that fits in
~75 min on 2 CPU cores. Stages (each skipped when its output already exists in --out, so
a run resumes): corpus -> tokenizer.model -> target.pt (kept at its best validation loss)
-> draft.pt (corpus, then distilled on the target's logits) -> target.gguf, draft.gguf ->
report.json (tools/train/verify.py). --train-only stops after the checkpoints, so a GPU
machine can train and a CPU machine with kakeya built export and verify.
Seeds are fixed; batches depend only on (seed, step), so a resumed run sees the same data.
"""
import argparse
import functools
import json
import math
import os
import shutil
import time

import numpy as np
import torch
import torch.nn.functional as F

import corpus
import corpus_tokens
import export_gguf
import tokenizer as tk
import verify
from model import Config, Gemma3


# Model sizes and schedules. "cpu" fits the 90-minute budget of a 2-core machine; "gpu"
# (picked when CUDA is present) is the shipped pair: a 3x larger target, 64-sequence
# batches and residual dropout, because the 2.6M-token corpus is repeated ~30 times.
PRESETS = {
    "smoke": dict(target=dict(n_embd=128, n_layer=6, n_head=2, n_head_kv=1, n_ff=384, n_ctx=256),
                  draft=dict(n_embd=64, n_layer=2, n_head=2, n_head_kv=1, n_ff=192, n_ctx=256),
                  steps=40, draft_steps=20, distill_steps=20, batch=4, vocab=2000, lr=3e-3, eval_every=20),
    "cpu": dict(target=dict(n_embd=256, n_layer=6, n_head=4, n_head_kv=1, n_ff=768, n_ctx=512),
                draft=dict(n_embd=128, n_layer=2, n_head=2, n_head_kv=1, n_ff=384, n_ctx=512),
                steps=1800, draft_steps=800, distill_steps=1200, batch=8, vocab=8000, lr=3e-3, eval_every=300),
    "gpu": dict(target=dict(n_embd=384, n_layer=12, n_head=6, n_head_kv=2, n_ff=896, n_ctx=512, dropout=0.25),
                draft=dict(n_embd=192, n_layer=2, n_head=3, n_head_kv=1, n_ff=576, n_ctx=512),
                steps=800, draft_steps=600, distill_steps=2000, batch=64, vocab=8000, lr=2e-3,
                eval_every=100),
    # Second generation (issue 42; README "Second generation"): trained on the pre-tokenized
    # Debian corpus (--tokens, from corpus_tokens.py) at 4,096 tokens of context. 72 M
    # parameters read per token (Q8_0: 72.5 MiB > the 32 MiB L3); the step counts are upper
    # bounds, the budgets (seconds) fix them after the first timed steps.
    "gen2": dict(target=dict(n_embd=640, n_layer=12, n_head=10, n_head_kv=2, n_ff=2048, n_ctx=4096,
                             sliding_window=512),
                 draft=dict(n_embd=320, n_layer=2, n_head=5, n_head_kv=1, n_ff=960, n_ctx=4096, sliding_window=512),
                 steps=8000, draft_steps=3000, distill_steps=3000, batch=16, vocab=16000, lr=1e-3,
                 eval_every=1000, ckpt_every=1000, budget_s=330, draft_budget_s=50, distill_budget_s=50, tokens=True,
                 eval_tokens=1 << 18, name="kakeya-pycode"),
    # The same code path on 2 CPU cores in minutes: the gen2 layout (12 layers, 5:1 sliding and
    # global, GQA) scaled down, 1,024 tokens of context.
    "gen2-smoke": dict(target=dict(n_embd=128, n_layer=12, n_head=4, n_head_kv=2, n_ff=384, head_dim=32,
                                   n_ctx=1024, sliding_window=128),
                       draft=dict(n_embd=64, n_layer=2, n_head=2, n_head_kv=1, n_ff=192, head_dim=32, n_ctx=1024,
                                  sliding_window=128),
                       steps=60, draft_steps=20, distill_steps=20, batch=2, vocab=16000, lr=3e-3, eval_every=30,
                       tokens=True, eval_tokens=16384, name="kakeya-pycode-smoke"),
}


def target_config(n_vocab, preset):
    return Config(n_vocab=n_vocab, **PRESETS[preset]["target"])


def draft_config(n_vocab, preset):
    # Two layers, the second one global (period 2), same window and rope as the target.
    return Config(n_vocab=n_vocab, swa_period=2, **PRESETS[preset]["draft"])


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="output folder (checkpoints, tokenizer, GGUF files)")
    ap.add_argument("--corpus", default=corpus.DEFAULT_ROOT)
    ap.add_argument("--tokens", metavar="DIR",
                    help="a pre-tokenized corpus (corpus_tokens.py encode: tokenizer.model, {train,validation,"
                         "heldout}.u16/.idx) instead of --corpus; required by the gen2 presets")
    ap.add_argument("--budget-s", type=float, help="target training seconds (default: the preset's, if any)")
    ap.add_argument("--eval-tokens", type=int,
                    help="with --tokens: validation and held-out tokens evaluated (default: the preset's)")
    ap.add_argument("--preset", choices=sorted(PRESETS),
                    help="model sizes and schedule (default: gpu when CUDA is used, else cpu)")
    ap.add_argument("--smoke", action="store_true", help="same as --preset smoke, on 1/8 of the corpus")
    ap.add_argument("--steps", type=int, help="target steps (default: the preset's)")
    ap.add_argument("--draft-steps", type=int, help="draft steps on the corpus (default: the preset's)")
    ap.add_argument("--distill-steps", type=int, help="draft distillation steps (default: the preset's)")
    ap.add_argument("--batch", type=int, help="sequences per step (default: the preset's)")
    ap.add_argument("--vocab", type=int, help="tokenizer vocabulary (default: the preset's)")
    ap.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--f16", action="store_true", help="export matrices as F16 (default F32)")
    ap.add_argument("--train-only", action="store_true",
                    help="stop after the checkpoints; export and verify later (e.g. GPU training, CPU checks)")
    ap.add_argument("--kakeya", default=verify.DEFAULT_KAKEYA, help="kakeya binary for verification")
    ap.add_argument("--compile", action="store_true", help="torch.compile the models' training forward (torch >= 2)")
    a = ap.parse_args()
    a.device = pick_device(a.device)
    if a.smoke:
        a.preset = "smoke"
    elif a.preset is None:
        a.preset = "gpu" if a.device.type == "cuda" else "cpu"
    for name in ("steps", "draft_steps", "distill_steps", "batch", "vocab", "budget_s"):
        if getattr(a, name) is None:
            setattr(a, name, PRESETS[a.preset].get(name))
    if PRESETS[a.preset].get("tokens") and not a.tokens:
        ap.error(f"--preset {a.preset} trains on a pre-tokenized corpus: give --tokens DIR")
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
    if isinstance(stream, np.ndarray):  # token ids on disk (uint16 memmap)
        rows = torch.from_numpy(np.stack([stream[s:s + n_ctx + 1] for s in starts.tolist()]).astype(np.int64))
    else:
        rows = torch.stack([stream[s:s + n_ctx + 1] for s in starts.tolist()])
    rows = rows.to(device, non_blocking=True)
    return rows[:, :-1], rows[:, 1:]


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


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


def train_loop(name, model, loss_fn, steps, peak_lr, ckpt_path, args, device, start=None, validate=None,
               budget_s=None, plan=None, meta=None):
    """Runs steps of loss_fn(step) with AdamW, printing progress and checkpointing.
    validate(): validation loss, every eval_every steps; the model ends as the best one seen.
    budget_s: the step count (and so the schedule) is fixed after 15 timed steps (the first 5
    not counted) so that the loop ends within budget_s seconds; it is saved in the checkpoint.
    plan(step, seconds_per_step, seconds_left) -> step count replaces "the steps that fit" when
    later steps cost more than the timed ones (the draft model's distillation); meta: a dict
    saved with the checkpoint and restored from it (what plan decided)."""
    opt = make_optimizer(model, peak_lr)
    first, best, total = 0, None, steps
    if start is not None:
        model.load_state_dict(start["model"])
        opt.load_state_dict(start["optim"])
        first, best, total = start["step"], start.get("best"), start.get("total", steps)
        if meta is not None:
            meta.update(start.get("meta", {}))
        budget_s = None  # the schedule was fixed by the first run
    eval_every = PRESETS[args.preset]["eval_every"]
    tokens_per_step = args.batch * model.cfg.n_ctx
    t0, t_probe, losses = time.time(), None, []
    step = first
    while step < total:
        model.train()
        for group in opt.param_groups:
            group["lr"] = lr_at(step, total, peak_lr)
        with autocast(device):
            loss = loss_fn(step)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
        step += 1
        done = step - first
        if budget_s is not None and done in (5, 15):
            sync(device)
            if done == 5:
                t_probe = time.time()
            else:
                per_step = (time.time() - t_probe) / 10
                left = budget_s - (time.time() - t0)
                fit = plan(step, per_step, left) if plan is not None else step + left / per_step
                total = max(step + 1, min(steps, int(fit)))
                print(f"[{name}] {per_step * 1000:.0f} ms/step: {total} steps fit the {budget_s:.0f} s budget "
                      f"({total * tokens_per_step / 1e6:.1f} M tokens)", flush=True)
        if done % 10 == 0 or step == total:
            rate = done * tokens_per_step / (time.time() - t0)
            eta = (total - step) * tokens_per_step / rate
            print(f"[{name}] step {step}/{total} loss {sum(losses[-10:]) / len(losses[-10:]):.3f} "
                  f"{rate:,.0f} tok/s ETA {eta / 60:.1f} min", flush=True)
        if validate is not None and (step % eval_every == 0 or step == total):
            with autocast(device):
                val = validate()
            improved = best is None or val < best["loss"]
            if improved:
                best = {"loss": val, "step": step,
                        "model": {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}}
            print(f"[{name}] step {step} validation {val:.4f} nats/token"
                  f"{' (best)' if improved else ''}", flush=True)
        if step == total and best is not None:
            model.load_state_dict(best["model"])  # what gets saved as finished, exported and shipped
        if step % PRESETS[args.preset].get("ckpt_every", 100) == 0 or step == total:
            save(ckpt_path, model, opt, step, best, total, meta)
    return losses, best


def save(path, model, opt, step, best=None, total=None, meta=None):
    tmp = path + ".tmp"
    torch.save({"config": model.cfg.to_dict(), "model": model.state_dict(), "optim": opt.state_dict(),
                "step": step, "best": best, "total": total if total is not None else step, "meta": meta or {}},
               tmp)
    os.replace(tmp, path)  # never leave a half-written checkpoint


def resume_state(path, steps):
    """(state to continue from or None, finished?)"""
    if not os.path.exists(path):
        return None, False
    state = torch.load(path, map_location="cpu", weights_only=False)
    return state, state["step"] >= state.get("total", steps)


def finished_model(state, device):
    """A finished checkpoint's model, built from its own config (it may come from another machine)."""
    model = Gemma3(Config(**state["config"]))
    model.load_state_dict({k: v.float() for k, v in state["model"].items()})
    return model.to(device)


def train_target(args, stream, n_vocab, validation, device, path):
    """Corpus cross-entropy; keeps the checkpoint with the lowest validation loss."""
    state, finished = resume_state(path, args.steps)
    if finished:
        best = state.get("best")
        log = {} if best is None else {"best_validation": {"step": best["step"], "nats_per_token": best["loss"]}}
        return finished_model(state, device), log
    torch.manual_seed(args.seed)
    model = Gemma3(target_config(n_vocab, args.preset)).to(device)
    print(f"target: {model.n_params() / 1e6:.2f}M params, {model.cfg}", flush=True)

    forward = torch.compile(model) if args.compile else model

    def loss_fn(step):
        x, y = batch(stream, model.cfg.n_ctx, args.batch, args.seed, step, device)
        return F.cross_entropy(forward(x).flatten(0, 1), y.flatten())

    def validate():
        docs, n_bytes = validation
        return verify.heldout_loss(model, docs, n_bytes, device)["nats_per_token"]

    peak_lr = PRESETS[args.preset]["lr"]
    losses, best = train_loop("target", model, loss_fn, args.steps, peak_lr, path, args, device, state, validate,
                              budget_s=args.budget_s)
    return model, {"first_loss": losses[0], "last_loss": sum(losses[-10:]) / len(losses[-10:]),
                   "best_validation": {"step": best["step"], "nats_per_token": best["loss"]}}


def train_draft(args, stream, target, device, path):
    """Corpus cross-entropy first, then KL(target || draft) on the same kind of windows."""
    total = args.draft_steps + args.distill_steps
    state, finished = resume_state(path, total)
    if finished:
        return finished_model(state, device), {}
    torch.manual_seed(args.seed + 1)
    model = Gemma3(draft_config(target.cfg.n_vocab, args.preset)).to(device)
    print(f"draft: {model.n_params() / 1e6:.2f}M params, {model.cfg}", flush=True)
    target.eval()

    def loss_fn(step):
        x, y = batch(stream, model.cfg.n_ctx, args.batch, args.seed + 7, step, device)
        logits = model(x).flatten(0, 1)
        if step < meta["draft_steps"]:  # set by plan, or restored from the checkpoint
            return F.cross_entropy(logits, y.flatten())
        with torch.no_grad():
            teacher = target(x).flatten(0, 1).log_softmax(-1)
        return F.kl_div(logits.log_softmax(-1), teacher, log_target=True, reduction="batchmean")

    P = PRESETS[args.preset]
    budget = (P["draft_budget_s"] + P["distill_budget_s"]) if "draft_budget_s" in P else None
    meta = {"draft_steps": args.draft_steps}

    def plan(step, per_step, left):
        # A distillation step is a corpus step plus the target's forward pass (timed here): each
        # phase gets its own share of the budget (the first GPU run gave both the corpus steps'
        # rate and overran its budget by 2.4x).
        x, _ = batch(stream, model.cfg.n_ctx, args.batch, args.seed + 7, 0, device)
        with torch.no_grad(), autocast(device):
            target(x)
            sync(device)
            t = time.time()
            for _ in range(3):
                target(x)
            sync(device)
        per_distill = per_step + (time.time() - t) / 3
        corpus_left = max(0.0, left - P["distill_budget_s"])
        meta["draft_steps"] = args.draft_steps = step + int(corpus_left / per_step)
        distill = int(P["distill_budget_s"] / per_distill)
        print(f"[draft] distillation {per_distill * 1000:.0f} ms/step: {args.draft_steps} corpus steps, "
              f"{distill} distillation steps", flush=True)
        return args.draft_steps + distill

    losses, _ = train_loop("draft", model, loss_fn, total, P["lr"], path, args, device, state,
                           budget_s=budget, plan=plan if budget else None, meta=meta)
    args.draft_steps = meta["draft_steps"]
    return model, {"last_distill_kl": sum(losses[-10:]) / len(losses[-10:])}


def load_corpus(args):
    """The first generation's data: the standard library, tokenizer trained here."""
    split, stats = corpus.load(args.corpus)
    validation_docs = [d for d in split["train"] if corpus.is_validation(d[0])]
    if args.smoke:  # every 8th training file keeps the smoke run short
        split["train"] = split["train"][::8]
        stats["smoke_train_files"] = len(split["train"])
    print(f"corpus: {stats}", flush=True)

    sp_path = os.path.join(args.out, "tokenizer.model")
    if not os.path.exists(sp_path):
        tk.train(split["train"], args.out, args.vocab)
    sp = tk.load(sp_path)
    # The tokenizer saw every non-held-out file; the models leave the validation files out.
    train_docs = [d for d in split["train"] if not corpus.is_validation(d[0])]
    stream = torch.tensor([t for doc in tk.encode_docs(sp, train_docs) for t in doc], dtype=torch.long)
    validation = (tk.encode_docs(sp, validation_docs), sum(len(t.encode("utf-8")) for _, t in validation_docs))
    heldout = tk.encode_docs(sp, split["heldout"])
    stats["validation_files"] = len(validation_docs)
    print(f"tokens: train {len(stream):,}, validation {sum(map(len, validation[0])):,}, "
          f"held-out {sum(map(len, heldout)):,}", flush=True)
    return sp, stream, validation, heldout, split["heldout"], stats["heldout"]["bytes"], stats


def load_tokens(args):
    """The second generation's data: token ids made by corpus_tokens.py (tokenizer included), read
    from disk as they are sampled; validation and held-out: the first eval_tokens of each split,
    in whole documents, and their text (decoded: the tokenizer round-trips bytes exactly)."""
    shutil.copy(os.path.join(args.tokens, "tokenizer.model"), os.path.join(args.out, "tokenizer.model"))
    sp = tk.load(os.path.join(args.out, "tokenizer.model"))
    stream, _ = corpus_tokens.load_split(args.tokens, "train")
    limit = args.eval_tokens or PRESETS[args.preset]["eval_tokens"]
    val_ids, val_docs = corpus_tokens.eval_docs(args.tokens, "validation", limit, sp)
    held_ids, held_docs = corpus_tokens.eval_docs(args.tokens, "heldout", limit, sp)
    nbytes = lambda docs: sum(len(t.encode("utf-8")) for _, t in docs)
    stats = {"tokens_dir": os.path.abspath(args.tokens), "train_tokens": int(len(stream)),
             "validation": {"files": len(val_docs), "tokens": sum(map(len, val_ids)), "bytes": nbytes(val_docs)},
             "heldout": {"files": len(held_docs), "tokens": sum(map(len, held_ids)), "bytes": nbytes(held_docs)}}
    print(f"tokens: {stats}", flush=True)
    # The engine checks (tokenizer parity, perplexity, samples) read the first few held-out files.
    return sp, stream, (val_ids, nbytes(val_docs)), held_ids, held_docs[:24], nbytes(held_docs), stats


def main():
    args = parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.set_num_threads(args.threads)
    torch.backends.cuda.matmul.allow_tf32 = True
    device = args.device
    t_start = time.time()

    sp, stream, validation, heldout, heldout_docs, heldout_bytes, stats = (
        load_tokens(args) if args.tokens else load_corpus(args))
    target, target_log = train_target(args, stream, sp.get_piece_size(), validation, device,
                                      os.path.join(args.out, "target.pt"))
    draft, draft_log = train_draft(args, stream, target, device, os.path.join(args.out, "draft.pt"))
    if args.train_only:
        print(f"checkpoints in {args.out}; export and verify with the same command without --train-only")
        return

    paths, shipped = {}, {}
    base = PRESETS[args.preset].get("name", "kakeya-pystdlib")
    licence = export_gguf.GEN2_LICENSE if args.tokens else export_gguf.STDLIB_LICENSE
    for name, model in (("target", target), ("draft", draft)):
        model.cpu().eval()
        paths[name] = os.path.join(args.out, f"{name}.gguf")
        export_gguf.export(model, sp, paths[name], f"{base}-{name}", f16=args.f16, license=licence)
        # The files that ship in models/: Q8_0 matrices (F32 norms), ~1/4 of F32.
        suffix = "" if name == "target" else "-draft"
        shipped[name] = os.path.join(args.out, f"{base}{suffix}.gguf")
        export_gguf.export(model, sp, shipped[name], f"{base}{suffix}", matrix_type="q8_0", license=licence)

    report = {
        "corpus": stats,
        "preset": args.preset,
        "train_tokens": len(stream),
        "target": {"params": target.n_params(), "config": target.cfg.to_dict(), **target_log,
                   "heldout": verify.heldout_loss(target, heldout, heldout_bytes)},
        "draft": {"params": draft.n_params(), "config": draft.cfg.to_dict(), **draft_log,
                  "heldout": verify.heldout_loss(draft, heldout, heldout_bytes)},
        "train_minutes": (time.time() - t_start) / 60,
    }
    engine_files_loss = report["target"]["heldout"]
    if args.tokens:  # the engine checks read only the first held-out files: PyTorch's figure on the same
        engine_files_loss = verify.heldout_loss(target, tk.encode_docs(sp, heldout_docs),
                                                sum(len(t.encode("utf-8")) for _, t in heldout_docs))
        report["target"]["heldout_engine_files"] = engine_files_loss
    report["kakeya"] = verify.against_kakeya(args.kakeya, paths["target"], paths["draft"], target, sp,
                                             heldout_docs, f16=args.f16,
                                             shipped=(shipped["target"], shipped["draft"]),
                                             torch_heldout=engine_files_loss)
    with open(os.path.join(args.out, "report.json"), "w") as f:
        json.dump(report, f, indent=2)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
