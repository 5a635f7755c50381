"""hymoe.transformers against transformers itself: tiny random models of every supported family, greedy generation
patched and unpatched (all experts in hymoe, and half of them in PyTorch), logits within the dtype's bound,
recording, unpatch, and the named errors."""

import json

import numpy as np
import pytest
import torch

transformers = pytest.importorskip("transformers")
import hymoe.placement  # noqa: E402
import hymoe.transformers as ht  # noqa: E402

import tiny_models  # noqa: E402

NEW_TOKENS = 32


def _checkpoint(model, tmp_path):
    """gpt-oss's experts (biases, interleaved gate/up) are read from a checkpoint directory: the model saved."""
    if model.config.model_type != "gpt_oss":
        return None
    model.save_pretrained(tmp_path / "checkpoint")
    return tmp_path / "checkpoint"


def _generate(model, ids):
    with torch.no_grad():
        return model.generate(ids, max_new_tokens=NEW_TOKENS, do_sample=False)


def _logits(model, ids):
    with torch.no_grad():
        return model(ids).logits.float()


def _logit_bound(reference, dtype):
    """f32 models: hymoe sums each expert in float32 in another order than PyTorch, so each expert output differs
    by a few units of the last place, and that difference passes through every later layer. Bound: 2^7 float32
    epsilons times the logits' magnitude (1.5e-5 relative). (bf16 models have no such bound: see
    test_bf16_experts_are_at_least_as_exact_as_transformers.)"""
    assert dtype is torch.float32
    return 2 ** 7 * torch.finfo(dtype).eps * reference.abs().max().item()


def _half_mask(model, seed=5):
    """Half of every MoE layer's experts, chosen at random, marked to stay in PyTorch."""
    layers = ht.moe_layers(model)
    e = ht.counts(model).shape[1]
    g = torch.Generator().manual_seed(seed)
    return torch.stack([torch.randperm(e, generator=g) < e // 2 for _ in layers])


@pytest.mark.parametrize("family", tiny_models.FAMILIES)
def test_greedy_generation_and_logits_match_transformers(family, tmp_path):
    model = tiny_models.build(family)
    ids = tiny_models.prompt(batch=2)
    reference = _generate(model, ids)
    reference_logits = _logits(model, reference)

    ht.patch(model, checkpoint=_checkpoint(model, tmp_path))
    assert ht.is_patched(model)
    assert all(isinstance(m, ht._HymoeExperts) for m in (mod for mod in model.modules())
               if type(m).__name__.endswith("Experts"))
    got = _generate(model, ids)
    assert torch.equal(got, reference), f"{family}: greedy tokens differ"
    logits = _logits(model, reference)
    assert (logits - reference_logits).abs().max().item() <= _logit_bound(reference_logits, torch.float32)
    # Every routed pair of the teacher-forced pass and of the generation was counted, K per token per layer.
    top_k = model.config.num_experts_per_tok
    generated_tokens = ids.numel() + ids.shape[0] * (NEW_TOKENS - 1)  # prefill, then one token per row per step
    teacher_tokens = reference.numel()
    assert (ht.counts(model).sum(dim=1) == (generated_tokens + teacher_tokens) * top_k).all()

    # Half the experts in PyTorch: the same tokens, logits within the same bound.
    ht.update_gpu_experts_mask(model, _half_mask(model))
    got_half = _generate(model, ids)
    assert torch.equal(got_half, reference), f"{family}: greedy tokens differ with half the experts in PyTorch"
    logits_half = _logits(model, reference)
    assert (logits_half - reference_logits).abs().max().item() <= _logit_bound(reference_logits, torch.float32)

    ht.unpatch(model)
    assert not ht.is_patched(model)
    assert torch.equal(_logits(model, reference), reference_logits)  # the originals, untouched


def _swiglu_sum_f64(x, ids, weights, expert):
    """Float64 sum over each token's routed experts of weight * down @ (silu(gate @ x) * (up @ x)); expert(e) gives
    expert e's float64 (gate, up, down) matrices."""
    x, w = x.double(), weights.double()
    out = torch.zeros_like(x)
    for t in range(x.shape[0]):
        for k in range(ids.shape[1]):
            gate, up, down = expert(int(ids[t, k]))
            out[t] += w[t, k] * (down @ (torch.nn.functional.silu(gate @ x[t]) * (up @ x[t])))
    return out


def _reference_f64(experts, x, ids, weights):
    """Float64 sum of the routed experts of a concatenated-layout module, from its own (bf16) weights."""
    gate_up, down = experts.gate_up_proj.double(), experts.down_proj.double()
    inter = gate_up.shape[1] // 2
    return _swiglu_sum_f64(x, ids, weights, lambda e: (gate_up[e][:inter], gate_up[e][inter:], down[e]))


@pytest.mark.parametrize("family", ["qwen3_moe", "deepseek_v3", "mixtral", "glm4_moe"])
def test_bf16_experts_are_at_least_as_exact_as_transformers(family):
    """In a bf16 model a routing decision near a tie can flip once any layer's output moves by one rounding, so
    whole-model logits have no bound; each MoE block is checked on the hidden states transformers itself fed it.
    hymoe must be no further from the float64 sum than transformers' own bf16 experts, and within a bound of the
    output's magnitude that follows from the path `auto` took on this CPU: widened weights (float32 inside, one
    rounding to bf16 at the end) within 2^-8; the native vdpbf16ps path (AMD's cores with AVX512_BF16), which also
    rounds the hidden values to bf16 before the down projection, within 2^-7 (measured: 0.0026-0.0042 of the
    magnitude there, 0.0013-0.0031 widened, transformers 0.0049-0.0065)."""
    model = tiny_models.build(family, dtype=torch.bfloat16)
    ids = tiny_models.prompt(batch=2, length=19)
    calls = []
    experts = [m for m in model.modules() if type(m).__name__.endswith("Experts")]
    hooks = [m.register_forward_hook(lambda mod, args, out: calls.append((mod, args, out))) for m in experts]
    weight_bytes = sum(m.gate_up_proj.numel() * 2 + m.down_proj.numel() * 2 for m in experts)
    with torch.no_grad():
        model(ids)
    for h in hooks:
        h.remove()
    ht.patch(model)
    # bf16 experts are held as bf16 panels: as many bytes as transformers' own parameters.
    assert ht.host_weight_bytes(model) == weight_bytes
    kernel = model.model.layers[-1].mlp.experts.engine.kernel_name
    assert "bf16" in kernel
    bound = 2 ** -7 if "bf16w_bf16" in kernel else 2 ** -8
    patched = {m._original: m for m in model.modules() if isinstance(m, ht._HymoeExperts)}
    assert len(calls) == len(experts) > 0
    for original, (x, top_k_index, top_k_weights), torch_out in calls:
        with torch.no_grad():
            got = patched[original](x, top_k_index, top_k_weights)
        assert got.dtype is torch.bfloat16
        reference = _reference_f64(original, x, top_k_index, top_k_weights)
        scale = reference.abs().max().item()
        hymoe_error = (got.double() - reference).abs().max().item()
        torch_error = (torch_out.double() - reference).abs().max().item()
        assert hymoe_error <= bound * scale, (kernel, hymoe_error, scale)
        assert hymoe_error <= torch_error, (hymoe_error, torch_error)
    ht.unpatch(model)


def test_fp8_checkpoint_experts_stay_compact(tmp_path):
    """A block-FP8 DeepSeek-V3 checkpoint: transformers on a CPU dequantizes it to bf16; hymoe, given the
    directory, runs the experts from their fp8 codes (1.03 bytes a weight) and, with release_torch_weights, holds
    the only copy."""
    pytest.importorskip("accelerate")  # transformers' FP8 loader needs it
    config = tiny_models._configs()["deepseek_v3"]()
    config.hidden_size, config.moe_intermediate_size = 128, 128  # the fp8 panels' unit is 128 along k
    torch.manual_seed(0)
    tiny_models.fp8_checkpoint(transformers.AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16),
                               tmp_path / "fp8")
    model = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "fp8").eval()
    experts = [m for m in model.modules() if type(m).__name__ == "DeepseekV3Experts"]
    assert experts and all(m.gate_up_proj.dtype is torch.bfloat16 for m in experts)  # transformers' copy
    calls = []
    hooks = [m.register_forward_hook(lambda mod, args, out: calls.append((mod, args))) for m in experts]
    with torch.no_grad():
        model(tiny_models.prompt(length=9))
    for h in hooks:
        h.remove()
    ht.patch(model, checkpoint=tmp_path / "fp8", release_torch_weights=True)
    assert all(m.gate_up_proj.numel() == 0 for m in experts)
    assert "fp8w" in model.model.layers[-1].mlp.experts.engine.kernel_name
    e, d, i = 16, 128, 128
    assert ht.host_weight_bytes(model) == len(experts) * e * 3 * i * (d + 4)  # 128 codes + one f32 scale per 128
    # On the very inputs transformers fed each block: hymoe decodes the fp8 codes exactly and computes in f32, so
    # it is within one bf16 rounding of its output (x is bf16) of the float64 sum over the checkpoint's codes.
    patched = {m._original: m for m in model.modules() if isinstance(m, ht._HymoeExperts)}
    for original, (x, ids, weights) in calls:
        with torch.no_grad():
            got = patched[original](x, ids, weights).float()
        exact = _reference_fp8(tmp_path / "fp8", ht.moe_layers(model)[list(patched).index(original)], x, ids,
                               weights)
        assert (got.double() - exact).abs().max().item() <= 2 ** -8 * exact.abs().max().item()


def _reference_fp8(path, layer, x, ids, weights):
    """Float64 sum of layer `layer`'s routed experts from the checkpoint's fp8 codes and scales."""
    import safetensors.torch

    t = safetensors.torch.load_file(path / "model.safetensors")

    def weight(e, name):
        codes = t[f"model.layers.{layer}.mlp.experts.{e}.{name}.weight"].double()
        scales = t[f"model.layers.{layer}.mlp.experts.{e}.{name}.weight_scale_inv"].double()
        return codes * scales.repeat_interleave(128, 0)[:codes.shape[0]].repeat_interleave(128, 1)[:, :codes.shape[1]]

    return _swiglu_sum_f64(x, ids, weights,
                           lambda e: (weight(e, "gate_proj"), weight(e, "up_proj"), weight(e, "down_proj")))


def test_mxfp4_checkpoint_experts_stay_compact(tmp_path):
    """A gpt-oss MXFP4 checkpoint: transformers on a CPU (no triton kernels) dequantizes it to bf16; hymoe, given
    the directory, holds the 4-bit blocks (17 bytes per 32 weights) and computes them on its integer twin (q8_0
    activations, docs/runtime.md)."""
    import safetensors.torch

    torch.manual_seed(0)
    tiny_models.mxfp4_checkpoint(tiny_models.build("gpt_oss", dtype=torch.bfloat16), tmp_path / "mx")
    model = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "mx").eval()
    experts = [layer.mlp.experts for layer in model.model.layers]
    assert all(m.gate_up_proj.dtype is torch.bfloat16 for m in experts)  # transformers' dequantized copy
    calls = []
    hooks = [m.register_forward_hook(lambda mod, args, out: calls.append((mod, args))) for m in experts]
    with torch.no_grad():
        model(tiny_models.prompt(batch=2, length=9))
    for h in hooks:
        h.remove()
    ht.patch(model, checkpoint=tmp_path / "mx", release_torch_weights=True)
    assert "mxfp4w" in model.model.layers[-1].mlp.experts.engine.kernel_name
    e, d, i = 8, 64, 32
    assert ht.host_weight_bytes(model) == len(experts) * (e * 3 * i * d * 17 // 32 + e * (2 * i + d) * 4)
    t = safetensors.torch.load_file(tmp_path / "mx" / "model.safetensors")
    fp4 = torch.tensor(tiny_models.FP4_VALUES, dtype=torch.float64)

    def decode(name):
        blocks, scales = t[name + "_blocks"], t[name + "_scales"]
        v = torch.stack([fp4[(blocks & 15).long()], fp4[(blocks >> 4).long()]], -1).flatten(-2)
        return (v * torch.pow(2.0, scales.double() - 127)[..., None]).flatten(-2)

    patched = {m._original: m for m in model.modules() if isinstance(m, ht._HymoeExperts)}
    for layer, (original, (x, ids, weights)) in enumerate(calls):
        p = f"model.layers.{layer}.mlp.experts."
        gate_up, down = decode(p + "gate_up_proj"), decode(p + "down_proj")
        gate_up_bias, down_bias = t[p + "gate_up_proj_bias"].double(), t[p + "down_proj_bias"].double()
        reference = torch.zeros(x.shape, dtype=torch.float64)
        for tok in range(x.shape[0]):
            for k in range(ids.shape[1]):
                ex = int(ids[tok, k])
                h = gate_up[ex] @ x[tok].double() + gate_up_bias[ex]
                g, u = h[0::2].clamp(max=7.0), h[1::2].clamp(-7.0, 7.0)
                reference[tok] += weights[tok, k].double() * (down[ex] @ ((u + 1) * g * torch.sigmoid(1.702 * g)) +
                                                              down_bias[ex])
        with torch.no_grad():
            got = patched[original](x, ids, weights).double()
        # q8_0 rounds each activation to within 1/254 of its block's largest, before both projections: 2^-5 of the
        # output's magnitude covers the two roundings summed over a block (measured: 0.9-1.8 %).
        assert (got - reference).abs().max().item() <= 2 ** -5 * reference.abs().max().item()


def test_patch_with_a_plan_file_and_int8_format(tmp_path):
    model = tiny_models.build("qwen3_moe")
    ids = tiny_models.prompt()
    reference = _logits(model, ids)
    layers = model.config.num_hidden_layers
    e = model.config.num_experts
    mask = np.zeros((layers, e), dtype=int)  # one row per decoder layer: the dense rows are ignored
    mask[1, :3] = 1
    mask[3, 5:] = 1
    (tmp_path / "PLAN.json").write_text(json.dumps({"format": "hymoe.placement.v1", "mask": mask.tolist(),
                                                    "report": {}}))
    ht.patch(model, gpu_experts_mask=tmp_path / "PLAN.json", format="int8")
    assert ht.moe_layers(model) == [1, 3]
    assert ht.gpu_experts_mask(model).tolist() == mask[[1, 3]].astype(bool).tolist()
    # int8 blocks of 32: activations and weights each round to 1/254 of their block's range.
    logits = _logits(model, ids)
    assert (logits - reference).abs().max().item() <= 0.05 * reference.abs().max().item()
    assert (logits - reference).abs().max().item() > 0  # the quantized path ran
    ht.unpatch(model)


def test_released_torch_weights_keep_one_copy_and_the_masked_experts():
    model = tiny_models.build("deepseek_v3", dtype=torch.bfloat16)
    ids = tiny_models.prompt(length=11)
    mask = torch.zeros(2, 16, dtype=torch.bool)
    mask[0, [1, 4]] = True
    mask[1, 9] = True
    ht.patch(model, gpu_experts_mask=mask)
    kept = _logits(model, ids)
    ht.unpatch(model)
    originals = [layer.mlp.experts for layer in model.model.layers[1:]]
    ht.patch(model, gpu_experts_mask=mask, release_torch_weights=True)
    assert all(o.gate_up_proj.numel() == 0 and o.down_proj.numel() == 0 for o in originals)
    assert torch.equal(_logits(model, ids), kept)  # the same bits: the masked experts' weights were kept
    ht.update_gpu_experts_mask(model, torch.zeros(2, 16, dtype=torch.bool))  # back to hymoe: allowed
    with pytest.raises(ValueError, match=r"experts \[3\] cannot move to PyTorch"):
        m = torch.zeros(2, 16, dtype=torch.bool)
        m[1, 3] = True
        ht.update_gpu_experts_mask(model, m)
    with pytest.raises(ValueError, match="cannot be unpatched"):
        ht.unpatch(model)


def test_the_same_bits_for_any_thread_count():
    from hymoe import _core

    model = tiny_models.build("qwen2_moe")
    ids = tiny_models.prompt(batch=3, length=13)
    before = _core.runtime_num_threads()
    try:
        ht.patch(model, threads=1)
        one = _logits(model, ids)
        _core.runtime_set_num_threads(2)
        assert torch.equal(_logits(model, ids), one)
    finally:
        _core.runtime_set_num_threads(before)
    ht.unpatch(model)


def test_the_record_plan_run_loop_script(tmp_path):
    import os
    import subprocess
    import sys

    root = tiny_models.__file__.rsplit("/python/", 1)[0]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([root + "/python", root + "/python/tests/hf_transformers"]))
    result = subprocess.run([sys.executable, root + "/scripts/transformers_loop.py", "--family", "deepseek_v3",
                             "--prompts", "3", "--new-tokens", "8", "--out", str(tmp_path)],
                            capture_output=True, text=True, env=env, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    report = json.loads(result.stdout[result.stdout.index("{"):])
    assert report["same_greedy_tokens"] and report["budget_experts"] == 8
    assert 0 <= report["realized_hit_rate"] <= 1 and report["predicted_hit_rate"] >= report["random_hit_rate"]
    assert report["files"] == ["PLAN.json", "counts.json", "logical_count.pt", "trace.csv"]
    plan = json.loads((tmp_path / "PLAN.json").read_text())
    assert sum(map(sum, plan["mask"])) == 8


def test_recording_counts_and_trace_round_trip(tmp_path):
    model = tiny_models.build("deepseek_v3")
    ht.patch(model, record_trace=True)
    ids = tiny_models.prompt(batch=1, length=5)
    _generate(model, ids)
    table = ht.counts(model)
    assert table.shape == (2, 16) and ht.moe_layers(model) == [1, 2]
    ht.write_trace(model, tmp_path / "trace.csv")
    trace = hymoe.placement.read_trace(tmp_path / "trace.csv", num_experts=16)
    assert trace["layer_ids"].tolist() == [1, 2]
    assert trace["experts"].shape == (5 + NEW_TOKENS - 1, 2, 4)
    assert np.array_equal(hymoe.placement.trace_counts(trace), table.numpy())
    assert trace["steps"].tolist() == [0] * 5 + list(range(1, NEW_TOKENS))
    ht.write_counts(model, tmp_path / "counts.json")
    assert np.array_equal(hymoe.placement.read_counts(tmp_path / "counts.json"), table.numpy())
    ht.write_counts(model, tmp_path / "counts.pt")
    logical = torch.load(tmp_path / "counts.pt")["logical_count"]
    assert logical.shape == (1, 3, 16) and logical[0, 0].sum() == 0 and torch.equal(logical[0, 1:], table)
    ht.write_counts(model, tmp_path / "logical_count.safetensors", layout="sglang")
    read = hymoe.placement.read_counts(tmp_path / "logical_count.safetensors")  # SGLang's records, summed
    assert read.shape == (3, 16) and read[0].sum() == 0 and np.array_equal(read[1:], table.numpy())
    with pytest.raises(ValueError, match="SGLang's layout is a .pt or .safetensors file"):
        ht.write_counts(model, tmp_path / "counts.csv", layout="sglang")
    ht.reset_counts(model)
    assert ht.counts(model).sum() == 0
    with pytest.raises(ValueError, match="no forward call was recorded"):
        ht.write_trace(model, tmp_path / "empty.csv")
    ht.unpatch(model)


def _experts_classes():
    return sorted((family, cls) for cls, (family, layout) in ht._FAMILIES.items() if layout == "concatenated")


@pytest.mark.parametrize("family,cls", _experts_classes())
def test_every_listed_experts_class_matches_its_own_forward(family, cls):
    """Each experts class hymoe lists, built alone from a tiny config: patched, its call gives transformers' eager
    forward within float32 rounding, on awkward routing (13 tokens, an expert no token picks, padding id -1 is not
    used: transformers has none)."""
    import importlib

    module = importlib.import_module(f"transformers.models.{family}.modeling_{family}")
    config = transformers.PretrainedConfig()
    for k in ("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts"):
        setattr(config, k, 7)
    for k in ("intermediate_size", "moe_intermediate_size", "expert_intermediate_size", "moe_ffn_hidden_size"):
        setattr(config, k, 24)
    config.hidden_size, config.hidden_act, config._experts_implementation = 40, "silu", "eager"
    torch.manual_seed(1)
    experts = getattr(module, cls)(config)
    with torch.no_grad():
        for p in experts.parameters():
            p.normal_(0, 0.3)
    holder = torch.nn.Module()
    holder.layers = torch.nn.ModuleList([torch.nn.Module()])
    holder.layers[0].mlp = torch.nn.Module()
    holder.layers[0].mlp.experts = experts
    g = torch.Generator().manual_seed(2)
    x = torch.randn(13, 40, generator=g)
    ids = torch.stack([torch.randperm(6, generator=g)[:3] for _ in range(13)])  # expert 6 gets no token
    weights = torch.rand(13, 3, generator=g)
    with torch.no_grad():
        reference = experts(x, ids, weights)
        ht.patch(holder)
        assert isinstance(holder.layers[0].mlp.experts, ht._HymoeExperts)
        got = holder.layers[0].mlp.experts(x, ids, weights)
    bound = 2 ** 7 * torch.finfo(torch.float32).eps * reference.abs().max().item()
    assert (got - reference).abs().max().item() <= bound
    ht.unpatch(holder)
    assert holder.layers[0].mlp.experts is experts


def test_an_activation_other_than_silu_is_refused():
    config = tiny_models._configs()["mixtral"]()
    config.hidden_act = "gelu"  # transformers' own Mixtral tests use this
    model = transformers.AutoModelForCausalLM.from_config(config)
    with pytest.raises(ValueError, match="act_fn is GELUActivation; hymoe's experts are SwiGLU"):
        ht.patch(model)
    assert not ht.is_patched(model)


def test_a_changed_layout_is_refused():
    model = tiny_models.build("qwen3_moe")
    model.model.layers[1].mlp.experts.is_transposed = True
    with pytest.raises(ValueError, match="is_transposed.*a layout this hymoe does not read"):
        ht.patch(model)


class _FooExperts(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.num_experts = 4
        self.w = torch.nn.Parameter(torch.zeros(4, 8, 8))


def test_unsupported_blocks_patch_nothing():
    model = tiny_models.build("olmoe")
    model.model.layers[1].mlp.experts = _FooExperts()
    before = model.model.layers[0].mlp.experts
    with pytest.raises(ValueError, match=r"model\.layers\.1\.mlp\.experts \(_FooExperts\).*Supported: .*mixtral"):
        ht.patch(model)
    assert model.model.layers[0].mlp.experts is before and not ht.is_patched(model)


def test_awkward_calls_of_a_patched_experts_module():
    model = tiny_models.build("mixtral")
    ht.patch(model)
    experts = model.model.layers[0].mlp.experts
    with torch.no_grad():
        empty = experts(torch.zeros(0, 64), torch.zeros(0, 2, dtype=torch.long), torch.zeros(0, 2))
        assert empty.shape == (0, 64)
        x = torch.randn(3, 64)
        ids = torch.tensor([[0, 1], [1, 2], [7, 4]])
        w = torch.rand(3, 2)
        f32 = experts(x, ids, w)
        half = experts(x.half(), ids, w)  # f16 hidden states: computed from their f32 values, returned as f16
        assert half.dtype is torch.float16
        assert torch.equal(half, experts(x.half().float(), ids, w).half())
        assert f32.shape == (3, 64)
        with pytest.raises(ValueError, match=r"topk_ids\[0, 1\] = 9 is not an expert id \(8 experts"):
            experts(x, torch.tensor([[0, 9], [1, 2], [3, 4]]), w)
    ht.unpatch(model)


@pytest.mark.parametrize("policy", [None, "PASSIVE"])
def test_spinning_threads_are_warned_about_once(policy):
    import os
    import subprocess
    import sys

    code = ("import warnings, torch, tiny_models, hymoe.transformers as ht\n"
            "torch.set_num_threads(2)\n"
            "warnings.simplefilter('always')\n"
            "with warnings.catch_warnings(record=True) as w:\n"
            "    for _ in range(2):\n"
            "        m = tiny_models.build('olmoe'); ht.patch(m); ht.unpatch(m)\n"
            "print(sum('OMP_WAIT_POLICY=PASSIVE' in str(x.message) for x in w))\n")
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    if policy:
        env["OMP_WAIT_POLICY"] = policy
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split()[-1] == ("0" if policy else "1")


def test_named_errors():
    model = tiny_models.build("gpt_oss")
    with pytest.raises(ValueError, match="pass checkpoint="):
        ht.patch(model)
    assert not ht.is_patched(model)
    dense = transformers.AutoModelForCausalLM.from_config(transformers.LlamaConfig(
        vocab_size=32, hidden_size=32, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2))
    with pytest.raises(ValueError, match="no MoE experts module"):
        ht.patch(dense)
    model = tiny_models.build("mixtral")
    with pytest.raises(ValueError, match="format 'fp4'"):
        ht.patch(model, format="fp4")
    with pytest.raises(ValueError, match=r"gpu_experts_mask has shape \(2, 7\)"):
        ht.patch(model, gpu_experts_mask=torch.zeros(2, 7, dtype=torch.bool))
    with pytest.raises(ValueError, match="not patched"):
        ht.unpatch(model)
    ht.patch(model)
    with pytest.raises(ValueError, match="already patched"):
        ht.patch(model)
    ids = tiny_models.prompt()
    out = model(ids)  # autograd on, as an eval() model called directly: the forward works
    with torch.no_grad():
        assert torch.equal(out.logits, model(ids).logits)
    with pytest.raises(RuntimeError, match="inference only and have no backward"):
        out.logits.sum().backward()  # a backward would skip the experts: it raises
    ht.unpatch(model)
