"""Export a trained Gemma3 module and its SentencePiece vocabulary as a gemma3 GGUF file.

The module already computes what docs/formats/architectures.md 3.4 describes, so this is a renaming:
no "+1" on norm weights, no q/k permutation, tied output (no output.weight).

    python3 export_gguf.py CHECKPOINT.pt TOKENIZER.model OUT.gguf [--type f32|f16|q8_0]
"""
import argparse

import torch

import gguf_writer as gw
import tokenizer as tk
from model import Config, Gemma3

ARCH = "gemma3"
STDLIB_LICENSE = "PSF-2.0 (training data: Python standard library)"
GEN2_LICENSE = ("training data: Python source of Debian 12 python3-* packages under DFSG-free licences "
                "(tools/train/corpus-packages.tsv lists each package, version and licence)")

# torch parameter suffix in a Block -> GGUF tensor name suffix (docs/formats/architectures.md 3.1)
BLOCK_TENSORS = {
    "attn_norm.weight": "attn_norm.weight",
    "wq.weight": "attn_q.weight",
    "wk.weight": "attn_k.weight",
    "wv.weight": "attn_v.weight",
    "wo.weight": "attn_output.weight",
    "q_norm.weight": "attn_q_norm.weight",
    "k_norm.weight": "attn_k_norm.weight",
    "post_attention_norm.weight": "post_attention_norm.weight",
    "ffn_norm.weight": "ffn_norm.weight",
    "ffn_gate.weight": "ffn_gate.weight",
    "ffn_up.weight": "ffn_up.weight",
    "ffn_down.weight": "ffn_down.weight",
    "post_ffw_norm.weight": "post_ffw_norm.weight",
}


def gguf_tensor_name(torch_name):
    if torch_name == "token_embd.weight" or torch_name == "output_norm.weight":
        return torch_name
    _, il, rest = torch_name.split(".", 2)  # blocks.<il>.<rest>
    return f"blk.{il}.{BLOCK_TENSORS[rest]}"


def add_hparams(w, cfg, name, license=STDLIB_LICENSE):
    p = ARCH + "."
    w.add("general.architecture", gw.STRING, ARCH)
    w.add("general.name", gw.STRING, name)
    w.add("general.license", gw.STRING, license)
    w.add(p + "context_length", gw.UINT32, cfg.n_ctx)
    w.add(p + "embedding_length", gw.UINT32, cfg.n_embd)
    w.add(p + "block_count", gw.UINT32, cfg.n_layer)
    w.add(p + "feed_forward_length", gw.UINT32, cfg.n_ff)
    w.add(p + "attention.head_count", gw.UINT32, cfg.n_head)
    w.add(p + "attention.head_count_kv", gw.UINT32, cfg.n_head_kv)
    w.add(p + "attention.key_length", gw.UINT32, cfg.head_dim)
    w.add(p + "attention.value_length", gw.UINT32, cfg.head_dim)
    w.add(p + "attention.layer_norm_rms_epsilon", gw.FLOAT32, cfg.norm_eps)
    w.add(p + "attention.sliding_window", gw.UINT32, cfg.sliding_window)
    w.add(p + "attention.sliding_window_pattern", gw.UINT32, cfg.swa_period)
    w.add(p + "rope.freq_base", gw.FLOAT32, cfg.rope_base)
    w.add(p + "rope.freq_base_swa", gw.FLOAT32, cfg.rope_base_swa)


def add_vocab(w, sp):
    tokens, scores, types = tk.gguf_vocab(sp)
    w.add("tokenizer.ggml.model", gw.STRING, "llama")
    w.add_array("tokenizer.ggml.tokens", gw.STRING, tokens)
    w.add_array("tokenizer.ggml.scores", gw.FLOAT32, scores)
    w.add_array("tokenizer.ggml.token_type", gw.INT32, types)
    w.add("tokenizer.ggml.unknown_token_id", gw.UINT32, sp.unk_id())
    w.add("tokenizer.ggml.bos_token_id", gw.UINT32, sp.bos_id())
    w.add("tokenizer.ggml.eos_token_id", gw.UINT32, sp.eos_id())
    w.add("tokenizer.ggml.add_bos_token", gw.BOOL, True)
    w.add("tokenizer.ggml.add_eos_token", gw.BOOL, False)
    w.add("tokenizer.ggml.add_space_prefix", gw.BOOL, False)  # trained with add_dummy_prefix=False


MATRIX_TYPES = {"f32": gw.GGML_F32, "f16": gw.GGML_F16, "q8_0": gw.GGML_Q8_0}


def export(model, sp, path, name, f16=False, matrix_type=None, license=STDLIB_LICENSE):
    """matrix_type: "f32", "f16" or "q8_0" for the 2-D tensors (default: f16 if f16 else f32)."""
    matrix_type = matrix_type or ("f16" if f16 else "f32")
    w = gw.GgufWriter()
    add_hparams(w, model.cfg, name, license)
    add_vocab(w, sp)
    for torch_name, param in model.state_dict().items():
        array = param.detach().float().cpu().numpy()
        # 1-D tensors (norms) stay F32, as llama.cpp's converter keeps them.
        ggml_type = MATRIX_TYPES[matrix_type] if array.ndim > 1 else gw.GGML_F32
        w.add_tensor(gguf_tensor_name(torch_name), array, ggml_type)
    w.write(path)


def load_checkpoint(path):
    ckpt = torch.load(path, map_location="cpu", weights_only=False)
    model = Gemma3(Config(**ckpt["config"]))
    model.load_state_dict({k: v.float() for k, v in ckpt["model"].items()})
    return model


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("checkpoint")
    ap.add_argument("tokenizer")
    ap.add_argument("out")
    ap.add_argument("--name", default="kakeya-pystdlib")
    ap.add_argument("--type", choices=sorted(MATRIX_TYPES), default="f32",
                    help="type of the matrices (norms stay F32); the shipped files use q8_0")
    ap.add_argument("--license", choices=["stdlib", "gen2"], default="stdlib",
                    help="general.license: the training data's (gen2: the Debian corpus of issue 42)")
    args = ap.parse_args()
    export(load_checkpoint(args.checkpoint), tk.load(args.tokenizer), args.out, args.name,
           matrix_type=args.type, license=GEN2_LICENSE if args.license == "gen2" else STDLIB_LICENSE)


if __name__ == "__main__":
    main()
