"""hymoe.placement used the way kt-kernel's users call kt_kernel: the import swapped, every call unchanged, the same
answers, exception types and messages (in kt-kernel's validation order)."""

import numpy as np
import pytest

import hymoe.placement as kt

torch = pytest.importorskip("torch")


def docstring_table():
    return torch.tensor([[0.1, 0.5, 0.3, 0.8],
                         [0.2, 0.4, 0.9, 0.1]])


def test_released_two_argument_form():
    masks = kt.generate_gpu_experts_masks(docstring_table(), num_gpu_experts=3)
    assert isinstance(masks, torch.Tensor) and masks.dtype == torch.bool and masks.device.type == "cpu"
    assert masks.tolist() == [[False, True, False, True], [False, False, True, False]]


def test_positional_budget_and_clamping():
    freq = docstring_table()
    assert kt.generate_gpu_experts_masks(freq, 0).sum().item() == 0
    assert kt.generate_gpu_experts_masks(freq, -5).sum().item() == 0
    assert kt.generate_gpu_experts_masks(freq, 100).all().item()
    mask, report = kt.plan_gpu_expert_placement(freq, 100)
    assert report["requested_num_gpu_experts"] == 100 and report["actual_num_gpu_experts"] == 8
    # Beyond int64 the request is still reported as given (kt-kernel clamps a Python int).
    _, report = kt.plan_gpu_expert_placement(freq, 10**30)
    assert report["requested_num_gpu_experts"] == 10**30 and report["actual_num_gpu_experts"] == 8


def test_score_aware_form_with_ema_and_bounds():
    current = torch.tensor([[10.0, 1.0, 1.0, 1.0],
                            [1.0, 9.0, 1.0, 1.0]])
    previous = torch.tensor([[0.0, 20.0, 0.0, 0.0],
                             [0.0, 0.0, 0.0, 30.0]])
    mask, report = kt.generate_gpu_experts_masks(
        current, 2, "score_aware_layer_balanced", min_experts_per_layer=1, previous_scores=previous, alpha=0.5,
        return_report=True)
    # EMA: layer 0 [5, 10.5, 0.5, 0.5], layer 1 [0.5, 4.5, 0.5, 15.5]; one per layer, each layer's hottest.
    assert mask.tolist() == [[False, True, False, False], [False, False, False, True]]
    assert report["previous_scores_provided"] is True and report["alpha"] == 0.5
    assert report["selected_score"] == pytest.approx(26.0) and report["total_score"] == pytest.approx(37.5)
    assert report["per_layer_counts"] == [1, 1] and report["layer_std"] == 0.0
    assert report["max_experts_per_layer"] is None and report["min_experts_per_layer"] == 1


def test_report_keys_and_types_are_kt_kernels():
    _, report = kt.plan_gpu_expert_placement(docstring_table(), 3)
    assert list(report) == [
        "strategy", "num_layers", "num_experts_per_layer", "requested_num_gpu_experts", "actual_num_gpu_experts",
        "expected_hit_rate", "selected_score", "total_score", "per_layer_counts", "layer_min", "layer_max",
        "layer_mean", "layer_std", "min_experts_per_layer", "max_experts_per_layer", "alpha",
        "previous_scores_provided"]
    assert type(report["layer_mean"]) is float and type(report["per_layer_counts"][0]) is int
    assert report["expected_hit_rate"] == pytest.approx(2.2 / 3.3, rel=1e-6)


def test_numpy_in_numpy_out():
    mask, report = kt.plan_gpu_expert_placement(docstring_table().numpy(), 3)
    assert isinstance(mask, np.ndarray) and mask.dtype == np.bool_
    assert mask.tolist() == [[False, True, False, True], [False, False, True, False]]


def test_keyword_only_options_as_in_kt_kernel():
    with pytest.raises(TypeError):
        kt.plan_gpu_expert_placement(docstring_table(), 3, "frequency", 1)  # min_experts_per_layer is keyword-only


@pytest.mark.parametrize("call, error, message", [
    (lambda: kt.generate_gpu_experts_masks([[0.1, 0.2]], 1), TypeError,
     "activation_freq must be a torch.Tensor or numpy.ndarray, got list"),
    (lambda: kt.generate_gpu_experts_masks(torch.ones(4), 1), ValueError,
     "activation_freq must be a 2D tensor of shape (num_layers, num_experts), got shape (4,)"),
    (lambda: kt.generate_gpu_experts_masks(torch.ones(2, 3, 4), 1, alpha=5.0), ValueError,
     "activation_freq must be a 2D tensor of shape (num_layers, num_experts), got shape (2, 3, 4)"),
    (lambda: kt.generate_gpu_experts_masks(torch.ones(2, 4), 1, alpha=1.5, previous_scores=[1]), ValueError,
     "alpha must be in [0, 1], got 1.5"),
    (lambda: kt.generate_gpu_experts_masks(torch.ones(2, 4), 1, alpha=2), ValueError,
     "alpha must be in [0, 1], got 2"),
    (lambda: kt.generate_gpu_experts_masks(torch.ones(2, 4), 1, alpha=float("nan")), ValueError,
     "alpha must be in [0, 1], got nan"),
    (lambda: kt.generate_gpu_experts_masks(torch.ones(2, 4), 1, previous_scores=[[1.0] * 4] * 2), TypeError,
     "previous_scores must be a torch.Tensor or numpy.ndarray when provided"),
    (lambda: kt.generate_gpu_experts_masks(torch.ones(2, 4), 1, "nope", previous_scores=torch.ones(4, 2)),
     ValueError, "previous_scores shape (4, 2) must match activation_freq shape (2, 4)"),
    (lambda: kt.generate_gpu_experts_masks(torch.ones(2, 4), 1, "nope", min_experts_per_layer=-1), ValueError,
     "Unknown expert placement strategy: 'nope'. Supported strategies: ['critical_path', 'frequency', "
     "'front-loading', 'random', 'score_aware_layer_balanced', 'uniform']"),
    (lambda: kt.generate_gpu_experts_masks(torch.ones(2, 4), 1, "score_aware_layer_balanced",
                                           min_experts_per_layer=-1), ValueError,
     "min_experts_per_layer must be non-negative, got -1"),
    (lambda: kt.generate_gpu_experts_masks(torch.ones(2, 4), 1, "score_aware_layer_balanced",
                                           max_experts_per_layer=-2), ValueError,
     "max_experts_per_layer must be non-negative, got -2"),
    (lambda: kt.generate_gpu_experts_masks(torch.ones(2, 4), 1, "score_aware_layer_balanced",
                                           max_experts_per_layer=5), ValueError,
     "max_experts_per_layer (5) cannot exceed num_experts_per_layer (4)"),
    (lambda: kt.generate_gpu_experts_masks(torch.ones(2, 4), 3, "score_aware_layer_balanced",
                                           min_experts_per_layer=2), ValueError,
     "num_gpu_experts=3 is too small for min_experts_per_layer=2 across 2 layers; need at least 4"),
    (lambda: kt.generate_gpu_experts_masks(torch.ones(2, 4), 12, "score_aware_layer_balanced",
                                           max_experts_per_layer=2), ValueError,
     "num_gpu_experts=8 exceeds max_experts_per_layer=2 across 2 layers; at most 4 experts can be selected"),
])
def test_errors_in_kt_kernels_order_and_words(call, error, message):
    with pytest.raises(error) as raised:
        call()
    assert type(raised.value) is error
    assert str(raised.value) == message


def test_bounds_are_ignored_by_the_frequency_strategy():
    # kt-kernel checks the per-layer bounds only for the balanced strategy.
    mask = kt.generate_gpu_experts_masks(docstring_table(), 3, min_experts_per_layer=7, max_experts_per_layer=-1)
    assert mask.sum().item() == 3


def test_hymoe_strategies_through_the_same_call():
    freq = torch.rand(4, 8, generator=torch.Generator().manual_seed(0))
    for name in ["uniform", "front-loading", "random", "critical_path"]:
        mask, report = kt.plan_gpu_expert_placement(freq, 10, name)
        assert mask.sum().item() == 10 and report["strategy"] == name
    uniform, _ = kt.plan_gpu_expert_placement(freq, 8, "uniform")
    assert uniform.sum(dim=1).tolist() == [2, 2, 2, 2]
    front, _ = kt.plan_gpu_expert_placement(freq, 8, "front-loading")
    assert front[0].all().item() and not front[1:].any().item()
