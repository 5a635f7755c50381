#!/usr/bin/env python3
"""Writes a Hugging Face model directory holding ONE MoE layer of a released model, at the released shapes, dtypes,
tensor names and quantized formats, with random weights: config.json, model.safetensors.index.json and two shards.
For `hymoe inspect/bench --model` on real-size layers without downloading checkpoints. Standard library only.

  scripts/make_synthetic_hf_model.py qwen3-30b-a3b /tmp/qwen3-layer          # then:
  hymoe bench --model /tmp/qwen3-layer --layer 0 --tokens 1 32 512

--experts N keeps the released shapes but stores only N routed experts (for machines with less memory than a
layer's packed weights need: a full DeepSeek-V3 layer holds about 11.6 GiB in hymoe's fp8 panels).
"""
import argparse
import json
import math
import os
import random
import struct

# name: (model_type, config keys, MoE layer, storage) at the released values.
PRESETS = {
    "mixtral-8x7b": ("mixtral", dict(hidden_size=4096, intermediate_size=14336, num_local_experts=8,
                                     num_experts_per_tok=2, num_hidden_layers=32), 0),
    "qwen1.5-moe-a2.7b": ("qwen2_moe", dict(hidden_size=2048, moe_intermediate_size=1408, num_experts=60,
                                            num_experts_per_tok=4, shared_expert_intermediate_size=5632,
                                            norm_topk_prob=False, decoder_sparse_step=1, num_hidden_layers=24), 0),
    "qwen3-30b-a3b": ("qwen3_moe", dict(hidden_size=2048, moe_intermediate_size=768, num_experts=128,
                                        num_experts_per_tok=8, norm_topk_prob=True, decoder_sparse_step=1,
                                        mlp_only_layers=[], num_hidden_layers=48), 0),
    "olmoe-1b-7b": ("olmoe", dict(hidden_size=2048, intermediate_size=1024, num_experts=64, num_experts_per_tok=8,
                                  norm_topk_prob=False, num_hidden_layers=16), 0),
    "deepseek-v2-lite": ("deepseek_v2", dict(hidden_size=2048, moe_intermediate_size=1408, n_routed_experts=64,
                                             num_experts_per_tok=6, n_shared_experts=2, topk_method="greedy",
                                             routed_scaling_factor=1.0, first_k_dense_replace=1,
                                             num_hidden_layers=27), 1),
    "deepseek-v3": ("deepseek_v3", dict(hidden_size=7168, moe_intermediate_size=2048, n_routed_experts=256,
                                        num_experts_per_tok=8, n_shared_experts=1, n_group=8, topk_group=4,
                                        norm_topk_prob=True, routed_scaling_factor=2.5, first_k_dense_replace=3,
                                        scoring_func="sigmoid", topk_method="noaux_tc", num_hidden_layers=61,
                                        quantization_config=dict(quant_method="fp8", fmt="e4m3",
                                                                 activation_scheme="dynamic",
                                                                 weight_block_size=[128, 128])), 3),
    "gpt-oss-20b": ("gpt_oss", dict(hidden_size=2880, intermediate_size=2880, num_local_experts=32,
                                    num_experts_per_tok=4, experts_per_token=4, swiglu_limit=7.0,
                                    num_hidden_layers=24,
                                    quantization_config=dict(quant_method="mxfp4", modules_to_not_convert=[])), 0),
    "gpt-oss-120b": ("gpt_oss", dict(hidden_size=2880, intermediate_size=2880, num_local_experts=128,
                                     num_experts_per_tok=4, experts_per_token=4, swiglu_limit=7.0,
                                     num_hidden_layers=36,
                                     quantization_config=dict(quant_method="mxfp4", modules_to_not_convert=[])), 0),
}

rng = random.Random(1234)


def bf16_chunk(std, count=1 << 19):
    vals = [rng.gauss(0.0, std) for _ in range(count)]
    raw = struct.pack("<%df" % count, *vals)
    return b"".join(raw[i + 2:i + 4] for i in range(0, len(raw), 4))  # top halves: bf16 (truncated)


class Tensor:
    def __init__(self, name, dtype, shape, fill):
        self.name, self.dtype, self.shape, self.fill = name, dtype, shape, fill  # fill(nbytes) -> bytes
        size = {"BF16": 2, "F32": 4, "U8": 1, "F8_E4M3": 1}[dtype]
        self.nbytes = math.prod(shape) * size


def tiled(chunk):
    def fill(n):
        start = rng.randrange(0, len(chunk) // 2) & ~3
        out = bytearray()
        while len(out) < n:
            out += chunk[start:]
            start = 0
        return bytes(out[:n])
    return fill


def fp8_codes(n):  # random e4m3 codes with |value| < 2 (exponent field <= 7): never NaN
    table = bytes((b & 0x80) | (b & 0x3F) for b in range(256))
    return os.urandom(n).translate(table)


def f32_const(value):
    return lambda n: struct.pack("<f", value) * (n // 4)


def write_shard(path, tensors):
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for t in tensors:
        header[t.name] = {"dtype": t.dtype, "shape": t.shape, "data_offsets": [offset, offset + t.nbytes]}
        offset += t.nbytes
    text = json.dumps(header).encode()
    text += b" " * (-(len(text) + 8) % 8)  # data section 8-byte aligned, as transformers writes it
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for t in tensors:
            left = t.nbytes
            while left:
                step = min(left, 256 << 20)
                f.write(t.fill(step))
                left -= step


def layer_tensors(model_type, c, layer, experts):
    D, E = c["hidden_size"], experts
    I = c.get("moe_intermediate_size", c.get("intermediate_size"))
    fp8 = c.get("quantization_config", {}).get("quant_method") == "fp8"
    router = tiled(bf16_chunk(1.5 / math.sqrt(D)))
    w_in, w_out = tiled(bf16_chunk(1 / math.sqrt(D))), tiled(bf16_chunk(1 / math.sqrt(I)))
    out = []

    def linear(name, n, k, fill):
        if fp8:
            out.append(Tensor(name, "F8_E4M3", [n, k], fp8_codes))
            out.append(Tensor(name + "_scale_inv", "F32", [-(-n // 128), -(-k // 128)], f32_const(0.5 / math.sqrt(k))))
        else:
            out.append(Tensor(name, "BF16", [n, k], fill))

    p = "model.layers.%d.%s" % (layer, "block_sparse_moe." if model_type == "mixtral" else "mlp.")
    if model_type == "gpt_oss":
        out.append(Tensor(p + "router.weight", "BF16", [E, D], router))
        out.append(Tensor(p + "router.bias", "BF16", [E], router))
        scales = lambda base: (lambda n: bytes(rng.randrange(base - 1, base + 1) for _ in range(min(n, 1 << 16))) * (n // min(n, 1 << 16)) + bytes(n % min(n, 1 << 16)))
        for proj, n, k in (("gate_up_proj", 2 * I, D), ("down_proj", D, I)):
            out.append(Tensor(p + "experts.%s_blocks" % proj, "U8", [E, n, k // 32, 16], os.urandom))
            out.append(Tensor(p + "experts.%s_scales" % proj, "U8", [E, n, k // 32], scales(127 - int(math.log2(math.sqrt(k))) - 2)))
        out.append(Tensor(p + "experts.gate_up_proj_bias", "BF16", [E, 2 * I], w_in))
        out.append(Tensor(p + "experts.down_proj_bias", "BF16", [E, D], w_out))
        return out
    out.append(Tensor(p + "gate.weight", "BF16", [E, D], router))
    if model_type == "deepseek_v3":
        out.append(Tensor(p + "gate.e_score_correction_bias", "F32", [E], lambda n: struct.pack("<%df" % (n // 4), *[rng.uniform(-0.1, 0.1) for _ in range(n // 4)])))
    names = ("w1", "w3", "w2") if model_type == "mixtral" else ("gate_proj", "up_proj", "down_proj")
    for e in range(E):
        q = p + "experts.%d." % e
        linear(q + names[0] + ".weight", I, D, w_in)
        linear(q + names[1] + ".weight", I, D, w_in)
        linear(q + names[2] + ".weight", D, I, w_out)
    shared = c.get("shared_expert_intermediate_size", 0) or I * c.get("n_shared_experts", 0)
    if shared:
        q = p + ("shared_expert." if model_type == "qwen2_moe" else "shared_experts.")
        linear(q + "gate_proj.weight", shared, D, w_in)
        linear(q + "up_proj.weight", shared, D, w_in)
        linear(q + "down_proj.weight", D, shared, w_out)
        if model_type == "qwen2_moe":
            out.append(Tensor(p + "shared_expert_gate.weight", "BF16", [1, D], router))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("preset", choices=sorted(PRESETS))
    ap.add_argument("out")
    ap.add_argument("--experts", type=int, help="routed experts to store (default: the released number)")
    a = ap.parse_args()
    model_type, c, layer = PRESETS[a.preset]
    c = dict(c, model_type=model_type, torch_dtype="bfloat16")
    experts_key = next(k for k in ("num_local_experts", "num_experts", "n_routed_experts") if k in c)
    if a.experts:
        c[experts_key] = a.experts
        if "n_group" in c:  # keep 8 groups where possible
            c["n_group"] = min(c["n_group"], a.experts // 2)
            c["topk_group"] = min(c["topk_group"], c["n_group"])
    os.makedirs(a.out, exist_ok=True)
    tensors = layer_tensors(model_type, c, layer, c[experts_key])
    half = len(tensors) // 2
    shards = {"model-00001-of-00002.safetensors": tensors[:half], "model-00002-of-00002.safetensors": tensors[half:]}
    weight_map = {}
    for name, ts in shards.items():
        write_shard(os.path.join(a.out, name), ts)
        weight_map.update({t.name: name for t in ts})
    with open(os.path.join(a.out, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": sum(t.nbytes for t in tensors)}, "weight_map": weight_map}, f, indent=2)
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(c, f, indent=2, sort_keys=True)
    print("%s: %s layer %d, %d tensors, %.1f MiB" % (a.out, model_type, layer, len(tensors),
                                                   sum(t.nbytes for t in tensors) / 2**20))


if __name__ == "__main__":
    main()
