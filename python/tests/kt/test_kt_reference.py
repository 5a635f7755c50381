"""hymoe.kt against kt-kernel 0.7.2 itself: the committed outputs of kt-kernel's bf16, int8 and int4 operators
(scripts/kt_kernel_reference.py; its avx512_bf16 and avx2 builds) on the cases of kt_cases.py, without and with
GPU-resident experts, T = 1, 7, 32, 512.

Bounds, from each format's numerics (relative Frobenius norms over the committed rows):
- bf16: both multiply the same bf16 weights and inputs; kt-kernel rounds its hidden rows and output to bf16
  (about 2^-9 each), hymoe its output: the two differ by under 2^-6.
- int8: kt-kernel quantizes each weight row to int8 (one scale a row), hymoe to q8 blocks of 32 (one scale a
  block), each about 2^-6 from the bf16 weights here: under 0.05 apart.
- int4: kt-kernel's 4-bit rows and hymoe's Q4_0 blocks are each 0.1-0.25 from the weights; their errors are
  independent: under 0.4 apart.
And in every cell hymoe's distance to the float64 reference is at most 1.25 times kt-kernel's.
"""
import pathlib

import numpy as np
import pytest
import torch

import kt_cases as c
from hymoe.kt import KTMoEWrapper

DATA = pathlib.Path(__file__).resolve().parents[3] / "tests" / "data" / "kt_kernel"
BOUND = {"bf16": 2.0 ** -6, "int8": 0.05, "int4": 0.4}


def _t(bits):
    return torch.from_numpy(bits.view(np.int16)).view(torch.bfloat16)


@pytest.fixture(scope="module")
def wrappers():
    gate, up, down = c.weights()
    out = {}
    for kind, (_, method) in c.METHODS.items():
        for masked in (False, True):
            w = KTMoEWrapper(0, c.E, c.K, c.D, c.I, torch.from_numpy(c.mask(masked)), 1, 1, "", 512, method=method)
            w.load_weights_from_tensors(_t(gate), _t(up), _t(down), torch.arange(c.E))
            out[kind, masked] = w
    return out


@pytest.mark.parametrize("variant", ["avx512_bf16", "avx2"])
def test_agrees_with_kt_kernel_within_the_formats_bound(wrappers, variant):
    ref_file = np.load(DATA / f"reference_{variant}.npz")
    gate, up, down = c.weights()
    cells = 0
    for kind in c.METHODS:
        for masked in (False, True):
            for T in c.TOKENS:
                key = f"{kind}_{'masked' if masked else 'all'}_T{T}"
                if key not in ref_file:
                    continue  # kt-kernel's avx2 build has no online int8 / int4
                x, ids, w = c.batch(T)
                y = wrappers[kind, masked].forward(_t(x), torch.from_numpy(ids), torch.from_numpy(w))
                rows = min(T, c.KEPT_ROWS)
                mine = y[:rows].float().numpy().astype(np.float64)
                theirs = c.bf16_to_f32(ref_file[key]).astype(np.float64)
                exact = c.reference(gate, up, down, x[:rows], ids[:rows], w[:rows], c.mask(masked))
                apart = np.linalg.norm(mine - theirs) / np.linalg.norm(theirs)
                assert apart < BOUND[kind], (key, apart)
                kt_err = np.linalg.norm(theirs - exact) / np.linalg.norm(exact)
                my_err = np.linalg.norm(mine - exact) / np.linalg.norm(exact)
                assert my_err <= 1.25 * kt_err + 1e-4, (key, my_err, kt_err)
                cells += 1
    assert cells == (24 if variant == "avx512_bf16" else 8)


def test_the_masked_experts_are_left_out(wrappers):
    """With experts 0 and 3 on the GPU, the CPU part is the float64 sum over the others only."""
    gate, up, down = c.weights()
    x, ids, w = c.batch(32)
    assert np.isin(ids, c.GPU_EXPERTS).any()
    y = wrappers["bf16", True].forward(_t(x), torch.from_numpy(ids), torch.from_numpy(w)).float().numpy()
    for masked in (False, True):
        exact = c.reference(gate, up, down, x, ids, w, c.mask(masked))
        err = np.linalg.norm(y - exact) / np.linalg.norm(exact)
        assert (err < 2.0 ** -7) == masked, (masked, err)
