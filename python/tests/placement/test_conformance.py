"""Every case of tests/data/conformance/placement (kt-kernel's plan_gpu_expert_placement and the older
generate_gpu_experts_masks, as the reference computed them) through hymoe.placement, with numpy and with torch
inputs: masks, report dicts, exception types and messages."""

import json
import math

import numpy as np
import pytest

import hymoe.placement as placement
from conftest import TEST_DATA

CASE_DIR = TEST_DATA / "conformance" / "placement"
CASES = sorted(p.name for p in CASE_DIR.iterdir() if (p / "input.json").exists())
PER_LAYER_FIELDS = {"per_layer_counts", "layer_min", "layer_max", "layer_mean", "layer_std"}


def load(name):
    with open(CASE_DIR / name / "input.json") as f:
        case_input = json.load(f)
    with open(CASE_DIR / name / "expected.json") as f:
        expected = json.load(f)
    return case_input, expected


def make_table(values, kind, dtype="float32"):
    array = np.array(values, dtype=dtype)
    if kind == "numpy":
        return array
    torch = pytest.importorskip("torch")
    return torch.from_numpy(array)


def mask_rows(mask, kind):
    if kind == "torch":
        import torch

        assert mask.dtype == torch.bool and mask.device.type == "cpu"
        mask = mask.numpy()
    else:
        assert isinstance(mask, np.ndarray) and mask.dtype == np.bool_
    return mask.astype(int).tolist()


def check_mask(rows, expected, ties_key="ties"):
    if not expected.get(ties_key, False):
        assert rows == expected["mask"]
        return
    # Several masks are valid: every expert above the boundary score, none below, the stated number at it.
    boundary = expected["tie_boundary"]["boundary_score"]
    at_boundary = 0
    for score_row, mask_row in zip(expected["scores"], rows):
        for score, m in zip(score_row, mask_row):
            if score > boundary:
                assert m == 1
            elif score < boundary:
                assert m == 0
            else:
                at_boundary += m
    assert at_boundary == expected["tie_boundary"]["num_selected_at_boundary_score"]


def check_report(report, expected, rows):
    ties = expected.get("ties", False)
    assert list(report) == list(expected["report"])  # the same keys in the same order
    for key, want in expected["report"].items():
        got = report[key]
        if ties and key in PER_LAYER_FIELDS:
            continue
        if isinstance(want, float):
            assert isinstance(got, float), key
            assert math.isclose(got, want, rel_tol=1e-6, abs_tol=0.0), (key, got, want)
        else:
            assert got == want and type(got) is type(want), (key, got, want)
    assert report["per_layer_counts"] == [sum(r) for r in rows]


def reference_call(case_input, kind, api):
    kwargs = dict(
        min_experts_per_layer=case_input["min_experts_per_layer"],
        max_experts_per_layer=case_input["max_experts_per_layer"],
        alpha=case_input["alpha"],
    )
    if "previous_scores" in case_input:
        kwargs["previous_scores"] = make_table(case_input["previous_scores"], kind, case_input["dtype"])
    table = make_table(case_input["activation_freq"], kind, case_input["dtype"])
    if api == "plan":
        return placement.plan_gpu_expert_placement(
            table, case_input["num_gpu_experts"], case_input["strategy"], **kwargs)
    return placement.generate_gpu_experts_masks(
        table, case_input["num_gpu_experts"], case_input["strategy"], return_report=True, **kwargs)


def unknown_to_both(case_input, expected):
    """The reference knows two strategies, hymoe six: a reference error for a name hymoe implements is checked with
    a name neither knows, and hymoe's message lists hymoe's names."""
    message = expected["error"]["message"]
    if not message.startswith("Unknown expert placement strategy") or case_input["strategy"] not in placement.strategy_names():
        return case_input, message
    changed = dict(case_input, strategy="no_such_strategy")
    names = sorted(placement.strategy_names())
    return changed, f"Unknown expert placement strategy: 'no_such_strategy'. Supported strategies: {names}"


@pytest.mark.parametrize("kind", ["numpy", "torch"])
@pytest.mark.parametrize("api", ["plan", "generate"])
@pytest.mark.parametrize("name", CASES)
def test_case(name, api, kind):
    case_input, expected = load(name)
    if "error" in expected:
        case_input, message = unknown_to_both(case_input, expected)
        with pytest.raises(ValueError) as raised:
            reference_call(case_input, kind, api)
        assert type(raised.value) is ValueError
        assert str(raised.value) == message
        return
    mask, report = reference_call(case_input, kind, api)
    rows = mask_rows(mask, kind)
    check_mask(rows, expected)
    check_report(report, expected, rows)


@pytest.mark.parametrize("kind", ["numpy", "torch"])
@pytest.mark.parametrize("name", [c for c in CASES if "legacy_mask" in load(c)[1]])
def test_legacy_two_argument_form(name, kind):
    """The released kt-kernel 0.7.2 call, generate_gpu_experts_masks(activation_freq, num_gpu_experts)."""
    case_input, expected = load(name)
    table = make_table(case_input["activation_freq"], kind, case_input["dtype"])
    mask = placement.generate_gpu_experts_masks(table, case_input["num_gpu_experts"])
    legacy = dict(expected, mask=expected["legacy_mask"], ties=expected.get("legacy_ties", False))
    check_mask(mask_rows(mask, kind), legacy)


def test_every_kind_of_case_is_present():
    kinds = {"error": 0, "frequency": 0, "score_aware_layer_balanced": 0}
    for name in CASES:
        case_input, expected = load(name)
        kinds["error" if "error" in expected else case_input["strategy"]] += 1
    assert kinds["error"] >= 4 and kinds["frequency"] >= 5 and kinds["score_aware_layer_balanced"] >= 5
