"""Drafters for a gemma3 target (model.py): a DFlash block drafter and an MTP (NextN) head.

Both borrow the target's token embedding (scaled by sqrt(n_embd)) and its tied LM head, frozen
and not part of their state dicts; only their own layers train. The forward passes are exactly
what kakeya runs (docs/formats/drafters.md 5.1 and 5.2; tools/train/README.md "Drafters" states them), so
the GGUF export is a renaming.

Target features (computed by the frozen target, `target_features`):
* taps: the residual stream ENTERING the target layers listed in DFLASH_TAPS (= outputs of
  layers 1, 5, 9), concatenated: [.., 3 * n_embd];
* hfin: the final hidden state after output_norm (the LM-head input): [.., n_embd].

DFlash (z-lab design): context feature g_p = rms(fc . taps_p, enc.output_norm); a block
[id_last, MASK x (B-1)] at positions anchor .. anchor+B-1 attends to the context K/V of every
position < anchor (K = rope(rms_head(Wk g_p)), V = Wv g_p, in every layer) and to all the
block's rows (non-causal); Qwen3-style layers (norms as stored, SwiGLU); logits = head .
rms(x, output_norm). Slot k predicts token anchor + k.

MTP (DeepSeek-V3 NextN, a gemma3 decoder layer): the row at position p takes (h_{p-1}, x_p):
u = eh_proj . [rms(embd(x_p) * sqrt(n_embd), enorm); rms(h_{p-1}, hnorm)], one model.Block
(layer index n_layer, so sliding-window and its rope base), h' = rms(u, shared_head_norm),
logits = head . h'; it predicts x_{p+1}. Chained drafts feed h' back as the next h.
"""
import math
from dataclasses import asdict, dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from model import Block, Config, RMSNorm, apply_rope_neox, rope_tables

DFLASH_TAPS = (2, 6, 10)  # GGUF dflash.target_layers: layer-input taps (HF hidden-state ids 1, 5, 9 + 1)
MASK_ID = 0               # <unk>: an existing row of the target's embedding that the target never emits


def gqa_scores(q, k):
    """q [S, KV, G, T, d] @ k [S, KV, 1, Tk, d]^T -> [S, KV, G, T, Tk], as one plain batched
    matmul over [S, KV] (torch's broadcast over G is several times slower on CPU)."""
    S, KV, G, T, d = q.shape
    return (q.reshape(S, KV, G * T, d) @ k[:, :, 0].transpose(-1, -2)).view(S, KV, G, T, -1)


def gqa_apply(p, v):
    """p [S, KV, G, T, Tk] @ v [S, KV, 1, Tk, d] -> [S, KV, G, T, d]"""
    S, KV, G, T, Tk = p.shape
    return (p.reshape(S, KV, G * T, Tk) @ v[:, :, 0]).view(S, KV, G, T, -1)


def autocast(device):
    """bf16 autocast on CUDA (training, generation), none on the CPU."""
    return torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=device.type == "cuda")


def _target_block(block, h, cos, sin, mask, pos0=0, kv=None):
    """model.Block.forward (eval) with gqa_scores / gqa_apply: the same arithmetic, faster on CPU.
    h holds the rows at positions pos0 .. pos0 + T - 1 (cos, sin and mask cover them). With
    kv = (K, V) [S, n_head_kv, n_ctx, head_dim] the rows' keys and values are written there and
    the rows attend to everything in it up to themselves (incremental greedy generation)."""
    cfg = block.cfg
    S, T, _ = h.shape
    x = block.attn_norm(h)
    q = block.wq(x).view(S, T, cfg.n_head, cfg.head_dim)
    k = block.wk(x).view(S, T, cfg.n_head_kv, cfg.head_dim)
    v = block.wv(x).view(S, T, cfg.n_head_kv, cfg.head_dim)
    q = block.q_norm(q).to(v.dtype).transpose(1, 2)
    k = block.k_norm(k).to(v.dtype).transpose(1, 2)
    v = v.transpose(1, 2)
    span = slice(pos0, pos0 + T)
    q, k = apply_rope_neox(q, cos[span], sin[span]), apply_rope_neox(k, cos[span], sin[span])
    if kv is not None:
        kv[0][:, :, span], kv[1][:, :, span] = k, v
        k, v = kv[0][:, :, :pos0 + T], kv[1][:, :, :pos0 + T]
    group = cfg.n_head // cfg.n_head_kv
    q = q.reshape(S, cfg.n_head_kv, group, T, cfg.head_dim) * (1.0 / math.sqrt(cfg.head_dim))
    scores = gqa_scores(q, k[:, :, None]).masked_fill(~mask[span, :pos0 + T], float("-inf"))
    y = gqa_apply(scores.softmax(-1, dtype=torch.float32).to(v.dtype), v[:, :, None])
    a = block.wo(y.reshape(S, cfg.n_head, T, cfg.head_dim).transpose(1, 2).reshape(S, T, -1))
    h = h + block.post_attention_norm(a)
    x = block.ffn_norm(h)
    y = block.ffn_down(F.gelu(block.ffn_gate(x), approximate="tanh") * block.ffn_up(x))
    return h + block.post_ffw_norm(y)


@torch.no_grad()
def target_features(target, tokens, taps=DFLASH_TAPS):
    """tokens [S, T] -> (taps [S, T, len(taps) * n_embd], hfin [S, T, n_embd]), float32."""
    rope, masks = target.tables(tokens.shape[1], tokens.device)
    h = target.token_embd(tokens) * math.sqrt(target.cfg.n_embd)
    out = []
    for il, block in enumerate(target.blocks):
        if il in taps:
            out.append(h)
        kind = "swa" if block.swa else "global"
        h = _target_block(block, h, *rope[kind], masks[kind])
    return torch.cat(out, -1).float(), target.output_norm(h).float()


class FrozenHead:
    """The target's token_embd (embedding and tied LM head), not a parameter of the drafters."""

    def __init__(self, weight):
        self.weight = weight.detach()
        self.scale = math.sqrt(weight.shape[1])

    def embed(self, ids):
        return F.embedding(ids, self.weight) * self.scale

    def logits(self, x):
        return F.linear(x, self.weight).float()

    def to(self, device):
        self.weight = self.weight.to(device)
        return self


# ---------------------------------------------------------------------------------------------
# DFlash


@dataclass
class DFlashConfig:
    n_vocab: int = 8000
    n_embd: int = 384          # = the target's hidden size
    n_layer: int = 3
    n_head: int = 6
    n_head_kv: int = 2
    head_dim: int = 64
    n_ff: int = 896
    block_size: int = 8
    target_layers: tuple = DFLASH_TAPS
    rope_base: float = 1e4
    norm_eps: float = 1e-6
    mask_id: int = MASK_ID
    n_ctx: int = 512           # the target's context

    @property
    def attn_scale(self):
        return 1.0 / math.sqrt(self.head_dim)

    def to_dict(self):
        d = asdict(self)
        d["target_layers"] = list(self.target_layers)
        return d


class DFlashLayer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d, e = cfg.head_dim, cfg.norm_eps
        self.attn_norm = RMSNorm(cfg.n_embd, e)
        self.wq = nn.Linear(cfg.n_embd, cfg.n_head * d, bias=False)
        self.wk = nn.Linear(cfg.n_embd, cfg.n_head_kv * d, bias=False)
        self.wv = nn.Linear(cfg.n_embd, cfg.n_head_kv * d, bias=False)
        self.wo = nn.Linear(cfg.n_head * d, cfg.n_embd, bias=False)
        self.q_norm = RMSNorm(d, e)
        self.k_norm = RMSNorm(d, e)
        self.ffn_norm = RMSNorm(cfg.n_embd, e)
        self.ffn_gate = nn.Linear(cfg.n_embd, cfg.n_ff, bias=False)
        self.ffn_up = nn.Linear(cfg.n_embd, cfg.n_ff, bias=False)
        self.ffn_down = nn.Linear(cfg.n_ff, cfg.n_embd, bias=False)


class DFlash(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        n_tl = len(cfg.target_layers)
        self.fc = nn.Linear(n_tl * cfg.n_embd, cfg.n_embd, bias=False)
        self.enc_norm = RMSNorm(cfg.n_embd, cfg.norm_eps)
        self.layers = nn.ModuleList(DFlashLayer(cfg) for _ in range(cfg.n_layer))
        self.output_norm = RMSNorm(cfg.n_embd, cfg.norm_eps)
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, std=0.02)
        self._rope = {}

    def rope(self, n, device):
        key = (n, str(device))
        if key not in self._rope:
            self._rope[key] = tuple(t.to(device) for t in rope_tables(n, self.cfg.head_dim, self.cfg.rope_base))
        return self._rope[key]

    def context(self, taps):
        """taps [S, T, n_tl * n_embd] -> g [S, T, n_embd]"""
        return self.enc_norm(self.fc(taps))

    def forward(self, taps, anchors, block_ids, head, anchor_valid=None):
        """taps [S, T, F] (features of positions 0..T-1 of S sequences); anchors [S, A] (the
        position of each block's first row; context = positions < anchor); block_ids [S, A, B]
        (token ids of the block rows: id_last, then MASK). Returns logits [S, A, B, n_vocab]."""
        cfg = self.cfg
        S, T, _ = taps.shape
        A, B = anchors.shape[1], block_ids.shape[2]
        H, KV, d = cfg.n_head, cfg.n_head_kv, cfg.head_dim
        group = H // KV
        cos, sin = self.rope(max(T, int(anchors.max()) + B) + 1, taps.device)
        g = self.context(taps)                                        # [S, T, D]
        pos_blk = (anchors[:, :, None] + torch.arange(B, device=anchors.device)).reshape(S, A * B)
        cos_b, sin_b = cos[pos_blk][:, None], sin[pos_blk][:, None]   # [S, 1, A*B, d/2]
        cos_c, sin_c = cos[:T], sin[:T]
        # context visibility: key position < anchor: [S, 1, 1, A, 1, T]
        ctx_mask = torch.arange(T, device=taps.device)[None, None, :] < anchors[:, :, None]
        ctx_mask = ctx_mask[:, None, None, :, None, :]
        x = head.embed(block_ids.reshape(S, A * B))
        for layer in self.layers:
            kc = layer.k_norm(layer.wk(g).view(S, T, KV, d)).to(g.dtype).transpose(1, 2)
            kc = apply_rope_neox(kc, cos_c, sin_c)                    # [S, KV, T, d]
            vc = layer.wv(g).view(S, T, KV, d).transpose(1, 2)
            hn = layer.attn_norm(x)
            q = layer.q_norm(layer.wq(hn).view(S, A * B, H, d)).transpose(1, 2)
            kb = layer.k_norm(layer.wk(hn).view(S, A * B, KV, d)).transpose(1, 2)
            vb = layer.wv(hn).view(S, A * B, KV, d).transpose(1, 2)
            q = apply_rope_neox(q, cos_b, sin_b).to(vc.dtype)
            kb = apply_rope_neox(kb, cos_b, sin_b).to(vc.dtype)
            q = q.reshape(S, KV, group, A * B, d) * cfg.attn_scale
            s_ctx = gqa_scores(q, kc[:, :, None]).view(S, KV, group, A, B, T)
            s_ctx = s_ctx.masked_fill(~ctx_mask, float("-inf"))
            qb = q.view(S, KV, group, A, B, d)
            kbb = kb.view(S, KV, 1, A, B, d)
            s_blk = qb @ kbb.transpose(-1, -2)                          # [S, KV, group, A, B, B]
            probs = torch.cat((s_ctx, s_blk), -1).softmax(-1, dtype=torch.float32).to(vc.dtype)
            p_ctx, p_blk = probs[..., :T], probs[..., T:]
            y = gqa_apply(p_ctx.reshape(S, KV, group, A * B, T), vc[:, :, None]).view(S, KV, group, A, B, d)
            y = y + p_blk @ vb.view(S, KV, 1, A, B, d)
            y = y.reshape(S, H, A * B, d).transpose(1, 2).reshape(S, A * B, H * d)
            x = x + layer.wo(y)
            hf = layer.ffn_norm(x)
            x = x + layer.ffn_down(F.silu(layer.ffn_gate(hf)) * layer.ffn_up(hf))
        out = self.output_norm(x)
        return head.logits(out).view(S, A, B, -1)

    @torch.no_grad()
    def draft(self, taps, pos0, id_last, head):
        """Reference inference for one block, written out as the engine runs it: context K/V of
        positions 0..pos0-1 ("injection"), then the block [id_last, MASK x (B-1)] at positions
        pos0 .. pos0+B-1. taps [T, F] of one sequence (T >= pos0). Returns logits [B, V]."""
        cfg = self.cfg
        B, H, KV, d = cfg.block_size, cfg.n_head, cfg.n_head_kv, cfg.head_dim
        cos, sin = self.rope(pos0 + B, taps.device)
        g = self.context(taps[:pos0])                                    # [pos0, D]
        ids = torch.tensor([id_last] + [cfg.mask_id] * (B - 1), device=taps.device)
        x = head.embed(ids)                                              # [B, D]
        for layer in self.layers:
            kc = apply_rope_neox(layer.k_norm(layer.wk(g).view(pos0, KV, d)).transpose(0, 1),
                                 cos[:pos0], sin[:pos0])                 # [KV, pos0, d]
            vc = layer.wv(g).view(pos0, KV, d).transpose(0, 1)
            hn = layer.attn_norm(x)
            q = apply_rope_neox(layer.q_norm(layer.wq(hn).view(B, H, d)).transpose(0, 1),
                                cos[pos0:pos0 + B], sin[pos0:pos0 + B])  # [H, B, d]
            kb = apply_rope_neox(layer.k_norm(layer.wk(hn).view(B, KV, d)).transpose(0, 1),
                                 cos[pos0:pos0 + B], sin[pos0:pos0 + B])
            vb = layer.wv(hn).view(B, KV, d).transpose(0, 1)
            K, V = torch.cat((kc, kb), 1), torch.cat((vc, vb), 1)        # [KV, pos0 + B, d]
            ys = []
            for h in range(H):
                kv = h // (H // KV)
                s = (q[h] @ K[kv].T) * cfg.attn_scale
                ys.append(s.softmax(-1) @ V[kv])
            y = torch.stack(ys, 1).reshape(B, H * d)
            x = x + layer.wo(y)
            hf = layer.ffn_norm(x)
            x = x + layer.ffn_down(F.silu(layer.ffn_gate(hf)) * layer.ffn_up(hf))
        return head.logits(self.output_norm(x))


def dflash_grow(model, n_layer):
    """Appends layers to a trained drafter, each an identity at first (zero wo and ffn_down: the
    residual stream passes through), so that a deeper drafter starts from the shallower one."""
    cfg = model.cfg
    device = next(model.parameters()).device
    for _ in range(n_layer - cfg.n_layer):
        layer = DFlashLayer(cfg).to(device)
        for m in layer.modules():
            if isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, std=0.02)
        nn.init.zeros_(layer.wo.weight)
        nn.init.zeros_(layer.ffn_down.weight)
        model.layers.append(layer)
    cfg.n_layer = len(model.layers)


def dflash_slot_weights(block_size, gamma, device=None):
    """exp(-(k-1)/gamma) for slots k = 1..B-1, normalised to sum 1."""
    k = torch.arange(1, block_size, dtype=torch.float32, device=device)
    w = torch.exp(-(k - 1) / gamma)
    return w / w.sum()


# ---------------------------------------------------------------------------------------------
# MTP


def mtp_block_config(target_cfg):
    """The MTP layer is layer index n_layer of the target's gemma3 shape."""
    d = target_cfg.to_dict()
    d["dropout"] = 0.0
    return Config(**d)


class MTP(nn.Module):
    def __init__(self, target_cfg):
        super().__init__()
        cfg = mtp_block_config(target_cfg)
        self.cfg = cfg
        self.il = cfg.n_layer                     # GGUF blk index (block_count - 1 of the sidecar)
        e = cfg.norm_eps
        self.enorm = RMSNorm(cfg.n_embd, e)
        self.hnorm = RMSNorm(cfg.n_embd, e)
        self.eh_proj = nn.Linear(2 * cfg.n_embd, cfg.n_embd, bias=False)
        self.block = Block(cfg, self.il)
        self.shared_head_norm = RMSNorm(cfg.n_embd, e)
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, std=0.02)
        self._tables = {}

    def rope(self, n, device):
        key = (n, str(device))
        if key not in self._tables:
            base = self.cfg.rope_base_swa if self.block.swa else self.cfg.rope_base
            self._tables[key] = tuple(t.to(device) for t in rope_tables(n, self.cfg.head_dim, base))
        return self._tables[key]

    @property
    def window(self):
        return self.cfg.sliding_window if self.block.swa else 0

    def input(self, h_prev, ids, head):
        e = self.enorm(head.embed(ids))
        hh = self.hnorm(h_prev)
        u = torch.cat((e, hh), -1)
        return self.eh_proj(u)

    def qkv(self, u, cos, sin):
        b, cfg = self.block, self.cfg
        S, T, _ = u.shape
        hn = b.attn_norm(u)
        v = b.wv(hn).view(S, T, cfg.n_head_kv, cfg.head_dim)
        q = b.q_norm(b.wq(hn).view(S, T, cfg.n_head, cfg.head_dim)).to(v.dtype).transpose(1, 2)
        k = b.k_norm(b.wk(hn).view(S, T, cfg.n_head_kv, cfg.head_dim)).to(v.dtype).transpose(1, 2)
        q, k = apply_rope_neox(q, cos, sin), apply_rope_neox(k, cos, sin)
        group = cfg.n_head // cfg.n_head_kv
        q = q.reshape(S, cfg.n_head_kv, group, T, cfg.head_dim) * (1.0 / math.sqrt(cfg.head_dim))
        return q, k[:, :, None], v.transpose(1, 2)[:, :, None]   # q [S,KV,G,T,d]; k, v [S,KV,1,T,d]

    def finish(self, u, y):
        """y [S, KV, G, T, d] attention output -> h' (after shared_head_norm) and the layer output."""
        b, cfg = self.block, self.cfg
        S, T = u.shape[0], u.shape[1]
        y = y.reshape(S, cfg.n_head, T, cfg.head_dim).transpose(1, 2).reshape(S, T, cfg.n_head * cfg.head_dim)
        h = u + b.post_attention_norm(b.wo(y))
        x = b.ffn_norm(h)
        out = h + b.post_ffw_norm(b.ffn_down(F.gelu(b.ffn_gate(x), approximate="tanh") * b.ffn_up(x)))
        return self.shared_head_norm(out)

    def forward(self, hfin, ids, head, n_steps=1):
        """Teacher-forced chained drafting over whole sequences.
        hfin [S, T, D]: the target's final hidden states; ids [S, T].
        Returns a list of n_steps hidden states h' [S, T, D] (logits = head.logits(h')): entry
        k-1 at row p is step k of the draft that starts at pos0 = p-k+1 (valid for p >= k-1),
        predicting ids[p+1].
        Step k at p: input (h'^{(k-1)}_{p-1}, ids[p]) (step 0 = the target's h); it attends to
        the step-1 rows at positions <= p-k+1 (within the window), the rows of steps 2..k-1 of
        the same draft (step j at p-k+j) and itself."""
        S, T, _ = hfin.shape
        cos, sin = self.rope(T, hfin.device)
        win = self.window
        i = torch.arange(T, device=hfin.device)[:, None]
        j = torch.arange(T, device=hfin.device)[None, :]
        zero = torch.zeros_like(hfin[:, :1])
        h_prev = torch.cat((zero, hfin[:, :-1]), 1)
        outs, keys = [], []  # keys: (k, v) of steps 1..k-1
        for k in range(1, n_steps + 1):
            u = self.input(h_prev, ids, head)
            q, kk, vv = self.qkv(u, cos, sin)
            keys.append((kk, vv))
            k1, v1 = keys[0]
            allowed = j <= i - (k - 1)
            if win > 0:
                allowed &= (i - j) < win
            s_ctx = gqa_scores(q, k1).masked_fill(~allowed, float("-inf"))   # [S,KV,G,T,T]
            extra_s, extra_v = [], []
            for step in range(2, k + 1):  # step j's row of the same draft sits at p - (k - j)
                kj, vj = keys[step - 1]
                shift = k - step
                if shift:
                    kj = torch.cat((torch.zeros_like(kj[..., :shift, :]), kj[..., :-shift, :]), -2)
                    vj = torch.cat((torch.zeros_like(vj[..., :shift, :]), vj[..., :-shift, :]), -2)
                extra_s.append((q * kj).sum(-1, keepdim=True))
                extra_v.append(vj)
            probs = torch.cat([s_ctx] + extra_s, -1).softmax(-1, dtype=torch.float32).to(v1.dtype)
            y = gqa_apply(probs[..., :T], v1)
            for n, vj in enumerate(extra_v):
                y = y + probs[..., T + n:T + n + 1] * vj
            hp = self.finish(u, y)
            outs.append(hp)
            h_prev = torch.cat((zero.to(hp.dtype), hp[:, :-1]), 1)
        return outs

    @torch.no_grad()
    def draft(self, hfin, ids, pos0, n_steps, head, forced=None):
        """Reference inference, one draft, written step by step as the engine runs it (no batching
        tricks): catch-up rows (h_{p-1}, ids[p]) for p = 0..pos0 (the last one is step 1), then
        chained rows (h', d) at pos0+1, pos0+2, ... hfin [T, D] and ids [T] (1-D) of one sequence,
        T > pos0 (positions < pos0 processed by the target; ids[pos0] = id_last).
        forced: the tokens fed to steps 2.. (default: each step's argmax, as the engine drafts).
        Returns [(logits [V] of step k)] for k = 1..n_steps."""
        D = hfin.shape[-1]
        cos, sin = self.rope(pos0 + n_steps + 1, hfin.device)
        h_prev = torch.cat((torch.zeros(1, D, device=hfin.device), hfin[:pos0]), 0)  # h_{p-1}, p = 0..pos0
        u = self.input(h_prev[None], ids[None, :pos0 + 1], head)
        q, kc, vc = self.qkv(u, cos[:pos0 + 1], sin[:pos0 + 1])
        keys, vals = [kc[..., p, :] for p in range(pos0 + 1)], [vc[..., p, :] for p in range(pos0 + 1)]
        qs = [q[..., pos0, :]]
        us = [u[:, pos0:pos0 + 1]]
        out, tok = [], None
        for k in range(1, n_steps + 1):
            p = pos0 + k - 1
            if k > 1:
                uk = self.input(hp, tok.view(1, 1), head)
                qk, kk, vk = self.qkv(uk, cos[p:p + 1], sin[p:p + 1])
                keys.append(kk[..., 0, :])
                vals.append(vk[..., 0, :])
                qs.append(qk[..., 0, :])
                us.append(uk)
            lo = max(0, p - self.window + 1) if self.window > 0 else 0
            K = torch.stack(keys[lo:], -2)   # positions lo..p (catch-up rows <= pos0, then this draft's)
            V = torch.stack(vals[lo:], -2)
            s = (qs[-1][..., None, :] @ K.transpose(-1, -2))
            y = s.softmax(-1, dtype=torch.float32).to(V.dtype) @ V     # [1, KV, G, 1, d]
            hp = self.finish(us[-1], y)
            logits = head.logits(hp)[0, 0]
            out.append(logits)
            if k < n_steps:
                tok = logits.argmax() if forced is None else torch.tensor(forced[k - 1], device=hfin.device)
        return out


def mtp_init_from_target(mtp, target, il):
    """Copy target layer il's weights into the MTP block (a warm start; shapes are equal)."""
    mtp.block.load_state_dict(target.blocks[il].state_dict())
