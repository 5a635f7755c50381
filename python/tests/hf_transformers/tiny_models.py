"""Tiny random transformers models of every family hymoe.transformers runs, built from configs (no downloads), each
with the real configs' router options: group-limited top-k, selection bias, norm_topk_prob,
routed_scaling_factor, shared experts and the dense-layer layouts (decoder_sparse_step, mlp_only_layers,
first_k_dense_replace)."""

import torch
import transformers

_ATTENTION = dict(vocab_size=97, hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
                  max_position_embeddings=256, initializer_range=0.2)


def _configs():
    t = transformers
    return {
        "mixtral": lambda: t.MixtralConfig(**_ATTENTION, intermediate_size=48, num_hidden_layers=2,
                                           num_local_experts=8, num_experts_per_tok=2),
        "qwen2_moe": lambda: t.Qwen2MoeConfig(**_ATTENTION, intermediate_size=96, moe_intermediate_size=32,
                                              shared_expert_intermediate_size=80, num_hidden_layers=3,
                                              num_experts=10, num_experts_per_tok=4, norm_topk_prob=False,
                                              decoder_sparse_step=1, mlp_only_layers=[1]),
        "qwen3_moe": lambda: t.Qwen3MoeConfig(**_ATTENTION, head_dim=16, intermediate_size=96,
                                              moe_intermediate_size=32, num_hidden_layers=4, num_experts=12,
                                              num_experts_per_tok=3, norm_topk_prob=True, decoder_sparse_step=2),
        "olmoe": lambda: t.OlmoeConfig(**_ATTENTION, intermediate_size=40, num_hidden_layers=2, num_experts=8,
                                       num_experts_per_tok=2),
        "deepseek_v2": lambda: t.DeepseekV2Config(
            **_ATTENTION, intermediate_size=96, moe_intermediate_size=32, num_hidden_layers=3, n_routed_experts=8,
            num_experts_per_tok=3, n_shared_experts=2, first_k_dense_replace=1, topk_method="group_limited_greedy",
            n_group=4, topk_group=2, routed_scaling_factor=1.5, kv_lora_rank=16, q_lora_rank=None,
            qk_rope_head_dim=8, qk_nope_head_dim=8, v_head_dim=16),
        "deepseek_v3": lambda: t.DeepseekV3Config(
            **_ATTENTION, intermediate_size=96, moe_intermediate_size=32, num_hidden_layers=3, n_routed_experts=16,
            num_experts_per_tok=4, n_shared_experts=1, first_k_dense_replace=1, n_group=4, topk_group=2,
            norm_topk_prob=True, routed_scaling_factor=2.5, kv_lora_rank=16, q_lora_rank=24, qk_rope_head_dim=8,
            qk_nope_head_dim=8, v_head_dim=16),
        "gpt_oss": lambda: t.GptOssConfig(**_ATTENTION, head_dim=16, intermediate_size=32, num_hidden_layers=2,
                                          num_local_experts=8, num_experts_per_tok=2, sliding_window=16,
                                          layer_types=["sliding_attention", "full_attention"]),
    }


# Families whose default config, shrunk by the fields it has, is a tiny model: their routers as transformers'
# defaults set them (GLM-4.5's group-limited sigmoid with a correction bias, ERNIE-4.5's, MiniMax-M2's, Phi-MoE's
# sparsemixer, Granite-MoE's, Hunyuan-MoE's).
_GENERIC = ("glm4_moe", "ernie4_5_moe", "minimax_m2", "phimoe", "granitemoe", "hunyuan_v1_moe")
_SMALL = dict(_ATTENTION, num_hidden_layers=2, head_dim=16, intermediate_size=48, moe_intermediate_size=32,
              num_experts=8, num_local_experts=8, n_routed_experts=8, moe_num_experts=8, num_experts_per_tok=2,
              moe_k=2, top_k=2)


def _generic(family):
    def make():
        fields = transformers.AutoConfig.for_model(family)
        return transformers.AutoConfig.for_model(family, **{k: v for k, v in _SMALL.items() if hasattr(fields, k)})
    return make


def _all_configs():
    configs = _configs()
    configs.update({family: _generic(family) for family in _GENERIC})
    return configs


FAMILIES = sorted(_all_configs())


def build(family, dtype=torch.float32, seed=0):
    """A tiny random model of `family` in eval mode; the DeepSeek-V3 selection bias is set non-zero (transformers
    initialises it to zeros), so the bias path is exercised."""
    config = _all_configs()[family]()
    torch.manual_seed(seed)
    model = transformers.AutoModelForCausalLM.from_config(config, dtype=dtype).eval()
    # Random weights make any token an end-of-sequence now and then: generate the full length every time.
    model.generation_config.eos_token_id = None
    model.generation_config.pad_token_id = 0
    with torch.no_grad():
        for name, buffer in model.named_buffers():
            if name.endswith("e_score_correction_bias"):
                buffer.copy_(torch.rand(buffer.shape, generator=torch.Generator().manual_seed(seed + 1)) * 0.5)
    return model


def prompt(batch=1, length=7, seed=3, vocab=97):
    return torch.randint(3, vocab, (batch, length), generator=torch.Generator().manual_seed(seed))


def fp8_checkpoint(model, path, block=128):
    """Saves `model` as a block-FP8 checkpoint, as DeepSeek-V3's is published: every routed expert's weight in
    float8 e4m3fn per block x block tile, with its `weight_scale_inv` (the tile's amax / 448), and
    quantization_config fp8 in config.json. The rest stays as saved."""
    import json
    import os

    import safetensors.torch

    model.save_pretrained(path)
    file = os.path.join(path, "model.safetensors")
    tensors = safetensors.torch.load_file(file)
    out = {}
    for name, w in tensors.items():
        if ".mlp.experts." not in name or not name.endswith("_proj.weight"):
            out[name] = w
            continue
        rows, cols = w.shape
        w = w.float()
        scales = torch.empty((rows + block - 1) // block, (cols + block - 1) // block)
        codes = torch.empty(rows, cols, dtype=torch.float8_e4m3fn)
        for i in range(scales.shape[0]):
            for j in range(scales.shape[1]):
                tile = w[i * block:(i + 1) * block, j * block:(j + 1) * block]
                scales[i, j] = tile.abs().max().clamp(min=1e-12) / 448.0
                codes[i * block:(i + 1) * block, j * block:(j + 1) * block] = (tile / scales[i, j]).to(codes.dtype)
        out[name], out[name + "_scale_inv"] = codes, scales
    safetensors.torch.save_file(out, file, metadata={"format": "pt"})
    with open(os.path.join(path, "config.json")) as f:
        config = json.load(f)
    config["quantization_config"] = {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
                                     "weight_block_size": [block, block]}
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(config, f)


# e2m1 values of the 16 FP4 codes (bit 3 the sign), as gpt-oss's MXFP4 checkpoints store them.
FP4_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)


def _mxfp4(w):
    """(..., K) -> blocks (..., K/32, 16) uint8 (element 2j in the low nibble) and scales (..., K/32) uint8 (e8m0,
    bias 127): each group of 32 scaled by a power of two that puts its largest magnitude in [4, 8), codes rounded
    to the nearest e2m1 magnitude (6 at most)."""
    g = w.float().reshape(*w.shape[:-1], -1, 32)
    exponent = torch.floor(torch.log2(g.abs().amax(-1).clamp(min=2.0 ** -100))) - 2
    scaled = g / torch.pow(2.0, exponent)[..., None]
    magnitudes = torch.tensor(FP4_VALUES[:8])
    code = (scaled.abs()[..., None] - magnitudes).abs().argmin(-1) + 8 * (scaled < 0).long()
    code = code.to(torch.uint8)
    return (code[..., 0::2] | (code[..., 1::2] << 4)).to(torch.uint8), (exponent + 127).to(torch.uint8)


def mxfp4_checkpoint(model, path):
    """Saves a gpt-oss `model` as its MXFP4 checkpoints are published: each layer's experts as
    `gate_up_proj_blocks` / `_scales` (E, 2I, D/32, 16) / (E, 2I, D/32) and `down_proj_*` (E, D, I/32, 16), biases in
    bf16, and quantization_config mxfp4 in config.json."""
    import json
    import os

    import safetensors.torch

    model.save_pretrained(path)
    file = os.path.join(path, "model.safetensors")
    out = {}
    for name, w in safetensors.torch.load_file(file).items():
        if name.endswith(("mlp.experts.gate_up_proj", "mlp.experts.down_proj")):
            out[name + "_blocks"], out[name + "_scales"] = _mxfp4(w.transpose(1, 2))  # (E, out, in)
        else:
            out[name] = w
    safetensors.torch.save_file(out, file, metadata={"format": "pt"})
    with open(os.path.join(path, "config.json")) as f:
        config = json.load(f)
    config["quantization_config"] = {"quant_method": "mxfp4", "modules_to_not_convert": [
        "model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"]}
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(config, f)
