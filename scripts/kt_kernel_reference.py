"""Writes tests/data/kt_kernel/reference.npz: kt-kernel 0.7.2's outputs on the cases of python/tests/kt/kt_cases.py
(bf16, int8 and int4 operators; T = 1, 7, 32, 512; without and with GPU-resident experts), for the comparison test
python/tests/kt/test_kt_reference.py, which needs neither kt-kernel nor the inputs.

Run in a kt-kernel environment (../shared/peers/kt_kernel/setup.sh VENV installs it):
    VENV/bin/python scripts/kt_kernel_reference.py [--out tests/data/kt_kernel/reference.npz] [--variant avx512_bf16]
kt-kernel is driven through its extension (CPUInfer, MOEConfig with the mask pointer, load_weights_task,
forward_task), as its KTMoEWrapper drives it: the wrapper pins host memory, which needs a CUDA driver.
"""
import argparse
import os
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python" / "tests" / "kt"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=str(ROOT / "tests" / "data" / "kt_kernel" / "reference.npz"))
    ap.add_argument("--variant", help="KT_KERNEL_CPU_VARIANT (default: kt-kernel's own choice for this CPU)")
    a = ap.parse_args()
    if a.variant:
        os.environ["KT_KERNEL_CPU_VARIANT"] = a.variant
    import numpy as np
    import torch
    import kt_kernel
    import kt_cases as c

    ext = kt_kernel.kt_kernel_ext
    cpu = ext.CPUInfer(1)
    gate, up, down = c.weights()
    tg, tu, td = (torch.from_numpy(v.view(np.int16)).view(torch.bfloat16).contiguous() for v in (gate, up, down))
    out = {"kt_kernel_version": np.array(kt_kernel.__version__), "variant": np.array(kt_kernel.__cpu_variant__)}
    for kind, (classes, _) in c.METHODS.items():
        cls = next((n for n in classes if hasattr(ext.moe, n)), None)
        if cls is None:
            print(f"{kind}: this kt-kernel build ({kt_kernel.__cpu_variant__}) has none of {classes}; skipped",
                  file=sys.stderr)
            continue
        for masked in (False, True):
            m = torch.from_numpy(c.mask(masked))
            cfg = ext.moe.MOEConfig(c.E, c.K, c.D, c.I, m.data_ptr())
            cfg.max_len = 512
            cfg.gate_proj, cfg.up_proj, cfg.down_proj = tg.data_ptr(), tu.data_ptr(), td.data_ptr()
            cfg.pool = cpu.backend_
            moe = getattr(ext.moe, cls)(cfg)
            p2l = torch.arange(c.E, dtype=torch.int64)
            cpu.submit(moe.load_weights_task(p2l.data_ptr()))
            cpu.sync()
            for T in c.TOKENS:
                x, ids, w = c.batch(T)
                tx = torch.from_numpy(x.view(np.int16)).view(torch.bfloat16).contiguous()
                tids, tw = torch.from_numpy(ids), torch.from_numpy(w)
                y = torch.zeros(T, c.D, dtype=torch.bfloat16)
                bsz = torch.tensor([T], dtype=torch.int32)
                cpu.submit(moe.forward_task(bsz.data_ptr(), c.K, tids.data_ptr(), tw.data_ptr(), tx.data_ptr(),
                                            y.data_ptr(), False))
                cpu.sync()
                bits = y.view(torch.int16).numpy().view(np.uint16)
                ref = c.reference(gate, up, down, x, ids, w, c.mask(masked))
                yf = c.bf16_to_f32(bits).astype(np.float64)
                err = float(np.linalg.norm(yf - ref) / np.linalg.norm(ref))
                key = f"{kind}_{'masked' if masked else 'all'}_T{T}"
                out[key] = bits[: c.KEPT_ROWS].copy()
                out[key + "_rel_err"] = np.array(err)
                print(f"{key}: rel err vs float64 {err:.5f}", file=sys.stderr)
            del moe
    pathlib.Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    np.savez(a.out, **out)
    print(f"wrote {a.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
