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


SMALL = dict(vocab_size=128, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4,
             head_dim=16, max_position_embeddings=64)
SMALL_NO_HEAD_DIM = {k: v for k, v in SMALL.items() if k != "head_dim"}


def qwen3_next_config():
    # Qwen3-Next: Qwen2-MoE's block (softmax, a sigmoid-gated shared expert) with Qwen3NextConfig's defaults
    # (norm_topk_prob true, taken from the class: the key is left out); layer 0 linear attention, layer 1 full.
    return transformers.Qwen3NextConfig(
        intermediate_size=96, moe_intermediate_size=32, num_experts=16, num_experts_per_tok=4,
        shared_expert_intermediate_size=48, decoder_sparse_step=1, layer_types=["linear_attention", "full_attention"],
        linear_num_value_heads=4, linear_num_key_heads=2, linear_key_head_dim=16, linear_value_head_dim=16, **SMALL)


def flex_olmo_config():
    # FlexOlmo: OLMoE's block, softmax top-k without renormalization (FlexOlmoConfig's default).
    return transformers.FlexOlmoConfig(intermediate_size=32, num_experts=16, num_experts_per_tok=4, pad_token_id=1,
                                       bos_token_id=2, eos_token_id=3, **SMALL)


def minimax_m2_config():
    # MiniMax-M2: sigmoid scores, e_score_correction_bias (the block's) for choosing, always renormalized, no groups,
    # no scale, no shared expert.
    return transformers.MiniMaxM2Config(intermediate_size=32, num_local_experts=16, num_experts_per_tok=4, **SMALL)


def solar_open_config():
    # Solar Open: DeepSeek-V3's router and shared expert on every layer, under SolarOpenConfig's defaults (n_group 1,
    # routed_scaling_factor 1.0) but for two groups of which one is kept, so the group limit acts.
    return transformers.SolarOpenConfig(
        moe_intermediate_size=32, n_routed_experts=16, num_experts_per_tok=4, n_shared_experts=1, n_group=2,
        topk_group=1, **SMALL)


def exaone_moe_config():
    # EXAONE-MoE: DeepSeek-V3's router under ExaoneMoeConfig's names (num_experts, num_shared_experts) and defaults
    # (routed_scaling_factor 2.5, mlp_layer_types from first_k_dense_replace 1).
    return transformers.ExaoneMoeConfig(
        intermediate_size=96, moe_intermediate_size=32, num_experts=16, num_experts_per_tok=4, num_shared_experts=2,
        **SMALL)


def ernie4_5_moe_config():
    # ERNIE-4.5-MoE: softmax, the choice on probabilities plus moe_statics' correction bias, weights the unbiased
    # probabilities renormalized (clamped at moe_norm_min), one shared expert; MoE from moe_layer_start_index 1.
    return transformers.Ernie4_5_MoeConfig(
        intermediate_size=96, moe_intermediate_size=32, moe_num_experts=16, moe_k=4, moe_num_shared_experts=1,
        moe_layer_start_index=1, **SMALL)


def qwen3_vl_moe_config():
    # Qwen3-VL-MoE: the language model's keys in text_config, softmax always renormalized, the fused experts.
    text = dict(intermediate_size=96, moe_intermediate_size=16, num_experts=16, num_experts_per_tok=4,
                decoder_sparse_step=1, rope_scaling={"rope_type": "default", "mrope_section": [2, 3, 3]}, **SMALL)
    vision = dict(depth=1, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=64, patch_size=4,
                  spatial_merge_size=2, temporal_patch_size=1, deepstack_visual_indexes=[])
    return transformers.Qwen3VLMoeConfig(text_config=text, vision_config=vision)


def qwen3_5_moe_config():
    # Qwen3.5-MoE: the language model's keys in text_config, softmax always renormalized, a sigmoid-gated shared
    # expert, every layer MoE (layer 0 linear attention, layer 1 full).
    text = dict(moe_intermediate_size=16, shared_expert_intermediate_size=24, num_experts=16, num_experts_per_tok=4,
                layer_types=["linear_attention", "full_attention"], linear_num_value_heads=4, linear_num_key_heads=2,
                linear_key_head_dim=16, linear_value_head_dim=16, **SMALL)
    vision = dict(depth=1, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=64, patch_size=4,
                  spatial_merge_size=2, temporal_patch_size=1)
    return transformers.Qwen3_5MoeConfig(text_config=text, vision_config=vision)


def qwen3_5_moe_text_config():
    # The text-only Qwen3.5-MoE (Qwen3_5MoeForCausalLM): the same keys at the top level.
    return qwen3_5_moe_config().text_config


def glm4v_moe_config():
    # GLM-4.5V: glm4_moe's block in the language model (keys under text_config), 4 groups keep 2.
    text = dict(vocab_size=128, hidden_size=64, intermediate_size=96, moe_intermediate_size=32, num_hidden_layers=2,
                num_attention_heads=4, num_key_value_heads=2, n_routed_experts=16, num_experts_per_tok=4,
                n_shared_experts=1, first_k_dense_replace=1, n_group=4, topk_group=2, max_position_embeddings=64,
                rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [2, 1, 1],
                                 "partial_rotary_factor": 0.5})
    vision = dict(depth=1, hidden_size=32, num_heads=2, intermediate_size=32, out_hidden_size=64, patch_size=14,
                  image_size=28)
    return transformers.Glm4vMoeConfig(text_config=text, vision_config=vision)


def mimo_v2_flash_config():
    # MiMo-V2-Flash: V3's router without a shared expert, layer 1 sparse by mlp_layer_types' default.
    return transformers.MiMoV2FlashConfig(
        vocab_size=128, hidden_size=64, intermediate_size=96, moe_intermediate_size=32, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=24, v_head_dim=16, n_routed_experts=16,
        num_experts_per_tok=4, n_group=4, topk_group=2, max_position_embeddings=64, sliding_window=8)


def kimi_linear_config():
    # Kimi-Linear: V3's block under its own key names (saved as num_experts, num_experts_per_token, ...), scale
    # 2.446 by default, both layers full attention (the block is the same beside its linear attention).
    return transformers.KimiLinearConfig(
        vocab_size=128, hidden_size=64, intermediate_size=96, moe_intermediate_size=32, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=4, num_experts=16, num_experts_per_token=4, num_shared_experts=1,
        num_expert_group=4, topk_group=2, kv_lora_rank=16, qk_rope_head_dim=8, qk_nope_head_dim=8, v_head_dim=16,
        max_position_embeddings=64, pad_token_id=0, bos_token_id=1, eos_token_id=2,
        layer_types=["full_attention", "full_attention"])


def bailing_hybrid_config():
    # Ling's hybrid (bailing_hybrid): V3's block under its own key names, 4 groups keep 2, layer 0 dense by
    # first_k_dense_replace 1, both layers full attention (the block is the same beside its linear attention).
    return transformers.BailingHybridConfig(
        vocab_size=128, hidden_size=64, intermediate_size=96, moe_intermediate_size=32, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=4, num_experts=16, num_experts_per_token=4, num_shared_experts=1,
        num_expert_group=4, topk_group=2, first_k_dense_replace=1, kv_lora_rank=16, q_lora_rank=32,
        qk_rope_head_dim=8, qk_nope_head_dim=8, v_head_dim=16, layer_types=["full_attention", "full_attention"],
        pad_token_id=0, bos_token_id=1, eos_token_id=2)


def mistral4_config():
    # Mistral 4: groups over softmax scores (4 groups keep 2, excluded experts 0.0), renormalized (+1e-20), one
    # shared expert, layer 1 MoE by first_k_dense_replace 1; experts saved fused.
    return transformers.Mistral4Config(
        vocab_size=128, hidden_size=64, intermediate_size=96, moe_intermediate_size=32, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=4, n_routed_experts=16, num_experts_per_tok=4, n_shared_experts=1,
        n_group=4, topk_group=2, first_k_dense_replace=1, kv_lora_rank=16, q_lora_rank=32, qk_rope_head_dim=8,
        qk_nope_head_dim=8, v_head_dim=16, max_position_embeddings=64, pad_token_id=0)


def qwen3_omni_moe_config():
    # Qwen3-Omni-MoE: Qwen3-MoE's block in the thinker's language model (keys under thinker_config.text_config);
    # no talker (enable_audio_output false), layer 0 dense by mlp_only_layers.
    text = dict(vocab_size=128, hidden_size=64, intermediate_size=96, moe_intermediate_size=32, num_hidden_layers=2,
                num_attention_heads=4, num_key_value_heads=2, head_dim=16, num_experts=16, num_experts_per_tok=4,
                mlp_only_layers=[0], max_position_embeddings=64)
    thinker = dict(text_config=text, vision_config=dict(depth=1, hidden_size=32, num_heads=2, intermediate_size=32,
                                                        out_hidden_size=64, deepstack_visual_indexes=[0]),
                   audio_config=dict(encoder_layers=1, d_model=32, encoder_attention_heads=2, encoder_ffn_dim=32,
                                     output_dim=64, num_mel_bins=16, downsample_hidden_size=8))
    return transformers.Qwen3OmniMoeConfig(thinker_config=thinker, enable_audio_output=False)


def jamba_config():
    # Jamba: softmax top-k, not renormalized; layer 0 attention with a dense MLP, layer 1 Mamba with the MoE block
    # (expert_layer_period 2, offset 1: the defaults).
    return transformers.JambaConfig(vocab_size=128, hidden_size=64, intermediate_size=32, num_hidden_layers=2,
                                    num_attention_heads=4, num_key_value_heads=2, num_experts=16, num_experts_per_tok=4,
                                    attn_layer_period=2, attn_layer_offset=0, mamba_d_state=4,
                                    max_position_embeddings=64)


def cohere2_moe_config(selection="softmax", combination="average"):
    # Cohere2-MoE: top-k of the logits weighed by expert_selection_fn, a shared MLP combined by
    # shared_expert_combination_strategy; layer 0 dense by mlp_layer_types.
    return transformers.Cohere2MoeConfig(
        vocab_size=128, hidden_size=64, intermediate_size=32, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, head_dim=16, num_experts=16, num_experts_per_tok=4, num_shared_experts=1,
        mlp_layer_types=["dense", "sparse"], prefix_dense_intermediate_size=96, max_position_embeddings=64,
        sliding_window=8, pad_token_id=0, bos_token_id=1, eos_token_id=2, expert_selection_fn=selection,
        shared_expert_combination_strategy=combination)


def minimax_config():
    # MiniMax-Text-01 (minimax): Mixtral's block (softmax top-k, always renormalized).
    return transformers.MiniMaxConfig(intermediate_size=32, num_local_experts=16, num_experts_per_tok=4,
                                      layer_types=["full_attention", "full_attention"], **SMALL)


def glm_moe_dsa_config():
    # GLM-5 with DSA attention: V3's block, 4 groups keep 2, layer 0 dense by mlp_layer_types.
    return transformers.GlmMoeDsaConfig(
        vocab_size=128, hidden_size=64, intermediate_size=96, moe_intermediate_size=32, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=4, n_routed_experts=16, num_experts_per_tok=4, n_shared_experts=1,
        n_group=4, topk_group=2, mlp_layer_types=["dense", "sparse"], kv_lora_rank=16, q_lora_rank=32,
        qk_rope_head_dim=8, qk_nope_head_dim=8, v_head_dim=16, max_position_embeddings=64)


def sarvam_moe_config():
    # Sarvam-MoE: glm4_moe's block (run by Glm4MoeForCausalLM), 4 groups keep 2, layer 0 dense.
    return transformers.SarvamMoEConfig(
        vocab_size=128, hidden_size=64, intermediate_size=96, moe_intermediate_size=32, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=4, head_dim=16, n_routed_experts=16, num_experts_per_tok=4,
        n_shared_experts=1, n_group=4, topk_group=2, first_k_dense_replace=1, max_position_embeddings=64)


def sarvam_mla_config():
    # Sarvam's MLA model (run by DeepseekV3ForCausalLM): V3's block, 4 groups keep 2, layer 0 dense.
    return transformers.SarvamMLAConfig(
        vocab_size=128, hidden_size=64, intermediate_size=96, moe_intermediate_size=32, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=4, n_routed_experts=16, num_experts_per_tok=4, n_shared_experts=1,
        n_group=4, topk_group=2, first_k_dense_replace=1, kv_lora_rank=16, q_lora_rank=32, qk_rope_head_dim=8,
        qk_nope_head_dim=8, v_head_dim=16, max_position_embeddings=64)


def beam_config():
    # Beam: V3's router (4 groups keep 2, correction bias), no shared expert, layer 1 sparse by mlp_layer_types.
    return transformers.BeamConfig(
        vocab_size=128, hidden_size=64, intermediate_size=96, moe_intermediate_size=32, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=4, num_experts=16, num_experts_per_tok=4, n_group=4, topk_group=2,
        mlp_layer_types=["dense", "sparse"], max_position_embeddings=64)


def kimi_k25_config():
    # Kimi K2.5: DeepSeek-V3 as its language model (text_config), 4 groups keep 2, layer 0 dense.
    text = dict(model_type="deepseek_v3", vocab_size=128, hidden_size=64, intermediate_size=96,
                moe_intermediate_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4,
                n_routed_experts=16, num_experts_per_tok=4, n_shared_experts=1, n_group=4, topk_group=2,
                first_k_dense_replace=1, kv_lora_rank=16, q_lora_rank=32, qk_rope_head_dim=8, qk_nope_head_dim=8,
                v_head_dim=16, max_position_embeddings=64)
    return transformers.Kimi_K25Config(text_config=text)


def mistral_large4_config():
    # Mistral Large 4: Mistral 4's softmax groups (4 keep 2), always renormalized, keys under text_config.
    text = dict(vocab_size=128, hidden_size=64, intermediate_size=96, moe_intermediate_size=32, num_hidden_layers=2,
                num_attention_heads=4, num_key_value_heads=4, n_routed_experts=16, num_experts_per_tok=4,
                n_shared_experts=1, n_group=4, topk_group=2, first_k_dense_replace=1, kv_lora_rank=16, q_lora_rank=32,
                qk_rope_head_dim=8, qk_nope_head_dim=8, v_head_dim=16, max_position_embeddings=64)
    return transformers.MistralLarge4Config(text_config=text)


OCR_TEXT = dict(vocab_size=128, hidden_size=64, intermediate_size=96, moe_intermediate_size=32, num_hidden_layers=2,
                num_attention_heads=4, num_key_value_heads=4, n_routed_experts=16, num_experts_per_tok=4,
                max_position_embeddings=64, mlp_layer_types=["dense", "sparse"])


def deepseek_ocr2_config():
    # DeepSeek-OCR-2: DeepSeek-V2's block (greedy softmax top-k, not renormalized, two shared experts by default) in
    # its language model, keys under text_config, layer 1 sparse by mlp_layer_types (required).
    vision = dict(sam_config=dict(hidden_size=32, output_channels=32, num_hidden_layers=1, num_attention_heads=2,
                                  mlp_dim=64, image_size=64, window_size=2),
                  encoder_config=dict(vocab_size=128, hidden_size=64, intermediate_size=64, num_hidden_layers=1,
                                      num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=64))
    return transformers.DeepseekOcr2Config(text_config=dict(OCR_TEXT, routed_scaling_factor=1.5),
                                           vision_config=vision)


def unlimited_ocr_config():
    # Unlimited-OCR: the same block under UnlimitedOcrTextConfig's defaults.
    vision = dict(sam_config=dict(hidden_size=32, output_channels=32, num_hidden_layers=1, num_attention_heads=2,
                                  mlp_dim=64, image_size=64, window_size=2),
                  encoder_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                                      image_size=28))
    return transformers.UnlimitedOcrConfig(text_config=dict(OCR_TEXT, routed_scaling_factor=1.5), vision_config=vision)


def lara_mini_config():
    # Lara-Mini: softmax top-4 renormalized (its default), an ungated 48-wide shared expert; layer 0 linear attention.
    return transformers.LaraMiniConfig(
        moe_intermediate_size=32, shared_expert_intermediate_size=48, num_experts=16, num_experts_per_tok=4,
        layer_types=["linear_attention", "full_attention"], linear_num_value_heads=4, linear_num_key_heads=2,
        linear_key_head_dim=16, linear_value_head_dim=16, **SMALL)


def flint_config():
    # Flint: top-4 of sigmoid scores renormalized (its default), an ungated 48-wide shared expert, layer 1 MoE by
    # mlp_only_layers [0].
    return transformers.FlintConfig(intermediate_size=96, moe_intermediate_size=32, shared_expert_intermediate_size=48,
                                    num_experts=16, num_experts_per_tok=4, mlp_only_layers=[0], **SMALL)


def dots3_note_text_config():
    # dots.llm3's language model: V3's block, 4 groups keep 2, two shared experts of shared_experts_intermediate_size
    # 24 each (48 wide), layer 1 sparse by mlp_layer_types.
    return transformers.Dots3NoteTextConfig(
        vocab_size=128, hidden_size=64, intermediate_size=96, moe_intermediate_size=32, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=4, n_routed_experts=16, num_experts_per_tok=4, n_shared_experts=2,
        shared_experts_intermediate_size=24, n_group=4, topk_group=2, kv_lora_rank=16, q_lora_rank=32,
        qk_rope_head_dim=8, qk_nope_head_dim=8, v_head_dim=16, max_position_embeddings=64,
        mlp_layer_types=["dense", "sparse"], pad_token_id=0, bos_token_id=1, eos_token_id=2)


def axk2_config():
    # A.X K2: V3's block, 4 groups keep 2 (excluded groups score 0.0), one shared expert, layer 1 sparse.
    return transformers.AXK2Config(
        vocab_size=128, hidden_size=64, intermediate_size=96, moe_intermediate_size=32, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=4, n_routed_experts=16, num_experts_per_tok=4, n_shared_experts=1,
        n_group=4, topk_group=2, kv_lora_rank=16, q_lora_rank=32, qk_rope_head_dim=8, qk_nope_head_dim=8,
        v_head_dim=16, max_position_embeddings=64, mlp_layer_types=["dense", "sparse"])


def minimax_m3_vl_config():
    # MiniMax-M3: M2's router, the routed output times routed_scaling_factor 2.0, a 48-wide shared MLP, routed and
    # shared experts running gpt-oss's clamped SwiGLU without biases at swiglu_limit 0.5 (so the clamps act);
    # layer 1 sparse by mlp_layer_types; the vision tower built tiny.
    text = dict(vocab_size=128, hidden_size=64, intermediate_size=32, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=4, head_dim=16, num_local_experts=16, num_experts_per_tok=4,
                shared_intermediate_size=48, dense_intermediate_size=96, mlp_layer_types=["dense", "sparse"],
                swiglu_limit=0.5, max_position_embeddings=64)
    vision = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2, image_size=28,
                  patch_size=14)
    return transformers.MiniMaxM3VLConfig(text_config=text, vision_config=vision)


def step3p7_config():
    # Step-3.7: M3's router, the routed output x 1.5, a 48-wide shared MLP; layer 1's routed experts clamped after the
    # silu at 0.5 and its shared MLP at 0.75 (swiglu_limits, swiglu_limits_shared); the vision tower built tiny.
    text = dict(vocab_size=128, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=4, head_dim=16, n_routed_experts=16, num_experts_per_tok=4, moe_intermediate_size=32,
                share_expert_dim=48, mlp_layer_types=["dense", "sparse"], swiglu_limits=[0.0, 0.5],
                swiglu_limits_shared=[0.0, 0.75], moe_router_scaling_factor=1.5, max_position_embeddings=64)
    vision = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2, image_size=28,
                  patch_size=14)
    return transformers.Step3p7Config(text_config=text, vision_config=vision)


def deepseek_v4_config():
    # DeepSeek-V4: sqrt-softplus scores with the correction bias, renormalized, x 1.5; one shared MLP as wide as the
    # experts; routed and shared experts limited at swiglu_limit 0.5 (the clamps act); layer 0 hash-routed, layer 1
    # routed by the gate.
    return transformers.DeepseekV4Config(
        vocab_size=128, hidden_size=64, moe_intermediate_size=32, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=1, head_dim=16, q_lora_rank=32, num_experts_per_tok=4, n_routed_experts=16,
        mlp_layer_types=["hash_moe", "moe"], swiglu_limit=0.5, max_position_embeddings=64)


def kolibri1_config():
    # Kolibri-1: the correction bias on the logits for choosing, the chosen logits' sigmoids as weights (not
    # renormalized, its default), an ungated 48-wide shared MLP; every layer MoE.
    return transformers.Kolibri1Config(moe_intermediate_size=32, shared_expert_intermediate_size=48, num_experts=16,
                                       num_experts_per_tok=4, **SMALL)


def aria_text_config():
    # Aria's language model: top-4 logits, softmax over them, SiLU experts stored as fc1 (E, D, 2I) / fc2 (E, I, D),
    # two 32-wide shared experts (64) running hidden_act gelu_pytorch_tanh.
    return transformers.AriaTextConfig(intermediate_size=32, moe_num_experts=16, moe_topk=4, moe_num_shared_experts=2,
                                       hidden_act="gelu_pytorch_tanh", **SMALL)


def aria_config():
    # Aria as released: the same language model under text_config, the vision tower built tiny.
    text = dict(vocab_size=128, hidden_size=64, intermediate_size=32, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=4, head_dim=16, moe_num_experts=16, moe_topk=4, moe_num_shared_experts=2,
                hidden_act="gelu_pytorch_tanh", max_position_embeddings=64)
    vision = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2, image_size=28,
                  patch_size=14)
    return transformers.AriaConfig(text_config=text, vision_config=vision,
                                   projector_patch_to_query_dict={"4": 4, "16": 16})


def jetmoe_config():
    # JetMoE: top-2 logits, softmax over them, 32-wide experts as input_linear / output_linear, an output bias.
    return transformers.JetMoeConfig(vocab_size=128, hidden_size=64, num_hidden_layers=2, num_key_value_heads=4,
                                     kv_channels=16, intermediate_size=32, num_local_experts=16, num_experts_per_tok=4,
                                     max_position_embeddings=64)


def axk1_config():
    # A.X K1: V3's block, 4 groups keep 2, no correction bias (as released), an RMSNorm of the block's output.
    return transformers.AXK1Config(
        vocab_size=128, hidden_size=64, intermediate_size=96, moe_intermediate_size=32, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=4, n_routed_experts=16, num_experts_per_tok=4, n_shared_experts=1,
        n_group=4, topk_group=2, kv_lora_rank=16, q_lora_rank=32, qk_rope_head_dim=8, qk_nope_head_dim=8,
        v_head_dim=16, max_position_embeddings=64, mlp_layer_types=["dense", "sparse"])


def openai_privacy_filter_config():
    # OpenAI's privacy filter: gpt-oss's block (router bias, top-4 logits softmax, clamped SwiGLU with biases) with gate
    # and up concatenated.
    return transformers.OpenAIPrivacyFilterConfig(vocab_size=128, hidden_size=64, num_hidden_layers=2,
                                                  num_attention_heads=4, num_key_value_heads=4, head_dim=16,
                                                  intermediate_size=32, num_local_experts=16, num_experts_per_tok=4,
                                                  pad_token_id=0, bos_token_id=1, eos_token_id=2)


def longcat_flash_config():
    # LongCat-Flash: softmax over 16 experts + 8 zero-computation experts, a small correction bias, x 6.0, not
    # renormalized; num_layers 2 (num_hidden_layers is 2 x num_layers).
    return transformers.LongcatFlashConfig(
        vocab_size=128, hidden_size=64, num_layers=2, num_attention_heads=4, ffn_hidden_size=96,
        expert_ffn_hidden_size=32, n_routed_experts=16, zero_expert_num=8, moe_topk=4, kv_lora_rank=16,
        q_lora_rank=32, qk_rope_head_dim=8, qk_nope_head_dim=8, v_head_dim=16, max_position_embeddings=64)


def nemotron_h_config():
    # Nemotron-H: V3's router (4 groups keep 2, correction bias), experts and a 48-wide shared MLP without a gate on
    # relu2; layer 0 an MLP, layer 1 MoE by layers_block_type.
    return transformers.NemotronHConfig(
        vocab_size=128, hidden_size=64, num_attention_heads=4, num_key_value_heads=4, head_dim=16,
        layers_block_type=["mlp", "moe"], intermediate_size=96, moe_intermediate_size=32,
        moe_shared_expert_intermediate_size=48, n_routed_experts=16, num_experts_per_tok=4, n_group=4, topk_group=2,
        max_position_embeddings=64, mamba_num_heads=4, mamba_head_dim=16, ssm_state_size=16, n_groups=1)


def qwen4_exp_text_config():
    # Qwen4-Exp's language model: Qwen2-MoE's block (sigmoid-gated shared expert), norm_topk_prob left to its default.
    return transformers.Qwen4ExpTextConfig(moe_intermediate_size=16, shared_expert_intermediate_size=24, num_experts=16,
                                           num_experts_per_tok=4, **SMALL)


def hy_v3_config():
    # Hunyuan-V3: sigmoid with the block's correction bias, no groups, always renormalized, router_scaling_factor.
    return transformers.HYV3Config(moe_intermediate_size=32, intermediate_size=96, num_experts=16, num_experts_per_tok=4,
                                   num_shared_experts=1, mlp_layer_types=["dense", "sparse"], **SMALL)


def afmoe_config():
    # AFMoE: sigmoid with expert_bias, always renormalized, route_scale 1.5, two shared experts, MoE from
    # num_dense_layers 1.
    return transformers.AfmoeConfig(moe_intermediate_size=32, intermediate_size=96, num_experts=16, num_experts_per_tok=4,
                                    num_shared_experts=2, num_dense_layers=1, route_scale=1.5, **SMALL)


def lfm2_moe_config():
    # LFM2-MoE: sigmoid with expert_bias, renormalized (+1e-6), routed_scaling_factor 1.25, no shared expert, MoE
    # from num_dense_layers 1.
    return transformers.Lfm2MoeConfig(vocab_size=128, hidden_size=64, intermediate_size=96, moe_intermediate_size=32,
                                      num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4, num_experts=16,
                                      num_experts_per_tok=4, num_dense_layers=1, routed_scaling_factor=1.25,
                                      layer_types=["full_attention", "full_attention"], max_position_embeddings=64)


def laguna_config():
    # Laguna: sigmoid with the correction bias, always renormalized, moe_routed_scaling_factor 1.5, one shared MLP
    # of shared_expert_intermediate_size 48, layer 1 sparse by mlp_layer_types.
    return transformers.LagunaConfig(moe_intermediate_size=32, intermediate_size=96, num_experts=16, num_experts_per_tok=4,
                                     shared_expert_intermediate_size=48, moe_routed_scaling_factor=1.5,
                                     mlp_layer_types=["dense", "sparse"], **SMALL)


def qwen4_exp_config():
    # Qwen4-Exp as released: the language model's keys under text_config.
    vision = dict(depth=1, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=64, patch_size=4,
                  spatial_merge_size=2, temporal_patch_size=1)
    return transformers.Qwen4ExpConfig(text_config=qwen4_exp_text_config().to_dict(), vision_config=vision)


def glm5_next_config():
    # GLM-5-Next: V3's block (4 groups keep 2) whose experts and shared MLP clamp gate above and up both ways at
    # swiglu_limit, here 0.5 so the clamps act; layer 0 dense by mlp_layer_types.
    text = dict(vocab_size=128, hidden_size=64, intermediate_size=96, moe_intermediate_size=32, num_hidden_layers=2,
                num_attention_heads=4, num_key_value_heads=4, n_routed_experts=16, num_experts_per_tok=4,
                n_shared_experts=1, n_group=4, topk_group=2, mlp_layer_types=["dense", "sparse"], swiglu_limit=0.5,
                max_position_embeddings=64, linear_head_dim=16, linear_num_heads=4, pad_token_id=0, bos_token_id=1,
                eos_token_id=2)
    vision = dict(depth=1, hidden_size=32, num_heads=2, intermediate_size=32, out_hidden_size=64)
    return transformers.Glm5NextConfig(text_config=text, vision_config=vision)


def hy_v4_config():
    # Hunyuan-V4: V3's block (4 groups keep 2) whose routed experts clamp at swiglu_limit (0.5 here, so the clamps
    # act) and whose shared MLP does not; layer 0 dense by mlp_layer_types.
    return transformers.HYV4Config(moe_intermediate_size=32, intermediate_size=96, n_routed_experts=16,
                                   num_experts_per_tok=4, n_shared_experts=1, n_group=4, topk_group=2,
                                   mlp_layer_types=["dense", "sparse"], swiglu_limit=0.5, pad_token_id=0,
                                   bos_token_id=1, eos_token_id=2, **SMALL)


def hy_v4_vl_config():
    # Hunyuan-V4's multimodal release: the same block, keys under text_config.
    text = hy_v4_config().to_dict()
    vision = dict(depth=1, hidden_size=32, num_heads=2, intermediate_size=32, out_hidden_size=64)
    return transformers.HYV4VLConfig(text_config=text, vision_config=vision)


def hunyuan_v1_moe_config():
    # Hunyuan-A13B: softmax top-k always renormalized, experts and an ungated shared MLP of intermediate_size; the
    # top-k given per layer, as its releases give it.
    return transformers.HunYuanMoEV1Config(intermediate_size=32, num_experts=16, moe_topk=[4, 4], **SMALL)


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


def granitemoe_config():
    return transformers.GraniteMoeConfig(**SMALL_NO_HEAD_DIM, intermediate_size=32, num_local_experts=16,
                                         num_experts_per_tok=4)


def granitemoeshared_config():
    return transformers.GraniteMoeSharedConfig(**SMALL_NO_HEAD_DIM, intermediate_size=32, num_local_experts=16,
                                               num_experts_per_tok=4, shared_intermediate_size=48)


def granitemoe_swa_config():
    return transformers.GraniteMoeSWAConfig(**SMALL_NO_HEAD_DIM, intermediate_size=32, num_local_experts=16,
                                            num_experts_per_tok=4, shared_intermediate_size=48)


def granitemoehybrid_config():
    return transformers.GraniteMoeHybridConfig(**SMALL_NO_HEAD_DIM, intermediate_size=32, num_local_experts=16,
                                               num_experts_per_tok=4, shared_intermediate_size=48,
                                               layer_types=["attention", "attention"])


def llama4_text_config():
    return transformers.Llama4TextConfig(**SMALL, intermediate_size=32, intermediate_size_mlp=48,
                                         num_local_experts=16, num_experts_per_tok=1, interleave_moe_layer_step=2)


def phimoe_config():
    # router_jitter_noise 0.3 (released: 0.01) so the sparsemixer's masks keep several experts, which the case tests
    return transformers.PhimoeConfig(**SMALL_NO_HEAD_DIM, intermediate_size=32, num_local_experts=16,
                                     num_experts_per_tok=2, router_jitter_noise=0.3)


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
    dict(name="qwen3_next_e16_k4", family="qwen3_next", config=qwen3_next_config, model_class="Qwen3NextForCausalLM",
         router="softmax", shared="gated", description="Qwen3-Next (qwen3_next): softmax top-4, renormalized "
         "(norm_topk_prob true by Qwen3NextConfig's default, the key absent from config.json), a 48-wide shared "
         "expert scaled by sigmoid(shared_expert_gate x)", drop_keys=["norm_topk_prob"]),
    dict(name="flex_olmo_e16_k4", family="flex_olmo", config=flex_olmo_config, model_class="FlexOlmoForCausalLM",
         router="softmax", shared=None, description="FlexOlmo (flex_olmo): softmax top-4, not renormalized, "
         "expert size intermediate_size"),
    dict(name="minimax_m2_e16_k4", family="minimax_m2", config=minimax_m2_config, model_class="MiniMaxM2ForCausalLM",
         router="v3", bias_of="block", shared=None, checkpoint_block="block_sparse_moe", checkpoint_down="w2",
         description="MiniMax-M2 (minimax_m2): sigmoid scores, the block's e_score_correction_bias for choosing, "
         "renormalized, no groups, no scale, no shared expert; saved under the released names (block_sparse_moe, "
         "w1/w3/w2)"),
    dict(name="solar_open_e16_g2_tg1_k4", family="solar_open", config=solar_open_config,
         model_class="SolarOpenForCausalLM", description="Solar Open (solar_open): V3's router with 2 groups of "
         "which 1 is kept, renormalized, scale 1.0, 1 shared expert, every layer MoE"),
    dict(name="ernie4_5_moe_e16_k4", family="ernie4_5_moe", config=ernie4_5_moe_config,
         model_class="Ernie4_5_MoeForCausalLM", router="softmax_bias", description="ERNIE-4.5-MoE (ernie4_5_moe): "
         "softmax, chosen on the probabilities plus moe_statics' (1, E) correction bias, unbiased weights "
         "renormalized, one shared expert, MoE from layer 1"),
    dict(name="hunyuan_v1_moe_e16_k4", family="hunyuan_v1_moe", config=hunyuan_v1_moe_config,
         model_class="HunYuanMoEV1ForCausalLM", router="softmax", shared="shared_mlp", description="Hunyuan-A13B "
         "(hunyuan_v1_moe): softmax top-4 (moe_topk given per layer), renormalized, an ungated shared MLP of "
         "intermediate_size"),
    dict(name="qwen3_vl_moe_e16_k4", family="qwen3_vl_moe", config=qwen3_vl_moe_config,
         model_class="Qwen3VLMoeForConditionalGeneration", router="softmax", shared=None, text_config=True,
         checkpoint_layers="model.language_model.layers.", released_transposed=["mlp.experts.gate_up_proj",
                                                                                "mlp.experts.down_proj"],
         description="Qwen3-VL-MoE (qwen3_vl_moe): the language model's keys under text_config, softmax top-4 always "
         "renormalized, the experts fused and stored as released (gate_up_proj (E, D, 2I) gate columns first, "
         "down_proj (E, I, D)), which transformers transposes on load"),
    dict(name="granitemoe_e16_k4", family="granitemoe", config=granitemoe_config, model_class="GraniteMoeForCausalLM",
         router="softmax", shared=None, block_attr="block_sparse_moe", router_attr="router",
         checkpoint_block="block_sparse_moe", checkpoint_check="output_linear.weight",
         description="Granite-MoE (granitemoe): softmax of the top-4 logits (softmax renormalized over the chosen), "
         "experts saved under the released names (block_sparse_moe.router.layer, input_linear (E, 2I, D) gate rows "
         "then up rows per expert, output_linear (E, D, I))"),
    dict(name="granitemoeshared_e16_k4", family="granitemoeshared", config=granitemoeshared_config,
         model_class="GraniteMoeSharedForCausalLM", router="softmax", shared="granite", block_attr="block_sparse_moe",
         router_attr="router", checkpoint_block="block_sparse_moe", checkpoint_check="output_linear.weight",
         description="Granite-MoE with a shared MLP (granitemoeshared): granitemoe's block plus shared_mlp "
         "(input_linear (2S, D) gate then up, output_linear (D, S)), S = shared_intermediate_size 48"),
    dict(name="granitemoehybrid_e16_k4", family="granitemoehybrid", config=granitemoehybrid_config,
         model_class="GraniteMoeHybridForCausalLM", router="softmax", shared="granite", block_attr="block_sparse_moe",
         router_attr="router", checkpoint_block="block_sparse_moe", checkpoint_check="output_linear.weight",
         description="Granite-4.0 hybrid (granitemoehybrid): granitemoeshared's MoE block and shared MLP in a "
         "Mamba/attention stack (both layers attention here; the block is the same in either)"),
    dict(name="llama4_text_e16_k1", family="llama4_text", config=llama4_text_config,
         model_class="Llama4ForCausalLM", router="llama4", shared="llama4", block_attr="feed_forward",
         router_attr="router", checkpoint_block="feed_forward", experts_in_out=True, wrap_as_llama4="llama4_e16_k1",
         description="Llama 4 (llama4_text): top-1 by logit, its sigmoid multiplied into the expert's input, an "
         "ungated shared expert of intermediate_size; experts fused (E, D, 2I) gate columns first and (E, I, D); "
         "layer 1 MoE by interleave_moe_layer_step 2, layer 0 dense"),
    dict(name="phimoe_e16_k2", family="phimoe", config=phimoe_config, model_class="PhimoeForCausalLM",
         router="sparsemixer", shared=None, router_attr="router", checkpoint_block="block_sparse_moe",
         checkpoint_down="w2", description="Phi-3.5-MoE (phimoe): the sparsemixer in eval mode (top-2, each weight a "
         "softmax over the logits within 2 router_jitter_noise of the chosen one, relative), router_jitter_noise 0.3 so "
         "the masks keep several experts; saved under the released names (block_sparse_moe, w1/w3/w2)"),
    dict(name="qwen3_5_moe_e16_k4", family="qwen3_5_moe", config=qwen3_5_moe_config,
         model_class="Qwen3_5MoeForConditionalGeneration", router="softmax", shared="gated", text_config=True,
         checkpoint_layers="model.language_model.layers.",
         description="Qwen3.5-MoE (qwen3_5_moe): the language model's keys under text_config, softmax top-4 always "
         "renormalized, a sigmoid-gated shared expert of shared_expert_intermediate_size 24, experts saved one per "
         "expert under model.language_model.layers.N.mlp"),
    dict(name="qwen3_5_moe_text_e16_k4", family="qwen3_5_moe_text", config=qwen3_5_moe_text_config,
         model_class="Qwen3_5MoeForCausalLM", router="softmax", shared="gated",
         description="the text-only Qwen3.5-MoE (qwen3_5_moe_text): qwen3_5_moe's block with its keys at the top "
         "level and its layers under model.layers"),
    dict(name="glm4v_moe_e16_g4_tg2_k4", family="glm4v_moe", config=glm4v_moe_config,
         model_class="Glm4vMoeForConditionalGeneration", text_config=True,
         checkpoint_layers="model.language_model.layers.",
         description="GLM-4.5V (glm4v_moe): glm4_moe's block in the language model, keys under text_config, tensors "
         "under model.language_model.layers; 4 groups keep 2, one shared expert"),
    dict(name="mimo_v2_flash_e16_g4_tg2_k4", family="mimo_v2_flash", config=mimo_v2_flash_config,
         model_class="MiMoV2FlashForCausalLM", shared=None,
         description="MiMo-V2-Flash (mimo_v2_flash): V3's router (4 groups keep 2, correction bias), no shared expert, "
         "layer 1 sparse by mlp_layer_types"),
    dict(name="kimi_linear_e16_g4_tg2_k4", family="kimi_linear", config=kimi_linear_config,
         model_class="KimiLinearForCausalLM", checkpoint_block="block_sparse_moe", checkpoint_down="w2",
         description="Kimi-Linear (kimi_linear): V3's block under its own key names, routed_scaling_factor 2.446, "
         "saved under block_sparse_moe with Mixtral's expert names (w1, w3, w2)"),
    dict(name="bailing_hybrid_e16_g4_tg2_k4", family="bailing_hybrid", config=bailing_hybrid_config,
         model_class="BailingHybridForCausalLM",
         description="Ling's hybrid (bailing_hybrid): V3's block under its own key names (num_experts_per_token, "
         "num_expert_group, moe_renormalize), 4 groups keep 2, one shared expert, layer 1 sparse by mlp_layer_types"),
    dict(name="mistral4_e16_g4_tg2_k4", family="mistral4", config=mistral4_config, model_class="Mistral4ForCausalLM",
         router="softmax_groups",
         description="Mistral 4 (mistral4): 4 groups of softmax scores keep 2 (top-2 sums; excluded experts 0.0), "
         "renormalized, one shared expert; experts saved fused (gate_up_proj (E, 2I, D), down_proj (E, D, I))"),
    dict(name="qwen3_omni_moe_e16_k4", family="qwen3_omni_moe", config=qwen3_omni_moe_config,
         model_class="Qwen3OmniMoeForConditionalGeneration", router="softmax", shared=None, thinker=True,
         checkpoint_layers="thinker.model.layers.",
         description="Qwen3-Omni-MoE (qwen3_omni_moe): Qwen3-MoE's block in the thinker's language model, keys under "
         "thinker_config.text_config (norm_topk_prob true by default), tensors under thinker.model.layers"),
    dict(name="jamba_e16_k4", family="jamba", config=jamba_config, model_class="JambaForCausalLM", router="softmax",
         norm=False, shared=None, block_attr="feed_forward", router_attr="router", checkpoint_block="feed_forward",
         description="Jamba (jamba): softmax top-4 NOT renormalized, experts of intermediate_size, layer 1 MoE by "
         "expert_layer_period 2 / offset 1 (a Mamba layer), under model.layers.N.feed_forward"),
    dict(name="cohere2_moe_e16_k4", family="cohere2_moe", config=cohere2_moe_config, model_class="Cohere2MoeForCausalLM",
         router="topk_softmax", shared_average=True,
         description="Cohere2-MoE (cohere2_moe) under its defaults: a float32 softmax over the top-4 logits, one shared "
         "expert of intermediate_size averaged with the routed output ((routed + shared) / 2), layer 0 dense by "
         "mlp_layer_types"),
    dict(name="cohere2_moe_sigmoid_sum_e16_k4", family="cohere2_moe",
         config=lambda: cohere2_moe_config("sigmoid", "sum"), model_class="Cohere2MoeForCausalLM",
         router="topk_sigmoid", description="Cohere2-MoE with expert_selection_fn sigmoid (the top-4 logits' sigmoids "
         "divided by their sum) and shared_expert_combination_strategy sum"),
    dict(name="granitemoe_swa_e16_k4", family="granitemoe_swa", config=granitemoe_swa_config,
         model_class="GraniteMoeSWAForCausalLM", router="softmax", shared="granite", block_attr="block_sparse_moe",
         router_attr="router", checkpoint_block="block_sparse_moe", checkpoint_check="experts.down_proj",
         description="Granite-MoE with sliding-window attention (granitemoe_swa): granitemoeshared's block and shared "
         "MLP under transformers' own names (block_sparse_moe.router.weight, experts.gate_up_proj (E, 2I, D), "
         "experts.down_proj (E, D, I), no .weight suffix)"),
    dict(name="dbrx_e16_k4", family="dbrx", builder=lambda out, spec: build_dbrx_case(out, spec),
         description="DBRX (dbrx): settings in ffn_config, softmax top-4 divided by the weights' 1-norm (their sum), "
         "experts stacked as (E I, D) w1 / v1 / w2 under transformer.blocks.N.ffn.experts.mlp, w2 used as h @ W"),
    dict(name="minimax_e16_k4", family="minimax", config=minimax_config, model_class="MiniMaxForCausalLM",
         router="softmax", shared=None, checkpoint_block="block_sparse_moe", checkpoint_down="w2",
         description="MiniMax-Text-01 (minimax): Mixtral's block, saved under block_sparse_moe with w1/w3/w2"),
    dict(name="glm_moe_dsa_e16_g4_tg2_k4", family="glm_moe_dsa", config=glm_moe_dsa_config,
         model_class="GlmMoeDsaForCausalLM",
         description="GLM-5 with DSA attention (glm_moe_dsa): V3's block, 4 groups keep 2, one shared expert, layer 1 "
         "sparse by mlp_layer_types"),
    dict(name="sarvam_moe_e16_g4_tg2_k4", family="sarvam_moe", config=sarvam_moe_config, model_class="auto",
         description="Sarvam-MoE (sarvam_moe, run by Glm4MoeForCausalLM): glm4_moe's block, 4 groups keep 2, the "
         "bias saved as mlp.gate.expert_bias"),
    dict(name="qwen4_exp_text_e16_k4", family="qwen4_exp_text", config=qwen4_exp_text_config,
         model_class="Qwen4ExpForCausalLM", router="softmax", shared="gated",
         description="Qwen4-Exp's language model (qwen4_exp_text): Qwen2-MoE's block, renormalized by "
         "norm_topk_prob's default (true), a sigmoid-gated shared expert"),
    dict(name="qwen4_exp_e16_k4", family="qwen4_exp", config=qwen4_exp_config,
         model_class="Qwen4ExpForConditionalGeneration", router="softmax", shared="gated", text_config=True,
         checkpoint_layers="model.language_model.layers.",
         description="Qwen4-Exp (qwen4_exp): qwen4_exp_text's block with the keys under text_config and the layers "
         "under model.language_model.layers"),
    dict(name="glm5_next_e16_g4_tg2_k4", family="glm5_next", config=glm5_next_config,
         model_class="Glm5NextForConditionalGeneration", text_config=True, checkpoint_layers="model.language_model.layers.",
         swiglu_limit=0.5,
         description="GLM-5-Next (glm5_next): V3's block, 4 groups keep 2, routed and shared experts run "
         "silu(min(gate, L)) * clamp(up, -L, L) with swiglu_limit L = 0.5 (the clamps act on most units)"),
    dict(name="hy_v4_e16_g4_tg2_k4", family="hy_v4", config=hy_v4_config, model_class="HYV4ForCausalLM",
         swiglu_limit=0.5, clamp_routed_only=True, checkpoint_check="experts.down_proj",
         description="Hunyuan-V4 (hy_v4): V3's block, 4 groups keep 2, the routed experts' SwiGLU limited at "
         "swiglu_limit 0.5 and the shared MLP's not; experts saved fused, the shared gate as linear_gate"),
    dict(name="hy_v4_vl_e16_g4_tg2_k4", family="hy_v4_vl", config=hy_v4_vl_config,
         model_class="HYV4VLForConditionalGeneration", text_config=True, swiglu_limit=0.5, clamp_routed_only=True,
         checkpoint_check="experts.down_proj",
         description="Hunyuan-V4's multimodal release (hy_v4_vl): hy_v4's block with the keys under text_config and "
         "the tensors still under model.layers"),
    dict(name="hy_v3_e16_k4", family="hy_v3", config=hy_v3_config, model_class="HYV3ForCausalLM", bias_of="block",
         scale_attr="router_scaling_factor", weights_from_reference=True,
         description="Hunyuan-V3 (hy_v3): sigmoid with the block's correction bias (saved as mlp.expert_bias), always "
         "renormalized, router_scaling_factor 2.826, shared MLP saved as mlp.shared_mlp, layer 1 sparse"),
    dict(name="afmoe_e16_k4", family="afmoe", config=afmoe_config, model_class="AfmoeForCausalLM", router_attr="router",
         bias_attr="expert_bias", scale_attr="route_scale", weights_from_reference=True,
         description="AFMoE (afmoe): sigmoid with expert_bias, always renormalized, route_scale 1.5, two shared "
         "experts, MoE from num_dense_layers 1; router saved as mlp.router.gate"),
    dict(name="lfm2_moe_e16_k4", family="lfm2_moe", config=lfm2_moe_config, model_class="Lfm2MoeForCausalLM",
         block_attr="feed_forward", checkpoint_block="feed_forward", checkpoint_down="w2", bias_attr="expert_bias",
         shared=None, norm_eps=1e-6, weights_from_reference=True,
         description="LFM2-MoE (lfm2_moe): sigmoid with expert_bias, renormalized (+1e-6), routed_scaling_factor "
         "1.25, no shared expert, under feed_forward with w1/w3/w2, MoE from num_dense_layers 1"),
    dict(name="laguna_e16_k4", family="laguna", config=laguna_config, model_class="LagunaForCausalLM",
         shared="sized", shared_size_attr="shared_expert_intermediate_size", scale_attr="moe_routed_scaling_factor",
         norm_eps=0.0, weights_from_reference=True,
         description="Laguna (laguna): sigmoid with the correction bias (saved as mlp.experts.e_score_correction_bias), "
         "always renormalized, moe_routed_scaling_factor 1.5, a shared MLP of 48 saved as mlp.shared_expert"),
    dict(name="exaone_moe_e16_k4", family="exaone_moe", config=exaone_moe_config,
         model_class="ExaoneMoeForCausalLM", description="EXAONE-MoE (exaone_moe): V3's router, one group, "
         "renormalized, routed_scaling_factor 2.5 (its default), 2 shared experts (num_shared_experts), layer 1 MoE "
         "by mlp_layer_types"),
    dict(name="sarvam_mla_e16_g4_tg2_k4", family="sarvam_mla", config=sarvam_mla_config, model_class="auto",
         description="Sarvam's MLA model (sarvam_mla, run by DeepseekV3ForCausalLM): V3's block, 4 groups keep 2, "
         "one shared expert, layer 0 dense"),
    dict(name="beam_e16_g4_tg2_k4", family="beam", config=beam_config, model_class="BeamForCausalLM", shared=None,
         weights_from_reference=True,
         description="Beam (beam): V3's router (4 groups keep 2, correction bias), no shared expert, num_experts, "
         "layer 1 sparse by mlp_layer_types; transformers multiplies the block's output by routed_scaling_factor "
         "(the same as scaling the weights, which its router returns unscaled: route.weights are float64's)"),
    dict(name="kimi_k25_e16_g4_tg2_k4", family="kimi_k25", config=kimi_k25_config,
         model_class="Kimi_K25ForConditionalGeneration", text_config=True,
         checkpoint_layers="language_model.model.layers.",
         released_renames=[("language_model.model.blocks.", "language_model.model.layers.")],
         description="Kimi K2.5 (kimi_k25): DeepSeek-V3 as the language model, keys under text_config, tensors under "
         "language_model.model.layers as the releases name them (save_pretrained in transformers 5.24 writes "
         "language_model.model.blocks; the reference reloads the released names); 4 groups keep 2"),
    dict(name="mistral_large4_e16_g4_tg2_k4", family="mistral_large4", config=mistral_large4_config,
         model_class="MistralLarge4ForConditionalGeneration", router="softmax_groups", text_config=True,
         checkpoint_layers="layers.", checkpoint_block="", checkpoint_down="w2",
         checkpoint_parts=("gate.", "experts.", "shared_experts."),
         description="Mistral Large 4 (mistral_large4): 4 groups of softmax scores keep 2 (excluded experts 0.0), "
         "always renormalized, one shared expert, keys under text_config, saved under Mistral's names "
         "(layers.N.gate, experts.E.w1 / w3 / w2, shared_experts.w1 / w3 / w2)"),
    dict(name="deepseek_ocr2_e16_k4", family="deepseek_ocr2", config=deepseek_ocr2_config,
         model_class="DeepseekOcr2ForConditionalGeneration", router="softmax", norm=False, text_config=True,
         scale_weights=True,
         description="DeepSeek-OCR-2 (deepseek_ocr2): DeepSeek-V2's block in the language model (greedy softmax "
         "top-4, not renormalized, x routed_scaling_factor 1.5, two shared experts), keys under text_config, tensors "
         "under model.layers., layer 1 sparse by mlp_layer_types"),
    dict(name="unlimited_ocr_e16_k4", family="unlimited_ocr", config=unlimited_ocr_config,
         model_class="UnlimitedOcrForConditionalGeneration", router="softmax", norm=False, text_config=True,
         scale_weights=True,
         description="Unlimited-OCR (unlimited_ocr): the same block under its own classes and defaults"),
    dict(name="lara_mini_e16_k4", family="lara_mini", config=lara_mini_config, model_class="LaraMiniForCausalLM",
         router="softmax", shared="ungated", checkpoint_check="experts.down_proj",
         description="Lara-Mini (lara_mini): softmax top-4 renormalized, an ungated shared expert added in full, the "
         "experts saved fused (experts.gate_up_proj (E, 2I, D), experts.down_proj (E, D, I))"),
    dict(name="flint_e16_k4", family="flint", config=flint_config, model_class="FlintForCausalLM",
         router="topk_sigmoid", shared="ungated",
         description="Flint (flint): top-4 of the sigmoid scores (no bias), renormalized, an ungated shared expert, "
         "layer 1 MoE by mlp_only_layers"),
    dict(name="dots3_note_text_e16_g4_tg2_k4", family="dots3_note_text", config=dots3_note_text_config,
         model_class="Dots3NoteForCausalLM", shared="sized_count", shared_size_attr="shared_experts_intermediate_size",
         flat_release=("dots3_note_e16_g4_tg2_k4", "dots3_note"),
         description="dots.llm3's language model (dots3_note_text): V3's block, 4 groups keep 2, two shared experts "
         "of shared_experts_intermediate_size 24 (48 wide), layer 1 sparse by mlp_layer_types"),
    dict(name="axk2_e16_g4_tg2_k4", family="axk2", config=axk2_config, model_class="AXK2ForCausalLM",
         description="A.X K2 (axk2): V3's block whose excluded groups score 0.0, 4 groups keep 2, one shared expert, "
         "layer 1 sparse by mlp_layer_types"),
    dict(name="minimax_m3_vl_e16_k4", family="minimax_m3_vl", config=minimax_m3_vl_config,
         model_class="MiniMaxM3SparseForConditionalGeneration", text_config=True,
         checkpoint_layers="language_model.model.layers.", checkpoint_block="block_sparse_moe", checkpoint_down="w2",
         shared="gate_up", shared_size_attr="shared_intermediate_size", swiglu_oai=True, weights_from_reference=True,
         description="MiniMax-M3 (minimax_m3_vl) as released: M2's sigmoid router with the block's correction bias, "
         "always renormalized, the routed output x routed_scaling_factor 2.0 (route.weights: float64's, scaled), a "
         "48-wide shared MLP, routed and shared experts running the clamped SwiGLU without biases at swiglu_limit "
         "0.5, tensors under language_model.model.layers.N.block_sparse_moe (w1 / w3 / w2)"),
    dict(name="step3p7_e16_k4", family="step3p7", config=step3p7_config, model_class="Step3p7ForConditionalGeneration",
         text_config=True, checkpoint_block="", checkpoint_parts=("moe.", "share_expert."),
         checkpoint_check="moe.down_proj.weight", shared="sized", shared_size_attr="share_expert_dim",
         scale_attr="moe_router_scaling_factor", weights_from_reference=True, silu_clamp=(0.5, 0.75),
         description="Step-3.7 (step3p7): sigmoid with the correction bias (moe.router_bias), renormalized, the "
         "routed output x 1.5 (route.weights: float64's, scaled), a shared MLP; the SwiGLU clamped after the silu at "
         "swiglu_limits[1] = 0.5 (routed) and swiglu_limits_shared[1] = 0.75 (shared), the clamps acting; experts "
         "stacked (E, I, D) as moe.gate_proj / up_proj / down_proj; the vision tower built tiny"),
    dict(name="deepseek_v4_e16_k4", family="deepseek_v4", config=deepseek_v4_config, model_class="DeepseekV4ForCausalLM",
         router="sqrt_softplus", checkpoint_block="ffn", checkpoint_down="w2", shared="sized",
         shared_size_attr="moe_intermediate_size", swiglu_limit=0.5,
         description="DeepSeek-V4 (deepseek_v4), its gate-routed layer 1 (layer 0 is hash_moe): sqrt-softplus scores "
         "with the correction bias (ffn.gate.bias) for choosing, renormalized, x 1.5, a shared MLP as wide as the "
         "experts, routed and shared SwiGLU limited at 0.5, tensors under model.layers.N.ffn (w1 / w3 / w2)"),
    dict(name="kolibri1_e16_k4", family="kolibri1", config=kolibri1_config, model_class="Kolibri1ForCausalLM",
         router="logit_bias", shared="sized", shared_size_attr="shared_expert_intermediate_size", checkpoint_block="",
         checkpoint_parts=("mlp.", "moe.router."), checkpoint_check="mlp.experts.15.down_proj.weight",
         description="Kolibri-1 (kolibri1): top-4 of the logits plus the correction bias (saved outside the block as "
         "model.layers.N.moe.router.expert_bias), weights the chosen logits' sigmoids, not renormalized, an ungated "
         "shared MLP"),
    dict(name="aria_text_e16_k4", family="aria_text", config=aria_text_config, model_class="AriaTextForCausalLM",
         router="topk_softmax", router_attr="router", experts_in_out=True, shared_gelu_tanh=True,
         checkpoint_check="experts.fc2.weight",
         description="Aria's language model (aria_text): top-4 logits, softmax over them, SiLU experts stored as "
         "experts.fc1 (E, D, 2I) / fc2 (E, I, D), two shared experts running hidden_act gelu_pytorch_tanh"),
    dict(name="aria_e16_k4", family="aria", config=aria_config, model_class="AriaForConditionalGeneration",
         router="topk_softmax", router_attr="router", experts_in_out=True, shared_gelu_tanh=True, text_config=True,
         checkpoint_layers="language_model.model.layers.", checkpoint_check="experts.fc2.weight",
         description="Aria (aria) as released: aria_text's block, keys under text_config, tensors under "
         "language_model.model.layers. (the vision tower built tiny)"),
    dict(name="jetmoe_e16_k4", family="jetmoe", config=jetmoe_config, model_class="JetMoeForCausalLM",
         router="topk_softmax", router_attr="router", router_linear="layer", shared=None, experts_jetmoe=True,
         output_bias=True, weights_from_reference=True, checkpoint_check="output_linear.weight",
         description="JetMoE (jetmoe), its MLP block: top-4 logits, softmax over them, experts as input_linear "
         "(E, 2I, D) gate rows first and output_linear (E, D, I), a bias mlp.bias added to every token's output"),
    dict(name="axk1_e16_g4_tg2_k4", family="axk1", config=axk1_config, model_class="AXK1ForCausalLM",
         zero_bias=True, drop_tensors=["mlp.gate.e_score_correction_bias"], output_norm=True, checkpoint_block="",
         checkpoint_parts=("mlp.", "post_mlp_layernorm."), checkpoint_check="mlp.experts.15.down_proj.weight",
         description="A.X K1 (axk1): V3's block, 4 groups keep 2, one shared expert, without a correction bias (the "
         "tensor absent, as released), the block's output through an RMSNorm saved as "
         "model.layers.N.post_mlp_layernorm.weight"),
    dict(name="openai_privacy_filter_e16_k4", family="openai_privacy_filter", config=openai_privacy_filter_config,
         model_class="OpenAIPrivacyFilterForTokenClassification", router="topk_softmax", router_attr="router",
         shared=None, experts_in_out=True, oai_biases=True, swiglu_oai=True, returns_tuple=True,
         weights_from_reference=True, checkpoint_check="experts.down_proj_bias",
         description="OpenAI's privacy filter (openai_privacy_filter): gpt-oss's tensor names and block (router bias, "
         "softmax over the top-4 logits, expert biases, the clamped SwiGLU) with gate and up concatenated, not "
         "interleaved: gate_up_proj (E, D, 2I) columns [gate | up] and gate_up_proj_bias (E, 2I) likewise"),
    dict(name="longcat_flash_e16_z8_k4", family="longcat_flash", config=longcat_flash_config,
         model_class="LongcatFlashForCausalLM", router="softmax", router_attr="router", router_linear="classifier",
         shared=None, zero_experts=8, checkpoint_check="experts.15.down_proj.weight",
         description="LongCat-Flash (longcat_flash): softmax over 16 experts and 8 zero-computation experts, the "
         "correction bias (E + Z) for choosing, x 6.0, not renormalized; a chosen zero expert adds w x"),
    dict(name="nemotron_h_e16_g4_tg2_k4", family="nemotron_h", config=nemotron_h_config,
         model_class="NemotronHForCausalLM", block_attr="mixer", checkpoint_layers="backbone.layers.",
         checkpoint_block="mixer", experts_ungated=True, shared="ungated_mlp",
         shared_size_attr="moe_shared_expert_intermediate_size", weights_from_reference=True,
         checkpoint_check="experts.15.down_proj.weight",
         description="Nemotron-H (nemotron_h): V3's router, 4 groups keep 2, experts and a shared MLP without a gate "
         "running relu2 (relu(up x)^2), tensors under backbone.layers.N.mixer"),
]


def softmax_route64(router, x, k, norm, bias=None, norm_min=0.0):
    """Softmax top-k in float64, chosen on p + bias when there is one: (indices in canonical order, weights,
    margins, False, whether the bias changed the choice)."""
    logits = x @ router.T
    p = np.exp(logits - logits.max())
    p /= p.sum()
    c = p + bias if bias is not None else p
    order = np.argsort(-c, kind="stable")
    idx = order[:k]
    w = p[idx]
    if norm:
        w = w / max(w.sum(), norm_min)
    srt = c[order]
    cut = srt[k - 1] - srt[k] if len(srt) > k else np.inf
    slot = np.min(np.diff(-srt[:k])) if k > 1 else np.inf
    by_bias = bias is not None and set(np.argsort(-p, kind="stable")[:k]) != set(idx)
    return idx, w, (cut, slot, np.inf), False, by_bias


def logit_bias_route64(router, bias, x, k, norm):
    """Kolibri-1 in float64: top-k of logits + bias (the bias added in float32, as transformers adds it), weights the
    sigmoids of the chosen logits, divided by their sum where norm: (indices, weights, margins, False, whether the
    bias changed the choice)."""
    logits = x @ router.T
    c = (logits.astype(np.float32) + bias.astype(np.float32)).astype(np.float64)
    order = np.argsort(-c, kind="stable")
    idx = order[:k]
    w = 1.0 / (1.0 + np.exp(-logits[idx]))
    if norm:
        w = w / w.sum()
    srt = c[order]
    cut = srt[k - 1] - srt[k] if len(srt) > k else np.inf
    slot = np.min(np.diff(-srt[:k])) if k > 1 else np.inf
    by_bias = set(np.argsort(-logits, kind="stable")[:k]) != set(idx)
    return idx, w, (cut, slot, np.inf), False, by_bias


def topk_logits_route64(router, x, k, sigmoid, norm, logit_bias=None):
    """Cohere2-MoE in float64: the top-k logits (plus a router bias where there is one), weighed by a softmax over
    them, or by their sigmoids (divided by their sum where norm): (indices, weights, margins, False, False)."""
    logits = x @ router.T
    if logit_bias is not None:
        logits = logits + logit_bias
    order = np.argsort(-logits, kind="stable")
    idx = order[:k]
    top = logits[idx]
    if sigmoid:
        w = 1.0 / (1.0 + np.exp(-top))
        if norm:
            w = w / w.sum()
    else:
        w = np.exp(top - top.max())
        w = w / w.sum()
    srt = logits[order]
    cut = srt[k - 1] - srt[k] if len(srt) > k else np.inf
    slot = np.min(np.diff(-srt[:k])) if k > 1 else np.inf
    return idx, w, (cut, slot, np.inf), False, False


def config_values(cfg):
    """The routing settings of a config, whatever its class names them."""
    E = (getattr(cfg, "n_routed_experts", None) or getattr(cfg, "num_local_experts", None)
         or getattr(cfg, "moe_num_experts", None) or cfg.num_experts)
    H = getattr(cfg, "moe_intermediate_size", None) or cfg.intermediate_size
    if type(cfg).__name__ in ("FlexOlmoConfig", "MiniMaxM2Config", "HunYuanMoEV1Config"):
        H = cfg.intermediate_size
    shared = (getattr(cfg, "n_shared_experts", None) or getattr(cfg, "num_shared_experts", None)
              or getattr(cfg, "moe_num_shared_experts", None) or 0)
    return dict(E=E, H=H, n_group=getattr(cfg, "n_group", None) or 1, topk_group=getattr(cfg, "topk_group", None) or 1,
                norm=getattr(cfg, "norm_topk_prob", True), scale=getattr(cfg, "routed_scaling_factor", 1.0),
                n_shared=shared)


def sparsemixer_route64(router, x, eps):
    """PhiMoE's sparsemixer (eval) in float64: (indices, weights, margins: the top-3 gap and how far every kept or
    masked logit's ratio is from the threshold, so float32 takes the same decisions)."""
    s = x @ router.T
    order = np.argsort(-s, kind="stable")
    idx, w, mask_margin, excluded = [], [], np.inf, None
    for _ in range(2):
        cand = np.where(np.arange(len(s)) == excluded, -np.inf, s) if excluded is not None else s
        e = int(np.argmax(cand))
        m = s[e]
        ratio = (m - s) / np.maximum(np.abs(s), m)
        keep = ratio <= 2 * eps
        if excluded is not None:
            keep[excluded] = False
        live = [i for i in range(len(s)) if i != excluded and i != e]
        mask_margin = min(mask_margin, np.min(np.abs(ratio[live] - 2 * eps)))
        z = np.where(keep, s - m, -np.inf)
        w.append(np.exp(z[e]) / np.exp(z).sum())
        idx.append(e)
        excluded = e
    gaps = (s[order[0]] - s[order[1]], s[order[1]] - s[order[2]])
    return np.array(idx), np.array(w), (min(gaps[1], mask_margin), gaps[0], np.inf), False, False


def route64(router, bias, x, n_group, topk_group, k, norm, scale, softmax=False, eps=1e-20, sqrt_softplus=False):
    """DeepSeek-V3/GLM routing in float64: (indices in canonical order, weights, margins). softmax: Mistral 4's
    groups over softmax scores (no bias; excluded experts score 0.0, which orders as -inf among positive scores).
    sqrt_softplus: DeepSeek-V4's scores, sqrt(softplus(logits))."""
    logits = x @ router.T
    s = np.exp(logits - logits.max()) / np.exp(logits - logits.max()).sum() if softmax else 1.0 / (1.0 + np.exp(-logits))
    if sqrt_softplus:
        s = np.sqrt(np.maximum(logits, 0.0) + np.log1p(np.exp(-np.abs(logits))))
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
        w = w / (w.sum() + eps)
    w = w * scale
    finite = masked[np.isfinite(masked)]
    srt = np.sort(finite)[::-1]
    cut = srt[k - 1] - srt[k] if len(srt) > k else np.inf
    slot = np.min(np.diff(-srt[:k])) if k > 1 else np.inf
    gsrt = np.sort(gs)[::-1]
    group_cut = gsrt[topk_group - 1] - gsrt[topk_group] if topk_group < n_group else np.inf
    unlimited = np.argsort(-c, kind="stable")[:k]
    unbiased = np.argsort(-s, kind="stable")[:k]
    return idx, w, (cut, slot, group_cut), set(unlimited) != set(idx), not softmax and set(unbiased) != set(idx)


def language_model(model):
    """The decoder a model's layers sit in: model.model, model.model.language_model for a multimodal one, or
    model.thinker.model.language_model for Qwen3-Omni."""
    if hasattr(model, "thinker"):
        return model.thinker.model.language_model
    return getattr(model.model, "language_model", model.model)


def released_names(path, renames):
    """Renames the tensors of a saved checkpoint (old prefix, new prefix) as its releases name them."""
    from safetensors.numpy import load_file
    tensors = load_file(path)
    for old, new in renames:
        tensors = {(new + n[len(old):] if n.startswith(old) else n): t for n, t in tensors.items()}
    save_file(tensors, path, metadata={"format": "pt"})


def released_experts(path, transposed):
    """Rewrites the fused experts of a saved checkpoint in the layout its releases store (transformers transposes
    them on load: Qwen3-VL-MoE's gate_up_proj (E, D, 2I), down_proj (E, I, D))."""
    from safetensors.numpy import load_file
    tensors = load_file(path)
    for n in list(tensors):
        if any(n.endswith(t) for t in transposed):
            tensors[n] = np.ascontiguousarray(np.swapaxes(tensors[n], 1, 2))
    save_file(tensors, path, metadata={"format": "pt"})


def build_case(out_dir, spec):
    cfg = spec["config"]()
    full_cfg = cfg
    if hasattr(cfg, "text_config") and spec.get("text_config"):  # the language model's keys
        cfg = cfg.text_config
    if spec.get("thinker"):  # Qwen3-Omni: the thinker's language model
        cfg = cfg.thinker_config.text_config
    v = config_values(cfg)
    if "norm" in spec:  # a router that never renormalizes whatever the config (Jamba)
        v["norm"] = spec["norm"]
    if spec.get("scale_attr"):  # the scaling factor under the family's own name
        v["scale"] = getattr(cfg, spec["scale_attr"])
    E, K, D, H = v["E"], getattr(cfg, "num_experts_per_tok", None) or cfg.moe_topk, cfg.hidden_size, v["H"]
    Z = spec.get("zero_experts", 0)  # LongCat-Flash: router rows E .. E + Z - 1 choose the identity
    if isinstance(K, list):  # one per layer (Hunyuan): layer 1's
        K = K[1]
    softmax = spec.get("router", "v3") in ("softmax", "softmax_bias")
    llama4 = spec.get("router") == "llama4"
    sparsemixer = spec.get("router") == "sparsemixer"
    softmax_groups = spec.get("router") == "softmax_groups"
    topk_logits = spec.get("router") in ("topk_softmax", "topk_sigmoid")
    softmax_bias = spec.get("router") == "softmax_bias"
    shared_kind = spec.get("shared", "experts")
    block_name = spec.get("checkpoint_block", "mlp")
    prefix = spec.get("checkpoint_layers", "model.layers.") + "1." + (block_name + "." if block_name else "")
    for seed in range(700000, 700000 + 1000):
        rng = np.random.default_rng(seed)
        router = (rng.standard_normal((E + Z, D)) * 1.5 / np.sqrt(D)).astype(np.float32)
        bias = rng.uniform(-0.15, 0.15, E + Z).astype(np.float32)
        # A router bias (OpenAI's privacy filter: gpt-oss's router.bias), drawn only for the cases that have one.
        router_bias = (rng.standard_normal(E) * 0.5).astype(np.float32) if spec.get("oai_biases") else None
        router_bias64 = router_bias.astype(np.float64) if router_bias is not None else None
        if spec.get("zero_bias"):  # releases without a correction bias: the buffer stays zeros
            bias = np.zeros(E, dtype=np.float32)
        x = rng.standard_normal((2, 5, D)).astype(np.float32)
        xs = x.reshape(-1, D).astype(np.float64)
        if Z:  # LongCat-Flash: softmax over E + Z with a small bias, not renormalized, times the scale
            bias = rng.uniform(-0.02, 0.02, E + Z).astype(np.float32)
            routes = [softmax_route64(router.astype(np.float64), t, K, False, bias.astype(np.float64)) for t in xs]
            routes = [(r[0], r[1] * v["scale"]) + tuple(r[2:]) for r in routes]
        elif softmax_bias:  # ERNIE's correction bias is on the probabilities' scale: keep it small
            bias = rng.uniform(-0.02, 0.02, E).astype(np.float32)
            routes = [softmax_route64(router.astype(np.float64), t, K, True, bias.astype(np.float64),
                                      getattr(cfg, "moe_norm_min", 0.0)) for t in xs]
        elif spec.get("router") == "logit_bias":
            routes = [logit_bias_route64(router.astype(np.float64), bias, t, K, v["norm"]) for t in xs]
        elif softmax:
            routes = [softmax_route64(router.astype(np.float64), t, K, v["norm"]) for t in xs]
        elif sparsemixer:
            routes = [sparsemixer_route64(router.astype(np.float64), t, cfg.router_jitter_noise) for t in xs]
        elif llama4:  # sigmoid of the chosen logits, no bias, no renormalization
            routes = [route64(router.astype(np.float64), np.zeros(E), t, 1, 1, K, False, 1.0) for t in xs]
        elif topk_logits:
            routes = [topk_logits_route64(router.astype(np.float64), t, K, spec["router"] == "topk_sigmoid", v["norm"],
                                          logit_bias=router_bias64)
                      for t in xs]
        elif softmax_groups:
            routes = [route64(router.astype(np.float64), np.zeros(E), t, v["n_group"], v["topk_group"], K, v["norm"],
                              v["scale"], softmax=True) for t in xs]
        else:
            routes = [route64(router.astype(np.float64), bias.astype(np.float64), t, v["n_group"], v["topk_group"], K,
                              v["norm"], v["scale"], eps=spec.get("norm_eps", 1e-20),
                              sqrt_softplus=spec.get("router") == "sqrt_softplus") for t in xs]
        if spec.get("scale_weights"):  # DeepSeek-V2's softmax weights times routed_scaling_factor
            routes = [(r[0], r[1] * v["scale"]) + tuple(r[2:]) for r in routes]
        margins = np.min([r[2] for r in routes], axis=0)
        by_groups = sum(r[3] for r in routes)
        by_bias = sum(r[4] for r in routes)
        groups_act = v["n_group"] > v["topk_group"]
        if spec.get("zero_bias"):
            by_bias = 2
        if margins.min() >= MARGIN and (by_groups >= 2 or not groups_act) and (
                by_bias >= 2 or (softmax and not softmax_bias) or llama4 or sparsemixer or softmax_groups or topk_logits):
            break
    else:
        raise SystemExit(f"{spec['name']}: no seed gives margins >= {MARGIN}")
    # Expert biases wide enough that the clamped SwiGLU's limits act (the privacy filter's, as gpt-oss's).
    gu_bias = (rng.standard_normal((E, 2 * H)) * 4.0).astype(np.float32) if spec.get("oai_biases") else None
    dn_bias = (rng.standard_normal((E, D)) * 0.5).astype(np.float32) if spec.get("oai_biases") else None
    gate = (rng.standard_normal((E, H, D)) / np.sqrt(D)).astype(np.float32)
    up = (rng.standard_normal((E, H, D)) / np.sqrt(D)).astype(np.float32)
    down = (rng.standard_normal((E, D, H)) / np.sqrt(H)).astype(np.float32)
    Hs = {"experts": H * v["n_shared"], "gated": getattr(cfg, "shared_expert_intermediate_size", 0),
          "ungated": getattr(cfg, "shared_expert_intermediate_size", 0),
          "sized_count": getattr(cfg, spec.get("shared_size_attr", "-"), 0) * v["n_shared"],
          "gate_up": getattr(cfg, spec.get("shared_size_attr", "-"), 0),
          "ungated_mlp": getattr(cfg, spec.get("shared_size_attr", "-"), 0),
          "shared_mlp": getattr(cfg, "intermediate_size", 0), "granite": getattr(cfg, "shared_intermediate_size", 0),
          "llama4": getattr(cfg, "intermediate_size", 0), "sized": getattr(cfg, spec.get("shared_size_attr", "-"), 0),
          None: 0}[shared_kind]
    shared = {n: (rng.standard_normal(s) / np.sqrt(s[1])).astype(np.float32)
              for n, s in (("gate_proj", (Hs, D)), ("up_proj", (Hs, D)), ("down_proj", (D, Hs)))} if Hs else {}
    shared_gate = (rng.standard_normal((1, D)) / np.sqrt(D)).astype(np.float32) if shared_kind == "gated" else None

    torch.manual_seed(0)
    model_class = (transformers.AutoModelForCausalLM if spec["model_class"] == "auto"
                   else getattr(transformers, spec["model_class"]))
    model = (model_class.from_config(full_cfg) if spec["model_class"] == "auto" else model_class(full_cfg)).eval()
    block_attr = spec.get("block_attr", "mlp")
    block = getattr(language_model(model).layers[1], block_attr)
    gate_module = getattr(block, spec.get("router_attr", "gate"))
    if isinstance(getattr(gate_module, "gate", None), torch.nn.Linear):  # a router module holding its linear (afmoe)
        gate_module = gate_module.gate
    if spec.get("router_linear"):  # JetMoE: the router's linear under its own name
        gate_module = getattr(gate_module, spec["router_linear"])
    out_bias = (rng.standard_normal(D) * 0.5).astype(np.float32) if spec.get("output_bias") else None
    out_norm = (1.0 + 0.3 * rng.standard_normal(D)).astype(np.float32) if spec.get("output_norm") else None
    with torch.no_grad():
        (gate_module.wg if hasattr(gate_module, "wg") else gate_module).weight.copy_(torch.from_numpy(router))
        if softmax_bias:
            block.gate.moe_statics.e_score_correction_bias.copy_(torch.from_numpy(bias).reshape(1, E))
        elif spec.get("bias_attr"):  # the bias on the block under its own name
            getattr(block, spec["bias_attr"]).copy_(torch.from_numpy(bias))
        elif Z:
            block.router.e_score_correction_bias.copy_(torch.from_numpy(bias))
        elif not softmax and not llama4 and not sparsemixer and not softmax_groups and not topk_logits:
            owner = block if spec.get("bias_of") == "block" else block.gate
            owner.e_score_correction_bias.copy_(torch.from_numpy(bias))
        if router_bias is not None:
            gate_module.bias.copy_(torch.from_numpy(router_bias))
        if gu_bias is not None:  # concatenated [gate | up], as the weights' columns
            block.experts.gate_up_proj_bias.copy_(torch.from_numpy(gu_bias))
            block.experts.down_proj_bias.copy_(torch.from_numpy(dn_bias))
        if spec.get("output_bias"):  # JetMoE: mlp.bias, added to every token's output
            block.bias.copy_(torch.from_numpy(out_bias))
        if spec.get("output_norm"):  # A.X K1: an RMSNorm of the block's output
            block.post_mlp_layernorm.weight.copy_(torch.from_numpy(out_norm))
        if spec.get("experts_ungated"):  # Nemotron-H: up_proj (E, I, D), down_proj (E, D, I), no gate
            block.experts.up_proj.copy_(torch.from_numpy(up))
            block.experts.down_proj.copy_(torch.from_numpy(down))
        elif spec.get("experts_jetmoe"):  # input_linear (E, 2I, D) gate rows first, output_linear (E, D, I)
            block.input_linear.weight.copy_(torch.from_numpy(np.concatenate([gate, up], axis=1)))
            block.output_linear.weight.copy_(torch.from_numpy(down))
        elif spec.get("experts_in_out"):  # (E, D, 2I) gate columns first, (E, I, D)
            block.experts.gate_up_proj.copy_(torch.from_numpy(np.concatenate([gate, up], axis=1).transpose(0, 2, 1)))
            block.experts.down_proj.copy_(torch.from_numpy(down.transpose(0, 2, 1).copy()))
        else:  # (E, 2I, D); LongCat-Flash allocates it for its zero experts too (unused: zeros)
            gate_up = np.concatenate([gate, up], axis=1)
            if Z:
                gate_up = np.concatenate([gate_up, np.zeros((Z, 2 * H, D), dtype=np.float32)])
            block.experts.gate_up_proj.copy_(torch.from_numpy(gate_up))
            block.experts.down_proj.copy_(torch.from_numpy(down))
        shared_module = {"gated": getattr(block, "shared_expert", None), "llama4": getattr(block, "shared_expert", None),
                         "ungated": getattr(block, "shared_expert", None),
                         "sized": getattr(block, "shared_experts", None),
                         "sized_count": getattr(block, "shared_experts", None),
                         "shared_mlp": getattr(block, "shared_mlp", None)}.get(shared_kind,
                                                                               getattr(block, "shared_experts", None))
        if shared_kind == "ungated_mlp":  # up_proj and down_proj only
            block.shared_experts.up_proj.weight.copy_(torch.from_numpy(shared["up_proj"]))
            block.shared_experts.down_proj.weight.copy_(torch.from_numpy(shared["down_proj"]))
        elif shared_kind == "gate_up":  # one (2S, D) gate_up_proj, gate rows first (saved as gate_proj and up_proj)
            block.shared_experts.gate_up_proj.weight.copy_(torch.from_numpy(np.concatenate([shared["gate_proj"],
                                                                                            shared["up_proj"]])))
            block.shared_experts.down_proj.weight.copy_(torch.from_numpy(shared["down_proj"]))
        elif shared_kind == "granite":  # one (2S, D) input_linear: gate rows, then up rows
            shared_module = language_model(model).layers[1].shared_mlp
            shared_module.input_linear.weight.copy_(torch.from_numpy(np.concatenate([shared["gate_proj"],
                                                                                     shared["up_proj"]])))
            shared_module.output_linear.weight.copy_(torch.from_numpy(shared["down_proj"]))
        else:
            for n, w in shared.items():
                getattr(shared_module, n).weight.copy_(torch.from_numpy(w))
        if shared_gate is not None:
            block.shared_expert_gate.weight.copy_(torch.from_numpy(shared_gate))

    os.makedirs(out_dir, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        model.save_pretrained(tmp)
        with open(os.path.join(tmp, "config.json")) as f:
            config = json.load(f)
        for key in spec.get("drop_keys", []):  # left to the config class's default, as a release might
            config.pop(key, None)
        with open(os.path.join(tmp, "config.json"), "w") as f:
            json.dump(config, f)
        if spec.get("released_transposed"):  # as the releases store them; the reload below reads that layout
            released_experts(os.path.join(tmp, "model.safetensors"), spec["released_transposed"])
        if spec.get("drop_tensors"):  # as the releases lack them
            from safetensors.numpy import load_file
            kept = {n: t for n, t in load_file(os.path.join(tmp, "model.safetensors")).items()
                    if not any(n.endswith(d) for d in spec["drop_tensors"])}
            save_file(kept, os.path.join(tmp, "model.safetensors"), metadata={"format": "pt"})
        if spec.get("released_renames"):  # the releases' names where save_pretrained writes others (the reload
            released_names(os.path.join(tmp, "model.safetensors"), spec["released_renames"])  # reads them too)
        weights = {}
        prefixes = (prefix,) + ((prefix.rsplit(".", 2)[0] + ".shared_mlp.",) if shared_kind == "granite" else ())
        with safe_open(os.path.join(tmp, "model.safetensors"), "np") as f:
            for n in f.keys():
                parts = spec.get("checkpoint_parts")  # where the block has no prefix of its own (Mistral's names)
                if n.startswith(prefixes) and (not parts or n[len(prefix):].startswith(parts)):
                    weights[n] = f.get_tensor(n)
        loaded = model_class.from_pretrained(
            tmp, dtype=torch.float32, experts_implementation="eager").eval()
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(config, f, indent=2, sort_keys=True)
        f.write("\n")
    save_file(weights, os.path.join(out_dir, "weights.safetensors"), metadata={"format": "pt"})
    down_name = spec.get("checkpoint_down", "down_proj")
    assert (f"{prefix}experts.{E - 1}.{down_name}.weight" in weights or f"{prefix}experts.{down_name}" in weights
            or prefix + spec.get("checkpoint_check", "-") in weights), sorted(weights)[:8]

    llayer = language_model(loaded).layers[1]
    lblock = getattr(llayer, block_attr)
    with torch.no_grad():
        xt = torch.from_numpy(x)
        y = lblock(xt)
        if spec.get("returns_tuple"):  # (y, router scores)
            y = y[0]
        if llama4:  # Llama4TextMoe returns (y (tokens, D), router logits)
            y = y[0].reshape(x.shape)
        if shared_kind == "granite":  # the decoder layer adds the shared MLP beside the block
            y = y + llayer.shared_mlp(xt)
        y = y.numpy()
        gate_args = (lblock.e_score_correction_bias,) if spec.get("bias_of") == "block" else ()
        if llama4:  # its router returns (scores over all E, logits)
            scores, _ = lblock.router(xt.reshape(-1, D))
            tw, ti = torch.topk(scores, K, dim=-1)
        elif spec.get("weights_from_reference"):  # routers whose call differs: y checks them, weights from float64
            ti = torch.from_numpy(np.stack([r[0] for r in routes]))
            tw = torch.from_numpy(np.stack([r[1] for r in routes]).astype(np.float32))
        else:
            _, tw, ti = getattr(lblock, spec.get("router_attr", "gate"))(xt.reshape(-1, D), *gate_args)
    indices = np.stack([r[0] for r in routes]).astype(np.int64)
    weights_canonical = canonical_weights(tw.numpy(), ti.numpy(), indices)

    # float64 y from the checkpoint's values.
    y64 = np.zeros_like(xs)
    silu = lambda z: z / (1.0 + np.exp(-z))
    for t in range(xs.shape[0]):
        for e, w in zip(routes[t][0], routes[t][1]):
            if e >= E:  # a zero-computation expert: w x
                y64[t] += w * xs[t]
                continue
            xin = xs[t] * w if llama4 else xs[t]  # Llama 4 scales the expert's input
            g_, u_ = gate[e].astype(np.float64) @ xin, up[e].astype(np.float64) @ xin
            if gu_bias is not None:
                g_, u_ = g_ + gu_bias[e, :H].astype(np.float64), u_ + gu_bias[e, H:].astype(np.float64)
            if spec.get("swiglu_limit"):  # GLM-5-Next: gate clamped above, up both ways
                g_, u_ = np.minimum(g_, spec["swiglu_limit"]), np.clip(u_, -spec["swiglu_limit"], spec["swiglu_limit"])
            if spec.get("experts_ungated"):  # relu(up x)^2
                h = np.maximum(u_, 0.0) ** 2
            elif spec.get("silu_clamp"):  # Step-3.7: min(silu(g), L) * clamp(u, -L, L)
                L = spec["silu_clamp"][0]
                g_, u_ = np.minimum(silu(g_), L), np.clip(u_, -L, L)
                h = g_ * u_
            else:
                h = swiglu_oai64(g_, u_, cfg) if spec.get("swiglu_oai") else silu(g_) * u_
            y64[t] += (1.0 if llama4 else w) * (down[e].astype(np.float64) @ h
                                                 + (dn_bias[e].astype(np.float64) if dn_bias is not None else 0.0))
        if shared:
            gs_, us_ = shared["gate_proj"].astype(np.float64) @ xs[t], shared["up_proj"].astype(np.float64) @ xs[t]
            if spec.get("swiglu_limit") and not spec.get("clamp_routed_only"):
                gs_, us_ = np.minimum(gs_, spec["swiglu_limit"]), np.clip(us_, -spec["swiglu_limit"], spec["swiglu_limit"])
            if spec.get("experts_ungated"):
                hs = np.maximum(us_, 0.0) ** 2
            elif spec.get("silu_clamp"):
                L = spec["silu_clamp"][1]
                hs = np.minimum(silu(gs_), L) * np.clip(us_, -L, L)
            elif spec.get("shared_gelu_tanh"):  # Aria: the shared MLP on hidden_act, the routed experts on SiLU
                hs = 0.5 * gs_ * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (gs_ + 0.044715 * gs_ ** 3))) * us_
            else:
                hs = swiglu_oai64(gs_, us_, cfg) if spec.get("swiglu_oai") else silu(gs_) * us_
            out = shared["down_proj"].astype(np.float64) @ hs
            if shared_gate is not None:
                out = out / (1.0 + np.exp(-(shared_gate[0].astype(np.float64) @ xs[t])))
            y64[t] += out
            if spec.get("shared_average"):  # Cohere2-MoE's "average"
                y64[t] /= 2
        if out_bias is not None:
            y64[t] += out_bias.astype(np.float64)
        if out_norm is not None:
            y64[t] = out_norm.astype(np.float64) * y64[t] / np.sqrt(np.mean(y64[t] ** 2) + cfg.rms_norm_eps)
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
        "seed": seed, "rank_space": ("biased softmax probability" if softmax_bias else "softmax probability") if softmax
        else "sigmoid score" if llama4 else "logit (sparsemixer)" if sparsemixer
        else "softmax probability (groups)" if softmax_groups else "logit" if topk_logits else "biased sigmoid score",
        "margin_threshold": MARGIN,
        "margins": {"topk_cut": float(margins[0]), "between_selected_slots": float(margins[1]) if np.isfinite(margins[1]) else None,
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
    if spec.get("flat_release"):
        flat_release(out_dir, os.path.join(os.path.dirname(out_dir), spec["flat_release"][0]), spec["flat_release"][1])
    if spec.get("wrap_as_llama4"):
        wrap_as_llama4(out_dir, os.path.join(os.path.dirname(out_dir), spec["wrap_as_llama4"]), prefix)


def flat_release(text_dir, out_dir, model_type):
    """The text model's case as a release with a flat config.json holds it: the same keys at the top level under the
    multimodal model_type (dots.llm3, whose config class builds its text config from them); the same tensors, x, y
    and routing."""
    import shutil

    shutil.copytree(text_dir, out_dir, dirs_exist_ok=True)
    with open(os.path.join(out_dir, "config.json")) as f:
        config = json.load(f)
    config["model_type"] = model_type
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(config, f, indent=2, sort_keys=True)
        f.write("\n")
    with open(os.path.join(out_dir, "meta.json")) as f:
        meta = json.load(f)
    meta.update(name=os.path.basename(out_dir), family=model_type,
                description=f"{model_type} as released: {os.path.basename(text_dir)}'s layer with its text keys at the "
                "top level of config.json under the multimodal model_type (the same x, y and routing)")
    with open(os.path.join(out_dir, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")


def wrap_as_llama4(text_dir, out_dir, prefix):
    """The llama4_text case as a released multimodal llama4 checkpoint holds it: config.json's text keys under
    text_config (model_type llama4), tensors under language_model.model.layers. The same x, y and routing."""
    import shutil

    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(text_dir, "config.json")) as f:
        text = json.load(f)
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump({"model_type": "llama4", "architectures": ["Llama4ForConditionalGeneration"],
                   "text_config": text}, f, indent=2, sort_keys=True)
        f.write("\n")
    with safe_open(os.path.join(text_dir, "weights.safetensors"), "np") as f:
        weights = {"language_model." + n: f.get_tensor(n) for n in f.keys()}
    save_file(weights, os.path.join(out_dir, "weights.safetensors"), metadata={"format": "pt"})
    for name in ("input.safetensors", "expected.safetensors"):
        shutil.copy(os.path.join(text_dir, name), os.path.join(out_dir, name))
    with open(os.path.join(text_dir, "meta.json")) as f:
        meta = json.load(f)
    meta.update(name=os.path.basename(out_dir), family="llama4", checkpoint_prefix="language_model." + prefix,
                description="Llama 4 (llama4) as released: " + os.path.basename(text_dir) + "'s layer with the text "
                "keys under text_config and the tensors under language_model.model.layers. (the same x, y and "
                "routing)")
    with open(os.path.join(out_dir, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")


def swiglu_oai64(g, u, cfg):
    """gpt-oss's clamped SwiGLU without biases in float64: (clamp(u, +-L) + 1) * g * sigmoid(alpha g), g = min(g, L)."""
    g = np.minimum(g, cfg.swiglu_limit)
    u = np.clip(u, -cfg.swiglu_limit, cfg.swiglu_limit)
    return (u + 1.0) * g / (1.0 + np.exp(-cfg.swiglu_alpha * g))


def canonical_weights(tw, ti, indices):
    """transformers' weights tw of experts ti put in the canonical slot order of `indices` (descending selection
    score): its topk(sorted=False) may order a token's experts otherwise, but must choose the same set."""
    out = np.zeros_like(tw)
    for t in range(ti.shape[0]):
        assert set(ti[t]) == set(indices[t]), (t, ti[t], indices[t])
        for slot, e in enumerate(indices[t]):
            out[t, slot] = tw[t, list(ti[t]).index(e)]
    return out


def build_dbrx_case(out_dir, spec):
    """DBRX's layout is its own (transformer.blocks.N.ffn, experts stacked as (E I, D) w1 / v1 / w2 with w2 used as
    h @ W, settings in ffn_config), so its case is built here rather than by build_case; the files are the same."""
    E, K, D, H = 16, 4, 64, 32
    cfg = transformers.DbrxConfig(d_model=D, n_heads=4, n_layers=2, vocab_size=128, max_seq_len=64,
                                  attn_config={"kv_n_heads": 2, "rope_theta": 10000.0, "clip_qkv": 8.0},
                                  ffn_config={"ffn_hidden_size": H, "moe_num_experts": E, "moe_top_k": K})
    prefix = "transformer.blocks.1.ffn."
    for seed in range(700000, 701000):
        rng = np.random.default_rng(seed)
        router = (rng.standard_normal((E, D)) * 1.5 / np.sqrt(D)).astype(np.float32)
        x = rng.standard_normal((2, 5, D)).astype(np.float32)
        xs = x.reshape(-1, D).astype(np.float64)
        routes = [softmax_route64(router.astype(np.float64), t, K, True) for t in xs]  # p-norm of order 1: the sum
        margins = np.min([r[2] for r in routes], axis=0)
        if margins.min() >= MARGIN:
            break
    else:
        raise SystemExit(f"{spec['name']}: no seed gives margins >= {MARGIN}")
    gate = (rng.standard_normal((E, H, D)) / np.sqrt(D)).astype(np.float32)
    up = (rng.standard_normal((E, H, D)) / np.sqrt(D)).astype(np.float32)
    down = (rng.standard_normal((E, D, H)) / np.sqrt(H)).astype(np.float32)
    torch.manual_seed(0)
    model = transformers.DbrxForCausalLM(cfg).eval()
    block = model.transformer.blocks[1].ffn
    with torch.no_grad():
        block.router.layer.weight.copy_(torch.from_numpy(router))
        block.experts.mlp.w1.copy_(torch.from_numpy(gate.reshape(E * H, D)))
        block.experts.mlp.v1.copy_(torch.from_numpy(up.reshape(E * H, D)))
        # w2's rows of expert e are used as h @ W: (H, D), the transpose of the (D, H) down matrix
        block.experts.mlp.w2.copy_(torch.from_numpy(np.ascontiguousarray(down.transpose(0, 2, 1)).reshape(E * H, D)))
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
        loaded = transformers.DbrxForCausalLM.from_pretrained(tmp, dtype=torch.float32).eval()
    assert sorted(weights) == [prefix + n for n in ("experts.mlp.v1", "experts.mlp.w1", "experts.mlp.w2",
                                                    "router.layer.weight")], sorted(weights)
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(config, f, indent=2, sort_keys=True)
        f.write("\n")
    save_file(weights, os.path.join(out_dir, "weights.safetensors"), metadata={"format": "pt"})
    lblock = loaded.transformer.blocks[1].ffn
    with torch.no_grad():
        xt = torch.from_numpy(x)
        y = lblock(xt).reshape(x.shape).numpy()
        tw, ti = lblock.route_tokens_to_experts(lblock.router(xt))
    indices = np.stack([r[0] for r in routes]).astype(np.int64)
    weights_canonical = canonical_weights(tw.numpy(), ti.numpy(), indices)
    y64 = np.zeros_like(xs)
    silu = lambda z: z / (1.0 + np.exp(-z))
    for t in range(xs.shape[0]):
        for e, w in zip(routes[t][0], routes[t][1]):
            h = silu(gate[e].astype(np.float64) @ xs[t]) * (up[e].astype(np.float64) @ xs[t])
            y64[t] += w * (down[e].astype(np.float64) @ h)
    y_err = float(np.abs(y.reshape(-1, D) - y64).max())
    y_max = float(np.abs(y).max())
    save_file({"x": x}, os.path.join(out_dir, "input.safetensors"))
    save_file({"y": y, "route.indices": indices, "route.weights": weights_canonical.astype(np.float32)},
              os.path.join(out_dir, "expected.safetensors"))
    meta = {
        "name": spec["name"], "family": "dbrx", "description": spec["description"],
        "generator": "scripts/make_hf_family_cases.py", "transformers_version": transformers.__version__,
        "torch_version": torch.__version__, "numpy_version": np.__version__, "config_class": "DbrxConfig",
        "model_class": "DbrxForCausalLM", "checkpoint_prefix": prefix, "layer": 1, "dtype": "float32",
        "input_shape": list(x.shape), "token_order": "t = b*L + l", "experts_implementation": "DbrxExperts' loop",
        "seed": seed, "rank_space": "softmax probability", "margin_threshold": MARGIN,
        "margins": {"topk_cut": float(margins[0]), "between_selected_slots": float(margins[1]), "group_cut": None},
        "errors": {"y_vs_fp64": y_err,
                   "route_weights_vs_fp64": float(np.abs(weights_canonical - np.stack([r[1] for r in routes])).max())},
        "suggested_tolerance": {"y": {"rtol": 1e-4, "atol": 2e-5 * max(1.0, y_max)},
                                "route.weights": {"rtol": 1e-5, "atol": 1e-6}, "route.indices": "exact"},
    }
    with open(os.path.join(out_dir, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")
    print(f"{spec['name']}: seed {seed}, margins {margins}, y vs fp64 {y_err:.2e}, max|y| {y_max:.3f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "tests", "data", "conformance",
                                                  "hf-extra"))
    ap.add_argument("--case", action="append", help="write only this case (repeatable); default: every case")
    args = ap.parse_args()
    for spec in CASES:
        if not args.case or spec["name"] in args.case:
            (spec.get("builder") or build_case)(os.path.join(args.out, spec["name"]), spec)


if __name__ == "__main__":
    main()
