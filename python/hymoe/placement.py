"""GPU-expert placement for hybrid CPU/GPU MoE inference, a drop-in for kt-kernel's.

`generate_gpu_experts_masks` and `plan_gpu_expert_placement` take kt-kernel's arguments with its defaults and
return what it returns: a bool mask of shape (num_layers, num_experts) on the CPU (a torch tensor for torch input,
a numpy array for numpy input) and, for the planner, kt-kernel's report dict (the same keys and values). Bad input
raises kt-kernel's exception types with its messages, in its order. Beyond kt-kernel's two strategies
(`frequency`, `score_aware_layer_balanced`) both accept hymoe's `uniform`, `front-loading`, `random` and
`critical_path` (docs/placement.md).

The rest of the module is hymoe's own: the planner with its cost model and whole-model layouts (`plan`),
statistics files (`read_counts`, `write_counts`, `write_sglang_counts`, `read_trace`, `summarize`), evaluation on held-out data
(`evaluate`, `sweep`) and trace replay (`replay`), all returning plain Python and numpy values.
"""

import json
import operator

from . import _core
from ._arrays import as_numpy, is_torch_tensor, like_input

__all__ = [
    "generate_gpu_experts_masks",
    "plan_gpu_expert_placement",
    "strategy_names",
    "plan",
    "read_counts",
    "write_counts",
    "write_sglang_counts",
    "read_trace",
    "trace_counts",
    "summarize",
    "evaluate",
    "sweep",
    "replay",
]

_INT64_MAX = (1 << 63) - 1
# kt-kernel's report keys; hymoe's report adds its own after them.
_KT_REPORT_KEYS = (
    "strategy", "num_layers", "num_experts_per_layer", "requested_num_gpu_experts", "actual_num_gpu_experts",
    "expected_hit_rate", "selected_score", "total_score", "per_layer_counts", "layer_min", "layer_max",
    "layer_mean", "layer_std", "min_experts_per_layer", "max_experts_per_layer", "alpha",
    "previous_scores_provided")


def strategy_names():
    """Every strategy the planner accepts, kt-kernel's two first."""
    return list(_core.placement_strategy_names())


def _shape(array):
    return tuple(int(d) for d in array.shape)


def _check_tables(activation_freq, previous_scores, alpha):
    """kt-kernel's checks before any work, in its order and words; returns (table, previous, came_from_torch)."""
    if not (is_torch_tensor(activation_freq) or _is_numpy(activation_freq)):
        raise TypeError(
            f"activation_freq must be a torch.Tensor or numpy.ndarray, got {type(activation_freq).__name__}"
        )
    if activation_freq.ndim != 2:
        raise ValueError(
            "activation_freq must be a 2D tensor of shape (num_layers, num_experts), "
            f"got shape {_shape(activation_freq)}"
        )
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must be in [0, 1], got {alpha}")
    table, from_torch = as_numpy(activation_freq, "activation_freq")
    previous = None
    if previous_scores is not None:
        if not (is_torch_tensor(previous_scores) or _is_numpy(previous_scores)):
            raise TypeError("previous_scores must be a torch.Tensor or numpy.ndarray when provided")
        if _shape(previous_scores) != _shape(activation_freq):
            raise ValueError(
                f"previous_scores shape {_shape(previous_scores)} must match "
                f"activation_freq shape {_shape(activation_freq)}"
            )
        previous, _ = as_numpy(previous_scores, "previous_scores")
    return table, previous, from_torch


def _is_numpy(value):
    import numpy as np

    return isinstance(value, np.ndarray)


def _budget(num_gpu_experts):
    # kt-kernel clamps int(num_gpu_experts) to [0, L*E]; int64 bounds are far outside that range.
    return max(-_INT64_MAX, min(int(num_gpu_experts), _INT64_MAX))


def _optional_int(value):
    return None if value is None else operator.index(value)


def plan_gpu_expert_placement(
    activation_freq,
    num_gpu_experts,
    strategy="frequency",
    *,
    min_experts_per_layer=0,
    max_experts_per_layer=None,
    previous_scores=None,
    alpha=0.8,
):
    """kt-kernel's planner: (mask, report). With `previous_scores` the ranked scores are
    alpha * activation_freq + (1 - alpha) * previous_scores in float32; `score_aware_layer_balanced` honours the
    per-layer bounds."""
    table, previous, from_torch = _check_tables(activation_freq, previous_scores, alpha)
    mask, report_json, _ = _core.placement_plan(
        table, _budget(num_gpu_experts), strategy, int(min_experts_per_layer),
        _optional_int(max_experts_per_layer), previous, float(alpha), 42, None, {}, None)
    full = json.loads(report_json)
    report = {key: full[key] for key in _KT_REPORT_KEYS}
    report["requested_num_gpu_experts"] = int(num_gpu_experts)
    report["max_experts_per_layer"] = max_experts_per_layer
    return like_input(mask, from_torch), report


def generate_gpu_experts_masks(
    activation_freq,
    num_gpu_experts,
    strategy="frequency",
    *,
    min_experts_per_layer=0,
    max_experts_per_layer=None,
    previous_scores=None,
    alpha=0.8,
    return_report=False,
):
    """kt-kernel's mask generator: the `num_gpu_experts` hottest experts across all layers (the released
    two-argument form), or any strategy of `plan_gpu_expert_placement`; (mask, report) when `return_report`."""
    mask, report = plan_gpu_expert_placement(
        activation_freq,
        num_gpu_experts,
        strategy,
        min_experts_per_layer=min_experts_per_layer,
        max_experts_per_layer=max_experts_per_layer,
        previous_scores=previous_scores,
        alpha=alpha,
    )
    return (mask, report) if return_report else mask


def plan(
    activation_freq,
    num_gpu_experts,
    strategy="frequency",
    *,
    min_experts_per_layer=0,
    max_experts_per_layer=None,
    previous_scores=None,
    alpha=0.8,
    seed=42,
    expert_bytes=None,
    cost=None,
    first_k_dense_replace=None,
    moe_layer_freq=1,
):
    """hymoe's planner: (mask, report, scores). The report adds to kt-kernel's fields `gpu_bytes` (when
    `expert_bytes` is given), `predicted_step_seconds` and `predicted_all_cpu_seconds` (the cost model `cost`, a
    dict of CostModel fields, docs/placement.md) and `dense_layers` (with `first_k_dense_replace`). With `first_k_dense_replace` the table covers
    every model layer and only its MoE layers (i >= first_k_dense_replace, i % moe_layer_freq == 0) are planned;
    dense rows are all-GPU. `scores` are the float32 scores that were ranked."""
    table, previous, from_torch = _check_tables(activation_freq, previous_scores, alpha)
    layout = None if first_k_dense_replace is None else (int(first_k_dense_replace), int(moe_layer_freq))
    mask, report_json, scores = _core.placement_plan(
        table, _budget(num_gpu_experts), strategy, int(min_experts_per_layer),
        _optional_int(max_experts_per_layer), previous, float(alpha), int(seed), _optional_int(expert_bytes),
        dict(cost or {}), layout)
    report = json.loads(report_json)
    report["requested_num_gpu_experts"] = int(num_gpu_experts)
    return like_input(mask, from_torch), report, like_input(scores, from_torch)


def _path(path):
    import os

    path = os.fspath(path)
    if not os.path.exists(path):
        import errno

        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)
    return path


def _counts_array(counts, name):
    array, _ = as_numpy(counts, name)
    return array


def read_counts(path, num_experts=None):
    """A (num_layers, num_experts) float64 array of routed-token counts from a statistics file: JSON
    (`{"activation_freq": [[...]]}` or a bare nested list), CSV (`layer,expert,count`), safetensors
    (`activation_freq`, or SGLang's `logical_count` summed over steps), or a per-token trace CSV, whose selections
    are counted (`num_experts`: the layer width when the trace does not reach it). docs/placement.md has the
    formats."""
    return _core.placement_read_counts(_path(path), _optional_int(num_experts))


def write_counts(path, counts):
    """Writes a count table in the format of the file's extension (.json, .csv, .safetensors), atomically."""
    import os

    _core.placement_write_counts(os.fspath(path), _counts_array(counts, "counts"))


def write_sglang_counts(path, logical_count):
    """Writes an int64 (records, layers, E) count tensor as SGLang's expert-distribution recorder dumps it: a dict
    {"logical_count": tensor} saved with torch.save (a .pt name) or a .safetensors file, atomically. `hymoe plan`
    reads both and sums the records."""
    import os

    import torch

    name = os.fspath(path)
    if not name.endswith((".pt", ".safetensors")):
        raise ValueError(f"hymoe.placement: SGLang's layout is a .pt or .safetensors file, not {name!r}")
    if logical_count.dim() != 3:
        raise ValueError(f"hymoe.placement: logical_count must be (records, layers, experts), not "
                         f"{tuple(logical_count.shape)}")
    tensor = logical_count.to(torch.int64).contiguous()
    tmp = name + ".tmp"
    if name.endswith(".pt"):
        torch.save({"logical_count": tensor}, tmp)
    else:
        import safetensors.torch

        safetensors.torch.save_file({"logical_count": tensor}, tmp)
    os.replace(tmp, name)


def read_trace(path, num_experts=None):
    """A per-token routing trace CSV (`token,step,layer,e1..eK[,w1..wK]`, vLLM's logger layout reads as is) as a
    dict: `experts` (tokens, layers, K) int32 with -1 for none, `weights` (same shape, float32) or None, `steps`
    (tokens,) int64 (-1 when unknown), `layer_ids` (layers,) int64 and `num_experts`. `replay`,
    `trace_counts` take this dict or the path."""
    return _core.placement_read_trace(_path(path), _optional_int(num_experts))


def _trace(trace):
    return trace if isinstance(trace, dict) else _path(trace)


def trace_counts(trace, begin=0, end=None):
    """(layers, experts) float64 routed-token counts of the trace's tokens [begin, end)."""
    return _core.placement_trace_counts(_trace(trace), int(begin), _optional_int(end))


def plan_replicas(counts, num_ranks, slots_per_rank):
    """Replicated hot experts for expert parallelism (EPLB): each layer's experts on ``num_ranks`` ranks of
    ``slots_per_rank`` slots, the spare slots holding extra replicas of the hottest experts (docs/placement.md,
    "Replicas"). Returns numpy arrays in vLLM's vocabulary: ``physical_to_logical`` (L, R * S),
    ``logical_to_physical_map`` (L, E, max replicas, padded with -1), ``logical_replica_count`` (L, E), and
    ``rank_load`` (L, R), ``imbalance`` (max / mean rank load per layer), ``num_ranks``, ``slots_per_rank``. A token
    t's pair with expert e goes to replica ``t % logical_replica_count[l, e]``."""
    return _core.placement_plan_replicas(_counts_array(counts, "counts"), int(num_ranks), int(slots_per_rank))


def rebalance_replicas(placement, counts):
    """``placement`` (from :func:`plan_replicas`) re-balanced for new statistics: the same result keys plus
    ``moved``, the slots per layer whose expert changed, the fewest the new replica counts allow."""
    return _core.placement_rebalance_replicas(dict(placement), _counts_array(counts, "counts"))


def summarize(counts):
    """How skewed a count table is, as `hymoe stats` prints it: per layer `total`, `top10_share`,
    `top25_share`, `top50_share` (share of the routed tokens taken by the hottest 10/25/50% of experts), `gini`,
    `balancedness` (mean/max), their means, `in_sample_cpu_saving` and a one-line `verdict`."""
    return _core.placement_summarize(_counts_array(counts, "counts"))


def evaluate(mask, heldout, cost=None):
    """What a plan buys on other data: `hit_rate` (routed token-experts that land on GPU experts / all routed),
    `layer_hit_rates`, `routed`, and the cost model's `predicted_step_seconds` against
    `predicted_all_cpu_seconds`. `mask` is any (layers, experts) bool/0-1 array or tensor; `heldout` a count
    table."""
    mask_array, _ = as_numpy(mask, "mask")
    return _core.placement_evaluate(mask_array, _counts_array(heldout, "heldout"), dict(cost or {}))


def sweep(train, heldout, ratios=(0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9), *, seed=42, expert_bytes=None,
          cost=None):
    """Every strategy planned on `train` at each budget ratio and scored on `heldout`, against the oracle (the
    frequency plan of `heldout` itself): one dict per ratio with `ratio`, `budget`, `hit_rate` and
    `predicted_step_seconds` (dicts by strategy) and `oracle_hit_rate`."""
    return _core.placement_sweep(_counts_array(train, "train"), _counts_array(heldout, "heldout"),
                                 [float(r) for r in ratios], int(seed), _optional_int(expert_bytes),
                                 dict(cost or {}))


def replay(trace, num_gpu_experts, strategy="frequency", *, replan_every=128, ema_alpha=0.5, hysteresis=0.1,
           max_moves_per_replan=-1, score_from=0, initial_mask=None, expert_bytes=None, min_experts_per_layer=0,
           max_experts_per_layer=None, seed=42, cost=None):
    """Replays a trace (path or `read_trace` dict) token by token with online re-planning every `replan_every`
    tokens (EMA-smoothed counts, a resident bonus of `hysteresis`, at most `max_moves_per_replan` loads per
    re-plan, -1 = no cap), scoring tokens from `score_from` on: `hit_rate`, `moves`, `replans`, per-window
    `windows`, warm-up and scored move rates, `bytes_moved` (with `expert_bytes`) and the `final_mask`."""
    initial = None if initial_mask is None else as_numpy(initial_mask, "initial_mask")[0]
    return _core.placement_replay(
        _trace(trace), int(num_gpu_experts), strategy, int(replan_every), float(ema_alpha), float(hysteresis),
        int(max_moves_per_replan), int(score_from), initial, _optional_int(expert_bytes),
        int(min_experts_per_layer), _optional_int(max_experts_per_layer), int(seed), dict(cost or {}))
