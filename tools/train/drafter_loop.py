"""The drafters' training loop (AdamW, warm-up and cosine, a step budget, the best
validation kept) and its checkpoints, shared by train_drafters.py and export_drafters.py."""
import math
import os
import time

import numpy as np
import torch

from drafters import autocast


def lr_at(step, total, peak, warm_frac=0.04):
    warm = max(1, int(total * warm_frac))
    if step < warm:
        return peak * (step + 1) / warm
    progress = min(1.0, (step - warm) / max(1, total - warm))
    return peak * (0.05 + 0.475 * (1 + math.cos(math.pi * progress)))


def train_loop(name, model, loss_fn, steps, peak_lr, budget_s, resume_path, device, validate, eval_every):
    """AdamW (wd 0), warm-up 4 %, cosine, clip 1.0. With budget_s the total step count is fixed
    after 15 timed steps (the first 5 not counted) so that the loop ends within budget_s.
    validate() (higher = better) runs every eval_every steps and at the end; the model ends as
    the best one seen (the data is small, so a long schedule can over-fit it)."""
    opt = torch.optim.AdamW(model.parameters(), lr=peak_lr, betas=(0.9, 0.95), weight_decay=0.0)
    first, total, best = 0, steps, None
    if os.path.exists(resume_path):
        st = torch.load(resume_path, map_location="cpu")
        model.load_state_dict(st["model"])
        opt.load_state_dict(st["optim"])
        first, total, best, budget_s = st["step"], st["total"], st.get("best"), None
        print(f"[{name}] resuming at step {first}/{total}", flush=True)
    t0, t_probe, losses, log = time.time(), None, [], []
    step = first
    while step < total:
        model.train()
        for gr_ in opt.param_groups:
            gr_["lr"] = lr_at(step, total, peak_lr)
        with autocast(device):
            loss, metrics = loss_fn(step)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
        step += 1
        done = step - first
        if budget_s is not None and done == 5:
            if device.type == "cuda":
                torch.cuda.synchronize()
            t_probe = time.time()
        if budget_s is not None and done == 15:
            if device.type == "cuda":
                torch.cuda.synchronize()
            per_step = (time.time() - t_probe) / 10
            total = max(step + 1, min(steps, int(step + (budget_s - (time.time() - t0)) / per_step)))
            print(f"[{name}] {per_step * 1000:.1f} ms/step: {total} steps fit the {budget_s:.0f} s budget",
                  flush=True)
        if done % 25 == 0 or step == total:
            el = time.time() - t0
            m = " ".join(f"{k} {v:.3f}" for k, v in metrics.items())
            print(f"[{name}] step {step}/{total} loss {np.mean(losses[-25:]):.4f} {m} "
                  f"{el / done * 1000:.0f} ms/step, ETA {(total - step) * el / done / 60:.1f} min", flush=True)
            log.append({"step": step, "loss": float(np.mean(losses[-25:])), **metrics})
        if step % eval_every == 0 or step == total:
            score = validate()
            improved = best is None or score > best["score"]
            if improved:
                best = {"score": score, "step": step,
                        "model": {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}}
            print(f"[{name}] step {step} validation {score:.4f}{' (best)' if improved else ''}", flush=True)
            log.append({"step": step, "validation": score})
        if step % 250 == 0 and step < total:
            tmp = resume_path + ".tmp"
            torch.save({"model": model.state_dict(), "optim": opt.state_dict(), "step": step, "total": total,
                        "best": best}, tmp)
            os.replace(tmp, resume_path)
    el = time.time() - t0
    if best is not None:
        model.load_state_dict(best["model"])
    return {"steps": total, "resumed_at": first, "seconds": round(el, 1),
            "best_step": best["step"] if best else None, "best_validation": best["score"] if best else None,
            "ms_per_step": round(el / max(1, total - first) * 1000, 1),
            "first_loss": losses[0] if losses else None,
            "last_loss": float(np.mean(losses[-25:])) if losses else None, "log": log}


def save_finished(path, model, cfg_dict, info):
    tmp = path + ".tmp"
    torch.save({"config": cfg_dict, "model": {k: v.detach().half().cpu() for k, v in model.state_dict().items()},
                "info": info}, tmp)
    os.replace(tmp, path)


def sample_rows(n, count, seed, step):
    g = torch.Generator().manual_seed(seed * 1_000_003 + step)
    return torch.randint(0, n, (count,), generator=g)
