"""Expert parallelism (hymoe.torch.apply_expert_parallel) on 1, 2 and 4 gloo processes against the single-process
layer: the same bits as one expert-parallel rank for every token and every expert gradient, the fused C++ layer's
bits (forward and backward) on one rank, and KempnerForge's per-rank rules for capacity and gradient scaling. Each
run is a set of processes (ep_worker.py) killed, and the test failed, when they do not finish in time."""

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")

if not dist.is_available() or not dist.is_gloo_available():
    pytest.skip("this PyTorch has no gloo backend for torch.distributed", allow_module_level=True)

sys.path.insert(0, str(Path(__file__).parent))
import ep_worker  # noqa: E402

from hymoe import _core  # noqa: E402
from hymoe.torch import _apply_capacity, apply_expert_parallel, build_moe  # noqa: E402

WORKER = Path(__file__).with_name("ep_worker.py")
HANG_SECONDS = 300  # a run of every case takes a few seconds per process; past this it is a hang
# (mode, world): world 0 is the fused single-process layer, no expert parallelism; "rowwise" runs the router and
# the shared expert row by row (ep_worker.RowByRow), so bits can be compared across rank counts.
RUNS = [("plain", 0), ("plain", 1), ("plain", 2), ("plain", 4), ("rowwise", 1), ("rowwise", 2), ("rowwise", 4)]
EPS32 = 2.0 ** -23


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _launch(mode: str, world: int, out_dir: Path) -> None:
    port = _free_port()
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", OMP_NUM_THREADS="1")
    cases = ",".join(ep_worker.CASES)
    procs = [subprocess.Popen([sys.executable, str(WORKER), cases, str(r), str(world), str(port), str(out_dir), mode],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
             for r in range(max(world, 1))]
    outputs = []
    try:
        for p in procs:
            out, _ = p.communicate(timeout=HANG_SECONDS)
            outputs.append(out.decode(errors="replace"))
    except subprocess.TimeoutExpired:
        for p in procs:
            p.kill()
        pytest.fail(f"expert-parallel run of {world} ranks did not finish in {HANG_SECONDS} s (a hang): killed")
    for rank, (p, out) in enumerate(zip(procs, outputs)):
        assert p.returncode == 0, f"rank {rank} of {world} exited with {p.returncode}:\n{out[-4000:]}"


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """(mode, world) -> case -> the ranks' saved results."""
    results = {}
    for mode, world in RUNS:
        out_dir = tmp_path_factory.mktemp(f"ep-{mode}-{world}")
        _launch(mode, world, out_dir)
        results[mode, world] = {case: [torch.load(out_dir / f"{case}.{r}.pt") for r in range(max(world, 1))]
                                for case in ep_worker.CASES
                                if world > 0 or not ep_worker.CASES[case].get("replicas")}
    return results


def _tolerance(case: dict, ref: torch.Tensor) -> float:
    """float32 rounding of sums over the dim, the hidden width and the tokens, at the reference's scale: the fused
    layer and the expert-parallel one sum in different orders (the router, the expert backward)."""
    n = case["moe"]["dim"] + case["moe"]["hidden_dim"] + case["tokens"]
    return 4 * n * EPS32 * max(1.0, float(ref.abs().max()) if ref.numel() else 1.0)


def _close(got, ref, case, what):
    tol = _tolerance(case, ref)
    err = float((got - ref).abs().max()) if ref.numel() else 0.0
    assert err <= tol, f"{what}: max |difference| {err:.3g} exceeds {tol:.3g}"


def _cat(ranks, key):
    return torch.cat([r[key] for r in ranks])


def _grads(ranks):
    """Expert gradients by global name (each on one rank); router and shared-expert gradients summed over ranks,
    as data parallelism sums them."""
    out = {}
    for r in ranks:
        for name, g in r["grads"].items():
            if name.startswith(("router.", "shared_expert.")):
                out[name] = out[name] + g if name in out else g.clone()
            else:
                assert name not in out, f"{name} held by two ranks"
                out[name] = g
    return out


TRAIN_CASES = [c for c, spec in ep_worker.CASES.items() if not spec.get("replicas")]


@pytest.mark.parametrize("case", TRAIN_CASES)
def test_one_rank_matches_the_fused_layer(runs, case):
    # hymoe's C++ router and kernels, the routing weights (and the gradient scale) applied in the kernel, the
    # combine and the input gradient summed in the layer's order: the fused layer's bits, forward and backward.
    (ref,), (one,) = runs["plain", 0][case], runs["plain", 1][case]
    for key in ("y", "grad_x", "aux_loss", "z_loss", "expert_counts"):
        assert torch.equal(one[key], ref[key]), f"{key} differs from the fused layer's bits"
    ref_grads = ref["grads"]
    assert set(ref_grads) <= set(one["grads"])
    for name, g in one["grads"].items():
        if name in ref_grads:
            assert torch.equal(g, ref_grads[name]), f"gradient of {name} differs from the fused layer's bits"
        else:  # an expert without rows: no gradient from the fused layer, zeros here (as FSDP needs)
            assert torch.count_nonzero(g) == 0, f"{name} has no rows but a nonzero gradient"


# Capacity and the gradient scale are per rank under KempnerForge's expert parallelism (capacity counts the rank's
# own tokens, the scale the rank's received rows), so more ranks legitimately change them: checked below instead.
BITS_CASES = [c for c in TRAIN_CASES if not ep_worker.CASES[c].get("per_rank_rules")]


@pytest.mark.parametrize("mode", ["plain", "rowwise"])
@pytest.mark.parametrize("world", [2, 4])
@pytest.mark.parametrize("case", BITS_CASES)
def test_ranks_give_one_ranks_bits(runs, case, world, mode):
    """Every token's output and input gradient, and every expert's weight gradients, have one rank's bits: with
    hymoe's router (C++, "plain") and with the router module's torch forward run row by row ("rowwise")."""
    spec = ep_worker.CASES[case]
    (one,), ranks = runs[mode, 1][case], runs[mode, world][case]
    assert [r["rows"][1] - r["rows"][0] for r in ranks] == ep_worker.split(spec["tokens"], world)
    assert torch.equal(_cat(ranks, "y"), one["y"]), "y differs from one rank's bits"
    assert torch.equal(_cat(ranks, "grad_x"), one["grad_x"]), "grad x differs from one rank's bits"
    grads = _grads(ranks)
    assert sorted(grads) == sorted(one["grads"])
    for name, g in one["grads"].items():
        if name.startswith(("router.", "shared_expert.")):
            _close(grads[name], g, spec, f"gradient of {name} summed over ranks")
        else:
            assert torch.equal(grads[name], g), f"gradient of {name} differs from one rank's bits"
    if mode == "plain":
        assert torch.equal(sum(r["expert_counts"] for r in ranks), one["expert_counts"])


def _kempnerforge_per_rank(case_name: str, world: int) -> list:
    """KempnerForge's expert-parallel forward in plain torch, every rank simulated in this process: each rank
    routes and caps its own tokens; an expert's rows are scaled by (rows its rank received / local experts) /
    (rows it received) when gradient_scale is on."""
    spec = ep_worker.CASES[case_name]
    counts = ep_worker.split(spec["tokens"], world)
    per_rank = spec["moe"]["num_experts"] // world
    routed, received = [], torch.zeros(spec["moe"]["num_experts"])
    lo = 0
    for n in counts:
        moe, x, _ = ep_worker.build(spec)  # a fresh router per rank: a train forward may move its state
        moe.train()
        xr = x[lo:lo + n]
        lo += n
        with torch.no_grad():
            w, idx = moe.router(xr)
            if moe.capacity_factor > 0:
                w, idx = _apply_capacity(w, idx, moe.num_experts, moe.capacity_factor)
        received += torch.bincount(idx.reshape(-1), minlength=moe.num_experts).float()
        routed.append((moe, xr, w, idx))
    scale = torch.ones(len(received))
    if spec["moe"].get("gradient_scale"):
        for rank in range(world):
            local = slice(rank * per_rank, (rank + 1) * per_rank)
            avg = float(received[local].sum()) / per_rank
            scale[local] = torch.where(received[local] > 0, avg / received[local].clamp(min=1), 1.0)
    ys = []
    with torch.no_grad():
        for moe, xr, w, idx in routed:
            outs = torch.stack([moe.experts[e](xr) for e in range(moe.num_experts)])  # (E, rows, dim)
            y = torch.zeros_like(xr)
            for k in range(idx.shape[1]):
                e = idx[:, k]
                y += (w[:, k] * scale[e]).unsqueeze(-1) * outs[e, torch.arange(len(xr))]
            if moe.shared_expert is not None:
                y += moe.shared_expert(xr)
            ys.append(y)
    return ys


@pytest.mark.parametrize("world", [1, 2, 4])
@pytest.mark.parametrize("case", ["capacity", "gradient_scale"])
def test_per_rank_rules_follow_kempnerforge(runs, case, world):
    expected = _kempnerforge_per_rank(case, world)
    for rank, (got, want) in enumerate(zip(runs["plain", world][case], expected)):
        _close(got["y"], want, ep_worker.CASES[case], f"y of rank {rank}")
    if world > 1:  # the rules do change the output with the number of ranks: a test that can fail
        assert not torch.equal(_cat(runs["plain", world][case], "y"), runs["plain", 1][case][0]["y"])


def test_a_rank_that_receives_nothing_still_takes_part(runs):
    ranks = runs["plain", 2]["idle_rank"]
    counts = sum(r["expert_counts"] for r in ranks)
    assert counts[2:].sum() == 0 and counts[:2].sum() > 0
    upper = [g for name, g in ranks[1]["grads"].items() if name.startswith("experts.")]
    assert upper and all(torch.count_nonzero(g) == 0 for g in upper)  # zero gradients, present (FSDP needs them)


class _Mesh:
    """A stand-in for torch's DeviceMesh (what apply_expert_parallel reads of it)."""

    def __init__(self, names, size, rank=0):
        self.mesh_dim_names, self._size, self._rank = names, size, rank

    def __getitem__(self, name):
        return self

    def size(self):
        return self._size

    def get_group(self):
        return "ep-group"

    def get_local_rank(self):
        return self._rank


def test_no_ep_dimension_or_size_one_leaves_the_layer_alone():
    moe = build_moe(dim=8, hidden_dim=8, num_experts=4, top_k=2)
    assert apply_expert_parallel(moe, None) == 0
    assert apply_expert_parallel(moe, _Mesh(("dp_shard",), 2)) == 0
    assert apply_expert_parallel(moe, _Mesh(("dp_shard", "ep"), 1)) == 0
    assert len(moe.experts) == 4 and moe.ep_world_size == 1 and moe.native


def test_apply_prunes_and_sets_kempnerforges_metadata():
    moe = build_moe(dim=8, hidden_dim=8, num_experts=8, top_k=2, shared_experts=1)
    expert5 = moe.experts[5].up_proj.weight.detach().clone()
    assert apply_expert_parallel(moe, _Mesh(("dp_shard", "ep"), 4, rank=2)) == 1
    assert (moe.ep_world_size, moe.ep_group, moe.local_expert_start, moe.num_local_experts) == (4, "ep-group", 4, 2)
    assert len(moe.experts) == 2 and torch.equal(moe.experts[1].up_proj.weight, expert5)
    assert not moe.native  # the C++ layer holding all eight experts is released
    assert sorted(n for n, _ in moe.named_parameters() if n.startswith("experts.")) == [
        f"experts.{i}.{p}_proj.weight" for i in (0, 1) for p in ("down", "gate", "up")]
    packed = build_moe(dim=8, hidden_dim=6, num_experts=4, top_k=1, packed_experts=True)
    up = packed.up_w.detach().clone()
    apply_expert_parallel(packed, _Mesh(("ep",), 2, rank=1))
    assert isinstance(packed.up_w, torch.nn.Parameter) and torch.equal(packed.up_w, up[2:])
    with pytest.raises(ValueError, match="already applied"):
        apply_expert_parallel(packed, _Mesh(("ep",), 2, rank=1))


def test_experts_not_divisible_by_ranks_is_an_error():
    moe = build_moe(dim=8, hidden_dim=8, num_experts=6, top_k=2)
    with pytest.raises(ValueError, match=r"num_experts \(6\) must be divisible by the expert-parallel size \(4\)"):
        apply_expert_parallel(moe, _Mesh(("ep",), 4))


def test_group_order_is_a_stable_counting_sort():
    import numpy as np

    dest = np.array([2, 0, 1, 0, 2, 2, 0], dtype=np.int64)
    order, counts = _core.moe_group_order(dest, 4)
    assert counts == [3, 1, 3, 0]
    assert order.tolist() == np.argsort(dest, kind="stable").tolist()
    order, counts = _core.moe_group_order(np.zeros(0, dtype=np.int64), 3)
    assert order.tolist() == [] and counts == [0, 0, 0]
    with pytest.raises(Exception, match=r"destination 3 of assignment 1 is outside \[0, 3\)"):
        _core.moe_group_order(np.array([0, 3]), 3)
    with pytest.raises(Exception, match="must be 1-D"):
        _core.moe_group_order(np.zeros((2, 2), dtype=np.int64), 3)


def test_row_moves_and_their_backward():
    # The autograd functions around the exchanges against torch's own expand, index and weighted slot sum.
    from hymoe.expert_parallel import _CombineSlots, _PermuteRows, _UnpermuteRows
    import numpy as np

    torch.manual_seed(3)
    T, K, D = 5, 3, 4
    x = torch.randn(T, D, requires_grad=True)
    order = torch.randperm(T * K)
    position = torch.empty_like(order)
    position[order] = torch.arange(T * K)
    sent = _PermuteRows.apply(x, order.numpy(), K, position.numpy())
    want = x.unsqueeze(1).expand(T, K, D).reshape(T * K, D)[order]
    assert torch.equal(sent, want)
    g = torch.randn(T * K, D)
    (gx,) = torch.autograd.grad(sent, x, g)
    (gx_want,) = torch.autograd.grad(want, x, g)
    assert torch.allclose(gx, gx_want, rtol=1e-6, atol=1e-6)
    rows = torch.randn(T * K, D, requires_grad=True)
    w = torch.rand(T, K, requires_grad=True)
    perm = torch.randperm(T * K)
    back = _UnpermuteRows.apply(_PermuteRows.apply(rows, perm.numpy(), 1, None), perm.numpy())
    assert torch.equal(back, rows)
    y = _CombineSlots.apply(rows, w, position.numpy(), T, K)
    per_slot = (rows[position] * w.reshape(-1, 1)).view(T, K, D)
    y_want = per_slot[:, 0] + per_slot[:, 1] + per_slot[:, 2]
    assert torch.equal(y, y_want)
    gy = torch.randn(T, D)
    got = torch.autograd.grad(y, (rows, w), gy)
    ref = torch.autograd.grad(y_want, (rows, w), gy)
    for a, b in zip(got, ref):
        assert torch.allclose(a, b, rtol=1e-5, atol=1e-6)
    with pytest.raises(Exception, match=r"permute_rows: index 9 at 1 is outside \[0, 3\)"):
        _core.moe_permute_rows(np.zeros((3, 2), dtype=np.float32), np.array([0, 9]), 1)
    with pytest.raises(Exception, match="appears twice"):
        _core.moe_unpermute_rows(np.zeros((2, 2), dtype=np.float32), np.array([1, 1]))


def test_ep_world_size_without_a_group_is_an_error():
    moe = build_moe(dim=8, hidden_dim=8, num_experts=4, top_k=2)
    moe.ep_world_size = 2
    with pytest.raises(ValueError, match="ep_group is None"):
        moe(torch.randn(1, 3, 8))


@pytest.mark.parametrize("world", [1, 2, 4])
def test_replicas_and_a_rebalance_keep_the_bits(runs, world):
    """Hot experts replicated (plan_replicas, one spare slot per rank), then re-balanced for other counts
    (weights moved between ranks): every token's output keeps the bits of the layer without replicas, and of one
    rank, router run row by row; with the router as it is, the same within each run."""
    (one,) = runs["rowwise", 1]["replicas"]
    ranks = runs["rowwise", world]["replicas"]
    for name in ("plain", "placed", "rebalanced"):
        assert torch.equal(_cat(ranks, name), one["plain"]), f"{name} differs from one rank's bits"
    for r in runs["plain", world]["replicas"]:
        assert torch.equal(r["placed"], r["plain"]) and torch.equal(r["rebalanced"], r["plain"])
        assert r["placed_grad_refused"] and r["rebalanced_grad_refused"]
    if world > 1:  # the re-balance moved slots, and some came from another rank
        assert ranks[0]["moved_slots"] > 0 and sum(r["received"] for r in ranks) > 0
        assert sorted({e for r in ranks for e in r["held"]}) == [0, 1, 2, 3]


def test_replica_plans_that_do_not_fit_are_errors():
    from hymoe.placement import plan_replicas

    moe = build_moe(dim=8, hidden_dim=8, num_experts=4, top_k=2)
    with pytest.raises(ValueError, match="the replica plan is for 2 ranks, the expert-parallel group has 4"):
        apply_expert_parallel(moe, _Mesh(("ep",), 4), replicas=plan_replicas(torch.tensor([[1.0, 2, 3, 4]]), 2, 3))
    with pytest.raises(ValueError, match="the replica plan has 2 layers, the model has 1 MoE layers"):
        apply_expert_parallel(moe, _Mesh(("ep",), 2), replicas=plan_replicas(torch.tensor([[1.0, 2, 3, 4]] * 2), 2, 3))
    with pytest.raises(ValueError, match="places 5 experts"):
        apply_expert_parallel(moe, _Mesh(("ep",), 2), replicas=plan_replicas(torch.tensor([[1.0, 2, 3, 4, 5]]), 2, 3))
