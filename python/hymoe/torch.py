"""KempnerForge's Mixture-of-Experts layer (``kempnerforge.model.moe``) run by hymoe's C++ forward and backward.

``build_moe`` takes KempnerForge's arguments and defaults and returns a ``torch.nn.Module`` with ``MoEMLP``'s
interface: the same submodules, parameter and buffer names (a KempnerForge ``state_dict`` loads with
``strict=True`` and back), ``forward(x)`` on (batch, seq, dim) CPU tensors, ``aux_loss`` / ``z_loss`` /
``expert_counts``, ``router.set_step``, and autograd through hymoe's exact C++ backward. docs/python.md states the
rules (dtypes, what raises, threads).

The module's float32 parameters are views of the C++ layer's own tensors, so the C++ forward reads them with no
copy and an optimizer's in-place step reaches the layer directly; a parameter replaced by another tensor (another
dtype after ``.to(torch.bfloat16)``, or a plain assignment) is copied into the layer when its version changes.
"""

from __future__ import annotations

import json
import math
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from hymoe import _core
from hymoe._module_kinds import (_F32, _MLP_ACTIVATIONS, _NATIVE_BIAS_UPDATE_RATE, _NATIVE_EMA_DECAY, _NATIVE_MLPS,
                                 _NATIVE_MODULES, _NATIVE_ROUTERS, _activation_name, _as_f32, _mlp_kind,
                                 _native_class, _np_f32, _plain_linear)

import importlib.util as _importlib_util


def _load_torch_core():
    """hymoe._torch_core where it was built against this PyTorch, else None. Not built (pip's isolated build, no
    PyTorch headers) is normal and silent. Built against another PyTorch is a warning, and the module is not
    loaded at all: another PyTorch's C++ ABI can abort the interpreter on load."""
    import warnings

    if _importlib_util.find_spec("hymoe._torch_core") is None:
        return None
    try:
        from hymoe._torch_core_build import TORCH_VERSION
    except ImportError:
        TORCH_VERSION = None
    if TORCH_VERSION is not None and TORCH_VERSION != torch.__version__:
        warnings.warn(f"hymoe.torch: hymoe._torch_core was built against torch {TORCH_VERSION}, not this "
                      f"{torch.__version__}, so it is not loaded; float32 forwards take the slower numpy-based path. "
                      "Rebuild hymoe against this PyTorch.")
        return None
    try:  # built where PyTorch's C++ headers were found (python/CMakeLists.txt)
        from hymoe import _torch_core as module
    except ImportError as e:
        warnings.warn(f"hymoe.torch: hymoe._torch_core does not load with torch {torch.__version__} ({e}); float32 "
                      "forwards take the slower numpy-based path. Rebuild hymoe against this PyTorch.")
        return None
    return module


_torch_core = _load_torch_core()

# Whether float32 forwards take hymoe._torch_core's path (torch tensors in and out in C++, docs/python.md).
FAST_FORWARD = _torch_core is not None

__all__ = [
    "MoEMLP",
    "HfMoELayer",
    "build_moe",
    "grouped_expert_forward",
    "grouped_expert_forward_packed",
    "scale_by_expert_load",
    "load_moe_layer",
    "apply_expert_parallel",
    "rebalance_expert_parallel",
]

# KempnerForge's flag for its torch._grouped_mm path, which its tests read: hymoe's grouped kernels always exist.
_HAS_GROUPED_MM = True



# ---- The module tree: KempnerForge's names, torch's initialization (so a seed gives KempnerForge's weights) ----


class SwiGLUMLP(nn.Module):
    """down(silu(gate x) * up x); ``forward`` runs in torch (the MoE layer runs its experts in C++)."""

    def __init__(self, dim: int, hidden_dim: int) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(dim, hidden_dim, bias=False)
        self.up_proj = nn.Linear(dim, hidden_dim, bias=False)
        self.down_proj = nn.Linear(hidden_dim, dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class StandardMLP(nn.Module):
    """down(act(up x)); ``forward`` runs in torch."""

    def __init__(self, dim: int, hidden_dim: int, activation: str = "gelu") -> None:
        super().__init__()
        self.up_proj = nn.Linear(dim, hidden_dim, bias=False)
        self.down_proj = nn.Linear(hidden_dim, dim, bias=False)
        if activation not in _MLP_ACTIVATIONS:
            raise ValueError(f"Unknown activation: {activation!r}")
        self._activation = _MLP_ACTIVATIONS[activation]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(self._activation(self.up_proj(x)))


def _build_mlp(dim: int, hidden_dim: int, activation: str) -> nn.Module:
    return SwiGLUMLP(dim, hidden_dim) if activation == "silu" else StandardMLP(dim, hidden_dim, activation)


def _slot_sum(weights: torch.Tensor) -> torch.Tensor:
    """(tokens, 1): each row's sum over its top-k slots, added in slot order as the C++ router adds them. A
    reduction kernel may add a short row in another order depending on how many rows there are, which would make
    a token's weights depend on the batch around it (and on the number of expert-parallel ranks)."""
    total = weights[:, :1]
    for k in range(1, weights.shape[1]):
        total = total + weights[:, k:k + 1]
    return total


class SoftmaxTopKRouter(nn.Module):
    """The router's parameters and last results; routing itself runs inside the C++ layer."""

    def __init__(self, dim: int, num_experts: int, top_k: int) -> None:
        super().__init__()
        self.gate = nn.Linear(dim, num_experts, bias=False)
        self.num_experts = num_experts
        self.top_k = top_k
        self._step = 0
        self._max_steps = 1
        self._aux_loss = 0.0  # a float or a tensor; the properties hand out tensors
        self._z_loss = 0.0
        self._expert_counts = np.zeros(num_experts, np.float32)  # a numpy array or a tensor, as the losses

    def set_step(self, step: int, max_steps: int) -> None:
        self._step = step
        self._max_steps = max(max_steps, 1)

    # The last forward's losses (0-d tensors, part of the autograd graph after a train forward with autograd on)
    # and expert counts. Kept as floats and a numpy array after other forwards and made tensors when read, which
    # keeps the per-call cost low.
    aux_loss = property(lambda self: self._as_tensor("_aux_loss", torch.tensor),
                        lambda self, value: self.__dict__.__setitem__("_aux_loss", value))
    z_loss = property(lambda self: self._as_tensor("_z_loss", torch.tensor),
                      lambda self, value: self.__dict__.__setitem__("_z_loss", value))
    expert_counts = property(lambda self: self._as_tensor("_expert_counts", torch.from_numpy),
                             lambda self, value: self.__dict__.__setitem__("_expert_counts", value))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(weights, indices), each (tokens, top_k), of x (tokens, dim) in torch, as KempnerForge's router computes
        them; records aux_loss, z_loss and expert_counts. The MoE layer routes in C++ and never calls this; it is
        for a layer run in torch (experts hymoe's kernels do not know) and for calling the router alone."""
        logits = self.gate(x)
        probs = F.softmax(logits, dim=-1)
        weights, indices = torch.topk(probs, k=self.top_k, dim=-1)
        weights = weights / _slot_sum(weights)
        counts = F.one_hot(indices, num_classes=self.num_experts).float().sum(dim=(0, 1))
        self.aux_loss = self.num_experts * ((counts / (x.shape[0] * self.top_k)) * probs.mean(dim=0)).sum()
        self.z_loss = (torch.logsumexp(logits, dim=-1) ** 2).mean()
        self.expert_counts = counts.detach()
        return weights, indices

    def _as_tensor(self, name: str, make) -> torch.Tensor:
        value = self.__dict__[name]
        if not isinstance(value, torch.Tensor):
            if callable(value):  # the layer's expert_counts, left to be read after a hymoe._torch_core forward
                value = value()
            value = self.__dict__[name] = make(value)
        return value


class SigmoidTopKRouter(SoftmaxTopKRouter):
    """DeepSeek-V3's sigmoid router: ``expert_bias`` (a parameter) and the ``expert_ema`` buffer, both moved by
    every train-mode forward as KempnerForge moves them."""

    def __init__(self, dim: int, num_experts: int, top_k: int, bias_update_rate: float = 0.001,
                 ema_decay: float = 0.99, sequence_aux_loss_weight: float = 0.0,
                 bias_schedule: str = "constant") -> None:
        super().__init__(dim, num_experts, top_k)
        self.bias_update_rate = bias_update_rate
        self.ema_decay = ema_decay
        self.sequence_aux_loss_weight = sequence_aux_loss_weight
        self.bias_schedule = bias_schedule
        self.expert_bias = nn.Parameter(torch.zeros(num_experts))
        self.register_buffer("expert_ema", torch.ones(num_experts) / num_experts)

    def _bias_rate(self) -> float:
        rate = self.bias_update_rate
        progress = self._step / self._max_steps
        if self.bias_schedule == "cosine_decay":
            return rate * 0.5 * (1.0 + math.cos(math.pi * progress))
        if self.bias_schedule == "linear_warmup":
            return rate * min(1.0, progress * 10.0)
        return rate

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """As SoftmaxTopKRouter.forward, with sigmoid scores on logits + expert_bias; a train-mode call moves
        expert_ema and expert_bias as KempnerForge's does (the C++ layer does the same in its own forward)."""
        logits = self.gate(x)
        scores = torch.sigmoid(logits + self.expert_bias)
        weights, indices = torch.topk(scores, k=self.top_k, dim=-1)
        weights = weights / _slot_sum(weights)
        counts = F.one_hot(indices, num_classes=self.num_experts).float().sum(dim=(0, 1))
        self.expert_counts = counts.detach()
        denom = x.shape[0] * self.top_k + 1e-8
        if self.training:
            with torch.no_grad():
                self.expert_ema.lerp_((counts / denom).to(self.expert_ema.dtype), 1.0 - self.ema_decay)
                self.expert_bias.add_(self._bias_rate() * (1.0 / self.num_experts - self.expert_ema.float()))
        if self.sequence_aux_loss_weight > 0:
            self.aux_loss = self.sequence_aux_loss_weight * self.num_experts * (
                (counts.detach() / denom) * scores.mean(dim=0)).sum()
        else:
            self.aux_loss = torch.tensor(0.0)
        self.z_loss = (torch.logsumexp(logits, dim=-1) ** 2).mean()
        return weights, indices


# ---- KempnerForge's component registry: build_moe composes a router and experts from it ----


class Registry:
    """category -> name -> builder, KempnerForge's ``kempnerforge.config.registry.Registry`` interface
    (``register``, ``get``, ``list``). ``build_moe`` uses KempnerForge's own registry when KempnerForge is
    importable (so its modules, and entries a user registered there, are used) and this one otherwise."""

    def __init__(self) -> None:
        self._stores: dict[str, dict] = {}

    def register(self, category: str, name: str, obj):
        store = self._stores.setdefault(category, {})
        if name in store:
            raise ValueError(f"{category}/{name} is already registered")
        store[name] = obj
        return obj

    def get(self, category: str, name: str):
        store = self._stores.setdefault(category, {})
        if name not in store:
            raise KeyError(f"Unknown {category}: '{name}'. Available: {list(store)}")
        return store[name]

    def list(self, category: str) -> list:
        return list(self._stores.setdefault(category, {}))


registry = Registry()
registry.register("router", "softmax_topk", lambda dim, num_experts, top_k: SoftmaxTopKRouter(dim, num_experts, top_k))
registry.register("router", "sigmoid_topk",
                  lambda dim, num_experts, top_k, **kw: SigmoidTopKRouter(dim, num_experts, top_k, **kw))
registry.register("mlp", "swiglu", lambda dim, hidden_dim: SwiGLUMLP(dim, hidden_dim))
registry.register("mlp", "standard_gelu", lambda dim, hidden_dim: StandardMLP(dim, hidden_dim, "gelu"))
registry.register("mlp", "standard_relu", lambda dim, hidden_dim: StandardMLP(dim, hidden_dim, "relu"))
_ACTIVATION_TO_MLP = {"silu": "swiglu", "gelu": "standard_gelu", "relu": "standard_relu"}  # KempnerForge's keys
_BIAS_SCHEDULES = ("constant", "cosine_decay", "linear_warmup")


def _component_registry():
    """KempnerForge's registry, with its routers and MLPs registered, when KempnerForge is importable; else
    hymoe's. Looked up at each build_moe, so a KempnerForge imported later is still used."""
    try:
        from kempnerforge.config.registry import registry as kempnerforge_registry
        import kempnerforge.model.mlp  # noqa: F401  (registers KempnerForge's MLPs)
        import kempnerforge.model.router  # noqa: F401  (and its routers)
    except ImportError:
        return registry
    return kempnerforge_registry


def _apply_capacity(weights: torch.Tensor, indices: torch.Tensor, num_experts: int,
                    capacity_factor: float) -> tuple[torch.Tensor, torch.Tensor]:
    """KempnerForge's capacity rule on a router's (tokens, top_k) weights and indices: capacity =
    max(1, ceil(tokens * top_k / num_experts * capacity_factor)); within each top-k slot k separately, the tokens
    after an expert's first ``capacity`` (in token order) get weight 0. Returns (new weights, indices); the
    weights are a new tensor (differentiable where kept), the indices are returned as given."""
    num_tokens, top_k = indices.shape
    capacity = max(1, math.ceil(num_tokens * top_k / num_experts * capacity_factor))
    # Rank of each token among the earlier tokens of the same slot sent to the same expert.
    one_hot = F.one_hot(indices, num_classes=num_experts)  # (T, K, E)
    rank = ((one_hot.cumsum(dim=0) - 1) * one_hot).sum(dim=-1)  # (T, K)
    return weights.masked_fill(rank >= capacity, 0.0), indices


# ---- Autograd through the C++ backward ----


@dataclass
class _Slot:
    """One C++ tensor and the torch tensor (parameter or buffer) that stands for it."""

    name: str
    owner: nn.Module
    attr: str
    view: torch.Tensor  # float32 torch view of the C++ tensor
    shares_counter: torch.Tensor | None  # the parameter made to share MoEMLP._version_source's version counter
    tensor: torch.Tensor | None = None  # the torch tensor when last synchronized
    version: int = -1  # its _version then


class _WatchedDict(OrderedDict):
    """An owner's ``_parameters`` or ``_buffers`` that raises its MoEMLP's flag when an entry is set or removed
    (``module.weight = nn.Parameter(...)``, ``register_buffer``, ``del module.weight``), so that the per-forward
    check need not look up every tensor to see that none was replaced. Reads are the plain dict's."""

    def __init__(self, items=(), flag: list | None = None) -> None:
        self._flag = [False] if flag is None else flag  # set first: OrderedDict.__init__ calls __setitem__
        super().__init__(items)

    def __setitem__(self, key, value) -> None:
        super().__setitem__(key, value)
        self._flag[0] = True

    def __delitem__(self, key) -> None:
        super().__delitem__(key)
        self._flag[0] = True

    def clear(self) -> None:
        super().clear()
        self._flag[0] = True


class _MoEFunction(torch.autograd.Function):
    """y, aux_loss, z_loss = layer(x); backward = hymoe's MoELayer::backward on the layer's saved state."""

    @staticmethod
    def forward(ctx, module: "MoEMLP", x: torch.Tensor, *params: torch.Tensor):
        forward_id, y, aux, z = module._run_forward(x, train=True)
        ctx.module = module
        ctx.forward_id = forward_id
        ctx.x_dtype = x.dtype
        ctx.params = params  # their dtypes are read in backward, for the gradients that are needed
        return y, torch.scalar_tensor(aux), torch.scalar_tensor(z)

    @staticmethod
    def backward(ctx, grad_y: torch.Tensor, grad_aux: torch.Tensor, grad_z: torch.Tensor):
        layer = ctx.module._layer
        gy = _as_f32(grad_y, "grad of y")
        grad_x, grads = layer.backward(ctx.forward_id, _np_f32(gy), float(grad_aux), float(grad_z))
        out = [None, torch.from_numpy(grad_x).to(ctx.x_dtype)]
        for g, p, needed in zip(grads, ctx.params, ctx.needs_input_grad[2:]):
            out.append(torch.from_numpy(g).to(p.dtype) if needed and g is not None else None)
        return tuple(out)


class _Route(torch.autograd.Function):
    """(weights, indices, aux_loss, z_loss) of x (tokens, dim) by hymoe's C++ router (the fused layer's routing
    code, so a token's weights have its bits whatever tokens sit beside it); the backward is the C++ router's."""

    @staticmethod
    def forward(ctx, core, train, keep, names, x, *params):
        weights, indices, aux, z, counts, saved = core.route(_np_f32(_as_f32(x, "x")), train, keep)
        ctx.core, ctx.saved, ctx.names, ctx.dtypes = core, saved, names, (x.dtype, [p.dtype for p in params])
        ctx.counts = torch.from_numpy(counts)
        indices = torch.from_numpy(indices)
        ctx.mark_non_differentiable(indices)
        return torch.from_numpy(weights).to(x.dtype), indices, torch.scalar_tensor(aux), torch.scalar_tensor(z)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_weights, grad_indices, grad_aux, grad_z):
        grad_x, grads = ctx.core.backward(ctx.saved, _np_f32(_as_f32(grad_weights, "grad of the weights")),
                                          float(grad_aux), float(grad_z))
        ctx.saved = None
        x_dtype, p_dtypes = ctx.dtypes
        out = [None, None, None, None, torch.from_numpy(grad_x).to(x_dtype)]
        out += [torch.from_numpy(grads[n]).to(dt) for n, dt in zip(ctx.names, p_dtypes)]
        return tuple(out)


def _route_in_cpp(module: "MoEMLP", x: torch.Tensor):
    """The expert-parallel forward's routing of this rank's tokens by hymoe's C++ router, for hymoe's and
    KempnerForge's own router classes: the module's router tensors are copied in first (an optimizer may have moved
    them), a train call's bias and EMA updates copied back, and the router's aux_loss, z_loss and expert_counts
    set as its own forward sets them."""
    core = module.__dict__.get("_ep_router_core")
    if core is None:
        core = module.__dict__["_ep_router_core"] = _core.Router(json.dumps(module._config))
    router = module._modules["router"]
    tensors = {n: router.get_parameter(n) if n in dict(router.named_parameters()) else router.get_buffer(n)
               for n in core.tensor_names()}
    for name, t in tensors.items():
        core.tensor(name)[...] = _np_f32(_as_f32(t, "router." + name))
    state = router.__dict__
    core.set_step(state.get("_step", 0), state.get("_max_steps", 1))
    names = core.parameter_names()
    params = [tensors[n] for n in names]
    train = module.training
    keep = torch.is_grad_enabled() and (x.requires_grad or any(p.requires_grad for p in params))
    weights, indices, aux, z = _Route.apply(core, train, keep, names, x, *params)
    if train:
        with torch.no_grad():
            for name in ("expert_bias", "expert_ema"):
                if name in tensors:
                    tensors[name].copy_(torch.from_numpy(core.tensor(name)))
    counts = _expert_counts_of(core, indices)
    if isinstance(router, SoftmaxTopKRouter):
        state["_aux_loss"], state["_z_loss"], state["_expert_counts"] = aux, z, counts
    else:
        router.aux_loss, router.z_loss, router.expert_counts = aux, z, counts
    return weights, indices


def _expert_counts_of(core, indices: torch.Tensor) -> torch.Tensor:
    """Top-k assignments per expert before capacity drops, as float (the router's expert_counts)."""
    num_experts = core.tensor("gate.weight").shape[0]
    return torch.bincount(indices.reshape(-1), minlength=num_experts).to(torch.float32)


def _native_config(router, experts, shared_expert, capacity_factor, gradient_scale, packed_experts):
    """The C++ layer's configuration for these modules, or (None, why) when the layer must run in torch."""
    rtype = _NATIVE_ROUTERS.get(_native_class(router, _NATIVE_ROUTERS) or "")
    if rtype is None:
        return None, f"router {type(router).__module__}.{type(router).__qualname__} is not one hymoe computes"
    gate = getattr(router, "gate", None)
    if not _plain_linear(gate) or len(experts) == 0:
        return None, "router.gate is not a bias-free nn.Linear, or there are no experts"
    num_experts, dim = gate.weight.shape
    if num_experts != len(experts) or getattr(router, "num_experts", None) != num_experts:
        return None, f"router scores {num_experts} experts, {len(experts)} given"
    if rtype == "sigmoid_topk" and (getattr(router, "bias_update_rate", None) != _NATIVE_BIAS_UPDATE_RATE
                                    or getattr(router, "ema_decay", None) != _NATIVE_EMA_DECAY):
        return None, "the sigmoid router's bias_update_rate or ema_decay differs from the C++ layer's 0.001, 0.99"
    kinds = [_mlp_kind(e, dim, None) for e in experts]
    if kinds[0] is None or any(k != kinds[0] for k in kinds):
        return None, "the experts are not all SwiGLUMLP / StandardMLP modules of one activation and shape"
    activation, hidden = kinds[0]
    if shared_expert is not None and _mlp_kind(shared_expert, dim, hidden) != kinds[0]:
        return None, "the shared expert differs from the routed experts in kind or shape"
    config = {
        "dim": int(dim), "hidden_dim": int(hidden), "num_experts": int(num_experts), "top_k": int(router.top_k),
        "activation": activation, "router_type": rtype, "shared_experts": int(shared_expert is not None),
        "capacity_factor": float(capacity_factor), "gradient_scale": bool(gradient_scale),
        "sequence_aux_loss_weight": float(getattr(router, "sequence_aux_loss_weight", 0.0)),
        "bias_schedule": getattr(router, "bias_schedule", "constant"), "packed_experts": bool(packed_experts),
    }
    return config, None


class MoEMLP(nn.Module):
    """KempnerForge's ``MoEMLP``: its constructor, submodules, names and forward, computed by hymoe's C++ layer
    when the router and experts are modules it computes (hymoe's or KempnerForge's routers and MLPs; ``native``
    says whether), otherwise in torch by the modules themselves, as KempnerForge's sequential loop does."""

    _hymoe_moe_layer = True  # what hymoe.expert_parallel looks for

    def __init__(self, router: nn.Module, experts: nn.ModuleList, shared_expert: nn.Module | None = None,
                 capacity_factor: float = 0.0, gradient_scale: bool = False, packed_experts: bool = False) -> None:
        super().__init__()
        self.router = router
        self.shared_expert = shared_expert
        self.num_experts = len(experts)
        self.capacity_factor = capacity_factor
        self.gradient_scale = gradient_scale
        self.packed_experts = packed_experts
        self.ep_world_size = 1
        self.ep_group = None
        self.local_expert_start = 0
        self.num_local_experts = len(experts)
        self.ep_replicas = None  # hymoe's: the replica placement, when apply_expert_parallel was given one
        config, self.native_reason = _native_config(router, experts, shared_expert, capacity_factor,
                                                     gradient_scale, packed_experts)
        self._config = config
        self._is_swiglu = hasattr(experts[0], "gate_proj")
        if packed_experts:
            # KempnerForge's packing: each expert's (out, in) Linear weights transposed and stacked to (E, in, out).
            self.up_w = nn.Parameter(torch.stack([e.up_proj.weight.detach().t().contiguous() for e in experts]))
            self.down_w = nn.Parameter(torch.stack([e.down_proj.weight.detach().t().contiguous() for e in experts]))
            if self._is_swiglu:
                self.gate_w = nn.Parameter(torch.stack([e.gate_proj.weight.detach().t().contiguous() for e in experts]))
                self._packed_activation = F.silu
            else:
                self._packed_activation = experts[0]._activation
        else:
            self.experts = experts
        self._layer = None
        if config is not None:
            self._init_layer(config)

    @property
    def native(self) -> bool:
        """Whether the forward and backward run in hymoe's C++ layer (else in torch, by the modules themselves)."""
        return self._layer is not None

    def _init_layer(self, config: dict) -> None:
        self._hymoe_router = isinstance(self.router, SoftmaxTopKRouter)  # keeps its results as _aux_loss etc.
        self._layer = _core.MoELayer(json.dumps(config))
        self._read_expert_counts = self._layer.expert_counts  # made once: a forward hands it to the router
        self._layer_handle = self._layer._handle()  # what hymoe._torch_core's forward takes
        # What the per-forward weight check reads (_weights_may_have_changed): one flag raised when a tensor is
        # replaced, one version counter shared by every aliasing parameter, and the versions of the few tensors
        # that have their own counter (buffers, replaced tensors).
        self._replaced = [True]
        self._version_source = torch.zeros(0)
        self._seen_version = -1
        self._watched: list = []  # (tensor, _version when last synchronized)
        self._force_copy = False
        self._slots = self._alias_tensors()
        self._dicts = self._tensor_dicts()
        self._parameter_dicts = [self._dicts[self._slots.index(self._slot_by_name[n])]
                                 for n in self._layer.parameter_names()]
        self._parameters_now: list = []  # the parameters, in the layer's order, as of the last synchronization
        self._router_state_slots = [s for s in self._slots if s.name.startswith("router.expert_")]
        self._sync_weights()

    def _alias_tensors(self) -> list:
        """Copies the torch-initialized tensors into the C++ layer, then puts in their place tensors over its
        memory. The parameters are made to share the version counter of ``_version_source`` (a Parameter made
        from a tensor shares its counter, as detach() does, and ``set_`` points it at other memory keeping the
        counter), so one ``_version`` read per forward sees an in-place change to any of them; buffers keep their
        own. The owners' dicts become _WatchedDicts, which flag a replaced tensor."""
        slots = []
        self._slot_by_name = {}
        owners = {}
        for name in self._layer.tensor_names():
            owner_path, _, attr = name.rpartition(".")
            owner = self.get_submodule(owner_path) if owner_path else self
            owners[id(owner)] = owner
            tensor = getattr(owner, attr)
            view = torch.from_numpy(self._layer.tensor(name))
            shares_counter = None
            with torch.no_grad():
                view.copy_(tensor)
                if isinstance(tensor, nn.Parameter):
                    shares_counter = nn.Parameter(self._version_source, requires_grad=tensor.requires_grad)
                    shares_counter.set_(view)
                    owner._parameters[attr] = shares_counter
                else:
                    tensor.data = view
            slot = _Slot(name, owner, attr, view, shares_counter)
            slots.append(slot)
            self._slot_by_name[name] = slot
        for owner in owners.values():
            owner.__dict__["_parameters"] = _WatchedDict(owner._parameters, self._replaced)
            owner.__dict__["_buffers"] = _WatchedDict(owner._buffers, self._replaced)
        return slots

    def _tensor_dicts(self) -> list:
        """(the owner's _parameters or _buffers dict, attribute) per slot: dict look-ups, far cheaper than
        nn.Module.__getattr__."""
        return [(s.owner._parameters if s.attr in s.owner._parameters else s.owner._buffers, s.attr) for s in self._slots]

    def weights_changed(self) -> None:
        """Makes the next forward re-read every weight. Needed only after writes that bypass torch's version
        counter (``p.data.copy_(...)``, writes through numpy views); in-place ops on the parameters themselves,
        optimizers, ``load_state_dict`` and ``.to()`` are seen on their own."""
        if self._layer is not None:
            self._force_copy = True
            self._replaced[0] = True

    def _apply(self, *args, **kwargs):
        out = super()._apply(*args, **kwargs)  # .to(), .float(), .bfloat16(): may swap the tensors' data
        if self._layer is None:
            return out
        self._dicts = self._tensor_dicts()
        self._parameter_dicts = [self._dicts[self._slots.index(self._slot_by_name[n])]
                                 for n in self._layer.parameter_names()]
        self.weights_changed()
        return out

    def _weights_may_have_changed(self) -> bool:
        """The per-forward check, a few reads however many tensors the layer has: a tensor replaced, an in-place
        change to an aliasing parameter (their shared counter), or to a tensor with its own counter."""
        return (self._replaced[0] or self._version_source._version != self._seen_version
                or bool(self._watched) and any(t._version != v for t, v in self._watched))

    def _sync_weights(self) -> None:
        """Brings the C++ layer up to date with the torch tensors after a change: nothing to copy for the ones
        that alias it, a copy for the others that are new or changed, and a re-pack of the kernels' weights."""
        force, self._force_copy = self._force_copy, False
        self._replaced[0] = False
        watched = []
        for slot, (d, a) in zip(self._slots, self._dicts):
            t = d[a]
            version = t._version
            if t.data_ptr() != slot.view.data_ptr() or t.dtype != torch.float32:
                if force or t is not slot.tensor or version != slot.version:
                    if tuple(t.shape) != tuple(slot.view.shape):
                        raise ValueError(f"hymoe.torch: {slot.name} has shape {tuple(t.shape)}; the layer needs "
                                         f"{tuple(slot.view.shape)}")
                    with torch.no_grad():
                        slot.view.copy_(_as_f32(t, slot.name))
            if t is not slot.shares_counter:
                watched.append((t, version))
            slot.tensor, slot.version = t, version
        self._watched = watched
        self._parameters_now = [d[a] for d, a in self._parameter_dicts]
        self._seen_version = self._version_source._version
        self._layer.mark_weights_changed()

    def _copy_back_router_state(self) -> None:
        """A train forward of the sigmoid router moves expert_bias and expert_ema inside the layer; torch tensors
        that do not alias the layer get the new values (and that write is not taken for a change to copy in)."""
        copied = False
        for slot in self._router_state_slots:
            t = slot.tensor  # current: the forward synchronized first
            if t.data_ptr() == slot.view.data_ptr() and t.dtype == torch.float32:
                continue
            with torch.no_grad():
                t.copy_(slot.view)
            slot.version = t._version
            copied = True
        if copied:
            self._watched = [(t, t._version) for t, _ in self._watched]
            self._seen_version = self._version_source._version

    def _run_forward(self, x: torch.Tensor, train: bool):
        """(forward_id, y, aux_loss, z_loss) of the C++ forward; aux_loss, z_loss and expert_counts are also
        recorded on the router."""
        if self._weights_may_have_changed():
            self._sync_weights()
        router = self._modules["router"].__dict__
        step, max_steps = router.get("_step", 0), router.get("_max_steps", 1)
        fast = _torch_core.forward(self._layer_handle, x, train, step, max_steps) if _torch_core is not None else None
        if fast is not None:  # x was a float32 (batch, seq, dim) CPU tensor, read in place; y is a torch tensor
            forward_id, y, aux, z = fast
            counts = self._read_expert_counts
        elif x.dtype is _F32 and x.is_cpu and x.is_contiguous():  # read in place: the binding copies it in
            shape = x.shape
            if len(shape) != 3:
                raise ValueError(f"hymoe.torch: x must be (batch, seq_len, dim), got shape {tuple(shape)}")
            forward_id, y, aux, z, counts = self._layer.forward_at(x.data_ptr(), shape, train, step, max_steps)
            y = torch.from_numpy(y)
        else:
            if x.dim() != 3:
                raise ValueError(f"hymoe.torch: x must be (batch, seq_len, dim), got shape {tuple(x.shape)}")
            forward_id, y, aux, z, counts = self._layer.forward(_as_f32(x, "x").numpy(), train, step, max_steps)
            y = torch.from_numpy(y).to(x.dtype)
        if self._hymoe_router:  # plain attributes (no nn.Module.__setattr__), made tensors when read
            router["_aux_loss"], router["_z_loss"], router["_expert_counts"] = aux, z, counts
        else:  # KempnerForge's router keeps tensors in plain attributes
            router["aux_loss"], router["z_loss"] = torch.tensor(aux, dtype=_F32), torch.tensor(z, dtype=_F32)
            router["expert_counts"] = torch.from_numpy(counts() if callable(counts) else counts)
        if train and self._router_state_slots:
            self._copy_back_router_state()
        return forward_id, y, aux, z

    @property
    def aux_loss(self) -> torch.Tensor:
        return self.router.aux_loss

    @property
    def z_loss(self) -> torch.Tensor:
        return self.router.z_loss

    @property
    def expert_counts(self) -> torch.Tensor:
        return self.router.expert_counts

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x (batch, seq_len, dim) -> (batch, seq_len, dim), in x's dtype. In train mode with autograd on, y,
        ``aux_loss`` and ``z_loss`` are differentiable through hymoe's C++ backward."""
        if self.ep_group is not None or self.ep_world_size > 1:  # apply_expert_parallel (hymoe's or KempnerForge's)
            return self._expert_parallel_forward(x)
        if self._layer is None:
            return self._torch_forward(x)
        if self.training and torch.is_grad_enabled():
            # Through the autograd Function even when nothing requires grad (it then records no graph): asking
            # each of the parameters would cost more than the Function's own look at them.
            if self._weights_may_have_changed():
                self._sync_weights()  # so that _parameters_now is current
            y, aux, z = _MoEFunction.apply(self, x, *self._parameters_now)
            self.router.aux_loss, self.router.z_loss = aux, z
            return y
        return self._run_forward(x, self.training)[1]

    def _expert_parallel_forward(self, x: torch.Tensor) -> torch.Tensor:
        """KempnerForge's forward under expert parallelism: this rank's tokens routed here (the router module in
        torch, its losses and counts of this rank's tokens, as KempnerForge keeps them), capacity applied to them,
        the routed experts computed wherever they live and the shared expert here, both by hymoe's grouped
        kernels (hymoe.expert_parallel)."""
        from hymoe.expert_parallel import ep_dispatch_and_compute, shared_expert_forward

        if self.ep_group is None:
            raise ValueError(f"hymoe.torch: ep_world_size={self.ep_world_size} but ep_group is None; set both with "
                             "hymoe.torch.apply_expert_parallel")
        B, L, D = x.shape
        x_flat = x.reshape(B * L, D)
        if self._config is not None and _NATIVE_ROUTERS.get(_native_class(self.router, _NATIVE_ROUTERS) or ""):
            weights, indices = _route_in_cpp(self, x_flat)
        else:
            weights, indices = self.router(x_flat)
        if self.capacity_factor > 0:
            weights, indices = _apply_capacity(weights, indices, self.num_experts, self.capacity_factor)
        out = ep_dispatch_and_compute(x_flat, weights, indices, self, self.ep_group, self.local_expert_start,
                                      self.num_local_experts, self.ep_world_size, gradient_scale=self.gradient_scale)
        if self.shared_expert is not None:
            out = out + shared_expert_forward(self, x_flat)
        return out.view(B, L, D)

    def _apply_packed_expert(self, x: torch.Tensor, i: int) -> torch.Tensor:
        """Packed expert ``i`` on rows x in torch ops (KempnerForge's helper of the same name)."""
        up = x @ self.up_w[i]
        mid = F.silu(x @ self.gate_w[i]) * up if self._is_swiglu else self._packed_activation(up)
        return mid @ self.down_w[i]

    def _torch_forward(self, x: torch.Tensor) -> torch.Tensor:
        """KempnerForge's forward in torch, by the modules themselves (routers and experts the C++ layer does not
        compute): route, drop over capacity, run each expert on its tokens, combine, add the shared expert."""
        B, L, D = x.shape
        x_flat = x.reshape(B * L, D)
        weights, indices = self.router(x_flat)
        if self.capacity_factor > 0:
            weights, indices = _apply_capacity(weights, indices, self.num_experts, self.capacity_factor)
        out = torch.zeros_like(x_flat)
        scale_loads = self.gradient_scale and self.training
        avg = x_flat.shape[0] * indices.shape[1] / max(self.num_experts, 1)
        for e in range(self.num_experts):
            hit = indices == e  # (tokens, top_k)
            rows = hit.any(dim=-1)
            if not rows.any():
                continue
            h = self._apply_packed_expert(x_flat[rows], e) if self.packed_experts else self.experts[e](x_flat[rows])
            if scale_loads:
                h = h * (avg / hit.sum().detach().float().clamp(min=1.0))
            w = (weights * hit.to(weights.dtype)).sum(dim=-1)
            out[rows] += w[rows].unsqueeze(-1) * h
        if self.shared_expert is not None:
            out = out + self.shared_expert(x_flat)
        return out.view(B, L, D)

    def saved_for_backward_bytes(self) -> int:
        """Bytes the last train forward keeps for its backward (docs/training.md); 0 for a layer run in torch."""
        return 0 if self._layer is None else self._layer.saved_for_backward_bytes()

    def extra_repr(self) -> str:
        c = self._config
        if c is None:
            return f"backend=torch ({self.native_reason})"
        return (f"dim={c['dim']}, hidden_dim={c['hidden_dim']}, num_experts={c['num_experts']}, top_k={c['top_k']}, "
                f"activation={c['activation']!r}, router_type={c['router_type']!r}, backend=hymoe")


def build_moe(
    dim: int,
    hidden_dim: int,
    num_experts: int,
    top_k: int,
    activation: str = "silu",
    router_type: str = "softmax_topk",
    shared_experts: int = 0,
    capacity_factor: float = 0.0,
    gradient_scale: bool = False,
    sequence_aux_loss_weight: float = 0.0,
    bias_schedule: str = "constant",
    packed_experts: bool = False,
) -> MoEMLP:
    """KempnerForge's ``build_moe``: the same arguments, defaults and module (weights drawn from torch's generator
    in KempnerForge's order, so a seed gives KempnerForge's initial weights). Invalid arguments raise ValueError
    naming the argument and the allowed values."""
    config = {
        "dim": dim, "hidden_dim": hidden_dim, "num_experts": num_experts, "top_k": top_k,
        "activation": activation, "router_type": router_type, "shared_experts": shared_experts,
        "capacity_factor": capacity_factor, "gradient_scale": gradient_scale,
        "sequence_aux_loss_weight": sequence_aux_loss_weight, "bias_schedule": bias_schedule,
        "packed_experts": packed_experts,
    }
    _validate(config)
    reg = _component_registry()
    try:
        router_builder = reg.get("router", router_type)
        mlp_builder = reg.get("mlp", _ACTIVATION_TO_MLP.get(activation, activation))
    except KeyError as e:
        raise ValueError(f"build_moe: {e.args[0]}") from None
    router_kwargs = {}
    if router_type == "sigmoid_topk":
        router_kwargs = {"sequence_aux_loss_weight": sequence_aux_loss_weight, "bias_schedule": bias_schedule}
    router = router_builder(dim, num_experts, top_k, **router_kwargs)
    experts = nn.ModuleList([mlp_builder(dim, hidden_dim) for _ in range(num_experts)])
    shared_expert = mlp_builder(dim, hidden_dim) if shared_experts > 0 else None
    return MoEMLP(router, experts, shared_expert, capacity_factor=capacity_factor, gradient_scale=gradient_scale,
                  packed_experts=packed_experts)


def _validate(config: dict) -> None:
    """The checks torch would trip over before the C++ layer sees the configuration (which checks the rest)."""
    for key in ("dim", "hidden_dim", "num_experts", "top_k", "shared_experts"):
        v = config[key]
        if isinstance(v, bool) or not isinstance(v, int):
            raise TypeError(f"build_moe: {key} must be an int, got {type(v).__name__} {v!r}")
    for key in ("dim", "hidden_dim", "num_experts", "top_k"):
        if config[key] <= 0:
            raise ValueError(f"build_moe: {key}={config[key]} must be positive")
    if config["top_k"] > config["num_experts"]:
        raise ValueError(f"build_moe: top_k={config['top_k']} exceeds num_experts={config['num_experts']}")
    reg = _component_registry()
    mlp_key = _ACTIVATION_TO_MLP.get(config["activation"], config["activation"])
    if mlp_key not in reg.list("mlp"):
        raise ValueError(f"build_moe: activation={config['activation']!r} is not one of silu, gelu, relu or an "
                         f"'mlp' registry entry ({', '.join(reg.list('mlp'))})")
    if config["router_type"] not in reg.list("router"):
        raise ValueError(f"build_moe: router_type={config['router_type']!r} is not a 'router' registry entry "
                         f"({', '.join(reg.list('router'))})")
    if config["router_type"] == "sigmoid_topk" and config["bias_schedule"] not in _BIAS_SCHEDULES:
        raise ValueError(f"build_moe: bias_schedule={config['bias_schedule']!r} is not one of "
                         f"{', '.join(_BIAS_SCHEDULES)}")


# ---- KempnerForge's expert helpers, run by hymoe's grouped expert kernels ----


def _grouped_reference(x_sorted, counts, mats, activation, packed):
    """The helpers' function in torch ops: expert e's MLP on its rows. mats[e] = (gate or None, up, down) as
    nn.Linear (out, in) weights, or packed (in, out) slices. The backward of _GroupedExperts differentiates this."""
    act = _MLP_ACTIVATIONS[activation]
    outs, offset = [], 0
    for (gate, up, down), n in zip(mats, counts):
        h = x_sorted[offset:offset + n]
        offset += n
        if n == 0:
            continue
        if packed:
            mid = F.silu(h @ gate) * (h @ up) if gate is not None else act(h @ up)
            outs.append(mid @ down)
        else:
            mid = F.silu(F.linear(h, gate)) * F.linear(h, up) if gate is not None else act(F.linear(h, up))
            outs.append(F.linear(mid, down))
    return torch.cat(outs) if outs else torch.zeros_like(x_sorted)


class _GroupedExperts(torch.autograd.Function):
    """y = the grouped expert MLPs of x_sorted, computed by hymoe's C++ kernels. The bindings have no backward
    for these kernels, so backward recomputes the experts' forward in torch ops on the saved inputs and takes
    torch's gradient of it (exact for that function; hymoe's forward agrees with it to float32 rounding). Every
    weight gets a gradient, zeros for an expert with no row, as KempnerForge's stacked grouped GEMM gives."""

    @staticmethod
    def forward(ctx, run, counts, activation, packed, n_per_expert, x_sorted, *weights):
        ctx.counts, ctx.activation, ctx.packed, ctx.n_per_expert = counts, activation, packed, n_per_expert
        ctx.save_for_backward(x_sorted, *weights)
        return run()

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_y):
        x_sorted, *weights = ctx.saved_tensors
        inputs = [t.detach().requires_grad_(need) for t, need in zip([x_sorted] + weights, ctx.needs_input_grad[5:])]
        wanted = [t for t in inputs if t.requires_grad]
        grads = {}
        if wanted:
            with torch.enable_grad():
                mats = _expert_mats(inputs[1:], ctx.n_per_expert, ctx.packed, len(ctx.counts))
                y = _grouped_reference(inputs[0], ctx.counts, mats, ctx.activation, ctx.packed)
                # With no rows at all y is a constant (zeros), and every gradient is zero.
                got = (torch.autograd.grad(y, wanted, grad_y.to(y.dtype), allow_unused=True) if y.requires_grad
                       else [None] * len(wanted))
            grads = {id(t): torch.zeros_like(t) if g is None else g for t, g in zip(wanted, got)}
        return (None,) * 5 + tuple(grads.get(id(t)) for t in inputs)


def _expert_mats(weights, n_per_expert, packed, num_experts):
    """(gate or None, up, down) per expert from the flat weight list _GroupedExperts takes."""
    if packed:  # weights = [up_w, down_w] or [up_w, down_w, gate_w], each (E, in, out)
        up, down = weights[0], weights[1]
        gate = weights[2] if len(weights) == 3 else None
        return [(None if gate is None else gate[e], up[e], down[e]) for e in range(num_experts)]
    mats = []
    for e in range(num_experts):  # weights = per expert [gate,] up, down
        w = weights[e * n_per_expert:(e + 1) * n_per_expert]
        mats.append((w[0], w[1], w[2]) if n_per_expert == 3 else (None, w[0], w[1]))
    return mats


def _check_counts(counts, rows: int, who: str) -> list:
    counts = [int(c) for c in counts]
    if any(c < 0 for c in counts) or sum(counts) != rows:
        raise ValueError(f"hymoe.torch.{who}: tokens_per_expert {counts} must be non-negative and sum to the "
                         f"{rows} rows of x_sorted")
    return counts


def grouped_expert_forward(x_sorted: torch.Tensor, tokens_per_expert: list[int], experts: nn.ModuleList) -> torch.Tensor:
    """KempnerForge's ``grouped_expert_forward``: experts[e] on rows [offset_e, offset_e + tokens_per_expert[e])
    of x_sorted (total_tokens, dim); returns (total_tokens, dim) in the same order, differentiable in x_sorted
    and every expert weight."""
    swiglu = hasattr(experts[0], "gate_proj")
    activation = "silu" if swiglu else _activation_name(experts[0]._activation)
    names = ("gate_proj", "up_proj", "down_proj") if swiglu else ("up_proj", "down_proj")
    weights = [getattr(e, n).weight for e in experts for n in names]
    counts = _check_counts(tokens_per_expert, x_sorted.shape[0], "grouped_expert_forward")

    def run():
        mats = [(_np_f32(_as_f32(e.gate_proj.weight, "gate_proj")) if swiglu else None,
                 _np_f32(_as_f32(e.up_proj.weight, "up_proj")), _np_f32(_as_f32(e.down_proj.weight, "down_proj")))
                for e in experts]
        y = _core.moe_grouped_expert_forward(_np_f32(_as_f32(x_sorted, "x_sorted")), counts, mats, activation)
        return torch.from_numpy(y).to(x_sorted.dtype)

    return _GroupedExperts.apply(run, counts, activation, False, len(names), x_sorted, *weights)


def grouped_expert_forward_packed(x_sorted: torch.Tensor, tokens_per_expert: list[int], up_w: torch.Tensor,
                                  down_w: torch.Tensor, gate_w: torch.Tensor | None, activation) -> torch.Tensor:
    """KempnerForge's ``grouped_expert_forward_packed`` over (E, in, out) weights; SwiGLU when gate_w is given
    (activation is then ignored, as there), else ``activation`` (F.gelu / F.relu / F.silu or its name).
    Differentiable in x_sorted, up_w, down_w and gate_w."""
    name = "silu" if gate_w is not None else _activation_name(activation)
    counts = _check_counts(tokens_per_expert, x_sorted.shape[0], "grouped_expert_forward_packed")

    def run():
        y = _core.moe_grouped_expert_forward_packed(
            _np_f32(_as_f32(x_sorted, "x_sorted")), counts,
            _np_f32(_as_f32(up_w, "up_w")), _np_f32(_as_f32(down_w, "down_w")),
            None if gate_w is None else _np_f32(_as_f32(gate_w, "gate_w")), name)
        return torch.from_numpy(y).to(x_sorted.dtype)

    weights = [up_w, down_w] + ([] if gate_w is None else [gate_w])
    return _GroupedExperts.apply(run, counts, name, True, 0, x_sorted, *weights)


def _no_grad_needed(who: str, *tensors) -> None:
    if torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors):
        raise RuntimeError(f"hymoe.torch.{who} runs hymoe's C++ kernels and is forward-only; call it under "
                           "torch.no_grad() (the MoE layer itself is differentiable)")


def scale_by_expert_load(expert_out: torch.Tensor, tokens_per_expert: list[int], num_experts: int) -> torch.Tensor:
    """The gradient-scale rule of MoEMLP in train mode: each expert's rows of expert_out (sorted by expert) times
    avg / max(count, 1), avg = total rows / num_experts."""
    _no_grad_needed("scale_by_expert_load", expert_out)
    y = _core.moe_scale_by_expert_load(_np_f32(_as_f32(expert_out, "expert_out")), [int(c) for c in tokens_per_expert],
                                   int(num_experts))
    return torch.from_numpy(y).to(expert_out.dtype)


# ---- Released checkpoints ----


class HfMoELayer(nn.Module):
    """One MoE layer of a Hugging Face model directory, run as transformers runs it (inference only: the weights
    stay in the C++ layer in their stored precision and are not torch parameters)."""

    def __init__(self, layer) -> None:
        super().__init__()
        self._layer = layer
        self.family = layer.family
        self.dim = layer.dim
        self.num_experts = layer.num_experts
        self.top_k = layer.top_k
        self.expert_counts = torch.zeros(layer.num_experts)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() != 3:
            raise ValueError(f"hymoe.torch: x must be (batch, seq_len, dim), got shape {tuple(x.shape)}")
        if torch.is_grad_enabled() and x.requires_grad:
            raise RuntimeError("hymoe.torch: a layer from load_moe_layer is inference-only; call it under "
                               "torch.no_grad() or on a tensor that does not require grad")
        y, counts = self._layer.forward(_np_f32(_as_f32(x, "x")))
        self.expert_counts = torch.from_numpy(counts)
        return torch.from_numpy(y).to(x.dtype)

    def extra_repr(self) -> str:
        return (f"family={self.family!r}, layer={self._layer.layer}, dim={self.dim}, num_experts={self.num_experts}, "
                f"top_k={self.top_k}")


def apply_expert_parallel(model: nn.Module, device_mesh_or_group, replicas=None) -> int:
    """KempnerForge's ``apply_expert_parallel`` for hymoe's MoE layers (hymoe.expert_parallel, docs/distributed.md):
    each MoEMLP keeps its rank's contiguous slice of experts, or the slots of a replica plan, and exchanges tokens
    with the other ranks."""
    from hymoe.expert_parallel import apply_expert_parallel as apply

    return apply(model, device_mesh_or_group, replicas)


def rebalance_expert_parallel(model: nn.Module, replicas) -> int:
    """Moves a model placed with replicas to a re-balanced plan (hymoe.expert_parallel.rebalance_expert_parallel)."""
    from hymoe.expert_parallel import rebalance_expert_parallel as rebalance

    return rebalance(model, replicas)


def load_moe_layer(model_dir, layer: int) -> HfMoELayer:
    """MoE layer ``layer`` of the Hugging Face model directory ``model_dir`` (config.json and safetensors, as
    downloaded; docs/models.md lists the families and formats)."""
    return HfMoELayer(_core.moe_load_model_layer(str(model_dir), int(layer)))
