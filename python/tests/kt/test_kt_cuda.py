"""hymoe.kt.KTMoEWrapper on CUDA tensors, as SGLang drives it on a GPU: pinned staging, the engine's call ordered on
the caller's stream by a host function, the output copy ordered after it. Needs a GPU and a hymoe built with the
CUDA toolkit; skipped elsewhere (scripts/gpu_check.sh runs it on a lent GPU machine)."""
import time

import pytest
import torch

from hymoe.kt import KTMoEWrapper

from test_kt_wrapper import batch, experts, make

if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)


def loaded(method="BF16", **kw):
    gate, up, down = experts()
    w = make(method, **kw)
    w.load_weights_from_tensors(gate, up, down)
    return w


@pytest.mark.parametrize("method", ["BF16", "AMXINT8"])
@pytest.mark.parametrize("T", [1, 7, 129])
@pytest.mark.parametrize("masked", [[], [0, 4]])
def test_cuda_tensors_give_the_cpu_tensors_bits(method, T, masked):
    w = loaded(method)
    w.gpu_experts_mask[masked] = True
    x, ids, wt = batch(T)
    want = w.forward(x, ids, wt).clone()
    stream = torch.cuda.Stream()
    got = w.forward(x.cuda(), ids.cuda(), wt.cuda(), stream.cuda_stream)
    assert got.device.type == "cuda" and got.dtype == x.dtype
    stream.synchronize()
    assert torch.equal(got.cpu(), want)


def test_the_call_waits_for_the_streams_earlier_work_and_the_copy_out_for_the_call():
    """Inputs written by a kernel still queued behind a long one are what the CPU experts read, and a kernel queued
    after sync_forward sees their result: both orderings are the stream's, with no host synchronization."""
    w = loaded()
    x, ids, wt = batch(32)
    want = w.forward(x, ids, wt).clone()
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        xg = torch.zeros_like(x, device="cuda")
        torch.cuda._sleep(200_000_000)  # about 0.1 s of GPU time before the inputs are written
        xg.copy_(x.cuda(non_blocking=True))
        idg, wtg = ids.cuda(), wt.cuda()
    w.submit_forward(xg, idg, wtg, stream.cuda_stream)
    y = w.sync_forward(xg, stream.cuda_stream)
    with torch.cuda.stream(stream):
        doubled = y * 2
    stream.synchronize()
    assert torch.equal(y.cpu(), want)
    assert torch.equal(doubled.cpu(), want * 2)


def test_submit_on_a_busy_stream_returns_at_once():
    w = loaded()
    x, ids, wt = batch(7)
    stream = torch.cuda.Stream()
    xg, idg, wtg = x.cuda(), ids.cuda(), wt.cuda()
    with torch.cuda.stream(stream):
        torch.cuda._sleep(500_000_000)
    t0 = time.perf_counter()
    w.submit_forward(xg, idg, wtg, stream.cuda_stream)
    submitted = time.perf_counter() - t0
    y = w.sync_forward(xg, stream.cuda_stream)
    stream.synchronize()
    assert submitted < 0.05, submitted
    assert torch.equal(y.cpu(), w.forward(x, ids, wt))


def test_a_captured_graph_replays_the_cpu_experts_on_new_inputs():
    """SGLang captures decode steps in CUDA graphs: the host function and the copies are captured with the capture
    size's fixed buffers, and each replay runs the CPU experts on that replay's inputs."""
    w = loaded()
    KTMoEWrapper.set_capture_batch_sizes([4])
    try:
        x, ids, wt = batch(4)
        xg, idg, wtg = x.cuda(), ids.cuda(), wt.cuda()
        stream = torch.cuda.Stream()
        with torch.cuda.stream(stream):
            w.forward(xg, idg, wtg, stream.cuda_stream)  # warm-up: the capture size's buffers exist before capture
        stream.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=stream):
            out = w.forward(xg, idg, wtg, torch.cuda.current_stream().cuda_stream)
        for seed in (5, 6, 7):
            x2, ids2, wt2 = batch(4, seed=seed)
            xg.copy_(x2.cuda())
            idg.copy_(ids2.cuda())
            wtg.copy_(wt2.cuda())
            graph.replay()
            torch.cuda.synchronize()
            assert torch.equal(out.cpu(), w.forward(x2, ids2, wt2)), seed
    finally:
        KTMoEWrapper.set_capture_batch_sizes([])
