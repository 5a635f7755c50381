"""``python -m hymoe.bench``: the cost of reaching hymoe's MoE layer from PyTorch, and hymoe against PyTorch's own
eager MoE, in one run on one shape (DeepSeek-V2-Lite's layer by default).

Per token count it times, on the same weights and input with the same number of threads:
  cpp     the C++ layer called in a C++ loop (MoELayer::forward; with --backward forward+backward)
  module  hymoe.torch's module called from Python (what a KempnerForge model calls)
  eager   PyTorch's eager reference: KempnerForge's sequential loop over experts on the module's weights
Times are medians of --repeats calls after one warm-up call. The module's overhead is measured per call: the
call's wall time minus the time that same call spent inside the binding (MoELayer's forward/backward and the
copies in and out of it), so other load on the machine does not enter it; "module - cpp" compares the medians.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

# Shapes of bench/shapes/*.json (routed experts, SwiGLU, softmax router). KempnerForge's shared_experts > 0 builds
# one shared MLP of hidden_dim, so DeepSeek-V2-Lite's two shared experts are one MLP here.
SHAPES = {
    "deepseek-v2-lite": dict(dim=2048, hidden_dim=1408, num_experts=64, top_k=6, shared_experts=2),
    "olmoe-1b-7b": dict(dim=2048, hidden_dim=1024, num_experts=64, top_k=8, shared_experts=0),
    "qwen3-30b-a3b": dict(dim=2048, hidden_dim=768, num_experts=128, top_k=8, shared_experts=0),
    "tiny": dict(dim=64, hidden_dim=32, num_experts=8, top_k=2, shared_experts=1),  # the bench's own test
}


def median_ms(fn, repeats: int) -> float:
    fn()  # warm-up: packs weights, allocates workspaces
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def module_median_ms(fn, repeats: int):
    """(median wall ms, median overhead ms) of fn, which returns the ms its calls spent inside the binding."""
    fn()
    walls, overheads = [], []
    for _ in range(repeats):
        start = time.perf_counter()
        inside = fn()
        wall = (time.perf_counter() - start) * 1e3
        walls.append(wall)
        overheads.append(wall - inside)
    return statistics.median(walls), statistics.median(overheads)


def cpp_median_ms(m, x_np, train: bool, repeats: int) -> float:
    """The C++ layer timed inside C++ (MoELayer::forward, and backward when train), after one warm-up call."""
    m._layer.time_forward(x_np, train, 1)
    return statistics.median(m._layer.time_forward(x_np, train, repeats))


def eager_forward(torch, F, m, x):
    """KempnerForge's sequential path (MoEMLP._local_forward without torch._grouped_mm) in plain torch ops."""
    B, L, D = x.shape
    xf = x.reshape(B * L, D)
    logits = xf @ m.router.gate.weight.t()
    probs = F.softmax(logits, dim=-1)
    weights, indices = torch.topk(probs, m.router.top_k, dim=-1)
    weights = weights / weights.sum(dim=-1, keepdim=True)
    out = torch.zeros_like(xf)
    for i, expert in enumerate(m.experts):
        mask = (indices == i).any(dim=-1)
        if not mask.any():
            continue
        h = xf[mask]
        h = expert.down_proj(F.silu(expert.gate_proj(h)) * expert.up_proj(h))
        w = (weights * (indices == i).float()).sum(dim=-1)
        out[mask] += w[mask].unsqueeze(-1) * h
    if m.shared_expert is not None:
        s = m.shared_expert
        out = out + s.down_proj(F.silu(s.gate_proj(xf)) * s.up_proj(xf))
    return out.view(B, L, D)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m hymoe.bench", description=__doc__.split("\n\n")[0])
    p.add_argument("--shape", default="deepseek-v2-lite", choices=sorted(SHAPES))
    p.add_argument("--tokens", default="1,128", help="comma-separated token counts (default 1,128)")
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("--threads", type=int, default=0, help="threads for hymoe and torch (default: hymoe's default)")
    p.add_argument("--packed", action="store_true", help="packed expert weights (build_moe's packed_experts)")
    p.add_argument("--backward", action="store_true", help="also time forward+backward (train mode)")
    p.add_argument("--no-eager", action="store_true", help="skip PyTorch's eager reference")
    p.add_argument("--numpy-path", action="store_true",
                   help="float32 forwards through hymoe._core's numpy-based path even where hymoe._torch_core is built")
    p.add_argument("--json", help="write the results to this file")
    args = p.parse_args(argv)
    if args.threads > 0:
        os.environ["HYMOE_THREADS"] = str(args.threads)  # read by hymoe when its thread pool starts

    import torch
    import torch.nn.functional as F

    import hymoe.torch as hmoe

    if args.numpy_path:
        hmoe._torch_core = None  # read by each forward
    forward_path = "hymoe._torch_core" if hmoe._torch_core is not None else "numpy-based"
    threads = args.threads if args.threads > 0 else (os.cpu_count() or 1)
    torch.set_num_threads(threads)
    shape = SHAPES[args.shape]
    torch.manual_seed(0)
    m = hmoe.build_moe(**shape, packed_experts=args.packed)
    if args.packed and not args.no_eager:
        p.error("--packed: the eager reference loops over unpacked experts; add --no-eager")
    print(f"shape {args.shape}: {json.dumps(shape)}; packed {args.packed}; threads {threads}; torch {torch.__version__}; "
          f"median of {args.repeats}; float32 forward path {forward_path}")
    results = []

    def measure(tokens, mode, x_np, train, module_call, eager_call):
        """One line: the C++ loop, the module (with its per-call overhead) and, unless --no-eager, eager torch."""
        cpp = cpp_median_ms(m, x_np, train, args.repeats)
        mod, over = module_median_ms(module_call, args.repeats)
        common = dict(shape=args.shape, tokens=tokens, mode=mode, threads=threads, packed=args.packed,
                      forward_path=forward_path)
        results.append(dict(common, who="cpp", ms=cpp))
        results.append(dict(common, who="module", ms=mod, overhead_ms=over))
        line = (f"T={tokens:4d} {mode:17s} cpp {cpp:9.3f} ms  module {mod:9.3f} ms  overhead "
                f"{over:.3f} ms/call ({100 * over / cpp:.2f}%)")
        if not args.no_eager:
            eager = median_ms(eager_call, args.repeats)
            results.append(dict(common, who="eager", ms=eager))
            line += f"  eager torch {eager:9.3f} ms ({eager / mod:.1f}x)"
        print(line, flush=True)

    for tokens in [int(t) for t in args.tokens.split(",")]:
        x = torch.randn(1, tokens, shape["dim"])
        x_np = x.numpy()
        m.eval()
        with torch.no_grad():
            def module_forward():
                m(x)
                return m._layer.last_call_ms

            measure(tokens, "forward", x_np, False, module_forward, lambda: eager_forward(torch, F, m, x))
        if args.backward:
            m.train()
            g = torch.randn_like(x)

            def module_step():
                xr = x.clone().requires_grad_(True)
                y = m(xr)
                inside = m._layer.last_call_ms
                y.backward(g)
                inside += m._layer.last_call_ms
                m.zero_grad(set_to_none=True)
                return inside

            def eager_step():
                xr = x.clone().requires_grad_(True)
                eager_forward(torch, F, m, xr).backward(g)
                m.zero_grad(set_to_none=True)

            measure(tokens, "forward+backward", x_np, True, module_step, eager_step)
    if args.json:
        with open(args.json, "w") as f:
            for r in results:
                f.write(json.dumps(r) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
