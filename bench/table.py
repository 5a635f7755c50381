#!/usr/bin/env python3
"""Turns `hymoe bench --json` lines (stdin or files) into the markdown results table of docs/performance.md."""
import json
import sys


def rows(paths):
    for path in paths or ["-"]:
        with (sys.stdin if path == "-" else open(path)) as f:
            for line in f:
                line = line.strip()
                if line.startswith("{"):
                    yield json.loads(line)


def main():
    # Fractions as best/paired (see docs/performance.md, "Method"); older JSON without paired ones shows best only.
    def frac(r, key):
        paired = r.get(key + "_paired")
        return f"{r[key]:.2f}" if paired is None else f"{r[key]:.2f} / {paired:.2f}"

    # frac of kernel: of the micro-kernel probe (hot in L1) taken beside the FMA probe; absent in older JSON.
    def frac_kernel(r):
        return "-" if "frac_kernel" not in r else frac(r, "frac_kernel")

    print("| shape | T | dtype | routing | thr | layer ms | tok/s | GFLOP/s | frac of peak (best / paired) "
          "| frac of kernel (best / paired) | weight GB/s | frac of bw (best / paired) | expert ms | dispatch "
          "| OpenBLAS ms | speed-up |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows(sys.argv[1:]):
        base = r.get("baseline_ms")
        base_ms = "-" if base is None else f"{base:.2f}"
        speed = "-" if base is None else f"{base / r['layer_ms']:.2f}x"
        print(f"| {r['shape']} | {r['tokens']} | {r['dtype']} | {r['routing']} | {r['threads']} | {r['layer_ms']:.2f} "
              f"| {r['tokens'] / r['layer_ms'] * 1e3:.0f} | {r['gflops']:.1f} | {frac(r, 'frac_peak')} "
              f"| {frac_kernel(r)} | {r['weight_gbps']:.1f} | {frac(r, 'frac_bandwidth')} | {r['expert_ms']:.2f} "
              f"| {100 * r['dispatch_frac']:.1f}% | {base_ms} | {speed} |")


if __name__ == "__main__":
    main()
