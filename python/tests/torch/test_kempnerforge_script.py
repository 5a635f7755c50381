"""scripts/run_kempnerforge_tests.sh against a stand-in checkout made here (CI fetches nothing): KempnerForge's
tests see hymoe.torch as kempnerforge.model.moe, imported both ways, and the rest of the package as it is."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
import hymoe  # noqa: E402

REPO = Path(__file__).resolve().parents[3]

STAND_IN_TEST = '''
import kempnerforge.model
import kempnerforge.model.moe as moe_module
from kempnerforge.model.moe import MoEMLP, build_moe
import hymoe.torch


def test_the_module_is_hymoe():
    assert moe_module is hymoe.torch and kempnerforge.model.moe is hymoe.torch
    assert MoEMLP is hymoe.torch.MoEMLP and kempnerforge.model.OWN_CODE


def test_a_layer_builds_and_runs():
    import torch
    m = build_moe(8, 12, 4, 2)
    assert m(torch.randn(1, 3, 8)).shape == (1, 3, 8)
'''


def test_the_script_runs_a_checkouts_tests_against_hymoe(tmp_path):
    ext = [Path(d).resolve() for d in hymoe.__path__ if any(Path(d).glob("_core*.so"))]
    if not ext:
        pytest.skip("no built hymoe._core beside the package")
    kf = tmp_path / "checkout"
    (kf / "kempnerforge" / "model").mkdir(parents=True)
    (kf / "tests" / "unit").mkdir(parents=True)
    (kf / "kempnerforge" / "__init__.py").write_text("")
    # A moe.py that must never be imported: the alias takes the name first.
    (kf / "kempnerforge" / "model" / "moe.py").write_text("raise ImportError('the real moe.py was imported')\n")
    (kf / "kempnerforge" / "model" / "__init__.py").write_text("OWN_CODE = True\n")
    (kf / "tests" / "unit" / "test_moe.py").write_text(STAND_IN_TEST)
    env = dict(os.environ, PYTHON=sys.executable, HYMOE_EXTENSION_DIR=str(ext[0]))
    r = subprocess.run(["bash", str(REPO / "scripts" / "run_kempnerforge_tests.sh"), str(kf)], env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "2 passed" in r.stdout, r.stdout
    assert "1 MoE layers built on hymoe's C++ layer, 0 run in torch" in r.stdout, r.stdout
    bad = subprocess.run(["bash", str(REPO / "scripts" / "run_kempnerforge_tests.sh"), str(tmp_path)], env=env,
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "usage" in bad.stderr


# KempnerForge's distributed tests as written for CUDA (init_device_mesh("cuda"), .cuda(), device="cuda",
# init_distributed with NCCL), in a stand-in checkout: NPROC=2 must run them on two CPU ranks over gloo, with
# hymoe's expert parallelism underneath.
STAND_IN_SETUP = '''
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh


def init_distributed(config, seed=42):
    assert dist.is_initialized(), "the plugin makes the gloo group first"
    return init_device_mesh("cuda", (dist.get_world_size(),), mesh_dim_names=("ep",))
'''

STAND_IN_EP_TEST = '''
import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh

from kempnerforge.distributed.setup import init_distributed
from kempnerforge.model.moe import build_moe
import hymoe.torch


def test_expert_parallel_on_two_cpu_ranks():
    mesh = init_distributed(None)
    assert dist.get_backend() == "gloo" and dist.get_world_size() == 2
    assert init_device_mesh("cuda", (2,), mesh_dim_names=("ep",)).device_type == "cpu"
    torch.manual_seed(0)
    moe = build_moe(8, 12, 4, 2).cuda()
    assert hymoe.torch.apply_expert_parallel(moe, mesh) == 1
    assert len(moe.experts) == 2 and moe.local_expert_start == 2 * dist.get_rank()
    x = torch.randn(1, 5 + dist.get_rank(), 8, device="cuda", requires_grad=True)
    moe(x).sum().backward()
    assert x.grad.shape == x.shape and all(p.grad is not None for p in moe.parameters() if p.requires_grad)
'''


def test_nproc_runs_distributed_tests_on_cpu_ranks(tmp_path):
    pytest.importorskip("torch.distributed.device_mesh", reason="KempnerForge's distributed tests need torch >= 2.2")
    ext = [Path(d).resolve() for d in hymoe.__path__ if any(Path(d).glob("_core*.so"))]
    if not ext:
        pytest.skip("no built hymoe._core beside the package")
    kf = tmp_path / "checkout"
    for d in ("kempnerforge/model", "kempnerforge/distributed", "tests/distributed"):
        (kf / d).mkdir(parents=True)
    for init in ("kempnerforge", "kempnerforge/model", "kempnerforge/distributed"):
        (kf / init / "__init__.py").write_text("")
    (kf / "kempnerforge" / "model" / "moe.py").write_text("raise ImportError('the real moe.py was imported')\n")
    (kf / "kempnerforge" / "distributed" / "setup.py").write_text(STAND_IN_SETUP)
    (kf / "tests" / "distributed" / "test_ep.py").write_text(STAND_IN_EP_TEST)
    env = dict(os.environ, PYTHON=sys.executable, HYMOE_EXTENSION_DIR=str(ext[0]), NPROC="2", HANG_SECONDS="300")
    r = subprocess.run(["bash", str(REPO / "scripts" / "run_kempnerforge_tests.sh"), str(kf),
                        "tests/distributed/test_ep.py"], env=env, capture_output=True, text=True, timeout=400)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count("1 passed") == 2, r.stdout  # one summary per rank
