"""hymoe inside Hugging Face `transformers` models: `patch(model)` swaps the experts of every MoE block for hymoe's
expert engine (include/hymoe/runtime.h); `unpatch(model)` puts the original modules back.

transformers (5.x) splits each MoE block into the family's router (`gate` / `router`) and an experts module that
`forward(hidden_states, top_k_index, top_k_weights)` sums the routed experts with. Only the experts module is
replaced: routing, shared experts and everything else stay the model's own code, so the router semantics are the
family's by construction. docs/transformers.md states what is supported, the numerics, the GPU-expert split, the
recording formats and the measured speed.
"""

import json
import os
import re
import warnings

import numpy as np
import torch

from hymoe import _core

__all__ = ["patch", "unpatch", "is_patched", "supported_families", "moe_layers", "counts", "reset_counts",
           "write_counts", "write_trace", "update_gpu_experts_mask", "gpu_experts_mask", "host_weight_bytes"]

# transformers' experts classes hymoe runs, by the layout of their parameters.
# "concatenated": gate_up_proj (E, 2I, D) with the gate rows first, down_proj (E, D, I), a SiLU act_fn and no biases;
# hymoe builds these from the model's own parameters or from the checkpoint. Each class listed has the same forward
# as MixtralExperts in transformers 5.24.0 (its source compared with the configuration field names set aside), and
# patch() also checks the flags transformers' experts decorator sets on the instance, so a later version that
# changes a layout is refused, not misread.
_CONCATENATED = {
    "afmoe": ["AfmoeExperts"], "axk1": ["AXK1Experts"], "axk2": ["AXK2Experts"],
    "bailing_hybrid": ["BailingHybridExperts"], "cohere2_moe": ["Cohere2MoeExperts"],
    "deepseek_ocr2": ["DeepseekOcr2TextExperts"], "deepseek_v2": ["DeepseekV2Experts"],
    "deepseek_v3": ["DeepseekV3Experts"], "deepseek_v32": ["DeepseekV32Experts"], "dots1": ["Dots1Experts"],
    "dots3_note": ["Dots3NoteExperts"], "ernie4_5_moe": ["Ernie4_5_MoeExperts"], "exaone_moe": ["ExaoneMoeExperts"],
    "flex_olmo": ["FlexOlmoExperts"], "flint": ["FlintExperts"], "glm4_moe": ["Glm4MoeExperts"],
    "glm4_moe_lite": ["Glm4MoeLiteExperts"], "glm4v_moe": ["Glm4vMoeTextExperts"],
    "glm_moe_dsa": ["GlmMoeDsaExperts"], "granitemoe": ["GraniteMoeExperts"],
    "granitemoe_swa": ["GraniteMoeSWAExperts"], "granitemoehybrid": ["GraniteMoeHybridExperts"],
    "granitemoeshared": ["GraniteMoeSharedExperts"], "hunyuan_v1_moe": ["HunYuanMoEV1Experts"],
    "hy_v3": ["HYV3Experts"], "inkling": ["InklingExperts"], "jamba": ["JambaExperts"],
    "kimi_linear": ["KimiLinearExperts"], "kolibri1": ["Kolibri1Experts"], "laguna": ["LagunaExperts"],
    "lara_mini": ["LaraMiniExperts"], "mellum": ["MellumExperts"], "mimo_v2_flash": ["MiMoV2FlashExperts"],
    "minimax": ["MiniMaxExperts"], "minimax_m2": ["MiniMaxM2Experts"], "mistral4": ["Mistral4Experts"],
    "mistral_large4": ["MistralLarge4TextExperts"], "mixtral": ["MixtralExperts"], "olmoe": ["OlmoeExperts"],
    "phimoe": ["PhimoeExperts"], "qwen2_moe": ["Qwen2MoeExperts"], "qwen3_5_moe": ["Qwen3_5MoeExperts"],
    "qwen3_moe": ["Qwen3MoeExperts"], "qwen3_next": ["Qwen3NextExperts"],
    "qwen3_omni_moe": ["Qwen3OmniMoeThinkerTextExperts", "Qwen3OmniMoeTalkerTextExperts"],
    "qwen3_vl_moe": ["Qwen3VLMoeTextExperts"], "qwen4_exp": ["Qwen4ExpTextExperts"],
    "solar_open": ["SolarOpenExperts"], "unlimited_ocr": ["UnlimitedOcrTextExperts"], "zaya": ["ZayaExperts"],
}
# "gpt_oss": gate_up_proj (E, D, 2I) with gate and up interleaved, biases and the clamped SwiGLU; hymoe reads these
# from the checkpoint directory, which holds them in that layout.
_FAMILIES = {cls: (family, "concatenated") for family, classes in _CONCATENATED.items() for cls in classes}
_FAMILIES["GptOssExperts"] = ("gpt_oss", "gpt_oss")
# The flags transformers' @use_experts_implementation sets on an experts instance, as each layout has them.
_LAYOUT_FLAGS = {
    "concatenated": {"has_gate": True, "has_bias": False, "is_transposed": False, "is_concatenated": True,
                     "has_post_expert_norm": False},
    "gpt_oss": {"has_gate": True, "has_bias": True, "is_transposed": True, "is_concatenated": False,
                "has_post_expert_norm": False},
}
_SILU = ("SiLU", "SiLUActivation")  # the act_fn classes of "silu" / "swish" in transformers' ACT2FN
_WEIGHT_NAMES = {"concatenated": ("gate_up_proj", "down_proj"),
                 "gpt_oss": ("gate_up_proj", "gate_up_proj_bias", "down_proj", "down_proj_bias")}
_STATE = "_hymoe_patch"
_LAYER = re.compile(r"(?:^|\.)layers\.(\d+)\.")


def supported_families():
    """The model_type of every family whose MoE blocks patch() runs on hymoe."""
    return sorted({family for family, _ in _FAMILIES.values()})


def _supported_text():
    return ", ".join(f"{cls} ({family})" for cls, (family, _) in sorted(_FAMILIES.items(), key=lambda i: i[1]))


def _looks_like_experts(module):
    """A module transformers computes routed experts with: an `...Experts` class holding per-expert 3D weights."""
    name = type(module).__name__
    if not name.endswith("Experts"):
        return False
    return any(isinstance(p, torch.Tensor) and p.dim() == 3 for p in module.parameters(recurse=False)) or \
        isinstance(getattr(module, "num_experts", None), int)


def _find_experts(model):
    """[(qualified name, parent module, attribute, experts module, model layer)] in layer order; a named error for an
    experts module of a family hymoe does not run, before anything is changed."""
    found, unsupported = [], []
    for name, module in model.named_modules():
        if isinstance(module, _HymoeExperts) or not _looks_like_experts(module):
            continue
        cls = type(module).__name__
        if cls not in _FAMILIES:
            unsupported.append(f"{name} ({cls})")
            continue
        flags = _LAYOUT_FLAGS[_FAMILIES[cls][1]]
        changed = {k: getattr(module, k, None) for k, v in flags.items() if getattr(module, k, None) != v}
        if changed:
            unsupported.append(f"{name} ({cls} with {changed}, a layout this hymoe does not read)")
            continue
        match = _LAYER.search(name + ".")
        if match is None:
            raise ValueError(f"hymoe.transformers: cannot tell the decoder layer of experts module {name!r} "
                             "(expected a name like 'model.layers.3.mlp.experts')")
        parent_name, _, attribute = name.rpartition(".")
        found.append((name, model.get_submodule(parent_name) if parent_name else model, attribute, module,
                      int(match.group(1))))
    if unsupported:
        raise ValueError("hymoe.transformers: these MoE experts modules are of families hymoe does not run: "
                         f"{', '.join(unsupported)}. Supported: {_supported_text()}. Nothing was patched.")
    return sorted(found, key=lambda f: f[4])


def _checkpoint_dir(checkpoint):
    if checkpoint is None:
        return None
    path = os.fspath(checkpoint)
    if os.path.isfile(path):
        return path  # a GGUF file
    if not os.path.isfile(os.path.join(path, "config.json")):
        raise FileNotFoundError(f"hymoe.transformers: checkpoint {path!r} is not a model directory (no config.json)")
    return path


def _read_mask(mask, layers, num_experts, num_hidden_layers):
    """The (MoE layers, E) bool mask of `mask`: None, an array/tensor with one row per MoE layer or per decoder
    layer, or a PLAN.json path (hymoe plan's output)."""
    if mask is None:
        return torch.zeros(len(layers), num_experts, dtype=torch.bool)
    if isinstance(mask, (str, os.PathLike)):
        with open(mask, encoding="utf-8") as f:
            plan = json.load(f)
        if not isinstance(plan, dict) or "mask" not in plan:
            raise ValueError(f"hymoe.transformers: {os.fspath(mask)} is not a PLAN.json (no 'mask' field)")
        mask = plan["mask"]
    table = torch.as_tensor(np.asarray(mask)) if not isinstance(mask, torch.Tensor) else mask.detach().cpu()
    if table.dim() != 2 or table.shape[1] != num_experts:
        raise ValueError(f"hymoe.transformers: gpu_experts_mask has shape {tuple(table.shape)}; expected "
                         f"({len(layers)}, {num_experts}) (one row per MoE layer) or ({num_hidden_layers}, "
                         f"{num_experts}) (one per decoder layer)")
    if table.shape[0] == len(layers):
        rows = table
    elif num_hidden_layers is not None and table.shape[0] == num_hidden_layers:
        rows = table[list(layers)]
    else:
        raise ValueError(f"hymoe.transformers: gpu_experts_mask has {table.shape[0]} rows; the model has "
                         f"{len(layers)} MoE layers ({num_hidden_layers} decoder layers)")
    return rows.to(torch.bool).clone()


class _Recorder:
    """The per-token trace of a patched model: one (layer, ids, weights) entry per experts call, steps counted at
    the first MoE layer's calls."""

    def __init__(self, first_layer):
        self.first_layer = first_layer
        self.calls = []  # (step, layer, ids (T, K) int64, weights (T, K) f32)
        self.step = -1

    def add(self, layer, ids, weights):
        if layer == self.first_layer:
            self.step += 1
        self.calls.append((max(self.step, 0), layer, ids.detach().to("cpu", torch.int64).clone(),
                           weights.detach().to("cpu", torch.float32).clone()))


class _HymoeExperts(torch.nn.Module):
    """Stands where the block's experts module stood: the same forward(hidden_states, top_k_index, top_k_weights),
    the experts the mask keeps in PyTorch computed with the original module's weights, the rest by hymoe's engine,
    both at once."""

    def __init__(self, original, engine, layer, layout, mask, recorder, release):
        super().__init__()
        self.layer = layer
        self.num_experts = engine.num_experts
        self.engine = engine
        self._layout = layout
        self._recorder = recorder
        # The original module is held outside the module tree: its weights are neither parameters of the patched
        # model nor in its state_dict (hymoe holds the experts), and unpatch() puts it back.
        object.__setattr__(self, "_original", original)
        self._mask_u8 = torch.zeros(self.num_experts, dtype=torch.uint8)
        self._held = None  # release: {expert: its PyTorch weights}, the masked experts' only
        self.set_mask(mask)
        if release:
            self._held = {e: self._expert_weights(e, clone=True) for e in self._torch_ids}
            for name in _WEIGHT_NAMES[layout]:
                getattr(original, name).data = torch.empty(0, dtype=getattr(original, name).dtype)

    def set_mask(self, mask):
        ids = torch.nonzero(mask).flatten().tolist()
        if self._held is not None:
            missing = [e for e in ids if e not in self._held]
            if missing:
                raise ValueError(f"layer {self.layer}: experts {missing} cannot move to PyTorch: the model was "
                                 "patched with release_torch_weights=True, which kept only the masked experts' "
                                 "PyTorch weights")
        self._mask_u8.copy_(mask.to(torch.uint8))
        self.gpu_experts_mask = mask.clone()
        self._torch_ids = ids

    def _expert_weights(self, e, clone=False):
        if self._held is not None:
            return self._held[e]
        o = self._original
        w = tuple(getattr(o, name)[e].detach() for name in _WEIGHT_NAMES[self._layout])
        return tuple(t.clone() for t in w) if clone else w

    def extra_repr(self):
        return (f"layer={self.layer}, num_experts={self.num_experts}, kernel={self.engine.kernel_name}, "
                f"experts_in_pytorch={len(self._torch_ids)}")

    def _torch_half(self, x, ids, weights):
        """The slots whose experts the mask keeps in PyTorch, with the original module's weights and its own
        per-expert arithmetic, summed in float32; None when no token routes to one."""
        o = self._original
        out = None
        for e in self._torch_ids:
            token, slot = torch.where(ids == e)
            if token.numel() == 0:
                continue
            h = x[token]
            w = self._expert_weights(e)
            if self._layout == "concatenated":
                gate, up = torch.nn.functional.linear(h, w[0]).chunk(2, dim=-1)
                h = torch.nn.functional.linear(o.act_fn(gate) * up, w[1])
            else:  # gpt-oss: gate_up, gate_up bias, down, down bias
                h = o._apply_gate(h @ w[0] + w[1]) @ w[2] + w[3]
            h = h.float() * weights[token, slot, None]
            if out is None:
                out = torch.zeros(x.shape[0], x.shape[1], dtype=torch.float32, device=x.device)
            out.index_add_(0, token, h)
        return out

    def forward(self, hidden_states, top_k_index=None, top_k_weights=None):
        x = hidden_states
        if x.dim() != 2 or top_k_index is None or top_k_weights is None:
            raise ValueError(f"layer {self.layer}: expected experts(hidden_states (tokens, hidden), top_k_index, "
                             f"top_k_weights); got hidden_states of shape {tuple(x.shape)}")
        n, k = top_k_index.shape
        device = x.device
        x_cpu = x.to("cpu", non_blocking=False)
        if x_cpu.dtype not in (torch.float32, torch.bfloat16) or not x_cpu.is_contiguous():
            x_cpu = x_cpu.to(torch.float32).contiguous()
        ids_cpu = top_k_index.to("cpu", torch.int64).contiguous()
        weights_cpu = top_k_weights.to("cpu", torch.float32).contiguous()
        y = torch.empty(n, x.shape[1], dtype=torch.float32)
        # Raw addresses of the tensors above, alive until wait(); the engine skips the slots the mask marks.
        self.engine.submit_raw(n, k, x_cpu.data_ptr(), x_cpu.dtype is torch.bfloat16, ids_cpu.data_ptr(), False,
                               weights_cpu.data_ptr(), y.data_ptr(), False, self._mask_u8.data_ptr())
        try:
            torch_part = self._torch_half(x, top_k_index, top_k_weights) if self._torch_ids else None
        finally:
            self.engine.wait()
        if self._recorder is not None:
            self._recorder.add(self.layer, ids_cpu, weights_cpu)
        y = y.to(device)
        if torch_part is not None:
            y += torch_part
        y = y.to(x.dtype)
        if torch.is_grad_enabled() and (x.requires_grad or top_k_weights.requires_grad):
            # A forward outside no_grad (an eval() model called directly) works; a backward through it would
            # skip the experts, so it raises instead.
            y = _NoBackward.apply(y, x, top_k_weights)
        return y


class _NoBackward(torch.autograd.Function):
    """Ties hymoe's output to the inputs that need gradients, and raises if a backward reaches it."""

    @staticmethod
    def forward(ctx, y, *inputs):
        return y.view_as(y)

    @staticmethod
    def backward(ctx, grad):
        raise RuntimeError("hymoe.transformers' experts are inference only and have no backward: a loss was "
                           "differentiated through a patched MoE block. unpatch() the model to train it.")


def patch(model, *, gpu_experts_mask=None, checkpoint=None, format="stored", record_trace=False, threads=None,
          max_tokens=0, release_torch_weights=False):
    """Runs every MoE block's experts of `model` (a transformers model of a supported family) on hymoe; returns
    the model. The routers, shared experts and the rest of the model are untouched.

    gpu_experts_mask: (MoE layers, E) or (decoder layers, E) bool (array, tensor or a PLAN.json path): the experts
      marked stay in PyTorch, computed with the model's own weights on its device, overlapped with hymoe's half.
    checkpoint: the model directory (or GGUF file) the model was loaded from: hymoe reads the experts from it, in
      their stored format (FP8 and MXFP4 stay compact); needed for gpt-oss. Without it the experts are packed from
      the model's parameters (bf16 stays bf16, f32 stays f32; other dtypes are an error).
    format: "stored", or "int8" / "int4" to quantize bf16/f32 experts at load (docs/runtime.md's formats).
    record_trace: also keep the per-token routing for write_trace (counts are always kept).
    threads: hymoe's thread count (process-wide); None leaves it.
    release_torch_weights: free transformers' expert weights once hymoe holds them, layer by layer (one resident
      copy; the masked experts' PyTorch weights are kept). unpatch() is then impossible: reload the model.
    """
    if getattr(model, _STATE, None) is not None:
        raise ValueError("hymoe.transformers: the model is already patched; unpatch() it first")
    if format not in ("stored", "int8", "int4"):
        raise ValueError(f"hymoe.transformers: format {format!r} is not one of 'stored', 'int8', 'int4'")
    found = _find_experts(model)
    if not found:
        raise ValueError("hymoe.transformers: the model has no MoE experts module; supported: " + _supported_text())
    config = getattr(model, "config", None)
    num_hidden_layers = getattr(getattr(config, "get_text_config", lambda: config)(), "num_hidden_layers", None)
    num_experts = {m.num_experts for _, _, _, m, _ in found}
    if len(num_experts) != 1:
        raise ValueError(f"hymoe.transformers: the MoE layers have different expert counts {sorted(num_experts)}")
    num_experts = num_experts.pop()
    layers = [f[4] for f in found]
    masks = _read_mask(gpu_experts_mask, layers, num_experts, num_hidden_layers)
    source = _checkpoint_dir(checkpoint)
    if source is not None and format != "stored":
        raise ValueError("hymoe.transformers: format='int8'/'int4' quantizes the model's parameters; with "
                         "checkpoint= the experts run in the checkpoint's own format")
    for name, _, _, module, _ in found:  # every layer is checked before any is built
        if source is None:
            _check_parameters(name, module, *_FAMILIES[type(module).__name__])
    if threads is not None:
        _core.runtime_set_num_threads(int(threads))
    _warn_about_spinning_threads()

    def build(name, module, layer):
        family, layout = _FAMILIES[type(module).__name__]
        if source is not None:
            engine = _core.ExpertEngine.from_model(source, layer, max_tokens=max_tokens)
        else:
            engine = _engine_from_parameters(module, format, max_tokens)
        if engine.num_experts != num_experts or engine.dim != _dim(module, layout):
            raise ValueError(f"hymoe.transformers: {name}: the checkpoint's layer {layer} has {engine.num_experts} "
                             f"experts of dimension {engine.dim}; the model's has {num_experts} of "
                             f"{_dim(module, layout)}")
        return engine, layout

    recorder = _Recorder(layers[0]) if record_trace else None
    patched = []

    def swap(entry, engine, layout, mask):
        name, parent, attribute, module, layer = entry
        replacement = _HymoeExperts(module, engine, layer, layout, mask, recorder, release_torch_weights)
        setattr(parent, attribute, replacement)
        patched.append((parent, attribute, module, replacement))

    if not release_torch_weights:
        # Every engine is built before any module is swapped: an error patches nothing.
        engines = [build(name, module, layer) for name, _, _, module, layer in found]
        for entry, (engine, layout), mask in zip(found, engines, masks):
            swap(entry, engine, layout, mask)
    else:
        # Layer by layer, so the peak is one copy of the experts plus one layer's.
        for entry, mask in zip(found, masks):
            try:
                engine, layout = build(entry[0], entry[3], entry[4])
            except Exception as e:
                if patched:
                    raise RuntimeError(
                        f"hymoe.transformers: building {entry[0]} failed after {len(patched)} layers were patched "
                        "with their PyTorch expert weights released; the model is unusable, reload it") from e
                raise
            swap(entry, engine, layout, mask)
    object.__setattr__(model, _STATE, {"patched": patched, "layers": layers, "recorder": recorder,
                                       "num_experts": num_experts, "num_hidden_layers": num_hidden_layers,
                                       "released": bool(release_torch_weights)})
    return model


_warned = []


def _warn_about_spinning_threads():
    """PyTorch's OpenMP threads spin after each parallel region unless OMP_WAIT_POLICY=PASSIVE, on the cores
    hymoe's pool then runs the experts on: on a 2-core machine that made a Qwen3-30B-A3B block's decode 1.7x slower
    (docs/transformers.md). The policy is read when the OpenMP runtime starts, so it can only be advised."""
    if _warned or torch.get_num_threads() < 2 or os.environ.get("OMP_WAIT_POLICY", "").upper() == "PASSIVE":
        return
    _warned.append(True)
    warnings.warn("hymoe.transformers: PyTorch's OpenMP threads spin between operations and slow hymoe's experts "
                  "down (1.7x at decode in docs/transformers.md); start Python with OMP_WAIT_POLICY=PASSIVE",
                  stacklevel=3)


def _dim(module, layout):
    """The model dimension of an experts module: down_proj is (E, D, I), gpt-oss's (E, I, D)."""
    return module.down_proj.shape[1] if layout == "concatenated" else module.down_proj.shape[2]


def _check_parameters(name, module, family, layout):
    if layout != "concatenated":
        raise ValueError(f"hymoe.transformers: {name} ({family}) has expert biases and interleaved gate/up "
                         "weights, which hymoe reads from the checkpoint: pass checkpoint=<the model directory>")
    act = type(getattr(module, "act_fn", None)).__name__
    if act not in _SILU:
        raise ValueError(f"hymoe.transformers: {name}: its act_fn is {act}; hymoe's experts are SwiGLU (silu)")
    if module.gate_up_proj.dtype not in (torch.bfloat16, torch.float32):
        raise ValueError(f"hymoe.transformers: {name}: experts in {module.gate_up_proj.dtype}; hymoe takes bf16 or "
                         "float32 parameters (or the checkpoint directory, for FP8 and MXFP4)")


def _engine_from_parameters(module, format, max_tokens):
    weight = module.gate_up_proj.detach().to("cpu")
    inter = weight.shape[1] // 2
    down = module.down_proj.detach().to("cpu")
    view = (lambda t: t.contiguous().view(torch.int16).numpy()) if weight.dtype is torch.bfloat16 else \
        (lambda t: t.contiguous().numpy())
    return _core.ExpertEngine.from_tensors(view(weight[:, :inter]), view(weight[:, inter:]), view(down),
                                           max_tokens=max_tokens, format=format)


def _state(model):
    state = getattr(model, _STATE, None)
    if state is None:
        raise ValueError("hymoe.transformers: the model is not patched")
    return state


def is_patched(model):
    return getattr(model, _STATE, None) is not None


def unpatch(model):
    """Puts the original experts modules back (their weights were never changed); returns the model."""
    state = _state(model)
    if state["released"]:
        raise ValueError("hymoe.transformers: the model was patched with release_torch_weights=True: its PyTorch "
                         "expert weights are gone, so it cannot be unpatched; reload it")
    for parent, attribute, original, _ in state["patched"]:
        setattr(parent, attribute, original)
    object.__delattr__(model, _STATE)
    return model


def moe_layers(model):
    """The decoder-layer index of each MoE layer, the rows of counts() and gpu_experts_mask()."""
    return list(_state(model)["layers"])


def _modules(model):
    return [p[3] for p in _state(model)["patched"]]


def counts(model):
    """(MoE layers, E) int64: the (token, expert) pairs routed in each MoE layer since patch() or reset_counts(),
    those computed in PyTorch included (the routing's statistics, not the placement's)."""
    return torch.stack([torch.from_numpy(m.engine.counts()) for m in _modules(model)])


def reset_counts(model):
    """Zeroes the counts and drops the recorded trace."""
    state = _state(model)
    for m in _modules(model):
        m.engine.reset_counts()
    if state["recorder"] is not None:
        state["recorder"].calls.clear()
        state["recorder"].step = -1


def host_weight_bytes(model):
    """Bytes of expert weights hymoe holds for the patched model."""
    return sum(m.engine.host_weight_bytes for m in _modules(model))


def gpu_experts_mask(model):
    """(MoE layers, E) bool: the experts each layer computes in PyTorch."""
    return torch.stack([m.gpu_experts_mask for m in _modules(model)])


def update_gpu_experts_mask(model, mask):
    """Re-places experts between forward calls: the same mask forms patch() takes."""
    state = _state(model)
    rows = _read_mask(mask, state["layers"], state["num_experts"], state["num_hidden_layers"])
    for m, row in zip(_modules(model), rows):
        m.set_mask(row)


def write_counts(model, path, layout="hymoe"):
    """Writes counts(model).

    layout "hymoe": a table `hymoe plan` reads, in the format of the name's extension (.json, .csv, .safetensors),
      one row per MoE layer (moe_layers(model)).
    layout "sglang": SGLang's expert-distribution dump, one record of every decoder layer (zero rows for dense
      layers): `logical_count`, an int64 (1, decoder layers, E) tensor, saved with torch.save in a .pt file or as
      a .safetensors tensor (both read by `hymoe plan`, which sums the records). A .pt name implies it."""
    state = _state(model)
    table = counts(model)
    name = os.fspath(path)
    if layout not in ("hymoe", "sglang"):
        raise ValueError(f"hymoe.transformers: layout {layout!r} is not 'hymoe' or 'sglang'")
    from hymoe import placement

    if name.endswith(".pt") or layout == "sglang":
        full = torch.zeros(1, state["num_hidden_layers"] or (max(state["layers"]) + 1), table.shape[1],
                           dtype=torch.int64)
        full[0, state["layers"]] = table
        return placement.write_sglang_counts(name, full)
    placement.write_counts(name, table.to(torch.float64).numpy())


def write_trace(model, path):
    """Writes the per-token routing recorded since patch(..., record_trace=True) as the trace CSV `hymoe stats`,
    `plan` and `replay` read (`token,step,layer,e1..eK,w1..wK`; docs/placement.md): one step per forward call of
    the model, its tokens numbered on from the previous step's."""
    recorder = _state(model)["recorder"]
    if recorder is None:
        raise ValueError("hymoe.transformers: patch the model with record_trace=True to write a trace")
    if not recorder.calls:
        raise ValueError("hymoe.transformers: no forward call was recorded")
    k = max(ids.shape[1] for _, _, ids, _ in recorder.calls)
    lines = ["token,step,layer," + ",".join(f"e{i + 1}" for i in range(k)) + "," +
             ",".join(f"w{i + 1}" for i in range(k))]
    base, current, width = 0, None, 0
    for step, layer, ids, weights in recorder.calls:
        if step != current:
            base, current, width = base + width, step, 0
        width = max(width, ids.shape[0])
        for t in range(ids.shape[0]):
            e = ids[t].tolist() + [-1] * (k - ids.shape[1])
            w = [f"{v:.9g}" for v in weights[t].tolist()] + ["0"] * (k - ids.shape[1])
            lines.append(f"{base + t},{step},{layer}," + ",".join(map(str, e)) + "," + ",".join(w))
    tmp = os.fspath(path) + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    os.replace(tmp, path)
