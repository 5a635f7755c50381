#!/usr/bin/env python3
# The numerics table of docs/semantics.md ("Expert weight formats"): for each conformance case with unpacked expert
# names, every token through every expert MLP in double, with the bf16-native and q8-block formats' rounding applied
# as the kernels apply it (activations rounded to bf16 / quantized per block of 32 before each projection, hidden
# rows in f32 first; weights rounded to bf16 / quantized per block of 32 along K), against f32 and bf16-widened
# weights. Prints each case's largest error relative to the output's largest magnitude. Needs numpy.
# Usage: python3 scripts/format_numerics.py   (from the repository root)
import json, struct, glob, os, math, numpy as np
def load(path):
    data = open(path, 'rb').read(); n = struct.unpack('<Q', data[:8])[0]; h = json.loads(data[8:8+n]); base = 8 + n
    return {k: np.frombuffer(data[base+v['data_offsets'][0]: base+v['data_offsets'][1]], dtype=np.float32).reshape(v['shape'])
            for k, v in h.items() if k != '__metadata__'}
def bf16(x):
    b = np.ascontiguousarray(x, np.float32).view(np.uint32).astype(np.uint64)
    b = (b + 0x7fff + ((b >> 16) & 1)) >> 16
    return (b.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
def q8(x):
    x = np.asarray(x, np.float32); out = np.empty(x.shape, np.float64)
    for b in range(0, x.shape[-1], 32):
        blk = x[..., b:b+32]; d = (np.abs(blk).max(axis=-1, keepdims=True) / np.float32(127)).astype(np.float32)
        inv = np.where(d > 0, np.float32(1) / np.where(d > 0, d, np.float32(1)), np.float32(0)).astype(np.float32)
        out[..., b:b+32] = np.clip(np.rint(blk * inv), -127, 127) * d.astype(np.float64)
    return out
def act(a, g, u):
    if a == 'silu': return g / (1 + np.exp(-g)) * u
    if a == 'gelu': return 0.5 * u * (1 + np.vectorize(math.erf)(u / math.sqrt(2)))
    return np.maximum(u, 0)
ident = lambda t: np.asarray(t, np.float64)
rows = []
for case in sorted(glob.glob('tests/data/conformance/moe/*/')):
    cfg = json.load(open(case + 'config.json')); w = load(case + 'weights.safetensors')
    x = load(case + 'input.safetensors')['x']; x = x.reshape(-1, x.shape[-1]); a = cfg['activation']; gated = a == 'silu'
    mlps = []
    for p in sorted({k.rsplit('.', 2)[0] for k in w if k.endswith('up_proj.weight')}):
        mlps.append((w.get(p + '.gate_proj.weight'), w[p + '.up_proj.weight'], w[p + '.down_proj.weight']))
    if not mlps: continue  # packed expert names (up_w, ...)
    e = {'wid': [], 'bn': [], 'q8': []}
    for G, U, Dn in mlps:
        def run(rx, rw):
            xx = rx(x); u = xx @ rw(U).T; g = xx @ rw(G).T if gated else u
            h = rx(act(a, g, u).astype(np.float32)); return h @ rw(Dn).T
        y32 = run(ident, ident); ywid = run(ident, bf16); ybn = run(bf16, bf16); yq8 = run(q8, q8)
        e['wid'].append(np.abs(ybn - ywid).max() / np.abs(ywid).max()); e['bn'].append(np.abs(ybn - y32).max() / np.abs(y32).max())
        e['q8'].append(np.abs(yq8 - y32).max() / np.abs(y32).max())
    rows.append((os.path.basename(case.rstrip('/')), max(e['wid']), max(e['bn']), max(e['q8'])))
for r in rows: print(f'{r[0]:<24} {r[1]:.2e} {r[2]:.2e} {r[3]:.2e}')
A = np.array([r[1:] for r in rows]); print('cases', len(rows), 'median', np.median(A, 0), 'largest', A.max(0))
