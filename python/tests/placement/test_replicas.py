"""hymoe.placement.plan_replicas / rebalance_replicas: vLLM's arrays from the C++ planner, a re-balance that moves
only what the new counts need, and errors naming the value."""
import numpy as np
import pytest

from hymoe import placement


def test_hot_expert_is_replicated_and_the_ranks_even_out():
    counts = np.array([[60.0, 20.0, 10.0, 10.0], [10.0, 10.0, 10.0, 70.0]])
    p = placement.plan_replicas(counts, num_ranks=2, slots_per_rank=3)
    assert p["physical_to_logical"].shape == (2, 6)
    assert p["logical_replica_count"].tolist() == [[3, 1, 1, 1], [1, 1, 1, 3]]
    assert p["logical_to_physical_map"].shape == (2, 4, 3)
    assert (p["logical_to_physical_map"][0, 1, 1:] == -1).all()
    for l in range(2):
        for e in range(4):
            slots = p["logical_to_physical_map"][l, e]
            slots = slots[slots >= 0]
            assert (p["physical_to_logical"][l, slots] == e).all()
    assert max(p["imbalance"]) < 1.25


def test_rebalance_moves_the_fewest_slots():
    before = np.array([[400.0] + [20.0] * 7])
    after = np.array([[20.0] * 5 + [400.0] + [20.0] * 2])
    p = placement.plan_replicas(before, 4, 3)
    same = placement.rebalance_replicas(p, before)
    assert same["moved"] == [0]
    assert (same["physical_to_logical"] == p["physical_to_logical"]).all()
    q = placement.rebalance_replicas(p, after)
    need = np.maximum(q["logical_replica_count"] - p["logical_replica_count"], 0).sum()
    assert q["moved"] == [need] and need > 0
    assert (q["physical_to_logical"] != p["physical_to_logical"]).sum() == need


def test_errors_name_the_value():
    with pytest.raises(Exception, match="slots cannot hold the 4 experts"):
        placement.plan_replicas(np.ones((1, 4)), 1, 3)
    p = placement.plan_replicas(np.ones((1, 4)), 2, 2)
    with pytest.raises(Exception, match="holds expert 9"):
        placement.rebalance_replicas({**p, "physical_to_logical": np.array([[0, 1, 2, 9]])}, np.ones((1, 4)))
