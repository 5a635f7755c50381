"""A pytest plugin (``-p kempnerforge_on_cpu``, loaded by scripts/run_kempnerforge_tests.sh when NPROC is set) that
runs KempnerForge's distributed tests, written for CUDA devices and NCCL, on CPU processes over gloo: nothing in
the checkout is changed; the names its tests reach for CUDA are pointed at the CPU here.

- ``init_device_mesh("cuda", ...)`` builds a CPU mesh; ``Module.cuda()`` and ``Tensor.cuda()`` leave things where
  they are; ``device="cuda"`` in torch's factory functions (``randint``, ``randn``, ...) means the CPU;
- ``kempnerforge.distributed.setup.init_distributed`` finds the process group already made, with gloo, and
  ``torch.cuda.set_device`` does nothing.

It is loaded after ``kempnerforge_alias`` so KempnerForge's MoE module is hymoe.torch. Needs torch >= 2.2
(``torch.distributed.device_mesh``), as KempnerForge does."""

import torch
import torch.distributed as dist

try:
    from torch.distributed import device_mesh as _device_mesh
except ImportError as e:  # torch < 2.2
    raise ImportError(f"kempnerforge_on_cpu needs torch.distributed.device_mesh (torch >= 2.2); this is torch "
                      f"{torch.__version__}") from e


def _cpu(device):
    if isinstance(device, str) and device.startswith("cuda"):
        return "cpu"
    if isinstance(device, torch.device) and device.type == "cuda":
        return torch.device("cpu")
    return device


_init_device_mesh = _device_mesh.init_device_mesh
_device_mesh.init_device_mesh = lambda device_type, *args, **kwargs: _init_device_mesh(
    _cpu(device_type), *args, **kwargs)
torch.nn.Module.cuda = lambda self, device=None: self
torch.Tensor.cuda = lambda self, *args, **kwargs: self
torch.cuda.set_device = lambda device: None


def _on_cpu(factory):
    def make(*args, **kwargs):
        if "device" in kwargs:
            kwargs["device"] = _cpu(kwargs["device"])
        return factory(*args, **kwargs)

    return make


for _name in ("randint", "randn", "rand", "zeros", "ones", "empty", "tensor", "arange", "full"):
    setattr(torch, _name, _on_cpu(getattr(torch, _name)))

import kempnerforge.distributed.setup as _setup  # noqa: E402  (after the patches: it binds init_device_mesh)

_init_distributed = _setup.init_distributed


def _init_distributed_on_gloo(config, seed=42):
    if not dist.is_initialized():
        dist.init_process_group("gloo")
    return _init_distributed(config, seed)


_setup.init_distributed = _init_distributed_on_gloo
