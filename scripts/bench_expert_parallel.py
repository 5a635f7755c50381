"""Expert parallelism's cost on one machine: hymoe.torch's MoE layer on N gloo ranks against one process.

  # one process: the fused C++ layer, and the expert-parallel forward on a one-rank group (its own overhead)
  python3 scripts/bench_expert_parallel.py --threads 2
  # N ranks, each with --threads threads: the expert-parallel forward and its exchanges
  python3 -m torch.distributed.run --nproc_per_node 2 scripts/bench_expert_parallel.py --threads 1

Per token count T (the layer's whole batch, split evenly across the ranks; at T=1 one rank has the token and the
others none) it prints the median over --repeats inference forwards (eval, no autograd) of the layer's time (the
slowest rank's, each call started after a barrier), the time spent in the all-to-all calls (the slowest rank's),
and the bytes that crossed between processes per forward (all ranks). Float32 weights and activations. The
layer is DeepSeek-V2-Lite's shape by default (hymoe.bench's SHAPES)."""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shape", default="deepseek-v2-lite")
    p.add_argument("--tokens", type=int, nargs="+", default=[1, 32, 512])
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--threads", type=int, default=1, help="threads per rank (hymoe's pool and torch's)")
    return p.parse_args()


def main() -> None:
    args = parse()
    os.environ["HYMOE_THREADS"] = str(args.threads)  # before hymoe's pool starts
    import torch
    import torch.distributed as dist

    from hymoe.bench import SHAPES
    from hymoe.expert_parallel import record_exchanges
    from hymoe.torch import apply_expert_parallel, build_moe

    torch.set_num_threads(args.threads)
    distributed = "RANK" in os.environ
    if distributed:
        dist.init_process_group("gloo")
    rank, world = (dist.get_rank(), dist.get_world_size()) if distributed else (0, 1)
    shape = dict(SHAPES[args.shape])
    shape["shared_experts"] = min(shape["shared_experts"], 1)
    torch.manual_seed(0)
    fused = build_moe(**shape).eval()
    layers = {}
    if distributed:
        apply_expert_parallel(fused, dist.group.WORLD)
        layers[f"expert-parallel, {world} ranks x {args.threads} threads"] = fused
    else:
        layers[f"fused C++ layer, 1 process x {args.threads} threads"] = fused
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29517")
        dist.init_process_group("gloo", rank=0, world_size=1)
        torch.manual_seed(0)
        one = build_moe(**shape).eval()
        apply_expert_parallel(one, dist.group.WORLD)
        layers[f"expert-parallel, 1 rank x {args.threads} threads"] = one
    if rank == 0:
        print(f"shape {args.shape} {shape}, float32, medians of {args.repeats}; host {os.uname().nodename}")
        print("| layer | T | forward ms | all-to-all ms | bytes between processes |")
        print("|---|---|---|---|---|")
    for name, layer in layers.items():
        for T in args.tokens:
            x = torch.randn(1, T, shape["dim"], generator=torch.Generator().manual_seed(T))
            lo, hi = rank * T // world, (rank + 1) * T // world
            xr = x[:, lo:hi].contiguous()
            rows = []
            with torch.no_grad():
                for i in range(args.repeats + 1):  # the first is a warm-up
                    dist.barrier()
                    with record_exchanges() as rec:
                        start = time.perf_counter()
                        layer(xr)
                        elapsed = time.perf_counter() - start
                    stats = torch.tensor([elapsed, rec.seconds, float(rec.bytes_to_others)], dtype=torch.float64)
                    if world > 1:
                        gathered = [torch.zeros_like(stats) for _ in range(world)]
                        dist.all_gather(gathered, stats)
                        stats = torch.stack(gathered)
                        stats = torch.stack([stats[:, 0].max(), stats[:, 1].max(), stats[:, 2].sum()])
                    if i:
                        rows.append(stats.tolist())
            if rank == 0:
                ms = statistics.median(r[0] for r in rows) * 1e3
                a2a = statistics.median(r[1] for r in rows) * 1e3
                moved = int(statistics.median(r[2] for r in rows))
                print(f"| {name} | {T} | {ms:.2f} | {a2a:.2f} | {moved} |", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
