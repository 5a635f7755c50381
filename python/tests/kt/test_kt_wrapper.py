"""hymoe.kt.KTMoEWrapper's contract (kt-kernel 0.7.2's inference mode, as SGLang's KTEPWrapperMethod drives it) on
CPU tensors: construction and its errors, the three loaders, the mask read on every call (in-place writes
re-place experts), submit/sync, the buffer cache and capture sizes, counts, and the methods hymoe cannot honour."""
import json
import pathlib
import struct
import time

import numpy as np
import pytest
import torch

import hymoe.kt as kt
from hymoe.kt import KTMoEWrapper
from hymoe.placement import read_counts

DATA = pathlib.Path(__file__).resolve().parents[3] / "tests" / "data"
HF = DATA / "conformance" / "hf"
E, K, H, I = 6, 2, 64, 32


def make(method="BF16", mask=None, path="", **kw):
    return KTMoEWrapper(1, E, K, H, I, mask, 1, 1, path, 1024, method=method, **kw)


def experts(seed=0, e=E, h=H, i=I):
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(*s, generator=g) / s[-1] ** 0.5).to(torch.bfloat16)
            for s in ((e, i, h), (e, i, h), (e, h, i))]


def batch(T, seed=1, e=E, h=H):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(T, h, generator=g).to(torch.bfloat16)
    ids = torch.argsort(torch.rand(T, e, generator=g), dim=1)[:, :K]
    w = torch.rand(T, K, generator=g) + 0.1
    return x, ids, w / w.sum(1, keepdim=True)


def reference(gate, up, down, x, ids, w, mask):
    y = torch.zeros(x.shape[0], x.shape[1], dtype=torch.float64)
    for t in range(x.shape[0]):
        for k in range(ids.shape[1]):
            e = int(ids[t, k])
            if e < 0 or bool(mask[e]):
                continue
            xf = x[t].double()
            a, b = gate[e].double() @ xf, up[e].double() @ xf
            y[t] += float(w[t, k]) * (down[e].double() @ (torch.nn.functional.silu(a) * b))
    return y


def rel(a, b):
    return float((a.double() - b.double()).norm() / b.double().norm())


def test_kt_kernels_argument_errors():
    with pytest.raises(ValueError, match=r"Unknown mode: 'train'. Supported modes: 'inference', 'sft'"):
        make(mode="train")
    with pytest.raises(ValueError, match=r"Method 'Q5' not supported for inference mode. Supported methods: \["):
        make(method="Q5")
    with pytest.raises(ValueError, match=r"swiglu_limit=7.0 is only supported on method='FP8'"):
        make(swiglu_limit=7.0)
    with pytest.raises(ValueError, match=r"numa_nodes length \(2\) must match threadpool_count \(1\)"):
        make(numa_nodes=[0, 1])
    with pytest.raises(RuntimeError):  # torch's copy_ rules, as kt-kernel copies the mask
        make(mask=torch.zeros(E + 1, dtype=torch.bool))


@pytest.mark.parametrize("kw,message", [
    (dict(method="GPTQ_INT4"), "method 'GPTQ_INT4' is one of kt-kernel's, but hymoe has no kernels"),
    (dict(mode="sft"), "mode 'sft'"),
    (dict(max_deferred_experts_per_token=2), "does not defer experts"),
    (dict(cpu_save=True), "cpu_save=True"),
    (dict(threadpool_count=2, numa_nodes=[0, 1]), "threadpool_count=2"),
])
def test_what_hymoe_cannot_honour_is_a_named_error(kw, message):
    args = dict(layer_idx=0, num_experts=E, num_experts_per_tok=K, hidden_size=H, moe_intermediate_size=I,
                gpu_experts_mask=None, cpuinfer_threads=1, threadpool_count=1, weight_path="",
                chunked_prefill_size=64)
    args.update(kw)
    with pytest.raises(ValueError, match=message):
        KTMoEWrapper(**args)


def test_one_thread_count_per_process():
    make()
    with pytest.raises(ValueError, match="the first KTMoEWrapper of this process set 1 threads"):
        KTMoEWrapper(0, E, K, H, I, None, 2, 1, "", 64)


@pytest.mark.parametrize("method,bound", [("BF16", 2.0 ** -7), ("AMXINT8", 0.05), ("MOE_INT4", 0.3)])
@pytest.mark.parametrize("T", [1, 7, 32, 129])
def test_tensors_forward_matches_the_reference_for_any_mask(method, bound, T):
    gate, up, down = experts()
    w = make(method)
    w.load_weights_from_tensors(gate, up, down, torch.arange(E))
    x, ids, wt = batch(T)
    for masked in ([], [0, 4], list(range(E))):
        w.gpu_experts_mask.zero_()
        w.gpu_experts_mask[masked] = True  # in place, as SGLang's dynamic expert update writes it
        y = w.forward(x, ids, wt)
        assert y.dtype == torch.bfloat16 and tuple(y.shape) == (T, H)
        ref = reference(gate, up, down, x, ids, wt, w.gpu_experts_mask)
        if len(masked) == E:
            assert bool((y == 0).all())
        elif float(ref.norm()) > 0:
            assert rel(y, ref) < bound, (method, T, masked)


def test_padding_ids_are_skipped_and_int32_ids_are_taken():
    gate, up, down = experts()
    w = make()
    w.load_weights_from_tensors(gate, up, down)
    x, ids, wt = batch(5)
    ids[1, 0] = -1
    y = w.forward(x, ids.to(torch.int32), wt)
    assert rel(y, reference(gate, up, down, x, ids, wt, w.gpu_experts_mask)) < 2.0 ** -7


def test_submit_returns_before_the_work_and_sync_returns_it():
    """The overlap SGLang relies on: submit_forward returns while the CPU experts run."""
    gate, up, down = experts(e=16, h=512, i=512)
    w = KTMoEWrapper(0, 16, K, 512, 512, None, 1, 1, "", 4096, method="BF16")
    w.load_weights_from_tensors(gate, up, down)
    x, ids, wt = batch(2048, e=16, h=512)
    t0 = time.perf_counter()
    w.forward(x, ids, wt)
    call = time.perf_counter() - t0
    t0 = time.perf_counter()
    w.submit_forward(x, ids, wt, 0)
    submitted = time.perf_counter() - t0
    y = w.sync_forward(x, 0).clone()
    assert submitted < call / 4, (submitted, call)
    with pytest.raises(RuntimeError, match="sync_forward without a submit_forward"):
        w.sync_forward(x)
    w.submit_forward(x, ids, wt)
    with pytest.raises(RuntimeError, match="while a call is in flight"):
        w.submit_forward(x, ids, wt)
    assert torch.equal(w.sync_forward(x), y)


def test_qlen_beyond_chunked_prefill_size_is_kt_kernels_error():
    gate, up, down = experts()
    w = KTMoEWrapper(0, E, K, H, I, None, 1, 1, "", 4, method="BF16")
    w.load_weights_from_tensors(gate, up, down)
    x, ids, wt = batch(5)
    with pytest.raises(ValueError, match=r"qlen \(5\) exceeds chunked_prefill_size \(4\)"):
        w.submit_forward(x, ids, wt)


def test_buffers_are_reused_and_capture_sizes_kept():
    gate, up, down = experts()
    w = make()
    w.load_weights_from_tensors(gate, up, down)
    KTMoEWrapper.set_capture_batch_sizes([3, 5])
    assert KTMoEWrapper.get_capture_batch_sizes() == [3, 5]
    try:
        a = w.forward(*batch(3))
        b = w.forward(*batch(3, seed=2))
        assert a.data_ptr() == b.data_ptr()  # the same buffer, as kt-kernel returns it
        w.forward(*batch(4))
        w.forward(*batch(6))
        assert w.forward(*batch(3)).data_ptr() == a.data_ptr()  # capture sizes survive other sizes
        KTMoEWrapper.clear_buffer_cache()
        assert not kt._buffers
    finally:
        KTMoEWrapper.set_capture_batch_sizes([])


def test_freeing_gpu_experts_host_copy_keeps_the_bits():
    gate, up, down = experts()
    x, ids, wt = batch(9)
    kept, freed = make(), make(keep_gpu_experts_on_cpu=False)
    for w in (kept, freed):
        w.load_weights_from_tensors(gate, up, down)
    full = freed.moe.host_weight_bytes
    for m in ([1, 2], [], [5]):
        for w in (kept, freed):
            w.update_gpu_experts_mask(torch.isin(torch.arange(E), torch.tensor(m, dtype=torch.int64)))
        assert torch.equal(kept.forward(x, ids, wt), freed.forward(x, ids, wt))
        assert freed.moe.host_weight_bytes == full // E * (E - len(m))
    with pytest.raises(ValueError, match=r"mask has shape \(5,\); expected \(6,\)"):
        kept.update_gpu_experts_mask(torch.zeros(5, dtype=torch.bool))


def test_physical_to_logical_map_places_experts():
    gate, up, down = experts()
    p2l = torch.tensor([3, 1, 1, 0, 5, 2])
    w, ident = make(), make()
    w.load_weights_from_tensors(gate, up, down, p2l)
    ident.load_weights_from_tensors(gate, up, down)
    x, ids, wt = batch(8)
    assert torch.equal(w.forward(x, ids, wt).clone(), ident.forward(x, p2l[ids], wt))
    with pytest.raises(ValueError, match="CPU int64 tensor"):
        make().load_weights_from_tensors(gate, up, down, p2l.to(torch.int32))


def test_counts_are_the_routing_and_write_a_table_hymoe_plan_reads(tmp_path):
    gate, up, down = experts()
    layers = []
    for layer in (0, 1):
        w = KTMoEWrapper(layer, E, K, H, I, torch.arange(E) < 2, 1, 1, "", 64, method="BF16")
        w.load_weights_from_tensors(gate, up, down)
        layers.append(w)
    x, ids, wt = batch(10)
    layers[0].forward(x, ids, wt)
    want = torch.bincount(ids.flatten(), minlength=E)
    assert torch.equal(layers[0].activation_counts(), want)  # GPU experts 0 and 1 included
    path = tmp_path / "counts.json"
    kt.write_counts(str(path), layers)
    table = read_counts(str(path))
    assert np.array_equal(np.asarray(table), np.stack([want.numpy(), np.zeros(E)]))
    kt.write_counts(str(tmp_path / "counts.pt"), layers)  # SGLang's recorder form
    record = torch.load(str(tmp_path / "counts.pt"))
    assert record["logical_count"].dtype == torch.int64
    assert torch.equal(record["logical_count"], torch.stack([want, torch.zeros(E, dtype=torch.int64)])[None])


def _safetensors(path):
    """name -> numpy array of a safetensors file (for the reference; bf16 as float32)."""
    raw = pathlib.Path(path).read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    out = {}
    for name, v in header.items():
        if name == "__metadata__":
            continue
        b, e = v["data_offsets"]
        buf = raw[8 + n + b:8 + n + e]
        if v["dtype"] == "BF16":
            a = (np.frombuffer(buf, np.uint16).astype(np.uint32) << 16).view(np.float32)
        elif v["dtype"] == "F32":
            a = np.frombuffer(buf, np.float32)
        else:
            continue
        out[name] = a.reshape(v["shape"])
    return out


def test_load_weights_from_a_hugging_face_directory():
    case = HF / "qwen3_moe_e16_k8_norm_bf16"
    cfg = json.loads((case / "config.json").read_text())
    e, k, h, i = cfg["num_local_experts"], cfg["num_experts_per_tok"], cfg["hidden_size"], cfg["moe_intermediate_size"]
    tensors = _safetensors(case / "weights.safetensors")
    p = "model.layers.1.mlp.experts."
    gate, up, down = (torch.from_numpy(np.stack([tensors[f"{p}{x}.{n}.weight"] for x in range(e)]))
                      for n in ("gate_proj", "up_proj", "down_proj"))
    mask = torch.zeros(e, dtype=torch.bool)
    mask[[2, 9]] = True
    for method, bound in (("BF16", 2.0 ** -7), ("AMXINT8", 0.05)):
        w = KTMoEWrapper(1, e, k, h, i, mask, 1, 1, str(case), 64, method=method)
        w.load_weights()
        g = torch.Generator().manual_seed(3)
        x = torch.randn(11, h, generator=g).to(torch.bfloat16)
        ids = torch.argsort(torch.rand(11, e, generator=g), 1)[:, :k]
        wt = torch.rand(11, k, generator=g)
        assert rel(w.forward(x, ids, wt), reference(gate, up, down, x, ids, wt, mask)) < bound
    with pytest.raises(ValueError, match="num_experts=8, but layer 1 of .* has 16"):
        KTMoEWrapper(1, 8, k, h, i, None, 1, 1, str(case), 64, method="BF16").load_weights()
    with pytest.raises(ValueError, match="quantization_config.quant_method is None; method FP8 takes 'fp8'"):
        KTMoEWrapper(1, e, k, h, i, None, 1, 1, str(case), 64, method="FP8").load_weights()


def test_load_weights_fp8_and_gguf_checkpoints():
    fp8 = HF / "deepseek_v3_e16_g4_tg2_k4_fp8"
    cfg = json.loads((fp8 / "config.json").read_text())
    w = KTMoEWrapper(1, cfg["n_routed_experts"], cfg["num_experts_per_tok"], cfg["hidden_size"],
                     cfg["moe_intermediate_size"], None, 1, 1, str(fp8), 64, method="FP8")
    w.load_weights()
    x, ids, wt = batch(4, e=cfg["n_routed_experts"], h=cfg["hidden_size"])
    assert bool(w.forward(x, ids, wt).float().abs().sum() > 0)
    with pytest.raises(ValueError, match="method BF16 takes an unquantized"):
        KTMoEWrapper(1, cfg["n_routed_experts"], 2, cfg["hidden_size"], cfg["moe_intermediate_size"], None, 1, 1,
                     str(fp8), 64, method="BF16").load_weights()
    gguf = DATA / "conformance" / "gguf" / "qwen3moe_q8_0"
    meta = json.loads((gguf / "meta.json").read_text())
    with pytest.raises(FileNotFoundError, match="GGUF weight path not found"):
        KTMoEWrapper(0, 2, 1, 2, 2, None, 1, 1, str(gguf / "none.gguf"), 64, method="LLAMAFILE").load_weights()
    with pytest.raises(ValueError, match="kt-kernel's converted weights"):
        KTMoEWrapper(0, 2, 1, 2, 2, None, 1, 1, str(gguf), 64, method="BF16").load_weights()
    d = meta["dims"]
    w = KTMoEWrapper(meta["block"], d["E"], d["K"], d["D"], d["H"], None, 1, 1, str(gguf), 64, method="LLAMAFILE")
    w.load_weights()  # the folder's one .gguf file
    x, ids, wt = batch(5, e=d["E"], h=d["D"])
    ids = torch.argsort(torch.rand(5, d["E"]), 1)[:, :d["K"]]
    wt = torch.rand(5, d["K"])
    y = w.forward(x, ids, wt).clone()
    assert bool(y.float().abs().sum() > 0)
    w.gpu_experts_mask.fill_(True)
    assert bool((w.forward(x, ids, wt) == 0).all())


def test_decode_placer_moves_hot_experts_onto_the_gpu_as_the_score_cache_does():
    """Expert 5 is hot during decode and starts on the CPU: the policy swaps it in for a cold GPU expert within its
    move credit (one swap per 1 / move_rate steps), and the wrapper's mask follows."""
    gate, up, down = experts()
    start = torch.zeros(E, dtype=torch.bool)
    start[[0, 1]] = True
    layers = []
    for layer in (0, 1):
        w = KTMoEWrapper(layer, E, K, H, I, start, 1, 1, "", 64, method="BF16")
        w.load_weights_from_tensors(gate, up, down)
        layers.append(w)
    placer = kt.DecodePlacer(layers, move_rate=0.5)
    x = batch(1)[0]
    ids, wt = torch.tensor([[5, 1]]), torch.tensor([[0.5, 0.5]])
    moves = []
    for _ in range(4):
        layers[0].forward(x, ids, wt)
        moves.append(placer.step())
    assert moves == [0, 1, 0, 0]  # credit 0.5 after the first step, 1 after the second: one swap, then none needed
    assert layers[0].gpu_experts_mask.tolist() == [False, True, False, False, False, True]
    assert layers[1].gpu_experts_mask.tolist() == start.tolist()  # nothing routed there
    assert torch.equal(placer.masks[0], layers[0].gpu_experts_mask)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_the_output_has_the_hidden_states_dtype(dtype):
    gate, up, down = experts()
    w = make()
    w.load_weights_from_tensors(gate, up, down)
    x, ids, wt = batch(3)
    y = w.forward(x.to(dtype).reshape(1, 3, H), ids, wt)  # (batch, seq, hidden) flattens as kt-kernel's does
    assert y.dtype == dtype and tuple(y.shape) == (3, H)
    assert rel(y, reference(gate, up, down, x, ids, wt, w.gpu_experts_mask)) < 2.0 ** -7
