"""hymoe.kt beside kt-kernel 0.7.2 in one process: the same routed-expert layer, weights, ids and routing weights
through both operators, interleaved repeat by repeat, cold weights; then hymoe.kt's call overhead and the overlap of
its asynchronous call. One JSON line per cell on stdout (docs/performance.md, "hymoe.kt beside kt-kernel").

Run in a kt-kernel environment (../shared/peers/kt_kernel/setup.sh VENV) with hymoe's source package and a built
extension on the path:
    PYTHONPATH=python HYMOE_EXTENSION_DIR=build/release/python VENV/bin/python scripts/kt_compare.py \
        --shape deepseek-v2-lite --tokens 1 32 512 --kinds bf16 int8 int4 --threads 2 --repeats 7
kt-kernel runs through its extension (CPUInfer + forward_task, as its KTMoEWrapper does; the wrapper itself pins
memory, which needs a CUDA driver); `--kt-threads` sets its pool separately (it oversubscribes: n workers, a queue
thread and the caller all spin). KT_KERNEL_CPU_VARIANT picks its build (avx512_bf16 on Zen 4; amx where AMX is).
"""
import argparse
import json
import os
import statistics
import sys
import time

SHAPES = {"deepseek-v2-lite": (2048, 1408, 64, 6), "qwen3-30b-a3b": (2048, 768, 128, 8), "tiny": (64, 64, 8, 2)}
KT_CLASSES = {"bf16": "AMXBF16_MOE", "int8": "AMXInt8_MOE", "int4": "AMXInt4_MOE"}
HYMOE_METHODS = {"bf16": "BF16", "int8": "AMXINT8", "int4": "AMXINT4"}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shape", default="deepseek-v2-lite", choices=list(SHAPES))
    ap.add_argument("--tokens", type=int, nargs="+", default=[1, 32, 512])
    ap.add_argument("--kinds", nargs="+", default=["bf16", "int8", "int4"], choices=list(KT_CLASSES))
    ap.add_argument("--threads", type=int, default=2, help="hymoe's threads")
    ap.add_argument("--kt-threads", type=int, nargs="+", default=[2, 1], help="kt-kernel pool sizes to run")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--evict-mib", type=int, default=256)
    ap.add_argument("--no-kt", action="store_true", help="hymoe only (no kt-kernel installed)")
    a = ap.parse_args()
    out = os.fdopen(os.dup(1), "w")  # kt-kernel logs to stdout: keep the real stdout for the JSON
    sys.stdout.flush()
    os.dup2(2, 1)
    import numpy as np
    import torch
    from hymoe.kt import KTMoEWrapper

    torch.set_num_threads(1)
    D, I, E, K = SHAPES[a.shape]
    g = torch.Generator().manual_seed(0)
    gate, up, down = ((torch.rand(*s, generator=g) * 2 - 1).div(s[-1] ** 0.5).to(torch.bfloat16).contiguous()
                      for s in ((E, I, D), (E, I, D), (E, D, I)))
    evict = np.ones((a.evict_mib << 20) // 4, np.float32) if a.evict_mib else None
    cpu_info = open("/proc/cpuinfo").read()
    model = next((line.split(":", 1)[1].strip() for line in cpu_info.splitlines() if line.startswith("model name")), "?")
    head = dict(shape=a.shape, dim=D, hidden=I, experts=E, top_k=K, cpu=model, repeats=a.repeats,
                cold=evict is not None)

    kt = None
    if not a.no_kt:
        import kt_kernel

        kt = kt_kernel.kt_kernel_ext
        head["kt_kernel"] = f"{kt_kernel.__version__} ({kt_kernel.__cpu_variant__})"

    for kind in a.kinds:
        hy = KTMoEWrapper(0, E, K, D, I, None, a.threads, 1, "", max(a.tokens), method=HYMOE_METHODS[kind])
        hy.load_weights_from_tensors(gate, up, down)
        kts = {}
        for n in (a.kt_threads if kt else []):
            pool = kt.CPUInfer(n)
            cfg = kt.moe.MOEConfig(E, K, D, I)
            cfg.max_len = -(-max(a.tokens) // 64) * 64
            cfg.gate_proj, cfg.up_proj, cfg.down_proj = gate.data_ptr(), up.data_ptr(), down.data_ptr()
            cfg.pool = pool.backend_
            op = getattr(kt.moe, KT_CLASSES[kind])(cfg)
            p2l = torch.arange(E, dtype=torch.int64)
            pool.submit(op.load_weights_task(p2l.data_ptr()))
            pool.sync()
            kts[n] = (pool, op)
        for T in a.tokens:
            rng = np.random.default_rng(T)
            x = (torch.rand(T, D, generator=g) * 2 - 1).to(torch.bfloat16).contiguous()
            times = {"hymoe": []} | {f"kt{n}": [] for n in kts}
            apart = []
            for r in range(a.repeats + 1):
                ids = torch.from_numpy(np.argsort(rng.random((T, E)), axis=1)[:, :K].astype(np.int64))
                w = torch.from_numpy(rng.random((T, K), dtype=np.float32))
                w /= w.sum(1, keepdim=True)
                if evict is not None:
                    evict.sum()
                t0 = time.perf_counter()
                y = hy.forward(x, ids, w)
                dt = time.perf_counter() - t0
                if r:
                    times["hymoe"].append(dt * 1e3)
                for n, (pool, op) in kts.items():
                    yk = torch.zeros(T, D, dtype=torch.bfloat16)
                    bsz = torch.tensor([T], dtype=torch.int32)
                    if evict is not None:
                        evict.sum()
                    t0 = time.perf_counter()
                    pool.submit(op.forward_task(bsz.data_ptr(), K, ids.data_ptr(), w.data_ptr(), x.data_ptr(),
                                                yk.data_ptr(), False))
                    pool.sync()
                    dt = time.perf_counter() - t0
                    if r:
                        times[f"kt{n}"].append(dt * 1e3)
                        apart.append(float((y.float() - yk.float()).norm() / yk.float().norm()))
            flops = 3.0 * 2 * T * K * D * I
            for engine, ms in times.items():
                med = statistics.median(ms)
                row = dict(head, engine="hymoe.kt" if engine == "hymoe" else "kt-kernel", weights=kind, tokens=T,
                           threads=a.threads if engine == "hymoe" else int(engine[2:]), layer_ms=round(med, 4),
                           min_ms=round(min(ms), 4), all_ms=[round(v, 3) for v in ms],
                           gflops=round(flops / med / 1e6, 2))
                if engine == "hymoe":
                    row["kernel"] = hy.moe.kernel_name
                elif apart:
                    row["hymoe_vs_kt_rel"] = round(statistics.median(apart), 5)
                print(json.dumps(row), file=out, flush=True)
        del kts

    # Call overhead: a 1-token call of a tiny layer (E 8, D 64, I 64), where compute is a few microseconds;
    # submit + sync through the wrapper and the engine's own submit + wait, medians of 2000.
    tiny = [(torch.rand(*s, generator=g) * 0.1).to(torch.bfloat16) for s in ((8, 64, 64), (8, 64, 64), (8, 64, 64))]
    small = KTMoEWrapper(1, 8, 2, 64, 64, None, a.threads, 1, "", 16, method="BF16")
    small.load_weights_from_tensors(*tiny)
    x1, ids1, w1 = torch.rand(1, 64).to(torch.bfloat16), torch.tensor([[1, 5]]), torch.tensor([[0.5, 0.5]])
    y1 = torch.empty(1, 64, dtype=torch.bfloat16)
    lap = []
    for _ in range(2200):
        t0 = time.perf_counter()
        small.submit_forward(x1, ids1, w1)
        small.sync_forward(x1)
        lap.append(time.perf_counter() - t0)
    raw = []
    xn, idn, wn, yn = (x1.view(torch.int16).numpy().view(np.uint16), ids1.numpy(), w1.numpy(),
                       y1.view(torch.int16).numpy().view(np.uint16))
    for _ in range(2200):
        t0 = time.perf_counter()
        small.moe.submit(xn, idn, wn, yn, None)
        small.moe.wait()
        raw.append(time.perf_counter() - t0)
    print(json.dumps(dict(head, engine="hymoe.kt", measure="call_overhead_us", threads=a.threads,
                          wrapper_submit_sync_us=round(statistics.median(lap[200:]) * 1e6, 1),
                          engine_submit_wait_us=round(statistics.median(raw[200:]) * 1e6, 1))), file=out, flush=True)

    # Overlap: submit a prefill-sized call, do other work on this thread (a sleep stands in for the GPU half),
    # then sync. The caller is free while the CPU experts run.
    hy = KTMoEWrapper(2, E, K, D, I, None, a.threads, 1, "", 512, method="BF16")
    hy.load_weights_from_tensors(gate, up, down)
    T = max(a.tokens)
    x = (torch.rand(T, D, generator=g) * 2 - 1).to(torch.bfloat16)
    ids = torch.from_numpy(np.argsort(np.random.default_rng(1).random((T, E)), axis=1)[:, :K].astype(np.int64))
    w = torch.full((T, K), 1.0 / K)
    hy.forward(x, ids, w)
    t0 = time.perf_counter()
    hy.forward(x, ids, w)
    alone = time.perf_counter() - t0
    other = alone * 0.8
    t0 = time.perf_counter()
    hy.submit_forward(x, ids, w)
    submitted = time.perf_counter() - t0
    time.sleep(other)
    hy.sync_forward(x)
    total = time.perf_counter() - t0
    print(json.dumps(dict(head, engine="hymoe.kt", measure="overlap", tokens=T, threads=a.threads,
                          call_ms=round(alone * 1e3, 2), submit_returns_ms=round(submitted * 1e3, 3),
                          other_work_ms=round(other * 1e3, 2), submit_other_sync_ms=round(total * 1e3, 2))),
          file=out, flush=True)


if __name__ == "__main__":
    main()
