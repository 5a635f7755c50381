"""The zero-copy rules of docs/python.md: what crosses into C++ without a copy, what comes back without one, what
raises; and that the GIL is released while the library runs."""

import sys
import threading
import time

import numpy as np
import pytest

import hymoe
import hymoe.placement as placement
from hymoe import _arrays, _core


def test_the_extension_is_the_packaged_one():
    assert _core.__name__ == "hymoe._core"
    assert hymoe.__version__


def test_numpy_input_is_read_in_place():
    big = np.arange(1 << 22, dtype=np.float32)  # 16 MiB
    assert _core._array_address(big, "float32") == big.ctypes.data


def test_a_view_is_read_in_place_at_its_offset():
    big = np.zeros((64, 1024), dtype=np.float32)
    rows = big[8:16]  # contiguous: no copy
    assert _core._array_address(rows, "float32") == rows.ctypes.data


def test_strided_and_wrong_dtype_inputs_raise():
    big = np.zeros((64, 1024), dtype=np.float32)
    with pytest.raises(ValueError, match="C-contiguous"):
        _core._array_address(big[:, ::2], "float32")
    with pytest.raises(TypeError, match="dtype float32"):
        _core._array_address(big.astype(np.float64), "float32")


def test_torch_input_crosses_as_a_view_of_its_memory():
    torch = pytest.importorskip("torch")
    t = torch.arange(1 << 20, dtype=torch.float32)
    view, from_torch = _arrays.as_numpy(t, "x")
    assert from_torch
    assert view.ctypes.data == t.data_ptr()
    assert _core._array_address(view, "float32") == t.data_ptr()
    # A tensor that requires grad crosses too (detached, same memory).
    w = torch.ones(4, 4, requires_grad=True)
    assert _arrays.as_numpy(w, "w")[0].ctypes.data == w.data_ptr()


def test_results_own_the_cpp_buffer_and_torch_results_share_it():
    freq = np.random.default_rng(0).random((8, 16), dtype=np.float32)
    mask, report, scores = placement.plan(freq, 20)
    # Not copies: each result is a view whose base is the capsule holding the C++ buffer.
    assert not mask.flags.owndata and mask.base is not None
    assert not scores.flags.owndata and scores.base is not None
    assert mask.dtype == np.bool_ and mask.shape == (8, 16) and int(mask.sum()) == 20
    wrapped = _arrays.like_input(scores, True) if "torch" in sys.modules or _has_torch() else None
    if wrapped is not None:
        assert wrapped.data_ptr() == scores.ctypes.data


def _has_torch():
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


def test_torch_table_on_another_device_raises():
    torch = pytest.importorskip("torch")
    t = torch.ones(2, 4, device="meta")
    with pytest.raises(ValueError, match="must be on the CPU, got a tensor on meta"):
        placement.generate_gpu_experts_masks(t, 2)


def test_bfloat16_and_integer_tables_are_accepted_as_float32():
    torch = pytest.importorskip("torch")
    counts = torch.tensor([[1, 5, 3, 8], [2, 4, 9, 1]])
    expected = [[False, True, False, True], [False, False, True, False]]
    assert placement.generate_gpu_experts_masks(counts, 3).tolist() == expected
    assert placement.generate_gpu_experts_masks(counts.to(torch.bfloat16), 3).tolist() == expected
    assert placement.generate_gpu_experts_masks(counts.numpy().astype(np.int32), 3).tolist() == expected


def test_the_gil_is_released_while_the_planner_runs():
    # A planner call long enough to measure (a global top-k over 8M scores); while it runs in a thread, the main
    # thread keeps running Python. Were the GIL held, the main thread would stall for the whole call.
    freq = np.random.default_rng(1).random((2048, 4096), dtype=np.float32)
    start = time.perf_counter()
    placement.plan(freq, 1 << 22)
    call_seconds = time.perf_counter() - start
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-4)
    try:
        worker = threading.Thread(target=placement.plan, args=(freq, 1 << 22))
        worker.start()
        longest_gap, last = 0.0, time.perf_counter()
        while worker.is_alive():
            now = time.perf_counter()
            longest_gap, last = max(longest_gap, now - last), now
        worker.join()
    finally:
        sys.setswitchinterval(old)
    assert call_seconds > 0.05, call_seconds
    assert longest_gap < 0.5 * call_seconds, (longest_gap, call_seconds)
