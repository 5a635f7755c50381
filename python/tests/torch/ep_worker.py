"""One rank of an expert-parallel run, started by test_expert_parallel.py as ``python ep_worker.py CASES RANK WORLD
PORT OUT_DIR MODE`` (MODE ``plain``, or ``rowwise``: router and shared expert run row by row, see RowByRow): for each case (comma-separated names of CASES), builds the case's layer from its seed (the same
weights on every rank), takes this rank's rows of the case's batch, applies hymoe.torch.apply_expert_parallel over
a gloo group of WORLD ranks, runs a train forward and backward, and saves (torch.save, OUT_DIR/CASE.RANK.pt) what
the test compares: y, grad x, the aux and z losses, and the gradients by global name (experts.<global index>.*,
up_w[<global index>], router.*, shared_expert.*).

WORLD = 0 runs the same case in this one process without expert parallelism (hymoe's fused C++ layer): the
reference the expert-parallel runs are held to."""

import os
import sys

import torch
import torch.distributed as dist

CASES = {
    # name: build_moe arguments, tokens, the rows each rank gets per world size (uneven, some empty)
    "softmax_shared": dict(moe=dict(dim=24, hidden_dim=40, num_experts=8, top_k=2, shared_experts=1), tokens=37),
    "sigmoid": dict(moe=dict(dim=16, hidden_dim=24, num_experts=4, top_k=3, router_type="sigmoid_topk",
                             sequence_aux_loss_weight=0.01), tokens=29),
    "packed_swiglu": dict(moe=dict(dim=16, hidden_dim=20, num_experts=8, top_k=2, packed_experts=True), tokens=23),
    "packed_gelu": dict(moe=dict(dim=16, hidden_dim=20, num_experts=4, top_k=1, activation="gelu",
                                 packed_experts=True), tokens=11),
    "relu": dict(moe=dict(dim=8, hidden_dim=12, num_experts=4, top_k=2, activation="relu"), tokens=13),
    # Rules KempnerForge applies per rank (so more ranks change the output): compared with a simulation.
    "capacity": dict(moe=dict(dim=16, hidden_dim=16, num_experts=4, top_k=2, capacity_factor=0.3), tokens=31,
                     per_rank_rules=True),
    "gradient_scale": dict(moe=dict(dim=16, hidden_dim=16, num_experts=4, top_k=2, gradient_scale=True),
                           tokens=27, per_rank_rules=True),
    # Replicated hot experts (inference): placed from skewed counts, then re-balanced for other counts.
    "replicas": dict(moe=dict(dim=16, hidden_dim=12, num_experts=4, top_k=2, shared_experts=1), tokens=41,
                     replicas=([[400.0, 40.0, 30.0, 5.0]], [[5.0, 30.0, 40.0, 400.0]])),
    # The experts of the upper half never chosen (expert_bias -100): the ranks holding them receive no rows.
    "idle_rank": dict(moe=dict(dim=16, hidden_dim=16, num_experts=4, top_k=1, router_type="sigmoid_topk"),
                      tokens=17, idle_upper_half=True),
}


def split(tokens: int, world: int) -> list:
    """Each rank's row count: uneven (2:1 on two ranks), and the last of three or more ranks gets none."""
    if world <= 1:
        return [tokens]
    weights = [2, 1] if world == 2 else list(range(world - 1, 0, -1)) + [0]
    counts = [tokens * w // sum(weights) for w in weights]
    counts[0] += tokens - sum(counts)
    return counts


def build(case: dict):
    from hymoe.torch import build_moe

    torch.manual_seed(1234)
    moe = build_moe(**case["moe"])
    if case.get("idle_upper_half"):
        with torch.no_grad():
            moe.router.expert_bias[moe.num_experts // 2:] = -100.0
    x = torch.randn(case["tokens"], case["moe"]["dim"], generator=torch.Generator().manual_seed(7))
    gy = torch.randn(case["tokens"], case["moe"]["dim"], generator=torch.Generator().manual_seed(8))
    return moe, x, gy


class RowByRow(torch.nn.Module):
    """``inner`` applied to one row at a time. torch's CPU kernels can round a row differently with the rows beside
    it (a GEMM's blocking; a vectorized sigmoid or exp, whose last elements take a scalar path), so a router run in
    torch on each rank's own tokens may differ in the last bit between rank counts. The ``rowwise`` runs wrap the
    router in RowByRowRouter (which also makes it a module hymoe does not route in C++, so the router module's own
    torch forward runs) to compare bits across rank counts on that path; hymoe's C++ router, the exchange, hymoe's
    kernels and the combine need no such help."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, x):
        if x.shape[0] == 0:
            return self.inner(x)
        return torch.cat([self.inner(x[i:i + 1]) for i in range(x.shape[0])])


class RowByRowRouter(RowByRow):
    """The router on one row at a time, in eval mode (a train-mode call would move a sigmoid router's bias once
    per row); its expert counts are the batch's."""

    def forward(self, x):
        self.inner.eval()
        rows = [self.inner(x[i:i + 1]) for i in range(x.shape[0])] or [self.inner(x)]
        weights, indices = torch.cat([w for w, _ in rows]), torch.cat([i for _, i in rows])
        self.expert_counts = torch.bincount(indices.reshape(-1), minlength=self.inner.num_experts).float()
        self.aux_loss = self.z_loss = torch.tensor(0.0)
        return weights, indices


def expert_grads(moe, start: int) -> dict:
    out = {}
    if moe.packed_experts:
        for name in ("up_w", "down_w", "gate_w"):
            p = getattr(moe, name, None)
            if p is not None and p.grad is not None:
                for i in range(p.shape[0]):
                    out[f"{name}[{start + i}]"] = p.grad[i].clone()
    else:
        for i, expert in enumerate(moe.experts):
            for name, p in expert.named_parameters():
                if p.grad is not None:  # the fused layer leaves an expert without rows without a gradient
                    out[f"experts.{start + i}.{name}"] = p.grad.clone()
    for name, p in moe.named_parameters():
        if name.startswith(("router.", "shared_expert.")) and p.grad is not None:
            out[name.replace(".inner.", ".")] = p.grad.clone()  # RowByRow's wrapping left out of the name
    return out


def run(case_name: str, rank: int, world: int, rowwise: bool, out_path: str) -> None:
    case = CASES[case_name]
    moe, x, gy = build(case)
    moe.train()
    counts = split(case["tokens"], max(world, 1))
    lo = sum(counts[:rank])
    rows = slice(lo, lo + counts[rank])
    start = 0
    if world >= 1:
        from hymoe.torch import apply_expert_parallel

        assert apply_expert_parallel(moe, dist.group.WORLD) == 1
        assert moe._layer is None and moe.ep_world_size == world
        start = moe.local_expert_start
        if rowwise and not case.get("per_rank_rules"):
            moe.router = RowByRowRouter(moe.router)
    xr = x[rows].clone().unsqueeze(0).requires_grad_(True)
    y = moe(xr)
    y.backward(gy[rows].unsqueeze(0))
    result = {
        "rows": (rows.start, rows.stop),
        "y": y.detach()[0].clone(),
        "grad_x": xr.grad[0].clone(),
        "aux_loss": torch.as_tensor(moe.aux_loss).detach().clone(),
        "z_loss": torch.as_tensor(moe.z_loss).detach().clone(),
        "expert_counts": torch.as_tensor(moe.expert_counts).detach().clone(),
        "grads": expert_grads(moe, start),
        "local_experts": (start, moe.num_local_experts),
    }
    torch.save(result, out_path)


def run_replicas(case_name: str, rank: int, world: int, rowwise: bool, out_path: str) -> None:
    """Inference forwards of one batch: without replicas, with replicas placed from the case's first counts, and
    after re-balancing them for its second counts (two slots per rank more than the experts need)."""
    from hymoe.expert_parallel import rebalance_expert_parallel
    from hymoe.placement import plan_replicas, rebalance_replicas
    from hymoe.torch import apply_expert_parallel

    case = CASES[case_name]
    counts = split(case["tokens"], max(world, 1))
    lo = sum(counts[:rank])
    result = {"rows": (lo, lo + counts[rank])}
    first, second = case["replicas"]
    slots = case["moe"]["num_experts"] // world + 1
    plan = plan_replicas(torch.tensor(first), world, slots)
    for name in ("plain", "placed", "rebalanced"):
        moe, x, _ = build(case)
        moe.eval()
        apply_expert_parallel(moe, dist.group.WORLD, replicas=None if name == "plain" else plan)
        if name == "rebalanced":
            new_plan = rebalance_replicas(plan, torch.tensor(second))
            result["moved_slots"] = int(sum(new_plan["moved"]))
            result["received"] = rebalance_expert_parallel(moe, new_plan)
            result["held"] = moe.ep_replicas["held"]
        if rowwise:
            moe.router = RowByRowRouter(moe.router)
        with torch.no_grad():
            result[name] = moe(x[lo:lo + counts[rank]].unsqueeze(0))[0].clone()
        if name != "plain":
            try:  # recording gradients through replicas is refused
                moe(x[lo:lo + counts[rank]].unsqueeze(0).requires_grad_(True))
                result[name + "_grad_refused"] = False
            except RuntimeError as e:
                result[name + "_grad_refused"] = "for inference" in str(e)
    torch.save(result, out_path)


def main(cases: str, rank: int, world: int, port: int, out_dir: str, mode: str) -> None:
    torch.set_num_threads(1)
    if world >= 1:
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    for name in cases.split(","):
        if CASES[name].get("replicas"):
            if world >= 1:
                run_replicas(name, rank, world, mode == "rowwise", f"{out_dir}/{name}.{rank}.pt")
            continue
        run(name, rank, world, mode == "rowwise", f"{out_dir}/{name}.{rank}.pt")
    if world >= 1:
        dist.barrier()
        dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], sys.argv[6])
    # Every result is on disk. Leave without the interpreter's shutdown: under load, Debian's torch 1.13 with gloo
    # aborted there about once in ten suite runs ("terminate called without an active exception", in a thread
    # collecting garbage after main returned), which would fail a run whose results were all written.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
