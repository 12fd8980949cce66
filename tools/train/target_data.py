"""The target's side of drafter training: its features over padded sequences (SeqSet) and its
own greedy continuations made in PyTorch (generate), which add training data where the
kakeya-made sequences are few."""
import math
import time

import numpy as np
import torch
import torch.nn.functional as F

import drafters as D


class SeqSet:
    """Padded sequences with the target's features, on the training device.
    tokens [N, T] int64, length [N], n_prompt [N]; taps [N, T, 3*D] and hfin [N, T, D] in f16,
    computed once, or per batch when all of them would take more than feature_bytes."""

    def __init__(self, seqs, target, device, batch, feature_bytes=8 << 30):
        self.n = len(seqs)
        T = max(len(t) for t, _ in seqs)
        self.tokens = torch.zeros(self.n, T, dtype=torch.long)
        for i, (t, _) in enumerate(seqs):
            self.tokens[i, :len(t)] = torch.from_numpy(t)
        self.length = torch.tensor([len(t) for t, _ in seqs])
        self.n_prompt = torch.tensor([p for _, p in seqs])
        self.tokens, self.length, self.n_prompt = (x.to(device) for x in (self.tokens, self.length, self.n_prompt))
        D_ = target.cfg.n_embd
        self.target, self.stored = target, self.n * T * (len(D.DFLASH_TAPS) + 1) * D_ * 2 <= feature_bytes
        if not self.stored:
            return
        self.taps = torch.empty(self.n, T, len(D.DFLASH_TAPS) * D_, dtype=torch.float16, device=device)
        self.hfin = torch.empty(self.n, T, D_, dtype=torch.float16, device=device)
        for s in range(0, self.n, batch):
            ids = self.tokens[s:s + batch]
            n = int(self.length[s:s + batch].max())
            taps, hfin = D.target_features(target, ids[:, :n])
            self.taps[s:s + batch, :n] = taps.half()
            self.hfin[s:s + batch, :n] = hfin.half()
            self.taps[s:s + batch, n:] = 0
            self.hfin[s:s + batch, n:] = 0

    def batch(self, idx):
        n = int(self.length[idx].max())
        tokens = self.tokens[idx, :n]
        if self.stored:
            taps, hfin = self.taps[idx, :n], self.hfin[idx, :n]
        else:  # the same f16 rounding as stored features; padding rows past a length are not read
            with torch.autocast(device_type=tokens.device.type, enabled=False):
                taps, hfin = (x.half() for x in D.target_features(self.target, tokens))
        return tokens, self.length[idx], self.n_prompt[idx], taps.float(), hfin.float()


@torch.no_grad()
def greedy(target, ids, steps, device):
    """ids [B, T] -> [B, T + steps]: the target's greedy continuation with a KV cache; bf16 on CUDA."""
    cfg = target.cfg
    S, T = ids.shape
    rope, masks = target.tables(T + steps, device)
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    cache = [tuple(torch.empty(S, cfg.n_head_kv, T + steps, cfg.head_dim, dtype=dtype, device=device)
                   for _ in range(2)) for _ in target.blocks]
    out, new, pos0 = [ids], ids, 0
    for _ in range(steps):
        with D.autocast(device):
            h = target.token_embd(new) * math.sqrt(cfg.n_embd)
            for block, kv in zip(target.blocks, cache):
                kind = "swa" if block.swa else "global"
                h = D._target_block(block, h, *rope[kind], masks[kind], pos0, kv)
            last = target.output_norm(h[:, -1]).float()
        pos0 += new.shape[1]
        new = F.linear(last, target.token_embd.weight.float()).argmax(-1)[:, None]
        out.append(new)
    return torch.cat(out, 1)


def generate(target, pools, count, device, seed, budget_s=None, batch=1024, n_ctx=512, n_predict=256):
    """More training sequences: `count` greedy continuations by the PyTorch target of the prompts
    in pools {length: [token arrays of that length]}, a batch per length so that it needs no
    padding. In bf16 a few near-tie tokens differ from kakeya's greedy choice (measured against
    kakeya below): they are training data only; the kakeya-made sequences stay the validation and
    held-out sets. Stops starting batches after budget_s seconds. Returns [(tokens, n_prompt)]."""
    g = np.random.default_rng(seed)
    lengths = sorted(c for c in pools if pools[c])
    if not lengths:
        raise SystemExit("--generate: no prompt windows (every file excluded, or all shorter than the prompt lengths)")
    out = []
    t0 = time.time()
    # Lengths take turns batch by batch, so that a budget cut leaves every length represented.
    per_length = count // len(lengths) + 1
    plans = {c: g.choice(len(pools[c]), size=per_length, replace=per_length > len(pools[c])) for c in lengths}
    made = 0
    for s in range(0, per_length, batch):
        if budget_s is not None and time.time() - t0 > budget_s:
            break
        for c in lengths:
            picks = plans[c][s:s + batch]
            ids = torch.tensor(np.stack([pools[c][i] for i in picks]).astype(np.int64), device=device)
            ids = greedy(target, ids, min(n_predict, n_ctx - c), device)
            out += [(row, c) for row in ids.cpu().numpy().astype(np.int64)]
            made += len(picks) * (ids.shape[1] - c)
        print(f"[generate] {len(out)} sequences, {made} tokens, {time.time() - t0:.0f} s, "
              f"{made / (time.time() - t0):.0f} tok/s", flush=True)
    return out


def agreement_with_kakeya(target, seqs, device, steps=64):
    """Share of the first `steps` greedy tokens the PyTorch generator gives as kakeya did."""
    same = total = 0
    for t, p in seqs:
        if len(t) < p + steps:
            continue
        ids = greedy(target, torch.tensor(t[None, :p].astype(np.int64), device=device), steps, device)
        mine = ids[0, p:].cpu().numpy()
        first = next((i for i in range(steps) if mine[i] != t[p + i]), steps)
        same += first
        total += steps
    return same / max(1, total)
