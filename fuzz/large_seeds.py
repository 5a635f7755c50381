#!/usr/bin/env python3
"""Writes the fuzz targets' large seeds into OUT/<target>/: inputs of 100-270 KB that reach the readers' limits
(100,000 nested arrays or objects, closed and unclosed; 200,000-digit numbers; 200 KB strings; a 20,000-entry GGUF
string array). They are too large to keep in fuzz/corpus/ and to mutate a million times, so `make fuzz` runs each
target over them once, whole, before fuzzing from the small seeds. The first byte of a json/stats input picks the
reader, as in json_fuzz.cc and stats_fuzz.cc.

usage: large_seeds.py OUT
"""
import os
import struct
import sys

DEPTH = 100_000
LONG = 200_000


def safetensors(header: str, data: bytes = b"") -> bytes:
    h = header.encode()
    return struct.pack("<Q", len(h)) + h + data


def gguf_string_array(n: int) -> bytes:
    def s(x: str) -> bytes:
        b = x.encode()
        return struct.pack("<Q", len(b)) + b

    kv = s("general.architecture") + struct.pack("<I", 8) + s("llama")
    kv += s("tokenizer.ggml.tokens") + struct.pack("<IIQ", 9, 8, n) + b"".join(s("t%d" % i) for i in range(n))
    return b"GGUF" + struct.pack("<IQQ", 3, 0, 2) + kv


def json_family(reader: int, key: str) -> dict:
    p = bytes([reader])
    k = ('"%s":' % key).encode()
    return {
        "deep_arrays": p + b"[" * DEPTH,
        "deep_arrays_closed": p + b"[" * DEPTH + b"]" * DEPTH,
        "deep_objects": p + b"{" + k + (b"{" + k) * (DEPTH // 2) + b"1" + b"}" * (DEPTH // 2 + 1),
        "long_number": p + b"{" + k + b"9" * LONG + b"}",
        "long_string": p + b"{" + k + b'"' + b"\x1b[2J" + b"x" * LONG + b'"}',
        "long_unterminated_string": p + b'{"' + b"x" * LONG,
    }


def main() -> None:
    out = sys.argv[1]
    seeds = {"json": {}, "stats": {}, "safetensors": {}, "gguf": {}}
    # json_fuzz: 0 parse_json, 1 MoE config, 2 PLAN.json, 3 bench shape.
    for reader, key in enumerate(["a", "dim", "mask", "dim"]):
        for name, data in json_family(reader, key).items():
            seeds["json"]["%s_%d" % (name, reader)] = data
    # stats_fuzz: 0 JSON counts, 1 CSV counts, 2 safetensors counts, 3 trace CSV.
    for name, data in json_family(0, "per_layer_counts").items():
        seeds["stats"]["json_" + name] = data
    seeds["stats"]["csv_long_field"] = b"\x01" + b"9" * LONG + b",1\n"
    seeds["stats"]["csv_wide_row"] = b"\x01" + b"1," * (LONG // 2) + b"1\n"
    seeds["stats"]["safetensors_deep_shape"] = b"\x02" + safetensors(
        '{"logical_count":{"dtype":"F64","shape":' + "[" * DEPTH)
    seeds["stats"]["trace_long_field"] = b"\x03token,layer,expert\n0,0," + b"7" * LONG + b"\n"
    seeds["safetensors"]["deep_shape"] = safetensors(
        '{"a":{"dtype":"F32","shape":' + "[" * DEPTH + "1" + "]" * DEPTH + ',"data_offsets":[0,4]}}', b"\0" * 4)
    seeds["safetensors"]["deep_shape_unclosed"] = safetensors('{"a":{"dtype":"F32","shape":' + "[" * DEPTH)
    seeds["safetensors"]["long_name"] = safetensors(
        '{"\x1b' + "n" * LONG + '":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}', b"\0" * 4)
    seeds["gguf"]["string_array_20000"] = gguf_string_array(20_000)
    for target, files in seeds.items():
        os.makedirs(os.path.join(out, target), exist_ok=True)
        for name, data in files.items():
            with open(os.path.join(out, target, name), "wb") as f:
                f.write(data)


if __name__ == "__main__":
    main()
