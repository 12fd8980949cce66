"""The gemma3 forward pass exactly as docs/formats/architectures.md 3.2-3.4 (llama.cpp semantics)
describes it.

Because the PyTorch module computes what kakeya and llama.cpp compute, the export is a
plain copy of the weights: norm weights are used as x_hat * w (no Gemma "1 + w"), q/k are
not permuted (NEOX rope pairs x[i] with x[i + d/2]), and the output head is the embedding.
"""
import math
from dataclasses import asdict, dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class Config:
    n_vocab: int
    n_embd: int = 320
    n_layer: int = 8
    n_head: int = 5
    n_head_kv: int = 1
    head_dim: int = 64
    n_ff: int = 960
    n_ctx: int = 512            # training window = gemma3.context_length
    sliding_window: int = 128   # gemma3.attention.sliding_window
    swa_period: int = 6         # layer il slides iff il % period < period - 1
    rope_base: float = 1e6      # global layers
    rope_base_swa: float = 1e4  # sliding layers
    norm_eps: float = 1e-6
    dropout: float = 0.0        # training only (residual branches); not part of the GGUF

    def is_swa(self, il):
        return il % self.swa_period < self.swa_period - 1

    def to_dict(self):
        return asdict(self)


def rms_norm(x, weight, eps):
    # Mean of squares in float32 whatever the autocast dtype (ggml accumulates in double
    # and casts the mean to float; float32 is within its rounding here).
    xf = x.float()
    xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return xf * weight


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))  # stored as is in GGUF

    def forward(self, x):
        return rms_norm(x, self.weight, self.eps)


def rope_tables(n_ctx, head_dim, base):
    """cos/sin [n_ctx, head_dim/2] for theta_i = p * base^(-2i/d) (docs/formats/architectures.md 3.3)."""
    inv_freq = base ** (-torch.arange(0, head_dim // 2, dtype=torch.float64) * 2 / head_dim)
    angles = torch.arange(n_ctx, dtype=torch.float64)[:, None] * inv_freq[None, :]
    return torch.cos(angles).float(), torch.sin(angles).float()


def apply_rope_neox(x, cos, sin):
    """x [B, H, T, D]: rotate the pairs (x[i], x[i + D/2]) (ggml NEOX mode)."""
    half = x.shape[-1] // 2
    a, b = x[..., :half], x[..., half:]
    return torch.cat((a * cos - b * sin, a * sin + b * cos), dim=-1)


def attention_mask(n_ctx, window):
    """Boolean [T, T], True where query i may see key j: j <= i and i - j < window."""
    i = torch.arange(n_ctx)[:, None]
    j = torch.arange(n_ctx)[None, :]
    allowed = j <= i
    if window > 0:
        allowed &= (i - j) < window
    return allowed


HAS_SDPA = hasattr(F, "scaled_dot_product_attention")  # torch >= 2.0 (not Debian's 1.13)


def full_attention(q, k, v, mask):
    """q [B, H, T, D], k/v [B, KV, T, D], mask [T, T] (True = visible) -> [B, H, T, D].
    GQA: consecutive query heads share a KV head (h // (H / KV)); a broadcast over the group
    instead of copies of K and V. The [T, T] tensors stay in the compute dtype; softmax
    accumulates in float32."""
    B, H, T, D = q.shape
    KV = k.shape[1]
    q = q.reshape(B, KV, H // KV, T, D) * (1.0 / math.sqrt(D))
    scores = (q @ k.unsqueeze(2).transpose(-1, -2)).masked_fill(~mask, float("-inf"))
    probs = scores.softmax(-1, dtype=torch.float32).to(v.dtype)
    return (probs @ v.unsqueeze(2)).reshape(B, H, T, D)


def local_mask(n_chunks, window, device):
    """[n_chunks, W, 2W]: query a of chunk c sees key b of (chunk c-1 ++ chunk c) iff
    a < b <= a + W, i.e. j <= i and i - j < W; chunk 0 has no previous chunk."""
    a = torch.arange(window, device=device)[:, None]
    b = torch.arange(2 * window, device=device)[None, :]
    m = ((b > a) & (b <= a + window)).expand(n_chunks, window, 2 * window).clone()
    m[0, :, :window] = False
    return m


def local_attention(q, k, v, window):
    """Sliding-window causal attention computed by chunks of W queries against the 2W keys
    that can reach them: exactly full_attention with attention_mask(T, W), in O(T * 2W)
    instead of O(T^2). q [B, H, T, D], k/v [B, KV, T, D]."""
    B, H, T, D = q.shape
    KV, W = k.shape[1], window
    pad = (-T) % W
    if pad:
        q, k, v = (F.pad(t, (0, 0, 0, pad)) for t in (q, k, v))
    n = (T + pad) // W

    def pairs(t):  # [B, KV, n, 2W, D]: previous chunk (zeros for chunk 0) ++ this chunk
        c = t.reshape(B, KV, n, W, D)
        return torch.cat((torch.cat((torch.zeros_like(c[:, :, :1]), c[:, :, :-1]), 2), c), 3)

    kk, vv = pairs(k), pairs(v)
    mask = local_mask(n, W, q.device)
    qc = q.reshape(B, KV, H // KV, n, W, D)
    if HAS_SDPA and q.is_cuda:
        G = H // KV
        y = F.scaled_dot_product_attention(
            qc.reshape(B * H, n, W, D), *(t.unsqueeze(2).expand(B, KV, G, n, 2 * W, D).reshape(B * H, n, 2 * W, D)
                                          for t in (kk, vv)), attn_mask=mask[None])
    else:
        scores = ((qc * (1.0 / math.sqrt(D))) @ kk.unsqueeze(2).transpose(-1, -2)).masked_fill(~mask, float("-inf"))
        y = scores.softmax(-1, dtype=torch.float32).to(v.dtype) @ vv.unsqueeze(2)
    return y.reshape(B, H, n * W, D)[:, :, :T]


class Block(nn.Module):
    def __init__(self, cfg, il):
        super().__init__()
        self.cfg = cfg
        self.swa = cfg.is_swa(il)
        d, e = cfg.head_dim, cfg.norm_eps
        self.attn_norm = RMSNorm(cfg.n_embd, e)
        self.wq = nn.Linear(cfg.n_embd, cfg.n_head * d, bias=False)
        self.wk = nn.Linear(cfg.n_embd, cfg.n_head_kv * d, bias=False)
        self.wv = nn.Linear(cfg.n_embd, cfg.n_head_kv * d, bias=False)
        self.wo = nn.Linear(cfg.n_head * d, cfg.n_embd, bias=False)
        self.q_norm = RMSNorm(d, e)
        self.k_norm = RMSNorm(d, e)
        self.post_attention_norm = RMSNorm(cfg.n_embd, e)
        self.ffn_norm = RMSNorm(cfg.n_embd, e)
        self.ffn_gate = nn.Linear(cfg.n_embd, cfg.n_ff, bias=False)
        self.ffn_up = nn.Linear(cfg.n_embd, cfg.n_ff, bias=False)
        self.ffn_down = nn.Linear(cfg.n_ff, cfg.n_embd, bias=False)
        self.post_ffw_norm = RMSNorm(cfg.n_embd, e)

    def attention(self, x, cos, sin, mask):
        cfg = self.cfg
        B, T, _ = x.shape
        q = self.wq(x).view(B, T, cfg.n_head, cfg.head_dim)
        k = self.wk(x).view(B, T, cfg.n_head_kv, cfg.head_dim)
        v = self.wv(x).view(B, T, cfg.n_head_kv, cfg.head_dim)
        # qk-norm per head, before rope (gemma3 / qwen3).
        q = self.q_norm(q).to(v.dtype).transpose(1, 2)
        k = self.k_norm(k).to(v.dtype).transpose(1, 2)
        v = v.transpose(1, 2)
        # The float32 rope tables promote q and k; SDPA wants one dtype for q, k and v.
        q, k = apply_rope_neox(q, cos, sin).to(v.dtype), apply_rope_neox(k, cos, sin).to(v.dtype)
        if self.swa and T > 2 * cfg.sliding_window:
            y = local_attention(q, k, v, cfg.sliding_window)
        elif HAS_SDPA and q.is_cuda:
            y = F.scaled_dot_product_attention(q, *(t.repeat_interleave(cfg.n_head // cfg.n_head_kv, 1)
                                                    for t in (k, v)), attn_mask=None if not self.swa else mask,
                                               is_causal=not self.swa)
        else:
            y = full_attention(q, k, v, mask)
        return self.wo(y.transpose(1, 2).reshape(B, T, cfg.n_head * cfg.head_dim))

    def forward(self, h, rope, masks):
        cos, sin = rope["swa" if self.swa else "global"]
        mask = masks["swa" if self.swa else "global"]
        p = self.cfg.dropout if self.training else 0.0
        a = self.attention(self.attn_norm(h), cos, sin, mask)
        h = h + F.dropout(self.post_attention_norm(a), p)
        x = self.ffn_norm(h)
        y = self.ffn_down(F.gelu(self.ffn_gate(x), approximate="tanh") * self.ffn_up(x))
        return h + F.dropout(self.post_ffw_norm(y), p)


class Gemma3(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.token_embd = nn.Embedding(cfg.n_vocab, cfg.n_embd)
        self.blocks = nn.ModuleList(Block(cfg, il) for il in range(cfg.n_layer))
        self.output_norm = RMSNorm(cfg.n_embd, cfg.norm_eps)
        self._tables = {}  # per (T, device): rope tables and masks, rebuilt lazily
        self.reset_parameters()

    def reset_parameters(self):
        # Embeddings are multiplied by sqrt(n_embd), so start them at 1/sqrt(n_embd)
        # scale; projections get the usual small normal init.
        std = 0.02
        nn.init.normal_(self.token_embd.weight, std=1.0 / math.sqrt(self.cfg.n_embd))
        for block in self.blocks:
            for lin in (block.wq, block.wk, block.wv, block.wo, block.ffn_gate, block.ffn_up, block.ffn_down):
                nn.init.normal_(lin.weight, std=std)

    def tables(self, T, device):
        key = (T, str(device))
        if key not in self._tables:
            cfg = self.cfg
            rope = {
                "global": tuple(t.to(device) for t in rope_tables(T, cfg.head_dim, cfg.rope_base)),
                "swa": tuple(t.to(device) for t in rope_tables(T, cfg.head_dim, cfg.rope_base_swa)),
            }
            masks = {
                "global": attention_mask(T, 0).to(device),
                "swa": attention_mask(T, cfg.sliding_window).to(device),
            }
            self._tables[key] = (rope, masks)
        return self._tables[key]

    def forward(self, tokens):
        """tokens [B, T] (positions 0..T-1) -> logits [B, T, n_vocab] in float32."""
        rope, masks = self.tables(tokens.shape[1], tokens.device)
        h = self.token_embd(tokens) * math.sqrt(self.cfg.n_embd)
        for block in self.blocks:
            h = block(h, rope, masks)
        x = self.output_norm(h).to(h.dtype)
        return F.linear(x, self.token_embd.weight).float()

    def n_params(self):
        return sum(p.numel() for p in self.parameters())
