"""Which modules hymoe's C++ code computes, and the tensor conversions every torch-facing module uses. A module of
its own so hymoe.torch (the layer) and hymoe.expert_parallel (which hymoe.torch calls) can share them without
importing each other."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

_MLP_ACTIVATIONS = {"gelu": F.gelu, "relu": F.relu, "silu": F.silu}

_F32 = torch.float32


def _as_f32(t: torch.Tensor, what: str) -> torch.Tensor:
    if t.device.type != "cpu":
        raise ValueError(f"hymoe.torch: {what} is on {t.device}; hymoe runs on the CPU (move it with .cpu())")
    if not t.is_floating_point():
        raise TypeError(f"hymoe.torch: {what} has dtype {t.dtype}; expected a floating dtype (float32 or bfloat16)")
    return t.detach().to(torch.float32).contiguous()


def _np_f32(t: torch.Tensor) -> np.ndarray:
    return t.numpy()


# The router and expert classes whose forward the C++ layer computes: hymoe's own and KempnerForge's (matched by
# module and class name, so KempnerForge need not be importable). Any other class (a subclass with its own forward,
# a module from a registry entry a user added) makes the layer run in torch, calling the modules themselves.
_NATIVE_MODULES = ("hymoe.torch", "kempnerforge.model.router", "kempnerforge.model.mlp")
_NATIVE_ROUTERS = {"SoftmaxTopKRouter": "softmax_topk", "SigmoidTopKRouter": "sigmoid_topk"}
_NATIVE_MLPS = ("SwiGLUMLP", "StandardMLP")
# The sigmoid router's constants the C++ layer has built in (src/moe/bias_schedule.cc, sigmoid_router.cc).
_NATIVE_BIAS_UPDATE_RATE, _NATIVE_EMA_DECAY = 0.001, 0.99


def _native_class(module: nn.Module, names) -> str | None:
    """The class name when ``module``'s forward is the one of hymoe's or KempnerForge's class of that name."""
    forward = type(module).forward
    name = forward.__qualname__.partition(".")[0]
    if name in names and forward.__module__ in _NATIVE_MODULES and type(module).__name__ == name:
        return name
    return None


def _plain_linear(m, shape=None) -> bool:
    return isinstance(m, nn.Linear) and m.bias is None and (shape is None or tuple(m.weight.shape) == shape)


def _mlp_kind(e: nn.Module, dim: int, hidden: int | None):
    """(activation, hidden_dim) of an expert the C++ kernels run, or None."""
    name = _native_class(e, _NATIVE_MLPS)
    if name is None or not _plain_linear(getattr(e, "up_proj", None)):
        return None
    h = e.up_proj.weight.shape[0] if hidden is None else hidden
    if not (_plain_linear(e.up_proj, (h, dim)) and _plain_linear(getattr(e, "down_proj", None), (dim, h))):
        return None
    if name == "SwiGLUMLP":
        return ("silu", h) if _plain_linear(getattr(e, "gate_proj", None), (h, dim)) else None
    fn = getattr(e, "_activation", None)
    act = next((n for n, f in _MLP_ACTIVATIONS.items() if f is fn), None)
    return None if act is None or hasattr(e, "gate_proj") else (act, h)


def _activation_name(activation) -> str:
    if isinstance(activation, str):
        return activation
    for name, fn in _MLP_ACTIVATIONS.items():
        if activation is fn:
            return name
    raise ValueError(f"hymoe.torch: activation {activation!r} is not one of F.silu, F.gelu, F.relu")
