"""hymoe behind kt-kernel's operator: `from hymoe.kt import KTMoEWrapper` in place of
`from kt_kernel import KTMoEWrapper`.

kt-kernel 0.7.2's inference-mode contract (the one SGLang's `KTEPWrapperMethod` drives), on hymoe's expert engine
(include/hymoe/runtime.h): the CPU half of a hybrid MoE layer. The caller routes; `submit_forward` starts the sum
over each token's experts that the mask leaves on the CPU, `sync_forward` returns it. `docs/runtime.md` states the
contract, the numerics, how SGLang uses it, and where hymoe differs from kt-kernel (each difference is a named
error or a documented extension, never a silent substitute).

CPU tensors need no CUDA at all. CUDA tensors are staged through pinned host buffers, with the CPU call ordered on
the caller's stream (host functions, as kt-kernel does); that path needs a build with the CUDA toolkit and a GPU.
"""

import json
import os

import numpy as np
import torch

from hymoe import _core

__all__ = ["KTMoEWrapper", "DecodePlacer", "generate_gpu_experts_masks", "activation_counts", "write_counts"]

# kt-kernel 0.7.2's inference methods, and how hymoe holds each one's experts: (engine format, what it reads).
_KT_INFERENCE_METHODS = ("AMXINT4", "AMXINT8", "RAWINT4", "FP8", "FP8_PERCHANNEL", "BF16", "GPTQ_INT4",
                         "SYCL_GPTQ_INT4", "MXFP4", "NVFP4", "MXFP8", "LLAMAFILE", "MOE_INT4", "MOE_INT8")
_METHODS = {
    "BF16": ("stored", "bf16"),      # a Hugging Face checkpoint with bf16 (or f32) experts, computed as stored
    "FP8": ("stored", "fp8"),        # a block-FP8 checkpoint (quantization_config fp8, weight_scale_inv)
    "MXFP4": ("stored", "mxfp4"),    # an MXFP4 checkpoint (gpt-oss's *_blocks / *_scales)
    "LLAMAFILE": ("stored", "gguf"),  # a GGUF file (or a folder holding one), its blocks kept
    "AMXINT8": ("int8", "bf16"),     # bf16 experts quantized at load to hymoe's q8 blocks of 32
    "MOE_INT8": ("int8", "bf16"),
    "AMXINT4": ("int4", "bf16"),     # bf16 experts quantized at load to Q4_0 blocks of 32
    "MOE_INT4": ("int4", "bf16"),
}
_SWIGLU_LIMIT_METHODS = ("FP8", "MXFP4", "MXFP8", "LLAMAFILE")

# kt-kernel's buffer cache, class-wide as there: batch sizes kept for CUDA-graph replay, and the rest in one slot.
_capture_sizes = []
_buffers = {}  # (tokens, hidden, dtype, device, parity) -> dict of tensors
_temp_tokens = [None]
_threads = [None]  # cpuinfer_threads of the first wrapper: hymoe's pool is process-wide, like kt-kernel's CPUInfer


def _np(t):
    """A CPU tensor as a numpy array over its memory (bf16 as its int16 bits, which the engine reads as bf16): no
    copy."""
    if t.dtype is torch.bfloat16:
        return t.view(torch.int16).numpy()
    return t.numpy()


def _pinned(shape, dtype):
    return torch.empty(shape, dtype=dtype, pin_memory=True)


class KTMoEWrapper:
    """kt-kernel 0.7.2's KTMoEWrapper (inference mode) on hymoe's expert engine.

    Beyond kt-kernel: it runs on a CPU-only machine (CPU tensors), `load_weights_from_tensors` takes every method
    (bf16 as stored, or quantized at load), `keep_gpu_experts_on_cpu=False` frees the packed copy of experts the
    mask puts on the GPU, `update_gpu_experts_mask` re-places experts between calls, and `activation_counts`
    returns the routed (token, expert) pairs of every call.
    """

    def __init__(self, layer_idx, num_experts, num_experts_per_tok, hidden_size, moe_intermediate_size,
                 gpu_experts_mask, cpuinfer_threads, threadpool_count, weight_path, chunked_prefill_size,
                 cpu_save=False, max_deferred_experts_per_token=None, method="AMXINT4", numa_nodes=None,
                 mode="inference", num_gpu_experts=0, lora_rank=16, lora_alpha=32.0, lora_dropout=0.0,
                 max_cache_depth=1, group_size=128, zero_point=True, full_weight_grad=False, swiglu_limit=0.0,
                 swiglu_alpha=0.0, *, keep_gpu_experts_on_cpu=True):
        if mode not in ("inference", "sft"):
            raise ValueError(f"Unknown mode: '{mode}'. Supported modes: 'inference', 'sft'")
        if mode == "sft":
            raise ValueError("mode 'sft' (kt-kernel's LoRA fine-tuning wrapper) is not provided by hymoe.kt; "
                             "hymoe's training layer is hymoe.torch.MoEMLP")
        if method not in _KT_INFERENCE_METHODS:
            raise ValueError(f"Method '{method}' not supported for inference mode. Supported methods: "
                             f"{sorted(_KT_INFERENCE_METHODS)}")
        if method not in _METHODS:
            raise ValueError(f"method '{method}' is one of kt-kernel's, but hymoe has no kernels for its weights; "
                             f"hymoe.kt runs {sorted(_METHODS)}")
        if swiglu_limit != 0.0 and method not in _SWIGLU_LIMIT_METHODS:
            raise ValueError(f"swiglu_limit={swiglu_limit} is only supported on method='FP8'/'MXFP4'/'MXFP8'/"
                             f"'LLAMAFILE'; method={method!r} runs plain SwiGLU")
        if max_deferred_experts_per_token:
            raise ValueError(f"max_deferred_experts_per_token={max_deferred_experts_per_token}: hymoe.kt does not "
                             "defer experts to the next layer (kt-kernel's approximate mode); pass 0 or None")
        if cpu_save:
            raise ValueError("cpu_save=True (kt-kernel writes its converted weights to disk) is not supported: "
                             "hymoe packs the weights at load and keeps nothing on disk")
        if numa_nodes is not None and len(numa_nodes) != threadpool_count:
            raise ValueError(f"numa_nodes length ({len(numa_nodes)}) must match threadpool_count "
                             f"({threadpool_count})")
        if threadpool_count != 1:
            raise ValueError(f"threadpool_count={threadpool_count}: hymoe runs one thread pool (no NUMA subpools); "
                             "pass 1")
        for name, value in (("num_experts", num_experts), ("num_experts_per_tok", num_experts_per_tok),
                            ("hidden_size", hidden_size), ("moe_intermediate_size", moe_intermediate_size),
                            ("cpuinfer_threads", cpuinfer_threads)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name}={value!r} must be a positive integer")
        if num_experts_per_tok > num_experts:
            raise ValueError(f"num_experts_per_tok={num_experts_per_tok} exceeds num_experts={num_experts}")
        if _threads[0] is None:
            _core.runtime_set_num_threads(cpuinfer_threads)
            _threads[0] = cpuinfer_threads
        elif _threads[0] != cpuinfer_threads:
            raise ValueError(f"cpuinfer_threads={cpuinfer_threads}: the first KTMoEWrapper of this process set "
                             f"{_threads[0]} threads, and hymoe's pool is process-wide")
        self.layer_idx = layer_idx
        self.num_experts = num_experts
        self.num_experts_per_tok = num_experts_per_tok
        self.hidden_size = hidden_size
        self.moe_intermediate_size = moe_intermediate_size
        self.weight_path = weight_path
        self.chunked_prefill_size = chunked_prefill_size
        self.cpu_save = cpu_save
        self.method = method
        self.max_deferred_experts_per_token = 0
        self.swiglu_limit = float(swiglu_limit)
        self.swiglu_alpha = float(swiglu_alpha)
        self.keep_gpu_experts_on_cpu = keep_gpu_experts_on_cpu
        # The mask is the wrapper's own tensor, read on every call: writing it in place re-places experts, as with
        # kt-kernel (SGLang's dynamic expert update does). Pinned where CUDA is present, as kt-kernel's.
        cuda = torch.cuda.is_available()
        self.gpu_experts_mask = (_pinned((num_experts,), torch.bool) if cuda
                                 else torch.zeros(num_experts, dtype=torch.bool))
        if gpu_experts_mask is None:
            self.gpu_experts_mask.zero_()
        else:
            self.gpu_experts_mask.copy_(gpu_experts_mask)
        self.num_gpu_experts = int(self.gpu_experts_mask.sum())
        self._set_mask_view()
        self.moe = None
        self._engine = None
        self._pending = None

    def _set_mask_view(self):
        m = self.gpu_experts_mask
        if not (isinstance(m, torch.Tensor) and m.dtype is torch.bool and m.device.type == "cpu"
                and tuple(m.shape) == (self.num_experts,) and m.is_contiguous()):
            raise ValueError(f"gpu_experts_mask must be a contiguous CPU bool tensor ({self.num_experts},); write it "
                             "in place (gpu_experts_mask.copy_(new)) to re-place experts")
        self._mask_np, self._mask_of, self._mask_ptr = m.numpy(), m, m.data_ptr()

    # ---- loading ----

    def _check_engine(self, engine):
        for name, want, got in (("num_experts", self.num_experts, engine.num_experts),
                                ("hidden_size", self.hidden_size, engine.dim),
                                ("moe_intermediate_size", self.moe_intermediate_size, engine.hidden)):
            if want != got:
                raise ValueError(f"{name}={want}, but layer {self.layer_idx} of {self.weight_path} has {got}")
        self._engine = engine
        self.moe = engine
        if _capture_sizes:
            engine.reserve(max(_capture_sizes), self.num_experts_per_tok)

    def _p2l(self, physical_to_logical_map_cpu):
        if physical_to_logical_map_cpu is None:
            return None
        m = torch.as_tensor(physical_to_logical_map_cpu)
        if m.dtype != torch.int64 or m.dim() != 1 or m.device.type != "cpu":
            raise ValueError(f"physical_to_logical_map_cpu must be a CPU int64 tensor (num_experts,), got "
                             f"{m.dtype} {tuple(m.shape)} on {m.device}")
        return m.contiguous().numpy()

    def _model_path(self):
        path, kind = self.weight_path, _METHODS[self.method][1]
        if kind == "gguf":
            if not os.path.exists(path):
                raise FileNotFoundError(f"GGUF weight path not found: {path}")
            if os.path.isdir(path):
                files = sorted(f for f in os.listdir(path) if f.endswith(".gguf"))
                if len(files) != 1:
                    raise ValueError(f"{path}: LLAMAFILE needs one .gguf file there, found {len(files)}: {files}")
                path = os.path.join(path, files[0])
            return path
        config = os.path.join(path, "config.json")
        if not os.path.isfile(config):
            raise ValueError(f"{path}: method {self.method} reads a Hugging Face model directory (config.json and "
                             "its safetensors); kt-kernel's converted weights (.kt files, blk.* tensors) are not read, "
                             "point weight_path at the original checkpoint")
        with open(config) as f:
            quant = (json.load(f).get("quantization_config") or {}).get("quant_method")
        want = {"bf16": None, "fp8": "fp8", "mxfp4": "mxfp4"}[kind]
        if quant != want:
            raise ValueError(f"{config}: quantization_config.quant_method is {quant!r}; method {self.method} takes "
                             f"{'an unquantized (bf16) checkpoint' if want is None else repr(want)}")
        return path

    def load_weights(self, physical_to_logical_map_cpu=None):
        """The layer's experts from weight_path (kt-kernel's layer_idx is the model's layer index)."""
        fmt = _METHODS[self.method][0]
        engine = _core.ExpertEngine.from_model(
            self._model_path(), self.layer_idx, keep_resident_host_copy=self.keep_gpu_experts_on_cpu,
            capture_sizes=list(_capture_sizes), format=fmt,
            physical_to_logical=self._p2l(physical_to_logical_map_cpu))
        self._check_engine(engine)

    def load_weights_from_tensors(self, gate_proj, up_proj, down_proj, physical_to_logical_map_cpu=None):
        """Stacked expert weights: gate and up (E, I, H), down (E, H, I), bf16 or float32 CPU tensors."""
        if self.method == "LLAMAFILE":
            raise ValueError("method LLAMAFILE reads GGUF blocks from weight_path; load_weights_from_tensors "
                             "takes bf16 or float32 tensors (use BF16, AMXINT8 or AMXINT4)")
        if self.method in ("FP8", "MXFP4"):
            raise ValueError(f"method {self.method} reads its quantized checkpoint from weight_path; "
                             "load_weights_from_tensors takes bf16 or float32 tensors (use BF16, AMXINT8 or AMXINT4)")
        tensors = []
        for name, t in (("gate_proj", gate_proj), ("up_proj", up_proj), ("down_proj", down_proj)):
            if not isinstance(t, torch.Tensor) or t.device.type != "cpu" or t.dtype not in (torch.bfloat16,
                                                                                            torch.float32):
                raise ValueError(f"{name} must be a bf16 or float32 CPU tensor")
            tensors.append(t.detach().contiguous())
        self._tensors = tensors  # read again when experts come back from the GPU (keep_gpu_experts_on_cpu=False)
        engine = _core.ExpertEngine.from_tensors(
            *(_np(t) for t in tensors), keep_resident_host_copy=self.keep_gpu_experts_on_cpu,
            capture_sizes=list(_capture_sizes), format=_METHODS[self.method][0],
            physical_to_logical=self._p2l(physical_to_logical_map_cpu), swiglu_limit=self.swiglu_limit,
            swiglu_alpha=self.swiglu_alpha if self.swiglu_alpha else 1.702)
        self._check_engine(engine)

    # ---- the call ----

    def _buffers(self, hidden_states, top_k, ids_dtype):
        n, device = hidden_states.shape[0], hidden_states.device
        key = (n, self.hidden_size, top_k, hidden_states.dtype, device, ids_dtype, self.layer_idx % 2)
        b = _buffers.get(key)
        if b is not None:
            return b
        if n not in _capture_sizes:  # one temporary size at a time, as kt-kernel keeps it
            if _temp_tokens[0] is not None and _temp_tokens[0] != n:
                for k in [k for k in _buffers if k[0] == _temp_tokens[0]]:
                    del _buffers[k]
            _temp_tokens[0] = n
        out_dtype = hidden_states.dtype if hidden_states.dtype in (torch.bfloat16, torch.float32) else torch.float32
        if device.type == "cpu":
            b = {"output_cpu": torch.empty(n, self.hidden_size, dtype=out_dtype)}
        else:
            b = {"input_cpu": _pinned((n, self.hidden_size), out_dtype),
                 "ids_cpu": _pinned((n, top_k), ids_dtype),
                 "weights_cpu": _pinned((n, top_k), torch.float32),
                 "output_cpu": _pinned((n, self.hidden_size), out_dtype),
                 "output_gpu": torch.empty(n, self.hidden_size, dtype=hidden_states.dtype, device=device)}
        _buffers[key] = b
        return b

    def submit_forward(self, hidden_states, topk_ids, topk_weights, cuda_stream=None):
        """Starts the CPU experts' sum for hidden_states (..., hidden_size); returns at once."""
        if self._engine is None:
            raise RuntimeError(f"layer {self.layer_idx}: load_weights (or load_weights_from_tensors) first")
        if self._pending is not None:
            raise RuntimeError(f"layer {self.layer_idx}: submit_forward while a call is in flight; "
                               "sync_forward first")
        flat = hidden_states if hidden_states.dim() == 2 else hidden_states.reshape(-1, self.hidden_size)
        n = flat.shape[0]
        if self.chunked_prefill_size and self.chunked_prefill_size > 0 and n > self.chunked_prefill_size:
            raise ValueError(f"qlen ({n}) exceeds chunked_prefill_size ({self.chunked_prefill_size}); the C++ MoE "
                             "output buffer is sized by chunked_prefill_size and would be overrun. Raise "
                             "--chunked-prefill-size or reduce the prefill chunk.")
        ids = topk_ids if topk_ids.dim() == 2 else topk_ids.reshape(n, -1)
        weights = topk_weights if topk_weights.dim() == 2 else topk_weights.reshape(n, -1)
        if ids.shape != weights.shape or ids.shape[0] != n:
            raise ValueError(f"topk_ids {tuple(topk_ids.shape)} and topk_weights {tuple(topk_weights.shape)} do not "
                             f"match hidden_states' {n} tokens")
        ids_dtype = ids.dtype if ids.dtype in (torch.int32, torch.int64) else torch.int64
        b = self._buffers(flat, ids.shape[1], ids_dtype)
        if self._mask_of is not self.gpu_experts_mask:  # the attribute was replaced, not written in place
            self._set_mask_view()
        if flat.device.type == "cpu":
            y = b["output_cpu"]
            x = flat if flat.dtype is y.dtype and flat.is_contiguous() else flat.to(y.dtype).contiguous()
            if ids.dtype is not ids_dtype or not ids.is_contiguous():
                ids = ids.to(ids_dtype).contiguous()
            if weights.dtype is not torch.float32 or not weights.is_contiguous():
                weights = weights.to(torch.float32).contiguous()
            bf16 = y.dtype is torch.bfloat16
            # Raw addresses of tensors checked above and kept in _pending until sync_forward.
            self._engine.submit_raw(n, ids.shape[1], x.data_ptr(), bf16, ids.data_ptr(), ids_dtype is torch.int32,
                                    weights.data_ptr(), y.data_ptr(), bf16, self._mask_ptr)
            self._pending = (b, None, (x, ids, weights, self._mask_of))
            return
        stream = torch.cuda.ExternalStream(cuda_stream) if cuda_stream else torch.cuda.current_stream(flat.device)
        with torch.cuda.stream(stream):
            b["input_cpu"].copy_(flat, non_blocking=True)
            b["ids_cpu"].copy_(ids, non_blocking=True)
            b["weights_cpu"].copy_(weights, non_blocking=True)
        self._engine.submit_on_stream(_np(b["input_cpu"]), b["ids_cpu"].numpy(), b["weights_cpu"].numpy(),
                                      _np(b["output_cpu"]), self._mask_np, stream.cuda_stream)
        self._pending = (b, stream, None)

    def sync_forward(self, hidden_states, cuda_stream=None):
        """The CPU experts' sum of the last submit_forward, (tokens, hidden_size) in hidden_states' dtype and device:
        a buffer reused by later calls of the same size (copy or consume it first, as with kt-kernel)."""
        if self._pending is None:
            raise RuntimeError(f"layer {self.layer_idx}: sync_forward without a submit_forward")
        b, stream, _ = self._pending
        self._pending = None
        if stream is None:
            self._engine.wait()
            out = b["output_cpu"]
            return out if out.dtype is hidden_states.dtype else out.to(hidden_states.dtype)
        if cuda_stream:
            stream = torch.cuda.ExternalStream(cuda_stream)
        self._engine.wait_on_stream(stream.cuda_stream)
        with torch.cuda.stream(stream):
            b["output_gpu"].copy_(b["output_cpu"], non_blocking=True)
        return b["output_gpu"]

    def forward(self, hidden_states, topk_ids, topk_weights, cuda_stream=None):
        self.submit_forward(hidden_states, topk_ids, topk_weights, cuda_stream)
        return self.sync_forward(hidden_states, cuda_stream)

    # ---- placement and statistics (beyond kt-kernel's wrapper) ----

    def update_gpu_experts_mask(self, mask):
        """Re-places experts between calls: mask (num_experts,) bool, True = on the GPU. The same as writing
        gpu_experts_mask in place; with keep_gpu_experts_on_cpu=False the experts leaving the GPU are packed
        again on the next call and those joining it are freed."""
        if self._pending is not None:
            raise RuntimeError(f"layer {self.layer_idx}: update_gpu_experts_mask while a call is in flight")
        mask = torch.as_tensor(mask)
        if tuple(mask.shape) != (self.num_experts,):
            raise ValueError(f"mask has shape {tuple(mask.shape)}; expected ({self.num_experts},)")
        self.gpu_experts_mask.copy_(mask)
        self.num_gpu_experts = int(self.gpu_experts_mask.sum())

    def activation_counts(self):
        """(num_experts,) int64: routed (token, expert) pairs of every call, GPU-resident experts included."""
        if self._engine is None:
            return torch.zeros(self.num_experts, dtype=torch.int64)
        return torch.from_numpy(self._engine.counts())

    @staticmethod
    def set_capture_batch_sizes(capture_bs):
        _capture_sizes[:] = [int(n) for n in capture_bs]

    @staticmethod
    def get_capture_batch_sizes():
        return list(_capture_sizes)

    @staticmethod
    def clear_buffer_cache():
        _buffers.clear()
        _temp_tokens[0] = None

    def submit_write_weight_scale_to_buffer(self, *args, **kwargs):
        raise NotImplementedError("hymoe.kt does not write experts into GPU buffers (SGLang's layerwise prefill "
                                  "with kt-kernel's native methods); run prefill with the CPU experts instead")

    def sync_write_weight_scale_to_buffer(self):
        raise NotImplementedError("hymoe.kt does not write experts into GPU buffers")


class DecodePlacer:
    """Re-places experts during decode with hymoe's decode policy (`hymoe replay`'s score cache, or its cost-aware
    form; docs/placement.md, "Decode-time placement"), learning from the wrappers' own counts.

    Call step() after each decode step: the policy takes in the (L, E) routed pairs counted since the last step,
    makes the swaps it allows (at most `move_rate` per layer per step, on average), and the wrappers whose layer
    changed get the new mask (update_gpu_experts_mask). The GPU half must load the experts that joined it before
    the next step: `masks` is the placement to follow, and step() returns how many experts moved."""

    def __init__(self, wrappers, policy="score-cache", *, decay=0.9, margin=0.0, move_rate=0.125,
                 move_credit_cap=1.0, expert_bytes=0, pcie_gbps=25.0, horizon_steps=8.0, cost=None):
        self.wrappers = sorted(wrappers, key=lambda w: w.layer_idx)
        if not self.wrappers:
            raise ValueError("DecodePlacer needs at least one wrapper")
        if len({w.num_experts for w in self.wrappers}) != 1:
            raise ValueError("DecodePlacer: the wrappers' num_experts differ")
        start = torch.stack([w.gpu_experts_mask for w in self.wrappers]).numpy()
        self._policy = _core.placement_OnlineDecodePolicy(
            start, policy, decay, margin, move_rate, move_credit_cap, None, 0.0, int(expert_bytes), pcie_gbps,
            horizon_steps, dict(cost or {}))
        self._seen = activation_counts(self.wrappers)

    @property
    def masks(self):
        """(L, E) bool: the placement the policy holds, one row per wrapper in layer order."""
        return torch.from_numpy(self._policy.mask)

    def step(self, move=True):
        now = activation_counts(self.wrappers)
        delta, self._seen = now - self._seen, now
        moves = self._policy.step(delta.to(torch.float64).numpy(), move)
        if moves:
            masks = self.masks
            for w, m in zip(self.wrappers, masks):
                if not torch.equal(w.gpu_experts_mask, m):
                    w.update_gpu_experts_mask(m)
        return moves


def generate_gpu_experts_masks(activation_freq, num_gpu_experts):
    """kt-kernel's global top-k placement over an (L, E) table: hymoe.placement's drop-in."""
    from hymoe.placement import generate_gpu_experts_masks as g

    return g(activation_freq, num_gpu_experts)


def activation_counts(wrappers):
    """The (L, E) table of routed pairs of the given wrappers, one row per wrapper in layer order."""
    rows = sorted(wrappers, key=lambda w: w.layer_idx)
    return torch.stack([w.activation_counts() for w in rows])


def write_counts(path, wrappers):
    """Writes activation_counts(wrappers): in a format `hymoe plan` reads (.json, .csv or .safetensors by name), or,
    for a name ending in .pt, as SGLang's expert-distribution recorder dumps it (torch.save of a dict whose
    `logical_count` is an int64 (1, L, E) tensor: one record of every layer's counts)."""
    from hymoe import placement

    table = activation_counts(wrappers)
    if str(path).endswith(".pt"):
        return placement.write_sglang_counts(path, table.unsqueeze(0))
    placement.write_counts(path, table.to(torch.float64).numpy())
