"""The kt-kernel comparison cases: inputs drawn from a seed with numpy's PCG64 (the same bits in every numpy), so the
committed kt-kernel outputs (tests/data/kt_kernel/reference.npz, written by scripts/kt_kernel_reference.py in a
kt-kernel environment) can be checked without kt-kernel or its inputs in the repository."""

import numpy as np

E, K, D, I = 8, 2, 256, 256  # experts, top-k, hidden_size, moe_intermediate_size
TOKENS = (1, 7, 32, 512)
KEPT_ROWS = 8  # rows of each output committed (all of them for T <= 8)
GPU_EXPERTS = (0, 3)  # the masked cases' GPU-resident experts
# kt-kernel's operator classes per kind (its avx2 build names the bf16 one AVX2BF16_MOE and has no online int8/int4)
# and the KTMoEWrapper method that selects them.
METHODS = {"bf16": (("AMXBF16_MOE", "AVX2BF16_MOE"), "BF16"), "int8": (("AMXInt8_MOE",), "AMXINT8"),
           "int4": (("AMXInt4_MOE",), "AMXINT4")}


def bf16_bits(a):
    """float32 -> bfloat16 bits (uint16), round to nearest even (finite inputs)."""
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def bf16_to_f32(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


def weights(seed=20261202):
    """gate, up (E, I, D) and down (E, D, I) as bf16 bits."""
    rng = np.random.default_rng(seed)
    gate = bf16_bits(rng.standard_normal((E, I, D), dtype=np.float32) / np.sqrt(D))
    up = bf16_bits(rng.standard_normal((E, I, D), dtype=np.float32) / np.sqrt(D))
    down = bf16_bits(rng.standard_normal((E, D, I), dtype=np.float32) / np.sqrt(I))
    return gate, up, down


def batch(T):
    """x (T, D) bf16 bits, ids (T, K) int64 (distinct per token), weights (T, K) float32 summing to 1."""
    rng = np.random.default_rng(1000 + T)
    x = bf16_bits(rng.standard_normal((T, D), dtype=np.float32))
    ids = np.argsort(rng.random((T, E)), axis=1)[:, :K].astype(np.int64)
    w = rng.random((T, K), dtype=np.float32) + np.float32(0.1)
    w /= w.sum(axis=1, keepdims=True)
    return x, ids, w


def mask(masked):
    m = np.zeros(E, dtype=np.bool_)
    if masked:
        m[list(GPU_EXPERTS)] = True
    return m


def reference(gate, up, down, x, ids, w, m):
    """float64 sum over each token's unmasked experts of w * down(silu(gate x) * up x), on the bf16 values."""
    g, u, dn, xf = (bf16_to_f32(a).astype(np.float64) for a in (gate, up, down, x))
    y = np.zeros((x.shape[0], D))
    for t in range(x.shape[0]):
        for k in range(ids.shape[1]):
            e = int(ids[t, k])
            if e < 0 or m[e]:
                continue
            a, b = g[e] @ xf[t], u[e] @ xf[t]
            y[t] += w[t, k] * (dn[e] @ (a / (1 + np.exp(-a)) * b))
    return y
