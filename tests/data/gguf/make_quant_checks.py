#!/usr/bin/env python3
"""Test data for hymoe's GGUF block decoders, checked against llama.cpp's own Python package (gguf-py).

Writes, next to this script:
  quant_blocks.gguf  for each of F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS, MXFP4,
                     Q2_K, Q3_K, TQ1_0, TQ2_0, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M:
                     `<type>.blocks`, random blocks of that type (every bit pattern of codes, grid indices, signs
                     and packed scales; f16
                     scale fields finite, with negative, zero and subnormal values; E8M0 exponents below 255), and
                     `<type>.expected`, gguf-py's dequantization of them as F32; and, per IQ grid, the key
                     `grid.<type>.fnv1a64`: the FNV-1a 64 hash of gguf-py's grid as int8, entry after entry.
  ../conformance/gguf/dequant_fnv1a64.json
                     for every tensor of the conformance cases' model.gguf: the FNV-1a 64 hash of gguf-py's
                     dequantization as little-endian f32 bytes, with the element count and the first values.

With --fuzz-seeds DIR, writes instead a few small GGUF files into DIR (the gguf fuzz target's seed corpus,
fuzz/corpus/gguf): metadata of every value type, one tensor of each decodable type, alignment 64.

Needs numpy and gguf (PyPI), e.g. in a virtual environment: python -m venv /tmp/v && /tmp/v/bin/pip install gguf
Only for regenerating the data; the tests and CI never run it.
"""
import json
import os

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T
from gguf.quants import dequantize

HERE = os.path.dirname(os.path.abspath(__file__))
CONFORMANCE = os.path.join(HERE, "..", "conformance", "gguf")


def fnv1a64(data: bytes) -> str:
    h = 0xCBF29CE484222325
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def finite_f16(rng, n):
    """Random finite f16 bit patterns: mostly normal values of both signs, some zeros and subnormals."""
    bits = rng.integers(0, 1 << 16, size=n, dtype=np.uint32).astype(np.uint16)
    exp = (bits >> 10) & 0x1F
    bits = np.where(exp == 0x1F, bits & ~np.uint16(0x4000), bits).astype(np.uint16)  # no inf/NaN
    bits[::7] = 0                        # d = 0
    bits[3::11] = bits[3::11] & 0x83FF   # subnormal (exponent 0)
    return bits


def random_blocks(rng, qtype, n_blocks):
    block_values, block_bytes = gguf.GGML_QUANT_SIZES[qtype]
    raw = rng.integers(0, 256, size=(n_blocks, block_bytes), dtype=np.uint8)
    # Offsets of the f16 scale fields in each block.
    f16_fields = {T.Q8_0: [0], T.Q4_0: [0], T.Q4_1: [0, 2], T.Q5_0: [0], T.Q5_1: [0, 2], T.Q4_K: [0, 2],
                  T.Q5_K: [0, 2], T.Q6_K: [208], T.IQ4_NL: [0], T.IQ4_XS: [0], T.MXFP4: [],
                  T.Q2_K: [80, 82], T.Q3_K: [108], T.TQ1_0: [52], T.TQ2_0: [64], T.IQ2_XXS: [0], T.IQ2_XS: [0],
                  T.IQ2_S: [0], T.IQ3_XXS: [0], T.IQ3_S: [0], T.IQ1_S: [0], T.IQ1_M: []}[qtype]
    for off in f16_fields:
        raw[:, off:off + 2] = finite_f16(rng, n_blocks).view(np.uint8).reshape(n_blocks, 2)
    if qtype == T.IQ1_M:
        # IQ1_M's f16 d lies in the top nibbles of its four uint16 scale words (bytes 48-55), nibble i in word i.
        d = finite_f16(rng, n_blocks)
        words = raw[:, 48:56].copy().view(np.uint16)
        for i in range(4):
            words[:, i] = (words[:, i] & 0x0FFF) | (((d >> (4 * i)) & 0xF) << 12)
        raw[:, 48:56] = words.view(np.uint8)
    if qtype == T.MXFP4:
        # E8M0 exponents 0..254 (255 is NaN in OCP MX; hymoe refuses it, ggml reads 2^127): the subnormal halves
        # 0 and 1, the largest (254: some values past float's range, inf in both), the rest random.
        raw[:, 0] = rng.integers(0, 255, size=n_blocks, dtype=np.uint8)
        raw[:3, 0] = [0, 1, 254][:n_blocks]
    return raw


def fuzz_seeds(out_dir):
    rng = np.random.default_rng(17)
    os.makedirs(out_dir, exist_ok=True)
    # Metadata of every value type, arrays of several element types, and a nested array (spec-legal).
    w = gguf.GGUFWriter(os.path.join(out_dir, "metadata.gguf"), "qwen3moe")
    w.add_uint8("t.u8", 200)
    w.add_int8("t.i8", -100)
    w.add_uint16("t.u16", 60000)
    w.add_int16("t.i16", -30000)
    w.add_uint32("t.u32", 7)
    w.add_int32("t.i32", -7)
    w.add_float32("t.f32", 0.5)
    w.add_bool("t.bool", True)
    w.add_string("t.str", "\u00e9t\u00e9")
    w.add_string("t.empty", "")
    w.add_uint64("t.u64", 1 << 63 | 1)
    w.add_int64("t.i64", -1)
    w.add_float64("t.f64", 1e300)
    w.add_array("t.ints", [1, -2, 3])
    w.add_array("t.strs", ["a", "", "bc"])
    w.add_array("t.floats", [0.25, -1.0])
    w.add_tensor("x", np.arange(8, dtype=np.float32))
    w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()
    w = gguf.GGUFWriter(os.path.join(out_dir, "nested.gguf"), "llama")
    w.add_array("t.nested", [[1, 2], [3]])
    w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()
    # One small tensor of each decodable type, 2-D and 3-D, with alignment 64.
    w = gguf.GGUFWriter(os.path.join(out_dir, "types.gguf"), "qwen2moe")
    w.add_custom_alignment(64)
    w.add_uint32("qwen2moe.expert_count", 2)
    w.add_tensor("f16", rng.standard_normal((2, 3)).astype(np.float16))
    w.add_tensor("bf16", rng.integers(0, 256, size=(1, 8), dtype=np.uint8), raw_dtype=T.BF16)
    for qtype in (T.Q8_0, T.Q4_0, T.Q4_K, T.Q5_K, T.Q6_K, T.MXFP4, T.Q4_1, T.Q5_0, T.Q5_1, T.IQ4_NL, T.IQ4_XS, T.Q2_K,
                  T.Q3_K, T.TQ1_0, T.TQ2_0):
        raw = random_blocks(rng, qtype, 2)
        w.add_tensor(qtype.name, raw.reshape(2, 1, -1), raw_dtype=qtype)
    w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()


def main():
    import sys
    if len(sys.argv) == 3 and sys.argv[1] == "--fuzz-seeds":
        fuzz_seeds(sys.argv[2])
        return
    rng = np.random.default_rng(1717)
    writer = gguf.GGUFWriter(os.path.join(HERE, "quant_blocks.gguf"), "hymoe-quant-test")
    # F16 and BF16: every finite value class, as plain tensors.
    f16 = np.concatenate([finite_f16(rng, 250), np.array([0x7C00, 0xFC00, 0x0001, 0x8001, 0x3C00, 0xC000], np.uint16)])
    writer.add_tensor("F16.blocks", f16.view(np.float16))
    writer.add_tensor("F16.expected", f16.view(np.float16).astype(np.float32))
    bf16 = rng.integers(0, 1 << 16, size=256, dtype=np.uint32).astype(np.uint16)
    bf16 = np.where(((bf16 >> 7) & 0xFF) == 0xFF, bf16 & ~np.uint16(0x4000), bf16).astype(np.uint16)  # no NaN
    writer.add_tensor("BF16.blocks", bf16.view(np.uint8).reshape(1, 512), raw_dtype=T.BF16)
    writer.add_tensor("BF16.expected", (bf16.astype(np.uint32) << 16).view(np.float32))
    # (Types added later come last, so the earlier ones keep their random blocks.)
    for qtype, n_blocks in [(T.Q8_0, 24), (T.Q4_0, 24), (T.Q4_K, 6), (T.Q5_K, 6), (T.Q6_K, 6), (T.MXFP4, 24),
                            (T.Q4_1, 24), (T.Q5_0, 24), (T.Q5_1, 24), (T.IQ4_NL, 24), (T.IQ4_XS, 6),
                            (T.Q2_K, 6), (T.Q3_K, 6), (T.TQ1_0, 6), (T.TQ2_0, 6), (T.IQ2_XXS, 8),
                            (T.IQ2_XS, 8), (T.IQ2_S, 8), (T.IQ3_XXS, 8), (T.IQ3_S, 8), (T.IQ1_S, 8), (T.IQ1_M, 8)]:
        raw = random_blocks(rng, qtype, n_blocks)
        block_values, _ = gguf.GGML_QUANT_SIZES[qtype]
        # Two rows, so the decoder also walks rows.
        rows = raw.reshape(2, -1)
        expected = dequantize(rows, qtype).astype(np.float32)
        assert expected.shape == (2, n_blocks // 2 * block_values)
        writer.add_tensor(f"{qtype.name}.blocks", rows, raw_dtype=qtype)
        writer.add_tensor(f"{qtype.name}.expected", expected)
    # The IQ grids: FNV-1a 64 of gguf-py's grid as int8, entry after entry, one key per grid (IQ1_M shares IQ1_S's).
    for cls in (gguf.quants.IQ2_XXS, gguf.quants.IQ2_XS, gguf.quants.IQ2_S, gguf.quants.IQ3_XXS, gguf.quants.IQ3_S,
                gguf.quants.IQ1_S):
        cls.init_grid()
        grid = cls.grid.reshape(cls.grid_shape).astype(np.int8)
        writer.add_string(f"grid.{cls.qtype.name}.fnv1a64", fnv1a64(grid.tobytes()))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()

    hashes = {}
    for case in sorted(os.listdir(CONFORMANCE)):
        path = os.path.join(CONFORMANCE, case, "model.gguf")
        if not os.path.isfile(path):
            continue
        reader = gguf.GGUFReader(path)
        hashes[case] = {}
        for t in reader.tensors:
            values = dequantize(t.data, t.tensor_type).astype("<f4")
            hashes[case][t.name] = {
                "type": t.tensor_type.name,
                "numel": int(values.size),
                "fnv1a64": fnv1a64(values.tobytes()),
                "first": [float(v) for v in values.reshape(-1)[:4]],
            }
    with open(os.path.join(CONFORMANCE, "dequant_fnv1a64.json"), "w") as f:
        json.dump(hashes, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
