#!/usr/bin/env python3
"""Writes the extra GGUF MoE cases under tests/data/conformance/gguf-extra/ (not run in CI; its output is committed).

Each case is laid out like the shared cases in tests/data/conformance/gguf/ (read that README: it is the contract):
model.gguf written by PyPI's `gguf` (llama.cpp's own writer) with a dense decoy block 0 and the MoE block 1,
input.safetensors with x (T, D) F32 (every row RMS 1), expected.safetensors with y (T, D) F32, route.indices (T, K)
I64 and route.weights (T, K) F32 computed in float64 on the dequantized weights with llama.cpp's build_moe_ffn
semantics, and meta.json (dims, semantics, margins, suggested_tolerance, tensor types).

Quantized tensors are random blocks (every field random: scales, mins, high bits, signs of d), their d/dmin scaled
so the weights have std 1/sqrt(fan_in); the values used for the expected output are gguf-py's dequantization of
those exact bytes. Tokens are drawn until every routing decision is at least 2e-3 from a tie (top-k cut, slot
order, deepseek2's group cut) and, in the deepseek2 case, until the selection bias and the group limit each change
the selected experts of at least two tokens.

Usage (in a virtual environment with `pip install gguf numpy`):
    python scripts/make_gguf_cases.py [--out tests/data/conformance/gguf-extra] [--case NAME ...]
"""
import argparse
import hashlib
import json
import os
import struct

import numpy as np
import gguf
from gguf import GGMLQuantizationType as Q

T = 7
MARGIN = 2e-3
# Architectures whose MoE metadata is deepseek2's (llama.cpp reads the same keys; glm4moe's gating defaults to sigmoid).
DEEPSEEK2_LIKE = ("deepseek2", "glm4moe", "dots1", "bailingmoe2", "deepseek32", "glm-dsa", "afmoe", "kimi-linear",
                  "exaone-moe", "cohere2moe", "dots3note", "laguna", "hy_v3", "hy_v4", "glm5-next", "step35",
                  "bailingmoe3", "minimax-m3", "deepseek4", "deepseek2-ocr",
                  "mistral4", "nemotron_h_moe")
# Of those, the ones that size their shared expert by expert_shared_feed_forward_length (the count written as 1).
SHARED_LENGTH_LIKE = ("exaone-moe", "cohere2moe", "laguna", "hy_v3", "step35", "bailingmoe3", "nemotron_h_moe")
# Architectures whose graph fixes softmax but reads the shared-expert count, leading dense blocks and (some) the
# normalization and scale as deepseek2 does.
SOFTMAX_SHARED_COUNT = ("deepseek", "bailingmoe")
NORM_FLOOR = 6.103515625e-5
# Architectures whose experts' hidden size llama.cpp takes from feed_forward_length.
FF_LENGTH_HIDDEN = ("llama", "olmoe", "granitemoe", "phimoe", "dbrx", "mistral3", "jamba", "minimax-m2", "granitehybrid",
                    "minimax-01", "arctic", "minicpm", "granite_swa")
# Architectures without deepseek2's metadata whose graph reads expert_gating_func (required there).
GATING_KEY = ("minimax-m2", "lfm2moe")

# Byte offsets of the f16 scale fields (d, and dmin where present) inside one block.
SCALE_FIELDS = {Q.Q8_0: [0], Q.Q4_0: [0], Q.Q4_1: [0, 2], Q.Q5_0: [0], Q.Q5_1: [0, 2], Q.Q4_K: [0, 2], Q.Q5_K: [0, 2],
                Q.Q6_K: [208], Q.IQ4_NL: [0], Q.IQ4_XS: [0], Q.Q2_K: [80, 82], Q.Q3_K: [108], Q.TQ1_0: [52],
                Q.TQ2_0: [64], Q.IQ2_XXS: [0], Q.IQ2_XS: [0], Q.IQ2_S: [0], Q.IQ3_XXS: [0], Q.IQ3_S: [0], Q.IQ1_S: [0],
                Q.IQ1_M: []}
# The second f16 field of the types with offsets, relative to d: K-quants' dmin (positive; the offset is -dmin * m)
# and Q4_1/Q5_1's m (the offset itself), both so that the values centre near zero.
OFFSET_FIELD = {Q.Q4_K: 7.5, Q.Q5_K: 7.5, Q.Q4_1: -7.5, Q.Q5_1: -15.5, Q.Q2_K: 1.5}


def random_mxfp4_blocks(rng, rows, cols):
    """Random MXFP4 blocks (every nibble random) whose E8M0 exponents put the weights' std near 1/sqrt(cols), each
    block's exponent one of three around it; returns (raw, values)."""
    n_blocks = rows * cols // 32
    raw = rng.integers(0, 256, size=(n_blocks, 17), dtype=np.uint8)
    kvalue_rms = np.sqrt(np.mean(np.array(gguf.quants.MXFP4.kvalues, dtype=np.float64) ** 2))
    e = 128 + int(np.round(np.log2(1.0 / (np.sqrt(cols) * kvalue_rms))))
    raw[:, 0] = e + rng.integers(-1, 2, size=n_blocks)
    raw = raw.reshape(rows, -1)
    return raw, gguf.quants.dequantize(raw, Q.MXFP4).astype(np.float64)


def set_iq1_m_d(raw, d):
    """IQ1_M keeps its f16 d in the top nibbles of the four uint16 scale words (bytes 48-55): nibble i in word i."""
    bits = np.asarray(d, dtype=np.float64).astype(np.float16).view(np.uint16)
    words = raw[:, 48:56].copy().view(np.uint16)
    for i in range(4):
        words[:, i] = (words[:, i] & 0x0FFF) | (((bits >> (4 * i)) & 0xF) << 12)
    raw[:, 48:56] = words.view(np.uint8)


def iq1_m_d(raw):
    words = raw[:, 48:56].copy().view(np.uint16)
    bits = sum(((words[:, i] >> 12) & 0xF).astype(np.uint16) << (4 * i) for i in range(4)).astype(np.uint16)
    return bits.view(np.float16).astype(np.float64)


def random_blocks(rng, qtype, rows, cols):
    """Random raw blocks of `qtype` for a (rows, cols) matrix, scaled to std 1/sqrt(cols); returns (raw, values)."""
    if qtype == Q.MXFP4:
        return random_mxfp4_blocks(rng, rows, cols)
    block_values, block_bytes = gguf.GGML_QUANT_SIZES[qtype]
    n_blocks = rows * cols // block_values
    raw = rng.integers(0, 256, size=(n_blocks, block_bytes), dtype=np.uint8)
    fields = SCALE_FIELDS[qtype]
    # d (and dmin or m) random in +-[0.5, 1.5]; K-quant d and dmin positive as ggml writes them (Q6_K's, Q4_0's, Q5_0's,
    # Q8_0's and the IQ4 types' d may be negative).
    for i, off in enumerate(fields):
        mag = rng.uniform(0.5, 1.5, size=n_blocks)
        if qtype in (Q.Q8_0, Q.Q4_0, Q.Q5_0, Q.Q6_K, Q.IQ4_NL, Q.IQ4_XS, Q.Q3_K, Q.TQ1_0, Q.TQ2_0):
            mag *= rng.choice([-1.0, 1.0], size=n_blocks)
        if i == 1:
            mag *= OFFSET_FIELD[qtype]
        raw[:, off:off + 2] = mag.astype(np.float16).view(np.uint8).reshape(n_blocks, 2)
    if qtype == Q.IQ1_M:
        set_iq1_m_d(raw, rng.uniform(0.5, 1.5, size=n_blocks))
    values = gguf.quants.dequantize(raw.reshape(rows, -1), qtype).astype(np.float64)
    scale = (1.0 / np.sqrt(cols)) / values.std()
    for off in fields:
        d = raw[:, off:off + 2].copy().view(np.float16).astype(np.float64) * scale
        raw[:, off:off + 2] = d.astype(np.float16).view(np.uint8).reshape(n_blocks, 2)
    if qtype == Q.IQ1_M:
        set_iq1_m_d(raw, iq1_m_d(raw) * scale)
    raw = raw.reshape(rows, -1)
    values = gguf.quants.dequantize(raw, qtype).astype(np.float64)
    return raw, values


def make_matrix(rng, qtype, rows, cols):
    """A weight matrix (rows, cols) of `qtype`: (array for the writer, raw_dtype, exact float64 values)."""
    if qtype == Q.F32:
        v = (rng.standard_normal((rows, cols)) / np.sqrt(cols)).astype(np.float32)
        return v, None, v.astype(np.float64)
    if qtype == Q.F16:
        v = (rng.standard_normal((rows, cols)) / np.sqrt(cols)).astype(np.float16)
        return v, None, v.astype(np.float64)
    if qtype == Q.BF16:
        f = (rng.standard_normal((rows, cols)) / np.sqrt(cols)).astype(np.float32)
        bits = (f.view(np.uint32) >> 16).astype(np.uint16)  # truncation: any bf16 value will do
        exact = (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
        return bits.view(np.uint8).reshape(rows, cols * 2), Q.BF16, exact
    raw, values = random_blocks(rng, qtype, rows, cols)
    return raw, qtype, values


def make_experts(rng, qtype, E, rows, cols):
    parts = [make_matrix(rng, qtype, rows, cols) for _ in range(E)]
    arr = np.stack([p[0] for p in parts])
    return arr, parts[0][1], np.stack([p[2] for p in parts])


def silu(z):
    return z / (1.0 + np.exp(-z))


def swiglu(gate, up, down, x, limit=0.0, after_silu=False):
    """SwiGLU; with a limit, ggml_swiglu_clamp's silu(min(g, L)) * clamp(u, -L, L), or with after_silu
    build_moe_ffn's other form, min(silu(g), L) * clamp(u, -L, L)."""
    g, u = gate @ x, up @ x
    if limit and after_silu:
        return down @ (np.minimum(silu(g), limit) * np.clip(u, -limit, limit))
    if limit:
        g, u = np.minimum(g, limit), np.clip(u, -limit, limit)
    return down @ (silu(g) * u)


SWIGLU_OAI_ALPHA, SWIGLU_OAI_LIMIT = 1.702, 7.0  # llama.cpp's build_moe_ffn fixes them for LLM_FFN_SWIGLU_OAI_MOE


def swiglu_oai(g, u):
    """ggml_swiglu_oai: g clamped above at the limit, u clamped to +-limit, g * sigmoid(alpha g) * (u + 1)."""
    g = np.minimum(g, SWIGLU_OAI_LIMIT)
    u = np.clip(u, -SWIGLU_OAI_LIMIT, SWIGLU_OAI_LIMIT)
    return g / (1.0 + np.exp(-SWIGLU_OAI_ALPHA * g)) * (u + 1.0)


def route(spec, router, bias, x, use_bias=True, use_groups=True, logit_bias=None):
    """llama.cpp's build_moe_ffn routing in float64: (indices, weights, selection scores after masking, group scores)."""
    logits = router @ x
    if logit_bias is not None:  # gpt-oss: ffn_gate_inp.bias
        logits = logits + logit_bias
    if spec["gating"] == "softmax_weight":  # SOFTMAX_WEIGHT: scores are the logits; softmax over the K chosen below
        p = logits.copy()
    elif spec["gating"] == "softmax":
        p = np.exp(logits - logits.max())
        p /= p.sum()
    elif spec["gating"] == "sqrt_softplus":  # expert_gating_func 4 (DeepSeek-V4)
        p = np.sqrt(np.maximum(logits, 0.0) + np.log1p(np.exp(-np.abs(logits))))
    else:
        p = 1.0 / (1.0 + np.exp(-logits))
    s = p + bias if (bias is not None and use_bias) else p.copy()
    group_scores = None
    G = spec.get("groups", 0)
    if G > 1 and use_groups:
        per = len(s) // G
        group_scores = np.array([np.sort(s[g * per:(g + 1) * per])[::-1][:2].sum() for g in range(G)])
        keep = np.argsort(-group_scores, kind="stable")[:spec["groups_used"]]
        masked = np.full_like(s, -np.inf)
        for g in keep:
            masked[g * per:(g + 1) * per] = s[g * per:(g + 1) * per]
        s = masked
    idx = np.argsort(-s, kind="stable")[:spec["K"]]
    w = p[idx]
    if spec["gating"] == "softmax_weight":
        w = np.exp(w - w.max())
        w = w / w.sum()
    if spec["norm"]:
        w = w / max(w.sum(), NORM_FLOOR)
    if spec["w_scale"] not in (0.0, 1.0):
        w = w * spec["w_scale"]
    return idx, w, s, group_scores


def margins(spec, s, group_scores):
    """The smallest gaps of this token's decisions: top-k cut, slot order, group cut (score space)."""
    K = spec["K"]
    order = np.sort(s[np.isfinite(s)])[::-1]
    cut = order[K - 1] - order[K] if len(order) > K else np.inf
    slots = min(order[k] - order[k + 1] for k in range(K - 1)) if K > 1 else np.inf
    group = np.inf
    if group_scores is not None:
        g = np.sort(group_scores)[::-1]
        group = g[spec["groups_used"] - 1] - g[spec["groups_used"]]
    return cut, slots, group


def build_case(out_dir, spec, seed):
    rng = np.random.default_rng(seed)
    arch, D, H, E, K = spec["arch"], spec["D"], spec["H"], spec["E"], spec["K"]
    Hs = spec.get("H_shared", 0)
    n_ff = spec["n_ff"]
    types = spec["types"]
    router = rng.standard_normal((E, D)) * spec.get("router_std", 1.5) / np.sqrt(D)
    router = router.astype(np.float32)
    router64 = router.astype(np.float64)
    bias = None
    if spec.get("exp_probs_b"):
        bias = (rng.standard_normal(E) * 0.08).astype(np.float32)
    gate_arr, gate_t, gate = make_experts(rng, types["gate"], E, H, D)
    up_arr, up_t, up = make_experts(rng, types["up"], E, H, D)
    down_arr, down_t, down = make_experts(rng, types["down"], E, D, H)
    # gpt-oss: router bias (E), expert biases gate/up (E, H) and down (E, D), all F32 as llama.cpp's converter
    # writes them; gate/up biases wide enough that the SwiGLU's clamps act on some values.
    oai = None
    if spec.get("biases"):
        oai = {"router": (rng.standard_normal(E) * 0.5).astype(np.float32),
               "gate": (rng.standard_normal((E, H)) * 4.0).astype(np.float32),
               "up": (rng.standard_normal((E, H)) * 4.0).astype(np.float32),
               "down": (rng.standard_normal((E, D)) * 0.5).astype(np.float32)}
    router_bias64 = oai["router"].astype(np.float64) if oai else None
    shared = None
    if Hs:
        shared = {k: make_matrix(rng, types["shared_" + k], r, c)
                  for k, (r, c) in {"gate": (Hs, D), "up": (Hs, D), "down": (D, Hs)}.items()}
    shared_gate = None
    if spec.get("shared_gate"):
        shared_gate = (rng.standard_normal(D) / np.sqrt(D)).astype(np.float32)
    dense = {k: make_matrix(rng, types["dense"], r, c) for k, (r, c) in
             {"gate": (n_ff, D), "up": (n_ff, D), "down": (D, n_ff)}.items()}

    # Tokens: drawn until every decision is clear; deepseek2 also needs tokens whose experts the bias and the
    # group limit change.
    need_bias = 2 if spec.get("exp_probs_b") else 0
    need_groups = 2 if spec.get("groups", 0) > 1 else 0
    xs, got_bias, got_groups, tries = [], 0, 0, 0
    while len(xs) < T:
        tries += 1
        assert tries < 200000, "no token satisfies the margins"
        x = rng.standard_normal(D)
        x = x / np.sqrt(np.mean(x * x))
        x = x.astype(np.float32).astype(np.float64)
        idx, _, s, gs = route(spec, router64, bias, x, logit_bias=router_bias64)
        if min(margins(spec, s, gs)) < MARGIN:
            continue
        if shared_gate is not None and abs(shared_gate.astype(np.float64) @ x) < 0.3:
            continue
        by_bias = need_bias and set(route(spec, router64, bias, x, use_bias=False)[0]) != set(idx)
        by_groups = need_groups and set(route(spec, router64, bias, x, use_groups=False)[0]) != set(idx)
        if by_bias:  # the unbiased selection must be clear too, so the difference is not a near-tie
            _, _, s2, gs2 = route(spec, router64, bias, x, use_bias=False)
            by_bias = min(margins(spec, s2, gs2)) >= MARGIN
        if by_groups:
            _, _, s3, gs3 = route(spec, router64, bias, x, use_groups=False)
            by_groups = min(margins(spec, s3, gs3)) >= MARGIN
        slots_left = T - len(xs)
        owed = max(need_bias - got_bias, 0) + max(need_groups - got_groups, 0)
        if owed >= slots_left and not ((by_bias and got_bias < need_bias) or (by_groups and got_groups < need_groups)):
            continue
        got_bias += bool(by_bias)
        got_groups += bool(by_groups)
        xs.append(x)
    X = np.stack(xs)

    Y = np.zeros((T, D))
    indices = np.zeros((T, K), dtype=np.int64)
    weights = np.zeros((T, K))
    min_cut = min_slot = min_group = np.inf
    counts = [0] * E
    clamped = {"gate_above_limit": 0, "up_outside_limit": 0}
    for t in range(T):
        x = X[t]
        idx, w, s, gs = route(spec, router64, bias, x, logit_bias=router_bias64)
        cut, slot, group = margins(spec, s, gs)
        min_cut, min_slot, min_group = min(min_cut, cut), min(min_slot, slot), min(min_group, group)
        indices[t], weights[t] = idx, w
        for k, e in enumerate(idx):
            counts[e] += 1
            if oai is None and spec.get("weight_before_ffn"):  # llama4: the weight scales the expert's input
                Y[t] += swiglu(gate[e], up[e], down[e], x * w[k])
                continue
            if oai is None and spec.get("ungated"):  # nemotron_h_moe: down(relu(up x)^2), no gate
                Y[t] += w[k] * (down[e] @ np.maximum(up[e] @ x, 0.0) ** 2)
                continue
            if oai is None and spec.get("swiglu_oai"):  # minimax-m3: the clamped SwiGLU without biases
                Y[t] += w[k] * (down[e] @ swiglu_oai(gate[e] @ x, up[e] @ x))
                continue
            if oai is None:
                Y[t] += w[k] * swiglu(gate[e], up[e], down[e], x, spec.get("clamp", 0.0), spec.get("clamp_after_silu"))
                continue
            g = gate[e] @ x + oai["gate"][e]
            u = up[e] @ x + oai["up"][e]
            clamped["gate_above_limit"] += int((g > SWIGLU_OAI_LIMIT).sum())
            clamped["up_outside_limit"] += int((np.abs(u) > SWIGLU_OAI_LIMIT).sum())
            Y[t] += w[k] * (down[e] @ swiglu_oai(g, u) + oai["down"][e])
        if shared is not None:
            shared_limit = spec.get("shared_clamp", spec.get("clamp", 0.0) if spec.get("shared_clamp_from_routed") else 0.0)
            out = swiglu(shared["gate"][2], shared["up"][2], shared["down"][2], x, shared_limit,
                         spec.get("clamp_after_silu"))
            if spec.get("swiglu_oai"):
                out = shared["down"][2] @ swiglu_oai(shared["gate"][2] @ x, shared["up"][2] @ x)
            if spec.get("ungated"):
                out = shared["down"][2] @ np.maximum(shared["up"][2] @ x, 0.0) ** 2
            if shared_gate is not None:
                z = shared_gate.astype(np.float64) @ x
                out = out * (silu(z) / z)  # llama.cpp's sigmoid, as silu(z)/z
            Y[t] += out
            if spec.get("shared_average"):  # cohere2moe: 0.5 * (routed + shared)
                Y[t] *= 0.5

    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, "model.gguf")
    w = gguf.GGUFWriter(path, arch)
    if spec.get("alignment"):
        w.add_custom_alignment(spec["alignment"])
    w.add_name("hymoe extra " + spec["case"])
    w.add_block_count(2)
    w.add_context_length(4096)
    w.add_embedding_length(D)
    w.add_feed_forward_length(H if arch in FF_LENGTH_HIDDEN else n_ff)
    w.add_head_count(4)
    w.add_head_count_kv(2)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_expert_count(E)
    w.add_expert_used_count(K)
    if arch not in FF_LENGTH_HIDDEN or arch == "minimax-m2":  # minimax-m2 requires the key, then sizes by n_ff
        w.add_expert_feed_forward_length(H)
    if arch in GATING_KEY:
        w.add_expert_gating_func(gguf.ExpertGatingFuncType.SIGMOID if spec["gating"] == "sigmoid"
                                 else gguf.ExpertGatingFuncType.SOFTMAX)
    if arch == "lfm2moe":
        w.add_leading_dense_block_count(1)
    if arch in SHARED_LENGTH_LIKE:  # its shared expert's own length
        w.add_expert_shared_feed_forward_length(Hs)
    if (arch in ("qwen2moe", "hunyuan-moe", "qwen3next", "qwen35moe", "qwen4exp")
            or (arch in ("ernie4_5-moe", "granitemoe", "granitehybrid", "granite_swa") and Hs)):
        w.add_expert_shared_feed_forward_length(Hs)
    if arch in SOFTMAX_SHARED_COUNT:
        w.add_leading_dense_block_count(1)
        w.add_expert_shared_count(Hs // H)
        if arch == "bailingmoe":
            w.add_expert_weights_norm(spec["norm"])
        w.add_expert_weights_scale(spec["w_scale"])
    if arch == "llama4":  # every second block MoE: block 1, with block 0 dense
        w.add_uint32(f"{arch}.interleave_moe_layer_step", 2)
    if arch == "ernie4_5-moe":  # MoE blocks from the first past the dense ones, every one of them
        w.add_leading_dense_block_count(1)
        w.add_uint32(f"{arch}.interleave_moe_layer_step", 1)
    if arch in DEEPSEEK2_LIKE:  # shared experts of H each, gating, normalization and scale from the metadata
        w.add_leading_dense_block_count(1)
        # SHARED_LENGTH_LIKE size their shared expert by its length where it is set, not by the count
        w.add_expert_shared_count(1 if arch in SHARED_LENGTH_LIKE else Hs // H)
        if spec["gating"] == "sqrt_softplus":  # 4, newer than gguf-py 0.19.0's enum
            w.add_uint32(f"{arch}.expert_gating_func", 4)
        elif not spec.get("omit_gating_func"):
            w.add_expert_gating_func(gguf.ExpertGatingFuncType.SIGMOID if spec["gating"] == "sigmoid"
                                     else gguf.ExpertGatingFuncType.SOFTMAX)
        w.add_expert_weights_norm(spec["norm"])
        w.add_expert_weights_scale(spec["w_scale"])
    if arch == "deepseek4":  # block 0 (the dense decoy here) would be hash-routed; block 1 is routed by the gate
        w.add_uint32(f"{arch}.hash_layer_count", 1)
    if spec.get("clamp"):  # one FLOAT32 per block, as the converters write it (block 0 dense: 0, no limit)
        w.add_array(f"{arch}.swiglu_clamp_exp", [0.0, float(spec["clamp"])])
    if spec.get("shared_clamp"):
        w.add_array(f"{arch}.swiglu_clamp_shexp", [0.0, float(spec["shared_clamp"])])
    if spec.get("groups", 0) > 1:
        w.add_expert_group_count(spec["groups"])
        w.add_expert_group_used_count(spec["groups_used"])
    w.add_tokenizer_model("gpt2")
    w.add_token_list(["<s>", "</s>", "hy", "moe"])

    def add(name, arr, qtype):
        if qtype is None:
            w.add_tensor(name, arr)
        else:
            w.add_tensor(name, arr, raw_dtype=qtype)

    tensor_types = {}

    def add_typed(name, made):
        add(name, made[0], made[1])
        tensor_types[name] = (made[1] or (Q.F16 if made[0].dtype == np.float16 else Q.F32)).name

    add_typed("token_embd.weight", (rng.standard_normal((4, D)).astype(np.float16), None))
    add_typed("blk.0.ffn_norm.weight", (np.ones(D, dtype=np.float32), None))
    for k in ("gate", "up", "down"):
        add_typed(f"blk.0.ffn_{k}.weight", dense[k])
    add_typed("blk.1.ffn_norm.weight", (np.ones(D, dtype=np.float32), None))
    experts = {"gate": (gate_arr, gate_t), "up": (up_arr, up_t), "down": (down_arr, down_t)}
    for k in spec.get("expert_order", ("gate", "up", "down")):
        if spec.get("split_experts"):  # early Mixtral files: blk.N.ffn_gate.E.weight, one (out, in) tensor each
            for e in range(E):
                add_typed(f"blk.1.ffn_{k}.{e}.weight", (experts[k][0][e], experts[k][1]))
        elif spec.get("merged_gate_up") and k in ("gate", "up"):
            if k == "gate":  # ffn_gate_up_exps: each expert's gate rows, then its up rows (llama.cpp's converter)
                merged = np.concatenate([experts["gate"][0], experts["up"][0]], axis=1)
                assert experts["gate"][1] == experts["up"][1]
                add_typed("blk.1.ffn_gate_up_exps.weight", (merged, experts["gate"][1]))
        elif not (spec.get("ungated") and k == "gate"):  # nemotron_h_moe has no gate tensors
            add_typed(f"blk.1.ffn_{k}_exps.weight", experts[k])
    if shared is not None and spec.get("shared_fused_up"):  # granite_swa: gate rows, then up rows, in ffn_up_shexp
        assert shared["gate"][1] == shared["up"][1]
        add_typed("blk.1.ffn_up_shexp.weight", (np.concatenate([shared["gate"][0], shared["up"][0]]), shared["gate"][1]))
        add_typed("blk.1.ffn_down_shexp.weight", shared["down"])
    elif shared is not None:
        for k in ("up", "down") if spec.get("ungated") else ("gate", "up", "down"):
            add_typed(f"blk.1.ffn_{k}_shexp.weight", shared[k])
    if shared_gate is not None:
        add_typed("blk.1.ffn_gate_inp_shexp.weight", (shared_gate, None))
    add_typed("blk.1.ffn_gate_inp.weight", (router, None))
    if oai is not None:
        add_typed("blk.1.ffn_gate_inp.bias", (oai["router"], None))
        for k in ("gate", "up", "down"):
            add_typed(f"blk.1.ffn_{k}_exps.bias", (oai[k], None))
    if bias is not None:
        add_typed("blk.1." + spec.get("bias_name", "exp_probs_b.bias"), (bias, None))
    add_typed("output_norm.weight", (np.ones(D, dtype=np.float32), None))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()

    write_safetensors(os.path.join(out_dir, "input.safetensors"), {"x": X.astype(np.float32)})
    write_safetensors(os.path.join(out_dir, "expected.safetensors"),
                      {"y": Y.astype(np.float32), "route.indices": indices, "route.weights": weights.astype(np.float32)})
    y_max = float(np.abs(Y).max())
    data = open(path, "rb").read()
    meta = {
        "case": spec["case"], "description": spec["description"], "arch": arch, "block": 1,
        "generator": "scripts/make_gguf_cases.py", "gguf_package_version": gguf_version(),
        "numpy_version": np.__version__, "seed": seed, "file_bytes": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
        "dims": {"T": T, "D": D, "H": H, "E": E, "K": K, "H_shared": Hs, "n_ff": n_ff,
                 "n_groups": spec.get("groups", 0), "n_group_used": spec.get("groups_used", 0)},
        "tensor_types": tensor_types,
        "semantics": {"gating": spec["gating"], "norm_w": spec["norm"], "w_scale": spec["w_scale"],
                      "exp_probs_b": bias is not None, "n_groups": spec.get("groups", 0),
                      "n_group_used": spec.get("groups_used", 0),
                      "shared": "sigmoid_gated" if shared_gate is not None else ("plain" if Hs else "none"),
                      **({"weight_before_ffn": True} if spec.get("weight_before_ffn") else {}),
                      **({"swiglu_clamp": spec["clamp"]} if spec.get("clamp") else {}),
                      **({"swiglu_clamp_form": "min(silu(g), L) * clamp(u, -L, L)"} if spec.get("clamp_after_silu")
                         else {"swiglu_clamp_form": "silu(min(g, L)) * clamp(u, -L, L)"} if spec.get("clamp") else {}),
                      **({"shared_swiglu_clamp": spec.get("shared_clamp", spec["clamp"])}
                         if spec.get("shared_clamp") or spec.get("shared_clamp_from_routed") else {}),
                      **({"biases": True, "activation": "swiglu_oai"} if oai is not None else {}),
                      **({"biases": False, "activation": "swiglu_oai"} if spec.get("swiglu_oai") else {}),
                      **({"activation": "relu(up x)^2, no gate"} if spec.get("ungated") else {})},
        "margins": {"topk_cut": finite_or_none(min_cut), "slot_order": finite_or_none(min_slot),
                    "group_cut": finite_or_none(min_group), "required": MARGIN,
                    "tokens_changed_by_bias": got_bias, "tokens_changed_by_groups": got_groups},
        "expert_token_counts": counts,
        **({"swiglu_oai": {"alpha": SWIGLU_OAI_ALPHA, "limit": SWIGLU_OAI_LIMIT, "clamped_values": clamped}}
           if oai is not None else {}),
        "suggested_tolerance": {"y": {"rtol": 1e-4, "atol": 2e-5 * max(1.0, y_max)},
                                "route_weights": {"rtol": 1e-5, "atol": 1e-6}, "route_indices": "exact, slot by slot"},
        "y_max_abs": y_max,
    }
    with open(os.path.join(out_dir, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")
    print(f"{spec['case']}: {len(data)} bytes, margins cut {min_cut:.4f} slot {min_slot:.4f} group {min_group:.4f}, "
          f"bias changed {got_bias}, groups changed {got_groups}")


def finite_or_none(v):
    """JSON has no infinity: a decision that does not exist (one slot, no groups) is null."""
    return float(v) if np.isfinite(v) else None


def gguf_version():
    try:
        from importlib.metadata import version
        return version("gguf")
    except Exception:  # noqa: BLE001
        return "unknown"


def write_safetensors(path, tensors):
    names = {np.dtype(np.float32): "F32", np.dtype(np.int64): "I64"}
    header, blobs, offset = {}, [], 0
    for name, arr in tensors.items():
        arr = np.ascontiguousarray(arr)
        b = arr.tobytes()
        header[name] = {"dtype": names[arr.dtype], "shape": list(arr.shape), "data_offsets": [offset, offset + len(b)]}
        blobs.append(b)
        offset += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def q8_0_types(shared=False):
    """The types of a case whose tensors are all Q8_0: the experts', the dense layers' and, with shared, the shared
    expert's."""
    types = dict(gate=Q.Q8_0, up=Q.Q8_0, down=Q.Q8_0, dense=Q.Q8_0)
    if shared:
        types.update(shared_gate=Q.Q8_0, shared_up=Q.Q8_0, shared_down=Q.Q8_0)
    return types


CASES = [
    dict(case="deepseek2_sigmoid_groups_q4_k", arch="deepseek2", D=256, H=32, E=8, K=3, H_shared=32, n_ff=32,
         gating="sigmoid", norm=True, w_scale=2.5, groups=4, groups_used=2, exp_probs_b=True, router_std=3.0,
         expert_order=("down", "up", "gate"),
         types=dict(gate=Q.Q4_K, up=Q.Q4_K, down=Q.Q8_0, shared_gate=Q.Q4_K, shared_up=Q.Q4_K, shared_down=Q.Q8_0,
                    dense=Q.Q8_0),
         description="deepseek2: sigmoid gating, exp_probs_b (changes the experts of >= 2 tokens), 4 groups keep 2 "
                     "(change >= 2 tokens), normalized, scaled by 2.5, shared expert; experts Q4_K gate/up with Q8_0 "
                     "down (mixed, as Q4_K_M mixes), leading dense block 0"),
    dict(case="llama_mixtral_q4_0", arch="llama", D=64, H=96, E=8, K=2, n_ff=96, gating="softmax", norm=True,
         w_scale=0.0, expert_order=("up", "gate", "down"),
         types=dict(gate=Q.Q4_0, up=Q.Q4_0, down=Q.Q4_0, dense=Q.Q4_0),
         description="llama arch (Mixtral): softmax, normalized top-2, Q4_0 experts, expert hidden from "
                     "feed_forward_length"),
    dict(case="olmoe_f16", arch="olmoe", D=64, H=48, E=8, K=4, n_ff=48, gating="softmax", norm=False, w_scale=0.0,
         types=dict(gate=Q.F16, up=Q.F16, down=Q.F16, dense=Q.F16),
         description="olmoe: softmax, weights not normalized, F16 experts"),
    dict(case="qwen3moe_q6_k", arch="qwen3moe", D=256, H=32, E=8, K=4, n_ff=64, gating="softmax", norm=True,
         w_scale=0.0, alignment=64, types=dict(gate=Q.Q6_K, up=Q.Q6_K, down=Q.Q4_0, dense=Q.Q8_0),
         description="qwen3moe: Q6_K gate/up (negative d and scales), Q4_0 down, general.alignment 64"),
    dict(case="qwen3moe_q5_k", arch="qwen3moe", D=256, H=32, E=8, K=2, n_ff=64, gating="softmax", norm=True,
         w_scale=0.0, types=dict(gate=Q.Q5_K, up=Q.Q5_K, down=Q.Q8_0, dense=Q.Q8_0),
         description="qwen3moe: Q5_K gate/up (fifth bits), Q8_0 down"),
    dict(case="qwen2moe_bf16", arch="qwen2moe", D=64, H=32, E=8, K=4, H_shared=96, n_ff=64, gating="softmax",
         norm=False, w_scale=0.0, shared_gate=True,
         types=dict(gate=Q.BF16, up=Q.BF16, down=Q.BF16, shared_gate=Q.BF16, shared_up=Q.BF16, shared_down=Q.BF16,
                    dense=Q.BF16),
         description="qwen2moe: BF16 experts and shared expert, sigmoid-gated shared expert (gate ne [D])"),
    dict(case="qwen3moe_f32", arch="qwen3moe", D=32, H=32, E=8, K=4, n_ff=32, gating="softmax", norm=True,
         w_scale=0.0, types=dict(gate=Q.F32, up=Q.F32, down=Q.F32, dense=Q.F32),
         description="qwen3moe: F32 experts"),
    dict(case="olmoe_q4_k_m_k1", arch="olmoe", D=256, H=256, E=2, K=1, n_ff=32, gating="softmax", norm=False,
         w_scale=0.0, types=dict(gate=Q.Q4_K, up=Q.Q4_K, down=Q.Q6_K, dense=Q.Q8_0),
         description="olmoe: Q4_K gate/up with Q6_K down (Q4_K_M's mix), top-1 of 2 experts, weight = p"),
    dict(case="gpt_oss_mxfp4", arch="gpt-oss", D=64, H=64, E=8, K=4, n_ff=64, gating="softmax_weight", norm=False,
         w_scale=0.0, biases=True, types=dict(gate=Q.MXFP4, up=Q.MXFP4, down=Q.MXFP4, dense=Q.Q8_0),
         description="gpt-oss: MXFP4 experts (ggml type 39), router bias, softmax over the top-4 logits "
                     "(SOFTMAX_WEIGHT), expert biases, clamped SwiGLU (alpha 1.702, limit 7; clamps act)"),
    dict(case="llama_mixtral_split_q4_0", arch="llama", D=64, H=96, E=8, K=2, n_ff=96, gating="softmax", norm=True,
         w_scale=0.0, split_experts=True, seed=1001, types=dict(gate=Q.Q4_0, up=Q.Q4_0, down=Q.Q4_0, dense=Q.Q4_0),
         description="llama arch (Mixtral) in the split layout of early GGUF files: one tensor per expert and "
                     "projection (blk.1.ffn_gate.E.weight, ffn_up.E, ffn_down.E), Q4_0; seed 1001, so the same weights, "
                     "tokens and expected output as llama_mixtral_q4_0"),
    dict(case="deepseek2_q4_k_m_fallback", arch="deepseek2", D=256, H=96, E=8, K=3, H_shared=192, n_ff=96,
         gating="softmax", norm=False, w_scale=1.0,
         types=dict(gate=Q.Q4_K, up=Q.Q4_K, down=Q.Q5_0, shared_gate=Q.Q4_K, shared_up=Q.Q4_K, shared_down=Q.Q5_0,
                    dense=Q.Q8_0),
         description="deepseek2 as DeepSeek-V2-Lite's Q4_K_M files lay it out: the expert hidden (here 96, there "
                     "1408) is no multiple of 256, so llama-quantize stores the down projections (rows of H values) in "
                     "Q4_K's fallback Q5_0; Q4_K gate/up, two shared experts likewise (hidden 192); softmax, not "
                     "normalized, scale 1"),
    dict(case="qwen2moe_q5_k_m_fallback", arch="qwen2moe", D=256, H=96, E=8, K=4, H_shared=160, n_ff=96,
         gating="softmax", norm=False, w_scale=0.0, shared_gate=True,
         types=dict(gate=Q.Q5_K, up=Q.Q5_K, down=Q.Q5_1, shared_gate=Q.Q5_K, shared_up=Q.Q5_K, shared_down=Q.Q5_1,
                    dense=Q.Q8_0),
         description="qwen2moe as Qwen1.5-MoE's Q5_K_M files lay it out: down projections of an expert hidden that "
                     "is no multiple of 256 in Q5_K's fallback Q5_1 (offsets m: q8_1 activations under int8); Q5_K "
                     "gate/up, sigmoid-gated shared expert"),
    dict(case="qwen3moe_iq4_xs_fallback", arch="qwen3moe", D=256, H=96, E=8, K=4, n_ff=64, gating="softmax", norm=True,
         w_scale=0.0, types=dict(gate=Q.IQ4_XS, up=Q.IQ4_XS, down=Q.IQ4_NL, dense=Q.Q8_0),
         description="qwen3moe as IQ4_XS files lay out an expert hidden that is no multiple of 256: IQ4_XS gate/up "
                     "(6-bit sub-block scales, the non-linear 16 values), down in the fallback IQ4_NL"),
    dict(case="llama_mixtral_q4_1", arch="llama", D=64, H=96, E=8, K=2, n_ff=96, gating="softmax", norm=True,
         w_scale=0.0, seed=1012, types=dict(gate=Q.Q4_1, up=Q.Q4_1, down=Q.Q4_1, dense=Q.Q4_1),
         description="llama arch (Mixtral) in the legacy Q4_1 type: x = d * q + m per block of 32"),
    dict(case="glm4moe_sigmoid_bias_q4_k", arch="glm4moe", D=256, H=32, E=8, K=3, H_shared=32, n_ff=32,
         gating="sigmoid", norm=True, w_scale=2.5, exp_probs_b=True, omit_gating_func=True, router_std=3.0,
         types=dict(gate=Q.Q4_K, up=Q.Q4_K, down=Q.Q8_0, shared_gate=Q.Q4_K, shared_up=Q.Q4_K, shared_down=Q.Q8_0,
                    dense=Q.Q8_0),
         description="glm4moe (GLM-4.5/4.6): no expert_gating_func key, which llama.cpp reads as sigmoid for this "
                     "architecture; exp_probs_b (changes >= 2 tokens), normalized, scaled by 2.5, one shared expert, "
                     "leading dense block"),
    dict(case="dots1_softmax_q8_0", arch="dots1", D=64, H=32, E=8, K=2, H_shared=64, n_ff=32, gating="softmax",
         norm=False, w_scale=1.0, types=q8_0_types(shared=True),
         description="dots1: gating from expert_gating_func (softmax here), not normalized, two shared experts"),
    dict(case="bailingmoe2_sigmoid_groups_q6_k", arch="bailingmoe2", D=256, H=64, E=8, K=2, H_shared=64, n_ff=64,
         gating="sigmoid", norm=True, w_scale=2.5, groups=4, groups_used=2, exp_probs_b=True, router_std=3.0,
         types=dict(gate=Q.Q6_K, up=Q.Q6_K, down=Q.Q8_0, shared_gate=Q.Q6_K, shared_up=Q.Q6_K, shared_down=Q.Q8_0,
                    dense=Q.Q8_0),
         description="bailingmoe2 (Ling 2.0): sigmoid, exp_probs_b, 4 groups keep 2, normalized, scaled by 2.5, one "
                     "shared expert; Q6_K gate/up, Q8_0 down"),
    dict(case="qwen3vlmoe_q4_0", arch="qwen3vlmoe", D=64, H=32, E=8, K=4, n_ff=64, gating="softmax", norm=True,
         w_scale=0.0, types=dict(gate=Q.Q4_0, up=Q.Q4_0, down=Q.Q4_0, dense=Q.Q8_0),
         description="qwen3vlmoe (Qwen3-VL-MoE's text model): softmax, normalized, no shared expert"),
    dict(case="hunyuan_moe_q8_0", arch="hunyuan-moe", D=64, H=32, E=8, K=4, H_shared=96, n_ff=64, gating="softmax",
         norm=True, w_scale=0.0, types=q8_0_types(shared=True),
         description="hunyuan-moe: softmax, normalized, an ungated shared expert of "
                     "expert_shared_feed_forward_length"),
    dict(case="qwen3next_q5_k", arch="qwen3next", D=256, H=32, E=8, K=4, H_shared=64, n_ff=64, gating="softmax",
         norm=True, w_scale=0.0, shared_gate=True,
         types=dict(gate=Q.Q5_K, up=Q.Q5_K, down=Q.Q8_0, shared_gate=Q.Q5_K, shared_up=Q.Q5_K, shared_down=Q.Q8_0,
                    dense=Q.Q8_0),
         description="qwen3next: softmax, normalized, a sigmoid-gated shared expert"),
    dict(case="ernie4_5_moe_bias_q8_0", arch="ernie4_5-moe", D=64, H=32, E=8, K=4, H_shared=64, n_ff=64,
         gating="softmax", norm=True, w_scale=0.0, exp_probs_b=True, router_std=3.0,
         types=q8_0_types(shared=True),
         description="ernie4_5-moe: softmax, exp_probs_b for choosing (changes >= 2 tokens), normalized, an ungated "
                     "shared expert of expert_shared_feed_forward_length, interleave_moe_layer_step 1 after one "
                     "leading dense block"),
    dict(case="deepseek_v1_q8_0", arch="deepseek", D=64, H=32, E=8, K=2, H_shared=64, n_ff=64, gating="softmax",
         norm=False, w_scale=1.5, types=q8_0_types(shared=True),
         description="deepseek (DeepSeek-MoE 16B, V1): softmax, not normalized, expert_weights_scale 1.5 read, two "
                     "shared experts, a leading dense block"),
    dict(case="bailingmoe_q4_k", arch="bailingmoe", D=256, H=32, E=8, K=2, H_shared=32, n_ff=64, gating="softmax",
         norm=True, w_scale=0.0, types=dict(gate=Q.Q4_K, up=Q.Q4_K, down=Q.Q8_0, shared_gate=Q.Q4_K,
                                             shared_up=Q.Q4_K, shared_down=Q.Q8_0, dense=Q.Q8_0),
         description="bailingmoe (Ling 1): softmax, expert_weights_norm true read, one shared expert, a leading "
                     "dense block"),
    dict(case="llada_moe_q4_0", arch="llada-moe", D=64, H=32, E=8, K=4, n_ff=64, gating="softmax", norm=False,
         w_scale=0.0, types=dict(gate=Q.Q4_0, up=Q.Q4_0, down=Q.Q4_0, dense=Q.Q8_0),
         description="llada-moe (LLaDA-MoE): softmax, not normalized, no shared expert"),
    dict(case="granitemoe_shared_q8_0", arch="granitemoe", D=64, H=64, E=8, K=2, H_shared=32, n_ff=64,
         gating="softmax", norm=True, w_scale=0.0, types=q8_0_types(shared=True),
         description="granitemoe (Granite MoE, with the Granite-MoE-Shared expert): softmax, normalized, experts "
                     "feed_forward_length wide, a shared expert of expert_shared_feed_forward_length"),
    dict(case="qwen35moe_merged_q8_0", arch="qwen35moe", D=64, H=32, E=8, K=4, H_shared=64, n_ff=64,
         gating="softmax", norm=True, w_scale=0.0, shared_gate=True, merged_gate_up=True,
         types=q8_0_types(shared=True),
         description="qwen35moe (Qwen3.5-MoE): softmax, normalized, a sigmoid-gated shared expert, gate and up merged "
                     "into ffn_gate_up_exps (ne [D, 2H, E]) as llama.cpp's converter writes them when it fuses"),
    dict(case="llama4_q8_0", arch="llama4", D=64, H=32, E=8, K=1, H_shared=32, n_ff=64, gating="sigmoid",
         norm=False, w_scale=0.0, weight_before_ffn=True,
         types=q8_0_types(shared=True),
         description="llama4 (Llama 4 Scout, Maverick): sigmoid gating, top-1, not normalized, the weight multiplied "
                     "into the expert's input (weight_before_ffn), an ungated shared expert of the experts' size, "
                     "interleave_moe_layer_step 2 (block 0 dense)"),
    dict(case="qwen3moe_q2_k", arch="qwen3moe", D=256, H=256, E=4, K=2, n_ff=64, gating="softmax", norm=True,
         w_scale=0.0, types=dict(gate=Q.Q2_K, up=Q.Q2_K, down=Q.Q3_K, dense=Q.Q8_0),
         description="qwen3moe as Q2_K files lay it out: Q2_K gate/up (2-bit codes, 4-bit scales and mins per 16), "
                     "down in Q3_K (llama-quantize raises ffn_down a type under Q2_K)"),
    dict(case="deepseek2_q3_k_fallback", arch="deepseek2", D=256, H=96, E=8, K=3, H_shared=192, n_ff=96,
         gating="softmax", norm=False, w_scale=1.0,
         types=dict(gate=Q.Q3_K, up=Q.Q3_K, down=Q.Q4_0, shared_gate=Q.Q3_K, shared_up=Q.Q3_K,
                    shared_down=Q.Q4_0, dense=Q.Q8_0),
         description="deepseek2 as DeepSeek-V2-Lite's Q3_K files lay it out: Q3_K gate/up (3-bit codes, signed 6-bit "
                     "scales), the down projections of an expert hidden that is no multiple of 256 in Q3_K's "
                     "fallback Q4_0 (llama-quantize at 0c1e57098; older versions wrote IQ4_NL); two shared experts "
                     "likewise"),
    dict(case="olmoe_tq1_0", arch="olmoe", D=256, H=256, E=4, K=2, n_ff=64, gating="softmax", norm=False,
         w_scale=0.0, types=dict(gate=Q.TQ1_0, up=Q.TQ1_0, down=Q.TQ2_0, dense=Q.Q8_0),
         description="ternary weights: TQ1_0 gate/up (five trits a byte in base 3), TQ2_0 down (2-bit codes)"),
    dict(case="llama_mixtral_tq2_0_fallback", arch="llama", D=256, H=96, E=8, K=2, n_ff=96, gating="softmax",
         norm=True, w_scale=0.0, types=dict(gate=Q.TQ2_0, up=Q.TQ2_0, down=Q.Q4_0, dense=Q.Q8_0),
         description="TQ2_0 gate/up with the down projections of a hidden that is no multiple of 256 in TQ2_0's "
                     "fallback Q4_0 (llama-quantize)"),
    dict(case="phimoe_q4_k", arch="phimoe", D=256, H=32, E=8, K=2, n_ff=32, gating="softmax", norm=True,
         w_scale=0.0, types=dict(gate=Q.Q4_K, up=Q.Q4_K, down=Q.Q8_0, dense=Q.Q8_0),
         description="phimoe (Phi-3.5-MoE) as llama.cpp runs it: phi3's graph, softmax top-2 renormalized (not "
                     "transformers' sparsemixer), experts feed_forward_length wide"),
    dict(case="dbrx_q8_0", arch="dbrx", D=64, H=32, E=8, K=4, n_ff=32, gating="softmax", norm=True, w_scale=0.0,
         types=q8_0_types(),
         description="dbrx: softmax top-4 normalized, experts feed_forward_length wide"),
    dict(case="mistral3_q4_0", arch="mistral3", D=64, H=32, E=8, K=2, n_ff=32, gating="softmax", norm=True,
         w_scale=0.0, types=dict(gate=Q.Q4_0, up=Q.Q4_0, down=Q.Q4_0, dense=Q.Q8_0),
         description="mistral3 (Mistral Large 3's MoE): softmax top-2 normalized, experts feed_forward_length wide"),
    dict(case="jamba_q8_0", arch="jamba", D=64, H=32, E=8, K=2, n_ff=32, gating="softmax", norm=False, w_scale=0.0,
         types=q8_0_types(),
         description="jamba: softmax top-2 NOT normalized, experts feed_forward_length wide, MoE where a block has "
                     "a router"),
    dict(case="rnd1_q8_0", arch="rnd1", D=64, H=32, E=8, K=4, n_ff=64, gating="softmax", norm=True, w_scale=0.0,
         types=q8_0_types(),
         description="rnd1: qwen3moe's routing (softmax top-4 normalized)"),
    dict(case="minimax_m2_sigmoid_bias_q8_0", arch="minimax-m2", D=64, H=32, E=8, K=2, n_ff=32, gating="sigmoid",
         norm=True, w_scale=0.0, exp_probs_b=True, types=q8_0_types(),
         description="minimax-m2: sigmoid gating from the (required) key, exp_probs_b for choosing (changes >= 2 "
                     "tokens), normalized, experts sized by feed_forward_length"),
    dict(case="mimo2_sigmoid_bias_q8_0", arch="mimo2", D=64, H=32, E=8, K=2, n_ff=64, gating="sigmoid", norm=True,
         w_scale=0.0, exp_probs_b=True, types=q8_0_types(),
         description="mimo2 (MiMo-V2-Flash): sigmoid fixed by the graph, exp_probs_b, normalized, no shared expert"),
    dict(case="lfm2moe_sigmoid_bias_q8_0", arch="lfm2moe", D=64, H=32, E=8, K=2, n_ff=64, gating="sigmoid",
         norm=True, w_scale=0.0, exp_probs_b=True, types=q8_0_types(),
         description="lfm2moe: gating from the (required) key, exp_probs_b, normalized, leading dense block"),
    dict(case="deepseek32_sigmoid_groups_q8_0", arch="deepseek32", D=64, H=32, E=8, K=2, H_shared=32, n_ff=64,
         gating="sigmoid", norm=True, w_scale=2.5, exp_probs_b=True, groups=4, groups_used=2,
         types=q8_0_types(shared=True),
         description="deepseek32 (DeepSeek-V3.2): dots1's declaration: gating from the required key, exp_probs_b and "
                     "4 groups keep 2 (each changes >= 2 tokens), normalized, scale 2.5, one shared expert"),
    dict(case="glm_dsa_q8_0", arch="glm-dsa", D=64, H=32, E=8, K=2, H_shared=32, n_ff=64, gating="sigmoid",
         omit_gating_func=True, norm=True, w_scale=2.5, exp_probs_b=True,
         types=q8_0_types(shared=True),
         description="glm-dsa: glm4moe's declaration, no expert_gating_func key (sigmoid), exp_probs_b, normalized, "
                     "scale 2.5, one shared expert"),
    dict(case="afmoe_q8_0", arch="afmoe", D=64, H=32, E=8, K=2, H_shared=64, n_ff=64, gating="sigmoid",
         omit_gating_func=True, norm=True, w_scale=1.5, exp_probs_b=True,
         types=q8_0_types(shared=True),
         description="afmoe: sigmoid without the key, exp_probs_b, normalized, scale 1.5, two shared experts"),
    dict(case="kimi_linear_q8_0", arch="kimi-linear", D=64, H=32, E=8, K=2, H_shared=32, n_ff=64, gating="sigmoid",
         norm=True, w_scale=2.446, exp_probs_b=True,
         types=q8_0_types(shared=True),
         description="kimi-linear: gating from the required key, exp_probs_b, normalized (fixed), scale 2.446, one "
                     "shared expert"),
    dict(case="exaone_moe_q8_0", arch="exaone-moe", D=64, H=32, E=8, K=2, H_shared=64, n_ff=64, gating="sigmoid",
         norm=True, w_scale=2.5, exp_probs_b=True,
         types=q8_0_types(shared=True),
         description="exaone-moe: gating from the required key, exp_probs_b, normalized, scale 2.5, a shared expert "
                     "of expert_shared_feed_forward_length 64 (its length: expert_shared_count 1 times H would be 32)"),
    dict(case="cohere2moe_sigmoid_q8_0", arch="cohere2moe", D=64, H=32, E=8, K=2, H_shared=64, n_ff=64,
         gating="sigmoid", omit_gating_func=True, norm=True, w_scale=1.0, shared_average=True,
         types=q8_0_types(shared=True),
         description="cohere2moe: no gating key (sigmoid), normalized, a shared expert of its own length 64 "
                     "(expert_shared_count 1 times H would be 32) averaged with the routed output, (routed + shared) / 2"),
    dict(case="deepseek2_iq1_s", arch="deepseek2", D=256, H=256, E=8, K=3, H_shared=256, n_ff=256,
         gating="sigmoid", norm=True, w_scale=2.5, exp_probs_b=True,
         types=dict(gate=Q.IQ1_S, up=Q.IQ1_S, down=Q.IQ2_XXS, shared_gate=Q.Q4_K, shared_up=Q.Q4_K,
                    shared_down=Q.Q6_K, dense=Q.Q8_0),
         description="deepseek2 as the 1.6-bit files of DeepSeek-V3/R1 lay it out: IQ1_S gate/up (the 2048-entry "
                     "grid of -1, 0, 1 and a +-1/8 delta per 32), IQ2_XXS down (a 256-entry grid, 7-bit sign fields), "
                     "the shared expert in Q4_K/Q6_K; sigmoid with exp_probs_b, normalized, scale 2.5"),
    dict(case="qwen3moe_iq2_xs_iq2_s", arch="qwen3moe", D=256, H=256, E=8, K=4, n_ff=64, gating="softmax", norm=True,
         w_scale=0.0, types=dict(gate=Q.IQ2_XS, up=Q.IQ2_XS, down=Q.IQ2_S, dense=Q.Q8_0),
         description="IQ2_XS gate/up (a 512-entry grid, scales per 16), IQ2_S down (a 1024-entry grid, explicit "
                     "sign bytes)"),
    dict(case="olmoe_iq3_xxs_iq3_s", arch="olmoe", D=256, H=256, E=4, K=2, n_ff=64, gating="softmax", norm=False,
         w_scale=0.0, types=dict(gate=Q.IQ3_XXS, up=Q.IQ3_XXS, down=Q.IQ3_S, dense=Q.Q8_0),
         description="IQ3_XXS gate/up (a 256-entry grid of 4 values), IQ3_S down (a 512-entry grid, odd scales)"),
    dict(case="llama_mixtral_iq1_m_fallback", arch="llama", D=256, H=96, E=8, K=2, n_ff=96, gating="softmax",
         norm=True, w_scale=0.0, types=dict(gate=Q.IQ1_M, up=Q.IQ1_M, down=Q.IQ4_NL, dense=Q.Q8_0),
         description="IQ1_M gate/up (d in the scales' top nibbles, a delta per 8), down rows that are no whole "
                     "256-block in the fallback IQ4_NL (llama-quantize)"),
    dict(case="qwen4exp_merged_q8_0", arch="qwen4exp", D=64, H=32, E=8, K=4, H_shared=64, n_ff=64,
         gating="softmax", norm=True, w_scale=0.0, shared_gate=True, merged_gate_up=True,
         types=q8_0_types(shared=True),
         description="qwen4exp: qwen35moe's declaration: softmax, normalized, a sigmoid-gated shared expert, gate and "
                     "up merged into ffn_gate_up_exps"),
    dict(case="granitehybrid_shared_q4_0", arch="granitehybrid", D=64, H=64, E=8, K=2, H_shared=32, n_ff=64,
         gating="softmax", norm=True, w_scale=0.0,
         types=dict(gate=Q.Q4_0, up=Q.Q4_0, down=Q.Q4_0, shared_gate=Q.Q4_0, shared_up=Q.Q4_0, shared_down=Q.Q4_0,
                    dense=Q.Q8_0),
         description="granitehybrid (Granite 4): granitemoe's declaration: softmax, normalized, experts "
                     "feed_forward_length wide, a shared expert of expert_shared_feed_forward_length"),
    dict(case="mellum_q8_0", arch="mellum", D=64, H=32, E=8, K=2, n_ff=64, gating="softmax", norm=True, w_scale=0.0,
         types=q8_0_types(),
         description="mellum: softmax top-2 normalized, experts expert_feed_forward_length wide"),
    dict(case="minimax_01_q4_0", arch="minimax-01", D=64, H=32, E=8, K=2, n_ff=32, gating="softmax", norm=True,
         w_scale=0.0, types=dict(gate=Q.Q4_0, up=Q.Q4_0, down=Q.Q4_0, dense=Q.Q8_0),
         description="minimax-01 (MiniMax-Text-01): softmax top-2 normalized, experts feed_forward_length wide"),
    dict(case="arctic_q8_0", arch="arctic", D=64, H=32, E=8, K=2, n_ff=32, gating="softmax", norm=True, w_scale=0.0,
         types=q8_0_types(),
         description="arctic (Snowflake Arctic): the MoE call alone (the graph's dense residual FFN reads another "
                     "input and is the caller's): softmax top-2 normalized, experts feed_forward_length wide"),
    dict(case="dots3note_sigmoid_groups_q8_0", arch="dots3note", D=64, H=32, E=8, K=2, H_shared=64, n_ff=64,
         gating="sigmoid", norm=True, w_scale=2.5, exp_probs_b=True, groups=4, groups_used=2,
         types=q8_0_types(shared=True),
         description="dots3note: dots1's declaration with the selection bias required: gating from the required "
                     "key, exp_probs_b and 4 groups keep 2 (each changes >= 2 tokens), normalized, scale 2.5, two "
                     "shared experts"),
    dict(case="laguna_sigmoid_bias_q8_0", arch="laguna", D=64, H=32, E=8, K=2, H_shared=64, n_ff=64,
         gating="sigmoid", omit_gating_func=True, norm=True, w_scale=1.5, exp_probs_b=True,
         types=q8_0_types(shared=True),
         description="laguna: no gating key (sigmoid), exp_probs_b, normalized, scale 1.5, a shared expert of "
                     "expert_shared_feed_forward_length 64"),
    dict(case="hy_v3_sigmoid_bias_q8_0", arch="hy_v3", D=64, H=32, E=8, K=2, H_shared=64, n_ff=64,
         gating="sigmoid", omit_gating_func=True, norm=True, w_scale=2.826, exp_probs_b=True, bias_name="exp_probs_b",
         merged_gate_up=True, types=q8_0_types(shared=True),
         description="hy_v3 (Hunyuan-V3): no gating key (sigmoid), the selection bias blk.1.exp_probs_b (no .bias "
                     "suffix), normalized, scale 2.826, gate and up merged, a shared expert of its own length 64"),
    dict(case="maple_clamp_q8_0", arch="maple", D=64, H=32, E=8, K=2, n_ff=64, gating="softmax", norm=True,
         w_scale=0.0, clamp=0.5, types=q8_0_types(),
         description="maple: softmax top-2 normalized, the experts' SwiGLU limited at swiglu_clamp_exp[1] = 0.5 "
                     "(ggml_swiglu_clamp: silu(min(g, L)) * clamp(u, -L, L); the limits act)"),
    dict(case="hy_v4_clamp_q8_0", arch="hy_v4", D=64, H=32, E=8, K=2, H_shared=32, n_ff=64, gating="sigmoid",
         norm=True, w_scale=2.827, exp_probs_b=True, clamp=0.5,
         types=q8_0_types(shared=True),
         description="hy_v4 (Hunyuan-V4): gating from the required key, exp_probs_b, normalized, scale 2.827, the "
                     "routed experts' SwiGLU limited at 0.5, the shared expert's not"),
    dict(case="glm5_next_clamp_q8_0", arch="glm5-next", D=64, H=32, E=8, K=2, H_shared=32, n_ff=64,
         gating="sigmoid", omit_gating_func=True, norm=True, w_scale=2.5, exp_probs_b=True, clamp=0.5,
         shared_clamp_from_routed=True, types=q8_0_types(shared=True),
         description="glm5-next: no gating key (sigmoid), exp_probs_b, normalized, scale 2.5, routed and shared "
                     "SwiGLU limited at 0.5 (no swiglu_clamp_shexp: the shared expert takes the routed limit)"),
    dict(case="step35_clamp_q8_0", arch="step35", D=64, H=32, E=8, K=2, H_shared=64, n_ff=64, gating="sigmoid",
         omit_gating_func=True, norm=True, w_scale=1.5, exp_probs_b=True, clamp=0.5, shared_clamp=0.75,
         clamp_after_silu=True, types=q8_0_types(shared=True),
         description="step35 (Step-3.5/3.7): no gating key (sigmoid), exp_probs_b, normalized, scale 1.5, a shared "
                     "expert of expert_shared_feed_forward_length 64; SwiGLU clamped after the silu, "
                     "min(silu(g), L) * clamp(u, -L, L), at 0.5 (routed) and 0.75 (shared), the clamps acting"),
    dict(case="bailingmoe3_clamp_q8_0", arch="bailingmoe3", D=64, H=32, E=8, K=2, H_shared=64, n_ff=64,
         gating="sigmoid", norm=True, w_scale=2.5, exp_probs_b=True, clamp=0.5, clamp_after_silu=True,
         types=q8_0_types(shared=True),
         description="bailingmoe3: gating from the required key, exp_probs_b (required), normalized, scale 2.5, a "
                     "shared expert of its own length 64; the routed SwiGLU clamped after the silu at 0.5, the shared "
                     "one not (no swiglu_clamp_shexp)"),
    dict(case="minimax_m3_swiglu_oai_q8_0", arch="minimax-m3", D=64, H=32, E=8, K=2, H_shared=32, n_ff=64,
         gating="sigmoid", norm=True, w_scale=2.0, exp_probs_b=True, swiglu_oai=True, types=q8_0_types(shared=True),
         description="minimax-m3: gating from the required key, exp_probs_b (required), normalized, scale 2.0, one "
                     "shared expert; routed and shared experts run the clamped SwiGLU without biases, "
                     "(clamp(u, +-7) + 1) * g * sigmoid(1.702 g), g = min(gate, 7) (at these magnitudes the limits "
                     "do not act; the formula differs from SwiGLU everywhere)"),
    dict(case="deepseek4_sqrt_softplus_q8_0", arch="deepseek4", D=64, H=32, E=8, K=2, H_shared=32, n_ff=64,
         gating="sqrt_softplus", norm=True, w_scale=1.5, exp_probs_b=True, clamp=0.5, shared_clamp_from_routed=True,
         types=q8_0_types(shared=True),
         description="deepseek4 (DeepSeek-V4), a block past hash_layer_count: sqrt-softplus gating (expert_gating_func "
                     "4), exp_probs_b (required), normalized, scale 1.5, one shared expert; routed and shared SwiGLU "
                     "limited at 0.5 (no swiglu_clamp_shexp: the routed limit)"),
    dict(case="deepseek2_ocr_q8_0", arch="deepseek2-ocr", D=64, H=32, E=8, K=2, H_shared=64, n_ff=64,
         gating="softmax", omit_gating_func=True, norm=False, w_scale=1.0, types=q8_0_types(shared=True),
         description="deepseek2-ocr (DeepSeek-OCR): deepseek2's declaration: no gating key (softmax), not normalized, "
                     "two shared experts"),
    dict(case="mistral4_groups_q4_0", arch="mistral4", D=64, H=32, E=8, K=2, H_shared=32, n_ff=64, gating="softmax",
         norm=True, w_scale=1.0, groups=4, groups_used=2, router_std=3.0,
         types=dict(gate=Q.Q4_0, up=Q.Q4_0, down=Q.Q4_0, shared_gate=Q.Q4_0, shared_up=Q.Q4_0, shared_down=Q.Q4_0,
                    dense=Q.Q8_0),
         description="mistral4 (Mistral 4): deepseek2's loader and graph: softmax from the key, 4 groups keep 2 "
                     "(changes >= 2 tokens), normalized, one shared expert"),
    dict(case="minicpm_moe_q8_0", arch="minicpm", D=64, H=32, E=8, K=2, n_ff=32, gating="softmax", norm=True,
         w_scale=0.0, types=q8_0_types(),
         description="minicpm (MiniCPM-MoE, granite's graph): softmax top-2 normalized, experts feed_forward_length "
                     "wide"),
    dict(case="granite_swa_fused_shared_q8_0", arch="granite_swa", D=64, H=64, E=8, K=2, H_shared=32, n_ff=64,
         gating="softmax", norm=True, w_scale=0.0, shared_fused_up=True,
         types=q8_0_types(shared=True),
         description="granite_swa: granitemoe's routing, a shared expert of expert_shared_feed_forward_length 32 whose "
                     "gate and up rows are one Q8_0 tensor, ffn_up_shexp [D, 2Hs]"),
    dict(case="nemotron_h_moe_relu2_q8_0", arch="nemotron_h_moe", D=64, H=32, E=8, K=2, H_shared=64, n_ff=64,
         gating="sigmoid", norm=True, w_scale=2.5, exp_probs_b=True, ungated=True,
         types=q8_0_types(shared=True),
         description="nemotron_h_moe (Nemotron 3 Nano): sigmoid fixed by the graph, exp_probs_b (required), "
                     "normalized, scale 2.5; experts and a shared expert of its own length 64 without gate tensors, "
                     "down(relu(up x)^2)"),
]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "tests", "data", "conformance",
                                                  "gguf-extra"))
    ap.add_argument("--case", action="append", help="write only this case (repeatable); default: every case")
    args = ap.parse_args()
    known = {spec["case"] for spec in CASES}
    for name in args.case or []:
        if name not in known:
            ap.error(f"--case {name}: no such case (known: {', '.join(sorted(known))})")
    # Each case's seed is fixed by the order in which it was added, so a new case leaves the others' bytes alone.
    for spec in CASES:
        if not args.case or spec["case"] in args.case:
            build_case(os.path.join(args.out, spec["case"]), spec, seed=spec.get("seed", 1000 + CASES.index(spec)))


if __name__ == "__main__":
    main()
