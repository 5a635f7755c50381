#!/usr/bin/env python3
"""Writes Hugging Face MoE cases of families beyond the shared set into tests/data/conformance/hf-extra/.

Not run by the build or CI; its output is committed. Each case has the layout of tests/data/conformance/hf/ (its
README is the contract): a tiny 2-layer model of the family built from a config with transformers (PyPI, no
downloads), layer 1's MoE block given seeded random weights and saved with save_pretrained (which writes the
checkpoint names real files use), `config.json` as written, `weights.safetensors` with layer 1's MoE tensors,
`input.safetensors` (x, (2, 5, 64) F32), `expected.safetensors` (y from transformers' eager expert loop after
from_pretrained, route.indices (T, K) I64 and route.weights (T, K) F32 in canonical order: descending selection
score) and `meta.json` (versions, seed, margins, the error of transformers' y against a float64 NumPy computation
of the family's semantics, suggested_tolerance).

Usage (a virtual environment with `pip install transformers==5.24.0 torch numpy safetensors`):
    python scripts/make_hf_family_cases.py [--out tests/data/conformance/hf-extra]
"""
import argparse
import json
import os
import tempfile

import numpy as np
import torch
import transformers
from safetensors.numpy import save_file
from safetensors import safe_open

MARGIN = 2e-4  # gaps of the biased sigmoid scores and group scores, float64, as the shared DeepSeek-V3 cases


def glm4_moe_config():
    # GLM-4.5/4.6's block: DeepSeek-V3's router and shared expert. n_group 4 > topk_group 2 makes the group
    # limit act; routed_scaling_factor is GLM's own default (1.0), which a port must not take from DeepSeek (2.5).
    return transformers.Glm4MoeConfig(
        vocab_size=64, hidden_size=64, intermediate_size=96, moe_intermediate_size=32, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=4, head_dim=16, max_position_embeddings=64, n_routed_experts=16,
        num_experts_per_tok=4, n_shared_experts=1, n_group=4, topk_group=2, norm_topk_prob=True,
        first_k_dense_replace=1)


def dots1_config():
    # dots.llm1: DeepSeek-V3's router and shared expert as released (n_group 1, topk_group 1) with Dots1Config's
    # norm_topk_prob default, false: the weights are the unbiased scores, not renormalized.
    return transformers.Dots1Config(
        vocab_size=64, hidden_size=64, intermediate_size=96, moe_intermediate_size=32, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=4, head_dim=16, max_position_embeddings=64, n_routed_experts=16,
        num_experts_per_tok=4, n_shared_experts=2, first_k_dense_replace=1)


# MLA attention at small sizes (the MoE block does not depend on them).
MLA = dict(kv_lora_rank=16, q_lora_rank=32, qk_rope_head_dim=8, qk_nope_head_dim=8, v_head_dim=16)


def deepseek_v32_config():
    # DeepSeek-V3.2: V3's block; MoE layers where mlp_layer_types says "sparse" (here given, not derived).
    return transformers.DeepseekV32Config(
        vocab_size=64, hidden_size=64, intermediate_size=96, moe_intermediate_size=32, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=64, n_routed_experts=16,
        num_experts_per_tok=4, n_shared_experts=1, n_group=4, topk_group=2, mlp_layer_types=["dense", "sparse"],
        index_topk=8, index_head_dim=16, index_n_heads=2, **MLA)


def glm4_moe_lite_config():
    # GLM-4.7-Flash (glm4_moe_lite): V3's block with its own routed_scaling_factor default 1.8, mlp_layer_types
    # derived as ["dense"] + ["sparse"] * (n - 1).
    return transformers.Glm4MoeLiteConfig(
        vocab_size=64, hidden_size=64, intermediate_size=96, moe_intermediate_size=32, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=64, n_routed_experts=16,
        num_experts_per_tok=4, n_shared_experts=1, **MLA)


CASES = [
    dict(name="glm4_moe_e16_g4_tg2_k4", family="glm4_moe", config=glm4_moe_config,
         model_class="Glm4MoeForCausalLM", description="GLM-4.5 style (glm4_moe): sigmoid scores, "
         "e_score_correction_bias for choosing, n_group=4 > topk_group=2, norm_topk_prob, routed_scaling_factor "
         "1.0 (GLM's default), 1 shared expert, first_k_dense_replace 1"),
    dict(name="dots1_e16_k4", family="dots1", config=dots1_config, model_class="Dots1ForCausalLM",
         description="dots.llm1 (dots1): sigmoid scores, e_score_correction_bias for choosing, one group, weights not "
         "renormalized (norm_topk_prob false, Dots1Config's default), routed_scaling_factor 1.0, 2 shared experts"),
    dict(name="deepseek_v32_e16_g4_tg2_k4", family="deepseek_v32", config=deepseek_v32_config,
         model_class="DeepseekV32ForCausalLM", description="DeepSeek-V3.2 (deepseek_v32): V3's router and shared "
         "expert, n_group=4 > topk_group=2, scale 2.5, layer 1 MoE by mlp_layer_types"),
    dict(name="glm4_moe_lite_e16_k4", family="glm4_moe_lite", config=glm4_moe_lite_config,
         model_class="Glm4MoeLiteForCausalLM", description="GLM-4.7-Flash (glm4_moe_lite): V3's router, one group, "
         "routed_scaling_factor 1.8 (its default), 1 shared expert, layer 1 MoE by the derived mlp_layer_types"),
]


def route64(router, bias, x, n_group, topk_group, k, norm, scale):
    """DeepSeek-V3/GLM routing in float64: (indices in canonical order, weights, margins)."""
    s = 1.0 / (1.0 + np.exp(-(x @ router.T)))
    c = s + bias
    E = c.shape[0]
    per = E // n_group
    gs = np.array([np.sort(c[g * per:(g + 1) * per])[::-1][:2].sum() for g in range(n_group)])
    gorder = np.argsort(-gs, kind="stable")
    keep = gorder[:topk_group]
    masked = np.full(E, -np.inf)
    for g in keep:
        masked[g * per:(g + 1) * per] = c[g * per:(g + 1) * per]
    order = np.argsort(-masked, kind="stable")
    idx = order[:k]
    w = s[idx]
    if norm:
        w = w / (w.sum() + 1e-20)
    w = w * scale
    finite = masked[np.isfinite(masked)]
    srt = np.sort(finite)[::-1]
    cut = srt[k - 1] - srt[k] if len(srt) > k else np.inf
    slot = np.min(np.diff(-srt[:k])) if k > 1 else np.inf
    gsrt = np.sort(gs)[::-1]
    group_cut = gsrt[topk_group - 1] - gsrt[topk_group] if topk_group < n_group else np.inf
    unlimited = np.argsort(-c, kind="stable")[:k]
    unbiased = np.argsort(-s, kind="stable")[:k]
    return idx, w, (cut, slot, group_cut), set(unlimited) != set(idx), set(unbiased) != set(idx)


def build_case(out_dir, spec):
    cfg = spec["config"]()
    E, K, D, H = cfg.n_routed_experts, cfg.num_experts_per_tok, cfg.hidden_size, cfg.moe_intermediate_size
    prefix = "model.layers.1.mlp."
    for seed in range(700000, 700000 + 1000):
        rng = np.random.default_rng(seed)
        router = (rng.standard_normal((E, D)) * 1.5 / np.sqrt(D)).astype(np.float32)
        bias = rng.uniform(-0.15, 0.15, E).astype(np.float32)
        x = rng.standard_normal((2, 5, D)).astype(np.float32)
        xs = x.reshape(-1, D).astype(np.float64)
        routes = [route64(router.astype(np.float64), bias.astype(np.float64), t, cfg.n_group, cfg.topk_group, K,
                          cfg.norm_topk_prob, cfg.routed_scaling_factor) for t in xs]
        margins = np.min([r[2] for r in routes], axis=0)
        by_groups = sum(r[3] for r in routes)
        by_bias = sum(r[4] for r in routes)
        groups_act = cfg.n_group > cfg.topk_group
        if margins.min() >= MARGIN and (by_groups >= 2 or not groups_act) and by_bias >= 2:
            break
    else:
        raise SystemExit(f"{spec['name']}: no seed gives margins >= {MARGIN}")
    gate = (rng.standard_normal((E, H, D)) / np.sqrt(D)).astype(np.float32)
    up = (rng.standard_normal((E, H, D)) / np.sqrt(D)).astype(np.float32)
    down = (rng.standard_normal((E, D, H)) / np.sqrt(H)).astype(np.float32)
    Hs = H * cfg.n_shared_experts
    shared = {n: (rng.standard_normal(s) / np.sqrt(s[1])).astype(np.float32)
              for n, s in (("gate_proj", (Hs, D)), ("up_proj", (Hs, D)), ("down_proj", (D, Hs)))}

    torch.manual_seed(0)
    model = getattr(transformers, spec["model_class"])(cfg).eval()
    block = model.model.layers[1].mlp
    with torch.no_grad():
        block.gate.weight.copy_(torch.from_numpy(router))
        block.gate.e_score_correction_bias.copy_(torch.from_numpy(bias))
        block.experts.gate_up_proj.copy_(torch.from_numpy(np.concatenate([gate, up], axis=1)))
        block.experts.down_proj.copy_(torch.from_numpy(down))
        for n, v in shared.items():
            getattr(block.shared_experts, n).weight.copy_(torch.from_numpy(v))

    os.makedirs(out_dir, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        model.save_pretrained(tmp)
        with open(os.path.join(tmp, "config.json")) as f:
            config = json.load(f)
        weights = {}
        with safe_open(os.path.join(tmp, "model.safetensors"), "np") as f:
            for n in f.keys():
                if n.startswith(prefix):
                    weights[n] = f.get_tensor(n)
        loaded = getattr(transformers, spec["model_class"]).from_pretrained(
            tmp, dtype=torch.float32, experts_implementation="eager").eval()
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(config, f, indent=2, sort_keys=True)
        f.write("\n")
    save_file(weights, os.path.join(out_dir, "weights.safetensors"), metadata={"format": "pt"})
    assert f"{prefix}experts.{E - 1}.down_proj.weight" in weights, sorted(weights)[:8]

    lblock = loaded.model.layers[1].mlp
    with torch.no_grad():
        xt = torch.from_numpy(x)
        y = lblock(xt).numpy()
        _, tw, ti = lblock.gate(xt.reshape(-1, D))
    indices = np.stack([r[0] for r in routes]).astype(np.int64)
    # Canonical slot order (descending biased score): transformers' topk(sorted=False) may differ, its set may not.
    tw, ti = tw.numpy(), ti.numpy()
    weights_canonical = np.zeros_like(tw)
    for t in range(ti.shape[0]):
        assert set(ti[t]) == set(indices[t]), (t, ti[t], indices[t])
        for slot, e in enumerate(indices[t]):
            weights_canonical[t, slot] = tw[t, list(ti[t]).index(e)]

    # float64 y from the checkpoint's values.
    y64 = np.zeros_like(xs)
    silu = lambda z: z / (1.0 + np.exp(-z))
    for t in range(xs.shape[0]):
        for e, w in zip(routes[t][0], routes[t][1]):
            h = silu(gate[e].astype(np.float64) @ xs[t]) * (up[e].astype(np.float64) @ xs[t])
            y64[t] += w * (down[e].astype(np.float64) @ h)
        hs = silu(shared["gate_proj"].astype(np.float64) @ xs[t]) * (shared["up_proj"].astype(np.float64) @ xs[t])
        y64[t] += shared["down_proj"].astype(np.float64) @ hs
    y_err = float(np.abs(y.reshape(-1, D) - y64).max())
    w_err = float(np.abs(weights_canonical - np.stack([r[1] for r in routes])).max())
    y_max = float(np.abs(y).max())

    save_file({"x": x}, os.path.join(out_dir, "input.safetensors"))
    save_file({"y": y, "route.indices": indices, "route.weights": weights_canonical.astype(np.float32)},
              os.path.join(out_dir, "expected.safetensors"))
    meta = {
        "name": spec["name"], "family": spec["family"], "description": spec["description"],
        "generator": "scripts/make_hf_family_cases.py", "transformers_version": transformers.__version__,
        "torch_version": torch.__version__, "numpy_version": np.__version__, "config_class": type(cfg).__name__,
        "model_class": spec["model_class"], "checkpoint_prefix": prefix, "layer": 1, "dtype": "float32",
        "input_shape": list(x.shape), "token_order": "t = b*L + l", "experts_implementation": "eager",
        "seed": seed, "rank_space": "biased sigmoid score", "margin_threshold": MARGIN,
        "margins": {"topk_cut": float(margins[0]), "between_selected_slots": float(margins[1]),
                    "group_cut": float(margins[2]) if np.isfinite(margins[2]) else None},
        "stats": {"tokens_where_group_limit_changes_selection": int(by_groups),
                  "tokens_where_bias_changes_selection": int(by_bias)},
        "errors": {"y_vs_fp64": y_err, "route_weights_vs_fp64": w_err},
        "suggested_tolerance": {"y": {"rtol": 1e-4, "atol": 2e-5 * max(1.0, y_max)},
                                "route.weights": {"rtol": 1e-5, "atol": 1e-6}, "route.indices": "exact"},
    }
    with open(os.path.join(out_dir, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")
    print(f"{spec['name']}: seed {seed}, margins {margins}, groups change {by_groups}, bias changes {by_bias}, "
          f"y vs fp64 {y_err:.2e}, max|y| {y_max:.3f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "tests", "data", "conformance",
                                                  "hf-extra"))
    args = ap.parse_args()
    for spec in CASES:
        build_case(os.path.join(args.out, spec["name"]), spec)


if __name__ == "__main__":
    main()
