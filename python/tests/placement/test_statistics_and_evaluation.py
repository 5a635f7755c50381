"""hymoe's own placement functions from Python: statistics files, summaries, held-out evaluation, sweeps and trace
replay return plain values that agree with each other and with the planner."""

import numpy as np
import pytest

import hymoe.placement as hp
from conftest import TEST_DATA

ARXIV = TEST_DATA / "placement" / "olmoe_arxiv.csv"
GITHUB = TEST_DATA / "placement" / "olmoe_github.csv"


def test_read_counts_gives_a_float64_table():
    counts = hp.read_counts(ARXIV)
    rows = [line.split(",") for line in ARXIV.read_text().splitlines()[1:] if line]
    expected = np.zeros((1 + max(int(r[0]) for r in rows), 1 + max(int(r[1]) for r in rows)))
    for layer, expert, count in rows:
        expected[int(layer), int(expert)] = float(count)
    assert counts.dtype == np.float64
    np.testing.assert_array_equal(counts, expected)


@pytest.mark.parametrize("suffix", [".json", ".csv", ".safetensors"])
def test_write_then_read_round_trips(tmp_path, suffix):
    counts = hp.read_counts(ARXIV)
    path = tmp_path / ("counts" + suffix)
    hp.write_counts(path, counts)
    np.testing.assert_array_equal(hp.read_counts(path), counts)


def test_sglang_counts_round_trip_summed_over_records(tmp_path):
    torch = pytest.importorskip("torch")
    pytest.importorskip("safetensors")
    records = torch.tensor([[[1, 0, 3], [2, 2, 0]], [[0, 5, 1], [1, 0, 0]]], dtype=torch.int64)
    path = tmp_path / "dump.safetensors"
    hp.write_sglang_counts(path, records)
    np.testing.assert_array_equal(hp.read_counts(path), records.sum(0).numpy().astype(np.float64))
    pt = tmp_path / "dump.pt"
    hp.write_sglang_counts(pt, records)
    assert torch.equal(torch.load(pt)["logical_count"], records)
    with pytest.raises(ValueError, match="not 'counts.json'"):
        hp.write_sglang_counts("counts.json", records)
    with pytest.raises(ValueError, match=r"\(records, layers, experts\), not \(2, 3\)"):
        hp.write_sglang_counts(tmp_path / "flat.pt", records[0])
    assert not (tmp_path / "flat.pt").exists()


def test_bad_files_raise_naming_the_file(tmp_path):
    with pytest.raises(FileNotFoundError):
        hp.read_counts(tmp_path / "missing.csv")
    bad = tmp_path / "bad.json"
    bad.write_text('{"activation_freq": [[1, -2]]}')
    with pytest.raises(ValueError, match="bad.json"):
        hp.read_counts(bad)
    with pytest.raises(ValueError, match="finite and non-negative"):
        hp.summarize(np.array([[1.0, np.nan]]))


def test_summary_matches_its_definition():
    counts = np.array([[8.0, 1.0, 1.0, 0.0], [1.0, 1.0, 1.0, 1.0]])
    summary = hp.summarize(counts)
    assert [layer["total"] for layer in summary["layers"]] == [10.0, 4.0]
    assert summary["layers"][0]["top25_share"] == pytest.approx(0.8)   # hottest 1 of 4 experts: 8 of 10
    assert summary["layers"][1]["top25_share"] == pytest.approx(0.25)
    assert summary["layers"][1]["balancedness"] == pytest.approx(1.0)
    assert summary["mean_top25"] == pytest.approx((0.8 + 0.25) / 2)
    assert isinstance(summary["verdict"], str) and summary["verdict"]


def test_in_sample_evaluation_equals_the_planners_hit_rate():
    counts = hp.read_counts(ARXIV)
    mask, report, scores = hp.plan(counts, counts.size // 4)
    evaluation = hp.evaluate(mask, counts)
    assert evaluation["hit_rate"] == pytest.approx(report["expected_hit_rate"], rel=1e-6)
    assert evaluation["routed"] == pytest.approx(counts.sum())
    assert len(evaluation["layer_hit_rates"]) == counts.shape[0]
    assert evaluation["predicted_step_seconds"] < evaluation["predicted_all_cpu_seconds"]
    assert report["predicted_step_seconds"] > 0 and "gpu_bytes" not in report
    assert hp.plan(counts, 4, expert_bytes=1000)[1]["gpu_bytes"] == 4000
    np.testing.assert_array_equal(scores, counts.astype(np.float32))


def test_sweep_every_strategy_against_the_oracle():
    train, heldout = hp.read_counts(ARXIV), hp.read_counts(GITHUB)
    rows = hp.sweep(train, heldout, [0.25, 0.5])
    assert [row["ratio"] for row in rows] == [0.25, 0.5]
    assert rows[0]["budget"] == int(train.size * 0.25)
    assert set(rows[0]["hit_rate"]) == set(hp.strategy_names())
    for row in rows:
        assert all(rate <= row["oracle_hit_rate"] + 1e-12 for rate in row["hit_rate"].values())
    # The frequency plan of the sweep is the one plan() makes, scored by evaluate().
    mask, _, _ = hp.plan(train, rows[0]["budget"])
    assert rows[0]["hit_rate"]["frequency"] == pytest.approx(hp.evaluate(mask, heldout)["hit_rate"])


def test_whole_model_table_keeps_dense_layers_on_the_gpu():
    counts = np.arange(1.0, 25.0).reshape(6, 4)
    mask, report, _ = hp.plan(counts, 4, first_k_dense_replace=2)
    assert mask[:2].all() and int(mask[2:].sum()) == 4
    assert report["dense_layers"] == [0, 1] and report["num_layers"] == 4


def write_trace(path, rng, tokens=64, layers=2, experts=8, top_k=2):
    rows = ["token,step,layer," + ",".join(f"e{k + 1}" for k in range(top_k))]
    picks = {}
    for t in range(tokens):
        for layer in range(layers):
            # Skewed: expert ids drawn mostly from the low half in the first half of the trace, the high half after.
            low = 0 if t < tokens // 2 else experts // 2
            chosen = rng.choice(np.arange(low, low + experts // 2), size=top_k, replace=False)
            picks[(t, layer)] = chosen
            rows.append(f"{t},{t},{layer}," + ",".join(str(int(e)) for e in chosen))
    path.write_text("\n".join(rows) + "\n")
    return picks


def test_trace_reading_counting_and_replay(tmp_path):
    path = tmp_path / "trace.csv"
    picks = write_trace(path, np.random.default_rng(3))
    trace = hp.read_trace(path, num_experts=8)
    assert trace["experts"].shape == (64, 2, 2) and trace["experts"].dtype == np.int32
    assert trace["weights"] is None and trace["num_experts"] == 8
    assert trace["experts"][5, 1].tolist() == [int(e) for e in picks[(5, 1)]]
    counts = hp.trace_counts(trace)
    assert counts.shape == (2, 8) and counts.sum() == 64 * 2 * 2
    np.testing.assert_array_equal(counts, hp.read_counts(path, num_experts=8))
    np.testing.assert_array_equal(hp.trace_counts(trace, 0, 32)[:, 4:], 0)

    # Re-planning every 8 tokens follows the shift to the high experts; a plan that never re-plans cannot.
    adaptive = hp.replay(trace, 8, replan_every=8, ema_alpha=1.0)
    frozen = hp.replay(path, 8, replan_every=10**6)
    assert adaptive["hit_rate"] > frozen["hit_rate"]
    assert adaptive["replans"] > 0 and adaptive["moves"] > 0 and frozen["moves"] == 0
    assert adaptive["final_mask"].shape == (2, 8) and int(adaptive["final_mask"].sum()) == 8
    assert adaptive["final_mask"][:, 4:].all()
