// The placement layer's half of hymoe._core: the planner, statistics files, evaluation and replay, as functions
// taking numpy arrays and plain values and returning numpy arrays, dicts and lists (python/hymoe/placement.py
// wraps them with kt-kernel's signatures). The GIL is released while the library runs.
#include <pybind11/stl.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>

#include "arrays.h"
#include "bindings.h"
#include "hymoe/error.h"
#include "hymoe/placement.h"

namespace hymoe::python {
namespace {

using namespace placement;

CostModel cost_from(const py::dict& d) {
  CostModel c;
  for (auto [key, value] : d) {
    const std::string k = py::str(key);
    const double v = value.cast<double>();
    if (k == "cpu_seconds_per_token_expert") c.cpu_seconds_per_token_expert = v;
    else if (k == "gpu_seconds_per_token_expert") c.gpu_seconds_per_token_expert = v;
    else if (k == "cpu_layer_overhead_seconds") c.cpu_layer_overhead_seconds = v;
    else if (k == "gpu_layer_overhead_seconds") c.gpu_layer_overhead_seconds = v;
    else if (k == "routed_per_step") c.routed_per_step = v;
    else throw py::key_error("unknown cost model field '" + k + "'");
  }
  return c;
}

py::tuple plan(const py::array& scores, int64_t num_gpu_experts, const std::string& strategy,
               int64_t min_experts_per_layer, std::optional<int64_t> max_experts_per_layer,
               std::optional<py::array> previous_scores, double alpha, uint64_t seed,
               std::optional<uint64_t> expert_bytes, const py::dict& cost,
               std::optional<std::pair<int64_t, int64_t>> layout) {
  PlanOptions options;
  options.min_experts_per_layer = min_experts_per_layer;
  options.max_experts_per_layer = max_experts_per_layer;
  options.alpha = alpha;
  options.seed = seed;
  options.expert_bytes = expert_bytes;
  options.cost = cost_from(cost);
  Tensor table = to_tensor_f32(scores, "activation_freq");
  if (previous_scores) options.previous_scores = to_tensor_f32(*previous_scores, "previous_scores");
  Placement p;
  {
    py::gil_scoped_release unlocked;
    p = layout ? plan_model_placement(table, LayerLayout{layout->first, layout->second}, num_gpu_experts, strategy,
                                      options)
               : plan_gpu_expert_placement(table, num_gpu_experts, strategy, options);
  }
  const std::vector<py::ssize_t> shape = {p.num_layers, p.num_experts};
  // The report as plan files hold it (kt-kernel's keys in its order, then hymoe's): JSON text, which
  // python/hymoe/placement.py parses; doubles are written to round-trip exactly.
  std::string report = report_to_json(p.report);
  return py::make_tuple(mask_to_numpy(std::move(p.mask), shape), report, tensor_to_numpy(std::move(p.scores)));
}

// A (L, E) table of routed-token counts from a numeric array: finite, non-negative, within the planner's range.
CountTable table_from(const py::array& array, const char* name) {
  const Tensor values = to_tensor_f32(array, name);  // shape and dtype checks; the values are re-read as double
  if (values.rank() != 2)
    fail(name, " must be a 2D array of shape (num_layers, num_experts), got shape ", shape_to_string(values.shape()));
  const auto f64 = py::array_t<double, py::array::c_style | py::array::forcecast>::ensure(array);
  CountTable t(values.dim(0), values.dim(1));
  std::copy_n(f64.data(), t.counts.size(), t.counts.begin());
  for (size_t i = 0; i < t.counts.size(); ++i)
    if (!std::isfinite(t.counts[i]) || t.counts[i] < 0)
      fail(name, "[", static_cast<int64_t>(i) / t.num_experts, ", ", static_cast<int64_t>(i) % t.num_experts,
           "] = ", t.counts[i], ": counts must be finite and non-negative");
  if (!(t.total() <= kMaxCountTotal)) fail(name, " sums to ", t.total(), ", beyond ", kMaxCountTotal);
  return t;
}

std::vector<uint8_t> mask_from(const py::array& array, const char* name) {
  const auto bytes = py::array_t<uint8_t, py::array::c_style | py::array::forcecast>::ensure(array);
  if (!bytes) throw py::error_already_set();
  std::vector<uint8_t> mask(bytes.data(), bytes.data() + bytes.size());
  for (uint8_t& v : mask) {
    if (v > 1) fail(name, " must hold 0/1 (or bool) values, found ", static_cast<int>(v));
  }
  return mask;
}

py::array_t<double> table_to_numpy(CountTable&& t) {
  return to_numpy(std::move(t.counts), {t.num_layers, t.num_experts});
}

py::dict trace_dict(RoutingTrace&& t) {
  py::dict d;
  d["num_experts"] = t.num_experts;
  d["layer_ids"] = to_numpy(std::move(t.layer_ids), {t.num_layers});
  d["steps"] = to_numpy(std::move(t.steps), {t.num_tokens});
  d["experts"] = to_numpy(std::move(t.experts), {t.num_tokens, t.num_layers, t.top_k});
  if (t.weights.empty()) d["weights"] = py::none();
  else d["weights"] = to_numpy(std::move(t.weights), {t.num_tokens, t.num_layers, t.top_k});
  return d;
}

// A trace from read_trace's dict (or one built by hand): experts (T, L, K) ids with -1 for none, optional weights
// (T, L, K), steps (T) and layer_ids (L), and num_experts.
RoutingTrace trace_from(const py::dict& d) {
  RoutingTrace t;
  const auto experts = py::array_t<int32_t, py::array::c_style | py::array::forcecast>::ensure(d["experts"]);
  if (!experts || experts.ndim() != 3) fail("trace['experts'] must be a (tokens, layers, top_k) integer array");
  t.num_tokens = experts.shape(0);
  t.num_layers = experts.shape(1);
  t.top_k = experts.shape(2);
  if (t.num_tokens * t.num_layers * t.top_k > kMaxTraceEntries)
    fail("trace['experts'] holds more than ", kMaxTraceEntries, " entries");
  t.experts.assign(experts.data(), experts.data() + experts.size());
  t.num_experts = d.contains("num_experts") && !d["num_experts"].is_none() ? d["num_experts"].cast<int64_t>() : 0;
  for (int32_t id : t.experts) {
    if (id < -1) fail("trace['experts'] holds id ", id, "; ids are >= 0, or -1 for none");
    if (!d.contains("num_experts") || d["num_experts"].is_none()) t.num_experts = std::max<int64_t>(t.num_experts, id + 1);
    else if (id >= t.num_experts) fail("trace['experts'] holds id ", id, " but num_experts is ", t.num_experts);
  }
  if (d.contains("weights") && !d["weights"].is_none()) {
    const auto w = py::array_t<float, py::array::c_style | py::array::forcecast>::ensure(d["weights"]);
    if (!w || w.size() != experts.size()) fail("trace['weights'] must have the shape of trace['experts']");
    t.weights.assign(w.data(), w.data() + w.size());
  }
  if (d.contains("steps") && !d["steps"].is_none()) {
    const auto s = py::array_t<int64_t, py::array::c_style | py::array::forcecast>::ensure(d["steps"]);
    if (!s || s.size() != t.num_tokens) fail("trace['steps'] must hold one step per token (", t.num_tokens, ")");
    t.steps.assign(s.data(), s.data() + s.size());
  } else {
    t.steps.assign(static_cast<size_t>(t.num_tokens), -1);
  }
  if (d.contains("layer_ids") && !d["layer_ids"].is_none()) {
    const auto l = py::array_t<int64_t, py::array::c_style | py::array::forcecast>::ensure(d["layer_ids"]);
    if (!l || l.size() != t.num_layers) fail("trace['layer_ids'] must hold one id per layer (", t.num_layers, ")");
    t.layer_ids.assign(l.data(), l.data() + l.size());
  } else {
    for (int64_t l = 0; l < t.num_layers; ++l) t.layer_ids.push_back(l);
  }
  return t;
}

RoutingTrace trace_arg(const py::object& trace) {
  if (py::isinstance<py::dict>(trace)) return trace_from(trace.cast<py::dict>());
  const std::string path = py::str(trace);
  py::gil_scoped_release unlocked;
  return read_trace_csv(path);
}

py::dict summary_dict(const StatsSummary& s) {
  py::list layers;
  for (const LayerSummary& l : s.layers) {
    py::dict d;
    d["total"] = l.total;
    d["top10_share"] = l.top10_share;
    d["top25_share"] = l.top25_share;
    d["top50_share"] = l.top50_share;
    d["gini"] = l.gini;
    d["balancedness"] = l.balancedness;
    layers.append(d);
  }
  py::dict d;
  d["layers"] = layers;
  d["mean_top10"] = s.mean_top10;
  d["mean_top25"] = s.mean_top25;
  d["mean_top50"] = s.mean_top50;
  d["mean_gini"] = s.mean_gini;
  d["mean_balancedness"] = s.mean_balancedness;
  d["mean_count_per_expert"] = s.mean_count_per_expert;
  d["in_sample_cpu_saving"] = s.in_sample_cpu_saving;
  d["verdict"] = s.verdict;
  return d;
}

py::dict evaluation_dict(const Evaluation& e) {
  py::dict d;
  d["hit_rate"] = e.hit_rate;
  d["layer_hit_rates"] = e.layer_hit_rates;
  d["routed"] = e.routed;
  d["predicted_step_seconds"] = e.predicted_step_seconds;
  d["predicted_all_cpu_seconds"] = e.predicted_all_cpu_seconds;
  return d;
}

py::dict sweep_row_dict(const SweepRow& r) {
  py::dict d, hit, seconds;
  const auto& names = strategy_names();
  for (size_t i = 0; i < names.size(); ++i) {
    hit[py::str(names[i])] = r.hit_rate[i];
    seconds[py::str(names[i])] = r.predicted_seconds[i];
  }
  d["ratio"] = r.ratio;
  d["budget"] = r.budget;
  d["hit_rate"] = hit;
  d["oracle_hit_rate"] = r.oracle;
  d["predicted_step_seconds"] = seconds;
  return d;
}

PlanOptions plan_options(int64_t min_per_layer, std::optional<int64_t> max_per_layer, uint64_t seed,
                         std::optional<uint64_t> expert_bytes, const py::dict& cost) {
  PlanOptions o;
  o.min_experts_per_layer = min_per_layer;
  o.max_experts_per_layer = max_per_layer;
  o.seed = seed;
  o.expert_bytes = expert_bytes;
  o.cost = cost_from(cost);
  return o;
}

py::dict replay_dict(ReplayResult&& r, int64_t layers, int64_t experts) {
  py::dict d;
  d["hit_rate"] = r.hit_rate;
  d["routed"] = r.routed;
  d["moves"] = r.moves;
  d["replans"] = r.replans;
  d["scored_from"] = r.scored_from;
  d["warmup_steps"] = r.warmup_steps;
  d["scored_steps"] = r.scored_steps;
  d["warmup_moves"] = r.warmup_moves;
  d["scored_moves"] = r.scored_moves;
  d["warmup_moves_per_layer_per_step"] = r.warmup_moves_per_layer_per_step;
  d["scored_moves_per_layer_per_step"] = r.scored_moves_per_layer_per_step;
  d["initial_experts"] = r.initial_experts;
  d["bytes_moved"] = r.bytes_moved ? py::object(py::int_(*r.bytes_moved)) : py::none();
  py::list windows;
  for (const ReplayWindow& w : r.windows) {
    py::dict wd;
    wd["begin"] = w.begin;
    wd["end"] = w.end;
    wd["hit_rate"] = w.hit_rate;
    wd["moves"] = w.moves;
    windows.append(wd);
  }
  d["windows"] = windows;
  d["final_mask"] = mask_to_numpy(std::move(r.final_mask), {layers, experts});
  return d;
}

// A replica placement as numpy arrays: physical_to_logical (L, R * S), logical_to_physical_map (L, E, W) padded
// with -1, logical_replica_count (L, E), rank_load (L, R), imbalance (L), and the sizes.
py::dict replicas_dict(const ReplicaPlacement& p) {
  const auto L = static_cast<py::ssize_t>(p.layers.size()), R = p.num_ranks, S = p.slots_per_rank, E = p.num_experts;
  const auto W = static_cast<py::ssize_t>(p.max_replicas());
  py::array_t<int64_t> p2l({L, static_cast<py::ssize_t>(R * S)}), counts({L, static_cast<py::ssize_t>(E)});
  py::array_t<double> load({L, static_cast<py::ssize_t>(R)});
  for (py::ssize_t l = 0; l < L; ++l) {
    const LayerReplicas& r = p.layers[static_cast<size_t>(l)];
    std::copy(r.physical_to_logical.begin(), r.physical_to_logical.end(), p2l.mutable_data(l, 0));
    std::copy(r.logical_replica_count.begin(), r.logical_replica_count.end(), counts.mutable_data(l, 0));
    std::copy(r.rank_load.begin(), r.rank_load.end(), load.mutable_data(l, 0));
  }
  const std::vector<int64_t> map = p.logical_to_physical_map();
  py::array_t<int64_t> l2p({L, static_cast<py::ssize_t>(E), W});
  std::copy(map.begin(), map.end(), l2p.mutable_data());
  py::dict d;
  d["num_ranks"] = p.num_ranks;
  d["slots_per_rank"] = p.slots_per_rank;
  d["physical_to_logical"] = p2l;
  d["logical_to_physical_map"] = l2p;
  d["logical_replica_count"] = counts;
  d["rank_load"] = load;
  d["imbalance"] = rank_imbalance(p);
  return d;
}

// The placement a dict of replicas_dict describes (its physical_to_logical and sizes), checked.
ReplicaPlacement replicas_from(const py::dict& d, int64_t num_experts) {
  ReplicaPlacement p;
  p.num_ranks = d["num_ranks"].cast<int64_t>();
  p.slots_per_rank = d["slots_per_rank"].cast<int64_t>();
  p.num_experts = num_experts;
  const auto p2l = py::array_t<int64_t, py::array::c_style | py::array::forcecast>::ensure(d["physical_to_logical"]);
  if (!p2l || p2l.ndim() != 2 || p2l.shape(1) != p.num_ranks * p.slots_per_rank)
    fail("placement['physical_to_logical'] must be (layers, num_ranks * slots_per_rank) = (L, ",
         p.num_ranks * p.slots_per_rank, ")");
  for (py::ssize_t l = 0; l < p2l.shape(0); ++l) {
    LayerReplicas r;
    r.physical_to_logical.assign(p2l.data(l, 0), p2l.data(l, 0) + p2l.shape(1));
    for (int64_t e : r.physical_to_logical)
      if (e < 0 || e >= num_experts)
        fail("placement['physical_to_logical'] holds expert ", e, "; the statistics have ", num_experts, " experts");
    p.layers.push_back(std::move(r));
  }
  return p;
}

}  // namespace

void register_placement(py::module_& m) {
  m.def("placement_plan_replicas", [](const py::array& counts, int64_t num_ranks, int64_t slots_per_rank) {
    const CountTable t = table_from(counts, "counts");
    ReplicaPlacement p;
    {
      py::gil_scoped_release unlocked;
      p = plan_replicas(t, num_ranks, slots_per_rank);
    }
    return replicas_dict(p);
  });
  m.def("placement_rebalance_replicas", [](const py::dict& current, const py::array& counts) {
    const CountTable t = table_from(counts, "counts");
    const ReplicaPlacement p = replicas_from(current, t.num_experts);
    ReplicaPlacement q;
    std::vector<int64_t> moved;
    {
      py::gil_scoped_release unlocked;
      q = rebalance_replicas(p, t, &moved);
    }
    py::dict d = replicas_dict(q);
    d["moved"] = moved;
    return d;
  });
  m.def("placement_strategy_names", &strategy_names);
  m.def("placement_plan", &plan, py::arg("scores"), py::arg("num_gpu_experts"), py::arg("strategy"),
        py::arg("min_experts_per_layer"), py::arg("max_experts_per_layer"), py::arg("previous_scores"),
        py::arg("alpha"), py::arg("seed"), py::arg("expert_bytes"), py::arg("cost"), py::arg("layout"),
        "(mask bool (L, E), report JSON text, ranked float32 scores (L, E)); layout = (first_k_dense_replace, "
        "moe_layer_freq) plans a whole model's table");

  m.def("placement_read_counts", [](const std::string& path, std::optional<int64_t> num_experts) {
    CountTable t;
    {
      py::gil_scoped_release unlocked;
      t = read_counts_or_trace(path, num_experts);
    }
    return table_to_numpy(std::move(t));
  });
  m.def("placement_write_counts", [](const std::string& path, const py::array& counts) {
    const CountTable t = table_from(counts, "counts");
    py::gil_scoped_release unlocked;
    write_counts(path, t);
  });
  m.def("placement_read_trace", [](const std::string& path, std::optional<int64_t> num_experts) {
    RoutingTrace t;
    {
      py::gil_scoped_release unlocked;
      t = read_trace_csv(path, num_experts);
    }
    return trace_dict(std::move(t));
  });
  m.def("placement_trace_counts", [](const py::object& trace, int64_t begin, std::optional<int64_t> end) {
    const RoutingTrace t = trace_arg(trace);
    const int64_t stop = end.value_or(t.num_tokens);
    if (begin < 0 || stop < begin || stop > t.num_tokens)
      fail("token range [", begin, ", ", stop, ") is outside the trace's ", t.num_tokens, " tokens");
    return table_to_numpy(t.counts(begin, stop));
  });
  m.def("placement_summarize", [](const py::array& counts) {
    const CountTable t = table_from(counts, "counts");
    StatsSummary s;
    {
      py::gil_scoped_release unlocked;
      s = summarize(t);
    }
    return summary_dict(s);
  });
  m.def("placement_evaluate", [](const py::array& mask, const py::array& counts, const py::dict& cost) {
    const std::vector<uint8_t> m8 = mask_from(mask, "mask");
    const CountTable t = table_from(counts, "heldout");
    const CostModel c = cost_from(cost);
    Evaluation e;
    {
      py::gil_scoped_release unlocked;
      e = evaluate_mask(m8, t, c);
    }
    return evaluation_dict(e);
  });
  m.def("placement_sweep", [](const py::array& train, const py::array& heldout, const std::vector<double>& ratios,
                              uint64_t seed, std::optional<uint64_t> expert_bytes, const py::dict& cost) {
    const CountTable a = table_from(train, "train"), b = table_from(heldout, "heldout");
    const PlanOptions o = plan_options(0, std::nullopt, seed, expert_bytes, cost);
    std::vector<SweepRow> rows;
    {
      py::gil_scoped_release unlocked;
      rows = sweep_static(a, b, ratios, o);
    }
    py::list out;
    for (const SweepRow& r : rows) out.append(sweep_row_dict(r));
    return out;
  });
  // The decode policies online (hymoe.kt.DecodePlacer): a step at a time over a running model's counts.
  py::class_<OnlineDecodePolicy>(m, "placement_OnlineDecodePolicy")
      .def(py::init([](const py::array& start_mask, const std::string& policy, double decay, double margin,
                       std::optional<double> move_rate, double move_credit_cap, std::optional<py::array> prompt,
                       double prompt_weight, uint64_t expert_bytes, double pcie_gbps, double horizon_steps,
                       const py::dict& cost) {
             if (start_mask.ndim() != 2) fail("start_mask must be (num_layers, num_experts)");
             const int64_t L = start_mask.shape(0), E = start_mask.shape(1);
             DecodePolicyOptions o;
             o.policy = policy;
             o.decay = decay;
             o.margin = margin;
             o.move_rate = move_rate;
             o.move_credit_cap = move_credit_cap;
             o.prompt_weight = prompt_weight;
             o.expert_bytes = expert_bytes;
             o.pcie_gbps = pcie_gbps;
             o.horizon_steps = horizon_steps;
             o.cost = cost_from(cost);
             std::vector<uint8_t> mask = mask_from(start_mask, "start_mask");
             o.budget = std::count(mask.begin(), mask.end(), uint8_t{1});
             std::vector<double> prior;
             double prompt_tokens = 1;
             if (prompt) {
               const CountTable t = table_from(*prompt, "prompt_counts");
               if (t.num_layers != L || t.num_experts != E) fail("prompt_counts must be (", L, ", ", E, ")");
               prior = t.counts;
             }
             return std::make_unique<OnlineDecodePolicy>(L, E, o, std::move(mask), prior, prompt_tokens);
           }),
           py::arg("start_mask"), py::arg("policy") = "score-cache", py::arg("decay") = 0.9, py::arg("margin") = 0.0,
           py::arg("move_rate") = 0.125, py::arg("move_credit_cap") = 1.0, py::arg("prompt_counts") = py::none(),
           py::arg("prompt_weight") = 0.0, py::arg("expert_bytes") = 0, py::arg("pcie_gbps") = 25.0,
           py::arg("horizon_steps") = 8.0, py::arg("cost") = py::dict())
      .def("step",
           [](OnlineDecodePolicy& p, const py::array& counts, bool move) {
             return p.step(table_from(counts, "counts").counts, move);
           },
           py::arg("counts"), py::arg("move") = true)
      .def_property_readonly("mask", [](const OnlineDecodePolicy& p) {
        const int64_t E = p.num_experts();
        std::vector<uint8_t> m = p.mask();
        const auto L = static_cast<py::ssize_t>(static_cast<int64_t>(m.size()) / E);
        return mask_to_numpy(std::move(m), {L, static_cast<py::ssize_t>(E)});
      });
  m.def("placement_replay",
        [](const py::object& trace, int64_t budget, const std::string& strategy, int64_t replan_every,
           double ema_alpha, double hysteresis, int64_t max_moves_per_replan, int64_t score_from,
           std::optional<py::array> initial_mask, std::optional<uint64_t> expert_bytes, int64_t min_per_layer,
           std::optional<int64_t> max_per_layer, uint64_t seed, const py::dict& cost) {
          const RoutingTrace t = trace_arg(trace);
          ReplayOptions o;
          o.strategy = strategy;
          o.budget = budget;
          o.replan_every = replan_every;
          o.ema_alpha = ema_alpha;
          o.hysteresis = hysteresis;
          o.max_moves_per_replan = max_moves_per_replan;
          o.score_from = score_from;
          if (initial_mask) o.initial_mask = mask_from(*initial_mask, "initial_mask");
          o.expert_bytes = expert_bytes;
          o.plan = plan_options(min_per_layer, max_per_layer, seed, expert_bytes, cost);
          ReplayResult r;
          {
            py::gil_scoped_release unlocked;
            r = replay(t, o);
          }
          return replay_dict(std::move(r), t.num_layers, t.num_experts);
        });
}

}  // namespace hymoe::python
