"""GGUF export of the drafters (drafters.py) for a gemma3 target (docs/formats/drafters.md 5.1, 5.2).

* DFlash: `general.architecture = "dflash"`, tensors `fc`, `enc.output_norm`, `output_norm`,
  `blk.i.*` (Qwen3-style names); no token_embd / output (borrowed from the target).
* MTP sidecar: `general.architecture = "gemma3"` with the target's hyper-parameter keys,
  `block_count` = target layers + 1, `nextn_predict_layers` = 1, tensors only at `blk.{n_layer}`
  (a gemma3 decoder block named as export_gguf.py names the target's, plus `nextn.eh_proj`,
  `nextn.enorm`, `nextn.hnorm`, `nextn.shared_head_norm`); no blk.0, token_embd or output.
Both carry the target's vocabulary (tokenizer.ggml.*, copied from the target file).
"""
import math
import os

import export_gguf
import gguf_reader as gr
import gguf_writer as gw

MATRIX_TYPES = {"f32": gw.GGML_F32, "f16": gw.GGML_F16, "q8_0": gw.GGML_Q8_0}

DFLASH_LAYER_TENSORS = {
    "attn_norm.weight": "attn_norm.weight",
    "wq.weight": "attn_q.weight",
    "wk.weight": "attn_k.weight",
    "wv.weight": "attn_v.weight",
    "wo.weight": "attn_output.weight",
    "q_norm.weight": "attn_q_norm.weight",
    "k_norm.weight": "attn_k_norm.weight",
    "ffn_norm.weight": "ffn_norm.weight",
    "ffn_gate.weight": "ffn_gate.weight",
    "ffn_up.weight": "ffn_up.weight",
    "ffn_down.weight": "ffn_down.weight",
}


def dflash_tensor_name(torch_name):
    if torch_name == "fc.weight":
        return "fc.weight"
    if torch_name == "enc_norm.weight":
        return "enc.output_norm.weight"
    if torch_name == "output_norm.weight":
        return "output_norm.weight"
    _, il, rest = torch_name.split(".", 2)  # layers.<il>.<rest>
    return f"blk.{il}.{DFLASH_LAYER_TENSORS[rest]}"


def mtp_tensor_name(torch_name, il):
    names = {"eh_proj.weight": "nextn.eh_proj.weight", "enorm.weight": "nextn.enorm.weight",
             "hnorm.weight": "nextn.hnorm.weight", "shared_head_norm.weight": "nextn.shared_head_norm.weight"}
    if torch_name in names:
        return f"blk.{il}.{names[torch_name]}"
    _, rest = torch_name.split(".", 1)  # block.<rest>
    return f"blk.{il}.{export_gguf.BLOCK_TENSORS[rest]}"


def _copy_key(w, g, key, value=None):
    vtype, etype = g.kv_types[key]
    value = g.kv[key] if value is None else value
    if vtype == gr.ARRAY:
        w.add_array(key, etype, value)
    else:
        w.add(key, vtype, value)


def add_vocab(w, g, mask_id=None):
    """The target's tokenizer.ggml.* keys, as export_gguf.add_vocab wrote them (+ the mask id)."""
    for key in g.kv:
        if key.startswith("tokenizer.ggml."):
            _copy_key(w, g, key)
    if mask_id is not None:
        w.add("tokenizer.ggml.mask_token_id", gw.UINT32, mask_id)


def _tensors(w, state, rename, matrix_type):
    for torch_name, param in state.items():
        array = param.detach().float().cpu().numpy()
        ggml_type = MATRIX_TYPES[matrix_type] if array.ndim > 1 else gw.GGML_F32
        w.add_tensor(rename(torch_name), array, ggml_type)


def export_dflash(model, target_gguf, path, name, matrix_type="q8_0"):
    cfg, p = model.cfg, "dflash."
    w = gw.GgufWriter()
    w.add("general.architecture", gw.STRING, "dflash")
    w.add("general.name", gw.STRING, name)
    w.add("general.license", gw.STRING, "PSF-2.0 (training data: Python standard library)")
    w.add(p + "context_length", gw.UINT32, cfg.n_ctx)
    w.add(p + "embedding_length", gw.UINT32, cfg.n_embd)
    w.add(p + "block_count", gw.UINT32, cfg.n_layer)
    w.add(p + "feed_forward_length", gw.UINT32, cfg.n_ff)
    w.add(p + "attention.head_count", gw.UINT32, cfg.n_head)
    w.add(p + "attention.head_count_kv", gw.UINT32, cfg.n_head_kv)
    w.add(p + "rope.freq_base", gw.FLOAT32, cfg.rope_base)
    w.add(p + "attention.layer_norm_rms_epsilon", gw.FLOAT32, cfg.norm_eps)
    w.add(p + "attention.key_length", gw.UINT32, cfg.head_dim)
    w.add(p + "attention.value_length", gw.UINT32, cfg.head_dim)
    w.add(p + "block_size", gw.UINT32, cfg.block_size)
    w.add_array(p + "target_layers", gw.INT32, list(cfg.target_layers))
    w.add(p + "embedding_scale", gw.FLOAT32, math.sqrt(cfg.n_embd))
    w.add(p + "attention.scale", gw.FLOAT32, cfg.attn_scale)
    add_vocab(w, target_gguf, mask_id=cfg.mask_id)
    _tensors(w, model.state_dict(), dflash_tensor_name, matrix_type)
    w.write(path)


def export_mtp(model, target_gguf, path, name, matrix_type="q8_0"):
    g = target_gguf
    arch = g.kv["general.architecture"]
    w = gw.GgufWriter()
    w.add("general.architecture", gw.STRING, arch)
    w.add("general.name", gw.STRING, name)
    w.add("general.license", gw.STRING, "PSF-2.0 (training data: Python standard library)")
    for key in g.kv:
        if key.startswith(arch + "."):
            _copy_key(w, g, key, model.il + 1 if key == arch + ".block_count" else None)
    w.add(arch + ".nextn_predict_layers", gw.UINT32, 1)
    add_vocab(w, g)
    _tensors(w, model.state_dict(), lambda n: mtp_tensor_name(n, model.il), matrix_type)
    w.write(path)


def import_dflash(path):
    """The inverse of export_dflash: a DFlash GGUF as a drafters.DFlash (float32, dequantized),
    so that a shipped drafter can be trained further (train_drafters.py --dflash-init)."""
    import torch
    import drafters as D
    g, p = gr.GgufFile(path), "dflash."
    if g.kv.get("general.architecture") != "dflash":
        raise ValueError(f"{path}: general.architecture is not dflash")
    cfg = D.DFlashConfig(n_vocab=len(g.kv["tokenizer.ggml.tokens"]), n_embd=g.kv[p + "embedding_length"],
                         n_layer=g.kv[p + "block_count"], n_head=g.kv[p + "attention.head_count"],
                         n_head_kv=g.kv[p + "attention.head_count_kv"], head_dim=g.kv[p + "attention.key_length"],
                         n_ff=g.kv[p + "feed_forward_length"], block_size=g.kv[p + "block_size"],
                         target_layers=tuple(g.kv[p + "target_layers"]), rope_base=g.kv[p + "rope.freq_base"],
                         norm_eps=g.kv[p + "attention.layer_norm_rms_epsilon"],
                         mask_id=g.kv["tokenizer.ggml.mask_token_id"], n_ctx=g.kv[p + "context_length"])
    if not math.isclose(g.kv[p + "attention.scale"], cfg.attn_scale, rel_tol=1e-6):
        raise ValueError(f"{path}: {p}attention.scale is not 1/sqrt(head_dim); drafters.DFlash cannot express it")
    model = D.DFlash(cfg)
    model.load_state_dict({n: torch.from_numpy(g.tensor(dflash_tensor_name(n))) for n in model.state_dict()})
    return model.eval()


def import_mtp(path, target_path):
    """The inverse of export_mtp: an MTP sidecar GGUF of the target at target_path as a drafters.MTP."""
    import torch
    import drafters as D
    g = gr.GgufFile(path)
    target_cfg = gr.gemma3_config(gr.GgufFile(target_path))
    model = D.MTP(target_cfg)
    if g.kv.get(g.kv.get("general.architecture", "") + ".block_count") != model.il + 1:
        raise ValueError(f"{path}: not an MTP sidecar of {target_path} (block_count is not its layers + 1)")
    model.load_state_dict({n: torch.from_numpy(g.tensor(mtp_tensor_name(n, model.il)))
                           for n in model.state_dict()})
    return model.eval(), target_cfg


def main():
    """Writes a shipped drafter GGUF back as a finished training checkpoint (F16 weights and the
    config, as train_drafters.py saves them), for --dflash-init, or as OUT/mtp.pt so that a
    DFlash-only run skips the MTP stage."""
    import argparse
    from drafter_loop import save_finished
    ap = argparse.ArgumentParser(description=main.__doc__)
    ap.add_argument("kind", choices=["dflash", "mtp"])
    ap.add_argument("gguf")
    ap.add_argument("out_pt")
    ap.add_argument("--target", help="the target GGUF (mtp only)")
    a = ap.parse_args()
    if a.kind == "dflash":
        model = import_dflash(a.gguf)
        config = model.cfg.to_dict()
    else:
        if not a.target:
            ap.error("mtp needs --target")
        model, target_cfg = import_mtp(a.gguf, a.target)
        config = target_cfg.to_dict()
    save_finished(a.out_pt, model, config, {"imported_from": os.path.basename(a.gguf)})
    print(f"{a.gguf} -> {a.out_pt} ({sum(p.numel() for p in model.parameters()) / 1e6:.2f}M params)")


if __name__ == "__main__":
    main()
