"""How arrays cross into hymoe._core and back (docs/python.md, "Arrays").

numpy arrays go in as they are; a torch tensor on the CPU goes in as a numpy view of its memory (no copy); results
come back as numpy arrays that own the C++ buffer, or, when the caller passed torch, as torch tensors sharing that
memory (torch.from_numpy, no copy). torch is imported only when a torch tensor is passed in."""

import sys

import numpy as np


def is_torch_tensor(value):
    """Whether `value` is a torch.Tensor, without importing torch when the caller has not."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(value, torch.Tensor)


def torch_to_numpy(tensor, name):
    """A CPU torch tensor as a numpy array over the same memory. bfloat16 (which numpy lacks) is widened to
    float32, a copy; tensors on other devices raise ValueError naming `name` and the device."""
    if tensor.device.type != "cpu":
        raise ValueError(f"{name} must be on the CPU, got a tensor on {tensor.device}")
    tensor = tensor.detach()
    if tensor.dtype is sys.modules["torch"].bfloat16:
        tensor = tensor.float()
    return tensor.numpy()


def as_numpy(value, name):
    """(numpy array, came_from_torch) for a torch tensor or numpy array; anything else raises TypeError."""
    if is_torch_tensor(value):
        return torch_to_numpy(value, name), True
    if isinstance(value, np.ndarray):
        return value, False
    raise TypeError(f"{name} must be a torch.Tensor or numpy.ndarray, got {type(value).__name__}")


def like_input(array, as_torch):
    """A result in the caller's kind: the numpy array itself, or a torch tensor over its memory."""
    if not as_torch:
        return array
    import torch

    return torch.from_numpy(array)
