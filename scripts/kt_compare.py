"""hymoe.kt beside kt-kernel 0.7.2, one script: the same routed-expert layer, weights, ids and routing weights
through both operators, cold weights, in alternating worker processes (kt-kernel's pool threads spin while they
live, so the two never share a process while timed); then hymoe.kt's call overhead and the overlap of its
asynchronous call. One JSON line per cell on stdout (docs/performance.md, "hymoe.kt beside kt-kernel").

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
    ap.add_argument("--repeats", type=int, default=5, help="timed repeats per cell and pass")
    ap.add_argument("--evict-mib", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=2, help="alternating worker passes per engine")
    ap.add_argument("--no-kt", action="store_true", help="hymoe only (no kt-kernel installed)")
    ap.add_argument("--worker", help=argparse.SUPPRESS)  # "hymoe" or "kt<threads>": one pass, times as JSON
    ap.add_argument("--dump", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if not a.worker:
        return parent(a)
    worker(a)


def parent(a):
    """Alternates worker passes (kt-kernel per pool size, then hymoe), pools the repeats, prints the cells."""
    import subprocess
    import tempfile

    import numpy as np

    engines = ["hymoe"] + ([] if a.no_kt else [f"kt{n}" for n in a.kt_threads])
    base = [sys.executable, __file__, "--shape", a.shape, "--tokens", *map(str, a.tokens), "--kinds", *a.kinds,
            "--threads", str(a.threads), "--repeats", str(a.repeats), "--evict-mib", str(a.evict_mib)]
    rows, dumps = {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(a.rounds):
            for eng in (engines if r % 2 == 0 else engines[::-1]):
                dump = os.path.join(tmp, f"{eng}.npz")
                res = subprocess.run(base + ["--worker", eng, "--dump", dump], stdout=subprocess.PIPE, text=True,
                                     check=True)
                dumps[eng] = dict(np.load(dump))
                for line in res.stdout.splitlines():
                    row = json.loads(line)
                    key = (row["engine"], row.get("weights"), row.get("tokens"), row["threads"], row.get("measure"))
                    if key in rows and "all_ms" in row:
                        rows[key]["all_ms"] += row["all_ms"]
                    else:
                        rows[key] = row
    for key, row in rows.items():
        if "all_ms" in row:
            ms = row["all_ms"]
            row["layer_ms"] = round(statistics.median(ms), 4)
            row["min_ms"] = round(min(ms), 4)
            row["gflops"] = round(row["flops"] / row["layer_ms"] / 1e6, 2)
            row["repeats"] = len(ms)
            if row["engine"] == "kt-kernel":
                name = f"{row['weights']}_T{row['tokens']}"
                mine, theirs = dumps["hymoe"][name].astype(np.float32), dumps[f"kt{row['threads']}"][name]
                theirs = theirs.astype(np.float32)
                row["hymoe_vs_kt_rel"] = round(float(np.linalg.norm(mine - theirs) / np.linalg.norm(theirs)), 5)
        print(json.dumps(row), flush=True)


def worker(a):
    out = os.fdopen(os.dup(1), "w")  # kt-kernel logs to stdout: keep the real stdout for the JSON
    sys.stdout.flush()
    os.dup2(2, 1)
    import numpy as np
    import torch

    torch.set_num_threads(1)
    D, I, E, K = SHAPES[a.shape]
    g = torch.Generator().manual_seed(0)
    gate, up, down = ((torch.rand(*s, generator=g) * 2 - 1).div(s[-1] ** 0.5).to(torch.bfloat16).contiguous()
                      for s in ((E, I, D), (E, I, D), (E, D, I)))
    evict = np.ones((a.evict_mib << 20) // 4, np.float32) if a.evict_mib else None
    cpu_info = open("/proc/cpuinfo").read()
    model = next((line.split(":", 1)[1].strip() for line in cpu_info.splitlines() if line.startswith("model name")), "?")
    head = dict(shape=a.shape, dim=D, hidden=I, experts=E, top_k=K, cpu=model, cold=evict is not None)
    hymoe = a.worker == "hymoe"
    if hymoe:
        from hymoe.kt import KTMoEWrapper
    else:
        import kt_kernel

        kt = kt_kernel.kt_kernel_ext
        head["kt_kernel"] = f"{kt_kernel.__version__} ({kt_kernel.__cpu_variant__})"
        threads = int(a.worker[2:])
        pool = kt.CPUInfer(threads)
    dump = {}
    for kind in a.kinds:
        if hymoe:
            op = KTMoEWrapper(0, E, K, D, I, None, a.threads, 1, "", max(a.tokens), method=HYMOE_METHODS[kind])
            op.load_weights_from_tensors(gate, up, down)
        else:
            cfg = kt.moe.MOEConfig(E, K, D, I)
            cfg.max_len = -(-max(a.tokens) // 64) * 64
            cfg.gate_proj, cfg.up_proj, cfg.down_proj = gate.data_ptr(), up.data_ptr(), down.data_ptr()
            cfg.pool = pool.backend_
            op = getattr(kt.moe, KT_CLASSES[kind])(cfg)
            p2l = torch.arange(E, dtype=torch.int64)
            pool.submit(op.load_weights_task(p2l.data_ptr()))
            pool.sync()
        for T in a.tokens:
            rng = np.random.default_rng(T)  # the same x, ids and weights in every worker
            x = torch.from_numpy(rng.uniform(-1, 1, (T, D)).astype(np.float32)).to(torch.bfloat16)
            ms = []
            for r in range(a.repeats + 1):
                ids = torch.from_numpy(np.argsort(rng.random((T, E)), axis=1)[:, :K].astype(np.int64))
                w = torch.from_numpy(rng.random((T, K), dtype=np.float32))
                w /= w.sum(1, keepdim=True)
                if evict is not None:
                    evict.sum()
                if hymoe:
                    t0 = time.perf_counter()
                    y = op.forward(x, ids, w)
                    dt = time.perf_counter() - t0
                else:
                    y = torch.zeros(T, D, dtype=torch.bfloat16)
                    bsz = torch.tensor([T], dtype=torch.int32)
                    t0 = time.perf_counter()
                    pool.submit(op.forward_task(bsz.data_ptr(), K, ids.data_ptr(), w.data_ptr(), x.data_ptr(),
                                                y.data_ptr(), False))
                    pool.sync()
                    dt = time.perf_counter() - t0
                if r:
                    ms.append(round(dt * 1e3, 4))
            dump[f"{kind}_T{T}"] = y.float().numpy()
            row = dict(head, engine="hymoe.kt" if hymoe else "kt-kernel", weights=kind, tokens=T,
                       threads=a.threads if hymoe else threads, all_ms=ms, flops=3.0 * 2 * T * K * D * I)
            if hymoe:
                row["kernel"] = op.moe.kernel_name
            print(json.dumps(row), file=out, flush=True)
        del op
    np.savez(a.dump, **dump)
    if hymoe:
        overhead_and_overlap(a, head, out, gate, up, down)


def overhead_and_overlap(a, head, out, gate, up, down):
    import numpy as np
    import torch
    from hymoe.kt import KTMoEWrapper

    D, I, E, K = SHAPES[a.shape]
    g = torch.Generator().manual_seed(1)
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
