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
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from hymoe import _core

import importlib.util as _importlib_util

try:  # built where PyTorch's C++ headers were found (python/CMakeLists.txt)
    from hymoe import _torch_core
except ImportError as e:
    _torch_core = None
    # Not built (pip's isolated build, no PyTorch headers) is normal and silent; a module that is there but does
    # not load (built against another PyTorch than the one now installed) is worth a warning.
    if _importlib_util.find_spec("hymoe._torch_core") is not None:
        import warnings

        warnings.warn(f"hymoe.torch: hymoe._torch_core does not load with torch {torch.__version__} ({e}); float32 "
                      "forwards take the slower numpy-based path. Rebuild hymoe against this PyTorch.")

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
]

_MLP_ACTIVATIONS = {"gelu": F.gelu, "relu": F.relu, "silu": F.silu}


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

    def __init__(self, dim: int, num_experts: int, top_k: int, sequence_aux_loss_weight: float = 0.0,
                 bias_schedule: str = "constant") -> None:
        super().__init__(dim, num_experts, top_k)
        self.bias_update_rate = 0.001
        self.ema_decay = 0.99
        self.sequence_aux_loss_weight = sequence_aux_loss_weight
        self.bias_schedule = bias_schedule
        self.expert_bias = nn.Parameter(torch.zeros(num_experts))
        self.register_buffer("expert_ema", torch.ones(num_experts) / num_experts)


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


_F32 = torch.float32


def _as_f32(t: torch.Tensor, what: str) -> torch.Tensor:
    if t.device.type != "cpu":
        raise ValueError(f"hymoe.torch: {what} is on {t.device}; hymoe runs on the CPU (move it with .cpu())")
    if not t.is_floating_point():
        raise TypeError(f"hymoe.torch: {what} has dtype {t.dtype}; expected a floating dtype (float32 or bfloat16)")
    return t.detach().to(torch.float32).contiguous()


def _np_f32(t: torch.Tensor) -> np.ndarray:
    return t.numpy()


class _MoEFunction(torch.autograd.Function):
    """y, aux_loss, z_loss = layer(x); backward = hymoe's MoELayer::backward on the layer's saved state."""

    @staticmethod
    def forward(ctx, module: "MoEMLP", x: torch.Tensor, *params: torch.Tensor):
        forward_id, y = module._run_forward(x, train=True)
        ctx.module = module
        ctx.forward_id = forward_id
        ctx.x_dtype = x.dtype
        ctx.params = params  # their dtypes are read in backward, for the gradients that are needed
        router = module.router
        return y, torch.scalar_tensor(router._aux_loss), torch.scalar_tensor(router._z_loss)

    @staticmethod
    def backward(ctx, grad_y: torch.Tensor, grad_aux: torch.Tensor, grad_z: torch.Tensor):
        layer = ctx.module._layer
        gy = _as_f32(grad_y, "grad of y")
        grad_x, grads = layer.backward(ctx.forward_id, _np_f32(gy), float(grad_aux), float(grad_z))
        out = [None, torch.from_numpy(grad_x).to(ctx.x_dtype)]
        for g, p, needed in zip(grads, ctx.params, ctx.needs_input_grad[2:]):
            out.append(torch.from_numpy(g).to(p.dtype) if needed and g is not None else None)
        return tuple(out)


class MoEMLP(nn.Module):
    """KempnerForge's ``MoEMLP`` backed by hymoe's C++ layer. Build it with :func:`build_moe`."""

    def __init__(self, config: dict, router: nn.Module, experts: nn.ModuleList, shared_expert: nn.Module | None):
        super().__init__()
        self.router = router
        self.shared_expert = shared_expert
        self.num_experts = len(experts)
        self.capacity_factor = config["capacity_factor"]
        self.gradient_scale = config["gradient_scale"]
        self.packed_experts = config["packed_experts"]
        self.ep_world_size = 1
        self.ep_group = None
        self.local_expert_start = 0
        self.num_local_experts = len(experts)
        self._config = dict(config)
        self._is_swiglu = config["activation"] == "silu"
        if self.packed_experts:
            # KempnerForge's packing: each expert's (out, in) Linear weights transposed and stacked to (E, in, out).
            self.up_w = nn.Parameter(torch.stack([e.up_proj.weight.t().contiguous() for e in experts]))
            self.down_w = nn.Parameter(torch.stack([e.down_proj.weight.t().contiguous() for e in experts]))
            if self._is_swiglu:
                self.gate_w = nn.Parameter(torch.stack([e.gate_proj.weight.t().contiguous() for e in experts]))
                self._packed_activation = F.silu
            else:
                self._packed_activation = experts[0]._activation
        else:
            self.experts = experts
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
        self._force_copy = True
        self._replaced[0] = True

    def _apply(self, *args, **kwargs):
        out = super()._apply(*args, **kwargs)  # .to(), .float(), .bfloat16(): may swap the tensors' data
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
        """(forward_id, y) of the C++ forward; aux_loss, z_loss and expert_counts are recorded on the router."""
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
        # Plain attributes (no nn.Module.__setattr__), made tensors when read.
        router["_aux_loss"], router["_z_loss"], router["_expert_counts"] = aux, z, counts
        if train and self._router_state_slots:
            self._copy_back_router_state()
        return forward_id, y

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
        if self.training and torch.is_grad_enabled():
            # Through the autograd Function even when nothing requires grad (it then records no graph): asking
            # each of the parameters would cost more than the Function's own look at them.
            if self._weights_may_have_changed():
                self._sync_weights()  # so that _parameters_now is current
            y, aux, z = _MoEFunction.apply(self, x, *self._parameters_now)
            self.router.aux_loss, self.router.z_loss = aux, z
            return y
        return self._run_forward(x, self.training)[1]

    def saved_for_backward_bytes(self) -> int:
        """Bytes the last train forward keeps for its backward (docs/training.md)."""
        return self._layer.saved_for_backward_bytes()

    def extra_repr(self) -> str:
        c = self._config
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
    if router_type == "sigmoid_topk":
        router = SigmoidTopKRouter(dim, num_experts, top_k, sequence_aux_loss_weight, bias_schedule)
    else:
        router = SoftmaxTopKRouter(dim, num_experts, top_k)
    experts = nn.ModuleList([_build_mlp(dim, hidden_dim, activation) for _ in range(num_experts)])
    shared_expert = _build_mlp(dim, hidden_dim, activation) if shared_experts > 0 else None
    return MoEMLP(config, router, experts, shared_expert)


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
    if config["activation"] not in _MLP_ACTIVATIONS:
        raise ValueError(f"build_moe: activation={config['activation']!r} is not one of silu, gelu, relu")
    if config["router_type"] not in ("softmax_topk", "sigmoid_topk"):
        raise ValueError(f"build_moe: router_type={config['router_type']!r} is not one of softmax_topk, sigmoid_topk")


# ---- KempnerForge's expert helpers, run by hymoe's grouped expert kernels (forward only) ----


def _no_grad_needed(who: str, *tensors) -> None:
    if torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors):
        raise RuntimeError(f"hymoe.torch.{who} runs hymoe's C++ kernels and is forward-only; call it under "
                           "torch.no_grad() (the MoE layer itself is differentiable)")


def _activation_name(activation) -> str:
    if isinstance(activation, str):
        return activation
    for name, fn in _MLP_ACTIVATIONS.items():
        if activation is fn:
            return name
    raise ValueError(f"hymoe.torch: activation {activation!r} is not one of F.silu, F.gelu, F.relu")


def grouped_expert_forward(x_sorted: torch.Tensor, tokens_per_expert: list[int], experts: nn.ModuleList) -> torch.Tensor:
    """KempnerForge's ``grouped_expert_forward``: experts[e] on rows [offset_e, offset_e + tokens_per_expert[e])
    of x_sorted (total_tokens, dim); returns (total_tokens, dim) in the same order."""
    weights = [w for e in experts for w in e.parameters()]
    _no_grad_needed("grouped_expert_forward", x_sorted, *weights)
    swiglu = hasattr(experts[0], "gate_proj")
    activation = "silu" if swiglu else _activation_name(experts[0]._activation)
    mats = [(_np_f32(_as_f32(e.gate_proj.weight, "gate_proj")) if swiglu else None,
             _np_f32(_as_f32(e.up_proj.weight, "up_proj")), _np_f32(_as_f32(e.down_proj.weight, "down_proj")))
            for e in experts]
    y = _core.moe_grouped_expert_forward(_np_f32(_as_f32(x_sorted, "x_sorted")), [int(c) for c in tokens_per_expert],
                                     mats, activation)
    return torch.from_numpy(y).to(x_sorted.dtype)


def grouped_expert_forward_packed(x_sorted: torch.Tensor, tokens_per_expert: list[int], up_w: torch.Tensor,
                                  down_w: torch.Tensor, gate_w: torch.Tensor | None, activation) -> torch.Tensor:
    """KempnerForge's ``grouped_expert_forward_packed`` over (E, in, out) weights; SwiGLU when gate_w is given
    (activation is then ignored, as there), else ``activation`` (F.gelu / F.relu / F.silu or its name)."""
    _no_grad_needed("grouped_expert_forward_packed", x_sorted, up_w, down_w, gate_w)
    name = "silu" if gate_w is not None else _activation_name(activation)
    y = _core.moe_grouped_expert_forward_packed(
        _np_f32(_as_f32(x_sorted, "x_sorted")), [int(c) for c in tokens_per_expert],
        _np_f32(_as_f32(up_w, "up_w")), _np_f32(_as_f32(down_w, "down_w")),
        None if gate_w is None else _np_f32(_as_f32(gate_w, "gate_w")), name)
    return torch.from_numpy(y).to(x_sorted.dtype)


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


def load_moe_layer(model_dir, layer: int) -> HfMoELayer:
    """MoE layer ``layer`` of the Hugging Face model directory ``model_dir`` (config.json and safetensors, as
    downloaded; docs/models.md lists the families and formats)."""
    return HfMoELayer(_core.moe_load_model_layer(str(model_dir), int(layer)))
