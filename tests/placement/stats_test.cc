// Count-table and trace files (round trips, SGLang's layouts, malformed inputs), the recorder, and the skew
// summary on known tables and on real data (vendored Apache-2.0 statistics, tests/data/placement/README.md).
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "hymoe/error.h"
#include "hymoe/placement.h"
#include "hymoe/safetensors.h"
#include "test_util.h"

namespace hymoe::test {
namespace {

using namespace hymoe::placement;

std::vector<std::byte> as_bytes(const std::string& s) {
  std::vector<std::byte> b(s.size());
  std::memcpy(b.data(), s.data(), s.size());
  return b;
}

CountTable sample_table() {
  CountTable t(2, 3);
  t.counts = {5, 0, 12, 7.5, 1, 3};
  return t;
}

TEST(CountFiles, JsonCsvAndSafetensorsRoundTrip) {
  const CountTable t = sample_table();
  const TempDir tmp("counts");
  const std::string& dir = tmp.path();
  for (const std::string ext : {".json", ".csv", ".safetensors"}) {
    const std::string path = dir + "/t" + ext;
    write_counts(path, t);
    const CountTable back = read_counts(path);
    EXPECT_EQ(back.num_layers, 2) << ext;
    EXPECT_EQ(back.num_experts, 3) << ext;
    EXPECT_EQ(back.counts, t.counts) << ext;
  }
}

TEST(CountFiles, JsonAcceptsBareListsAndTheActivationFreqObject) {
  const StatsArray bare = parse_counts_json("[[1, 2], [3, 4.5]]", "x");
  EXPECT_EQ(bare.shape, (Shape{2, 2}));
  EXPECT_EQ(bare.values, (std::vector<double>{1, 2, 3, 4.5}));
  const StatsArray obj = parse_counts_json(R"({"num_gpu_experts": 3, "activation_freq": [[0.5, 0.25, 0]]})", "x");
  EXPECT_EQ(obj.shape, (Shape{1, 3}));
  // A 1-D table reads (the planner rejects it with the reference's message).
  EXPECT_EQ(parse_counts_json("[1, 2, 3]", "x").shape, (Shape{3}));
  EXPECT_EQ(error_of([] { require_table(parse_counts_json("[1, 2, 3]", "f.json"), "f.json"); }),
            "f.json: activation_freq must be a 2D tensor of shape (num_layers, num_experts), got shape (3,)");
}

TEST(CountFiles, MalformedJsonIsRejectedWithWhereAndWhat) {
  struct Case {
    std::string text, message;
  } cases[] = {
      {"[[1, 2], [3]]", "f.json: activation_freq[1] has 1 entries, expected 2 (rows must all have the same length)"},
      {"[[1, -2]]", "f.json: activation_freq[0][1] must be a non-negative count, got -2"},
      {"[[1, \"2\"]]", "f.json: activation_freq[0][1] must be a number, got a string"},
      {"[[1, 2], 3]", "f.json: activation_freq[1] is a number where a list was expected (ragged nesting)"},
      {"{\"counts\": []}", "f.json: a JSON count file must be a nested list or an object with an \"activation_freq\" field"},
      {"{\"activation_freq\": 3}", "f.json: activation_freq must be a list of lists of counts, got a number"},
  };
  for (const auto& c : cases) EXPECT_EQ(error_of([&] { parse_counts_json(c.text, "f.json"); }), c.message) << c.text;
  EXPECT_NE(error_of([] { parse_counts_json("[[1, 2]", "f.json"); }).find("f.json: not valid JSON"), std::string::npos);
  EXPECT_NE(error_of([] { parse_counts_json("[[1, 1e999]]", "f.json"); }).find("number overflow"), std::string::npos);
  EXPECT_EQ(error_of([] { require_table(parse_counts_json("[[]]", "f.json"), "f.json"); }),
            "f.json: count table must have at least one layer and one expert, got (1, 0)");
}

TEST(CountFiles, CsvReadsSparseRowsAndBothHeaders) {
  const CountTable t = parse_counts_csv("# from a run\nlayer,expert,count\r\n1,2,7\n0,0,3\n\n", "f.csv");
  EXPECT_EQ(t.num_layers, 2);
  EXPECT_EQ(t.num_experts, 3);
  EXPECT_EQ(t.counts, (std::vector<double>{3, 0, 0, 0, 0, 7}));
  EXPECT_EQ(parse_counts_csv("layer_id,expert_id,count\n0,1,4\n", "f.csv").counts, (std::vector<double>{0, 4}));
}

TEST(CountFiles, MalformedCsvIsRejectedWithLineNumbers) {
  struct Case {
    std::string text, message;
  } cases[] = {
      {"", "f.csv: empty file; expected the header `layer,expert,count`"},
      {"l,e,c\n0,0,1\n", "f.csv: line 1: header must be `layer,expert,count`"},
      {"layer,expert,count\n", "f.csv: no count rows after the header"},
      {"layer,expert,count\n0,0,1\n0,0,2\n", "f.csv: line 3: (layer 0, expert 0) listed twice"},
      {"layer,expert,count\n0,x,1\n", "f.csv: line 2: expert must be an integer, got 'x'"},
      {"layer,expert,count\n0,-1,1\n", "f.csv: line 2: expert -1 is outside [0, 65535]"},
      {"layer,expert,count\n0,0,-1\n", "f.csv: line 2: count must be a non-negative count, got -1"},
      {"layer,expert,count\n0,0,nan\n", "f.csv: line 2: count must be a finite number, got nan"},
      {"layer,expert,count\n0,0\n", "f.csv: line 2: expected 3 fields, got 2"},
      {"layer,expert,count\n5000,0,1\n", "f.csv: line 2: layer 5000 is outside [0, 4095]"},
      {"layer,expert,count\n4000,65000,1\n", "f.csv: 4001 x 65001 entries exceed the limit of 16777216"},
  };
  for (const auto& c : cases) EXPECT_EQ(error_of([&] { parse_counts_csv(c.text, "f.csv"); }), c.message) << c.text;
}

TEST(CountFiles, SafetensorsLogicalCountIsSummedOverSteps) {
  SafetensorsWriter w;
  w.add("logical_count", Tensor(Shape{3, 2, 2}, {1, 2, 3, 4, 10, 20, 30, 40, 100, 200, 300, 400}));
  const StatsArray a = parse_counts_safetensors(w.serialize(), "s.safetensors");
  EXPECT_EQ(a.shape, (Shape{2, 2}));
  EXPECT_EQ(a.values, (std::vector<double>{111, 222, 333, 444}));

  // int32 as SGLang writes it.
  std::vector<std::byte> raw(4 * sizeof(int32_t));
  const int32_t vals[4] = {7, 0, 1, 2};
  std::memcpy(raw.data(), vals, raw.size());
  SafetensorsWriter wi;
  wi.add_raw("logical_count", DType::kI32, Shape{1, 1, 4}, raw);
  EXPECT_EQ(parse_counts_safetensors(wi.serialize(), "s").values, (std::vector<double>{7, 0, 1, 2}));
}

TEST(CountFiles, MalformedSafetensorsAreRejected) {
  SafetensorsWriter none;
  none.add("weights", Tensor(Shape{2, 2}));
  EXPECT_EQ(error_of([&] { parse_counts_safetensors(none.serialize(), "s.safetensors"); }),
            "s.safetensors: holds neither `activation_freq` (L, E) nor `logical_count` (steps, L, E)");
  SafetensorsWriter neg;
  neg.add("activation_freq", Tensor(Shape{1, 2}, {1, -3}));
  EXPECT_EQ(error_of([&] { parse_counts_safetensors(neg.serialize(), "s.safetensors"); }),
            "s.safetensors: activation_freq entry 1 must be a non-negative count, got -3");
  EXPECT_NE(error_of([] { parse_counts_safetensors(as_bytes("garbage!"), "s.safetensors"); }), "");
  // A regular file's format is its name's; a missing file is named as missing.
  const TempDir dir("counts_format");
  std::ofstream(dir.path("x.txt")) << "layer,expert,count\n0,0,1\n";
  EXPECT_EQ(error_of([&] { read_counts(dir.path("x.txt")); }),
            dir.path("x.txt") + ": unknown statistics format; the name must end in .json, .csv or .safetensors");
  EXPECT_NE(error_of([] { read_counts("/nonexistent/x.txt"); }).find("/nonexistent/x.txt: cannot open"), std::string::npos);
}

TEST(CountFiles, JsonDepthDuplicateKeysAndShapeAreCheckedWhileParsing) {
  // 100,000 nested lists (the table's or an ignored field's) are refused at depth 64, without recursion.
  const std::string deep(100000, '[');
  EXPECT_EQ(error_of([&] { parse_counts_json(deep, "d.json"); }),
            "d.json: activation_freq: lists nested deeper than 8 levels");
  EXPECT_EQ(error_of([&] { parse_counts_json("{\"other\": " + deep, "d.json"); }),
            "d.json: JSON nested deeper than 64 levels of arrays and objects");
  EXPECT_EQ(error_of([] { parse_counts_json("[[[[[[[[[1]]]]]]]]]", "d.json"); }),
            "d.json: activation_freq: lists nested deeper than 8 levels");
  struct Case {
    std::string text, message;
  } cases[] = {
      {R"({"activation_freq": [[1]], "activation_freq": [[2]]})",
       "j.json: duplicate key 'activation_freq' in a JSON object"},
      {R"({"meta": {"a": 1, "a": 2}, "activation_freq": [[1]]})",
       "j.json: duplicate key 'a' in a JSON object"},
      {R"([[1, 2], [3]])", "j.json: activation_freq[1] has 1 entries, expected 2 (rows must all have the same length)"},
      {R"([[1, 2], 3])", "j.json: activation_freq[1] is a number where a list was expected (ragged nesting)"},
      {R"([[1, [2]]])", "j.json: activation_freq[0][1] is a list where a number was expected (ragged nesting)"},
      {R"([[1, "2"]])", "j.json: activation_freq[0][1] must be a number, got a string"},
      {R"([[1, {}]])", "j.json: activation_freq[0][1] must be a number, got an object"},
      {R"([[1, -2]])", "j.json: activation_freq[0][1] must be a non-negative count, got -2"},
      {R"({"activation_freq": 5})", "j.json: activation_freq must be a list of lists of counts, got a number"},
      {R"({"activation_freq": {}})", "j.json: activation_freq must be a list of lists of counts, got an object"},
      {R"({"counts": [[1]]})",
       "j.json: a JSON count file must be a nested list or an object with an \"activation_freq\" field"},
      {"[[1e400]]", "j.json: not valid JSON: "},
  };
  for (const auto& c : cases)
    EXPECT_EQ(error_of([&] { parse_counts_json(c.text, "j.json"); }).substr(0, c.message.size()), c.message) << c.text;
  // A long bad token is quoted as a short, printable prefix.
  EXPECT_LT(error_of([] { parse_counts_json("[[\"" + std::string(1 << 20, 'x'), "j.json"); }).size(), 300u);

  // Ignored fields may hold anything (within the depth); the table keeps its shape, rank included.
  const StatsArray a = parse_counts_json(R"({"note": [{"x": [1, "y"]}], "activation_freq": [[[1, 2]], [[3, 4.5]]]})",
                                         "j.json");
  EXPECT_EQ(a.shape, (Shape{2, 1, 2}));
  EXPECT_EQ(a.values, (std::vector<double>{1, 2, 3, 4.5}));
  EXPECT_EQ(parse_counts_json("[[], []]", "j.json").shape, (Shape{2, 0}));
  EXPECT_EQ(error_of([] { require_table(parse_counts_json("[[], []]", "j.json"), "j.json"); }),
            "j.json: count table must have at least one layer and one expert, got (2, 0)");
}

TEST(CountFiles, TotalsBeyondFloat32AreRefusedNamingTheFile) {
  EXPECT_EQ(error_of([] { require_table(parse_counts_json("[[3e38, 3e38]]", "big.json"), "big.json"); }),
            "big.json: counts sum to 6e+38, more than the limit of 1e+38 (the planner sums scores in float32); scale "
            "the counts down");
  EXPECT_EQ(error_of([] { parse_counts_csv("layer,expert,count\n0,0,1e308\n0,1,1e308\n", "f.csv"); }),
            "f.csv: counts sum to inf, more than the limit of 1e+38 (the planner sums scores in float32); scale the "
            "counts down");
  CountTable a(1, 2), b(1, 2);
  a.counts = {6e37, 0};
  b.counts = {6e37, 0};
  EXPECT_EQ(error_of([&] { a.add(b, "b.json"); }).rfind("b.json (added to the tables before it): counts sum to 1.2e+38,", 0),
            0u);
  CountTable c(1, 1);
  c.counts = {2e38};
  EXPECT_NE(error_of([&] { c.to_scores("c.json"); }).find("c.json: counts sum to 2e+38"), std::string::npos);
}

TEST(CountFiles, FilesReadTheSameAsTextAndSafetensorsStreamsLargeRecorderDumps) {
  const TempDir scratch("counts_files");
  const std::string& dir = scratch.path();
  const std::string json = R"({"activation_freq": [[1, 2, 3], [4, 5, 6]], "x": {"y": null}})";
  std::ofstream(dir + "/c.json") << json;
  EXPECT_EQ(read_counts(dir + "/c.json").counts, (std::vector<double>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(error_of([&] { read_counts(dir); }).rfind(dir + ": ", 0), 0u);

  // (steps=300, L=4, E=1024) float32: 4.9 MB, more than one release block; every step adds 1 + its index % 3.
  const int64_t steps = 300, L = 4, E = 1024;
  std::vector<float> v(static_cast<size_t>(steps * L * E));
  for (int64_t s = 0; s < steps; ++s)
    for (int64_t i = 0; i < L * E; ++i) v[static_cast<size_t>(s * L * E + i)] = static_cast<float>(1 + i % 3);
  SafetensorsWriter w;
  w.add("logical_count", Tensor(Shape{steps, L, E}, std::move(v)));
  w.write(dir + "/c.safetensors");
  const CountTable t = read_counts(dir + "/c.safetensors");
  ASSERT_EQ(t.num_layers, L);
  ASSERT_EQ(t.num_experts, E);
  for (int64_t i = 0; i < L * E; ++i) ASSERT_EQ(t.counts[static_cast<size_t>(i)], 300.0 * (1 + i % 3)) << i;
  SafetensorsWriter one_d;
  one_d.add("activation_freq", Tensor(Shape{4}, {1, 2, 3, 4}));
  one_d.write(dir + "/v.safetensors");
  EXPECT_EQ(error_of([&] { read_counts(dir + "/v.safetensors"); }),
            dir + "/v.safetensors: activation_freq must be a 2D tensor of shape (num_layers, num_experts), got shape "
                  "(4,)");
}

TEST(Traces, FilesAreReadInBlocksWithTheSameResult) {
  const TempDir scratch("trace_files");
  const std::string& dir = scratch.path();
  // About 1.6 MB: rows cross the 1 MiB block boundary. Token ids are sparse (far apart, near INT64_MAX) so the
  // hash index is used; the layer-major order numbers tokens by first appearance.
  std::string text = "token,step,layer,e1,e2,w1,w2\n";
  for (int l = 0; l < 3; ++l)
    for (int t = 0; t < 20000; ++t)
      text += std::to_string(INT64_MAX - int64_t{1000} * t) + "," + std::to_string(t / 7) + "," + std::to_string(l * 2) +
              "," + std::to_string((t + l) % 16) + "," + std::to_string((t * 3) % 16) + ",0.75,0.25\n";
  std::ofstream(dir + "/t.csv") << text;
  const RoutingTrace from_file = read_trace_csv(dir + "/t.csv");
  const RoutingTrace from_text = parse_trace_csv(text, "t.csv");
  EXPECT_EQ(from_file.num_tokens, 20000);
  EXPECT_EQ(from_file.layer_ids, (std::vector<int64_t>{0, 2, 4}));
  EXPECT_EQ(from_file.experts, from_text.experts);
  EXPECT_EQ(from_file.weights, from_text.weights);
  EXPECT_EQ(from_file.steps, from_text.steps);
  EXPECT_EQ(from_file.expert(19999, 2, 0), (19999 + 2) % 16);
  EXPECT_EQ(from_file.steps[19999], 19999 / 7);

  // A line longer than the limit is named; so is a directory.
  std::ofstream(dir + "/long.csv") << "token,layer,e1\n0,0," + std::string(2 << 20, '1') + "\n";
  EXPECT_EQ(error_of([&] { read_trace_csv(dir + "/long.csv"); }),
            dir + "/long.csv: line 2 is longer than 1048576 bytes");
  EXPECT_EQ(error_of([&] { read_trace_csv(dir); }), dir + ": is a directory, which cannot be read as a file");
}

TEST(Traces, CsvReadsTheVllmLoggerColumnsAndRoundTrips) {
  const std::string text =
      "row,forward_pass,row_in_forward_pass,layer,e1,e2,w1,w2\n"
      "0,0,0,0,3,1,0.5,0.25\n0,0,0,8,2,0,0.6,0.1\n1,1,0,0,1,-1,0.9,0\n";
  const RoutingTrace t = parse_trace_csv(text, "t.csv", 4);
  EXPECT_EQ(t.num_tokens, 2);
  EXPECT_EQ(t.num_layers, 2);
  EXPECT_EQ(t.top_k, 2);
  EXPECT_EQ(t.layer_ids, (std::vector<int64_t>{0, 8}));
  EXPECT_EQ(t.steps, (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(t.expert(0, 1, 0), 2);
  EXPECT_EQ(t.expert(1, 1, 0), -1);  // token 1 has no row for layer 8
  EXPECT_EQ(t.counts().counts, (std::vector<double>{0, 2, 0, 1, 1, 0, 1, 0}));
  const RoutingTrace back = parse_trace_csv(trace_to_csv(t), "back.csv", 4);
  EXPECT_EQ(back.experts, t.experts);
  EXPECT_EQ(back.weights, t.weights);
  EXPECT_EQ(back.steps, t.steps);
  EXPECT_EQ(back.layer_ids, t.layer_ids);
}

TEST(Traces, MalformedTracesAreRejected) {
  struct Case {
    std::string text, message;
  } cases[] = {
      {"token,layer\n0,0\n", "t.csv: header must name expert columns e1, e2, ..."},
      {"layer,e1\n0,0\n", "t.csv: header must name a `token` (or `row`) and a `layer` column"},
      {"token,layer,e1,e2,w1\n0,0,1,2,0.5\n", "t.csv: header has 2 expert columns but 1 weight columns"},
      {"token,layer,e1\n0,0,1\n0,0,2\n", "t.csv: line 3: token 0 appears twice at layer 0"},
      {"token,layer,e1\n0,0,-2\n", "t.csv: line 2: expert id -2 is outside [-1, 3]"},
      {"token,layer,e1\n0,0,4\n", "t.csv: line 2: expert id 4 is outside [-1, 3]"},
      {"token,layer,e1\n", "t.csv: no routing rows after the header"},
      {"token,layer,e1,e1\n0,0,1,1\n", "t.csv: line 1: column `e1` appears twice"},
      {"token,layer,e1,w1\n0,0,1,inf\n", "t.csv: line 2: weight must be finite"},
  };
  for (const auto& c : cases) EXPECT_EQ(error_of([&] { parse_trace_csv(c.text, "t.csv", 4); }), c.message) << c.text;
  EXPECT_EQ(error_of([] { parse_trace_csv("token,layer,e1\n0,0,-1\n", "t.csv"); }),
            "t.csv: no expert id in the trace (all are -1); give the number of experts");
}

TEST(Recorder, CountsValidIdsOnlyAndCostsNothingWhenOff) {
  ActivationRecorder r(2, 4);
  const std::vector<int32_t> ids = {0, 3, 3, -1, 2, 9};  // (T=3, K=2); -1 and 9 are not experts
  r.record(0, ids, 2);
  EXPECT_EQ(r.counts().total(), 0);  // off by default
  r.set_enabled(true);
  r.record(0, ids, 2);
  r.record(1, std::vector<int32_t>{1, 1}, 2);
  EXPECT_EQ(r.counts().counts, (std::vector<double>{1, 0, 1, 2, 0, 2, 0, 0}));
  EXPECT_EQ(r.invalid_ids(), 2);
  EXPECT_THROW(r.record(2, ids, 2), Error);
  EXPECT_THROW(r.record(0, ids, 4), Error);
  r.reset();
  EXPECT_EQ(r.counts().total(), 0);
}

TEST(Recorder, KeepsAPerTokenTraceWithScores) {
  ActivationRecorder r(2, 4);
  r.set_enabled(true);
  r.set_trace_enabled(true);
  r.record(0, std::vector<int32_t>{0, 3, 2, 1}, 2, std::vector<float>{0.6f, 0.4f, 0.7f, 0.3f});
  r.record(1, std::vector<int32_t>{1, 7, 0, 2}, 2, std::vector<float>{0.5f, 0.5f, 0.9f, 0.1f});
  const RoutingTrace t = r.trace();
  EXPECT_EQ(t.num_tokens, 2);
  EXPECT_EQ(t.expert(0, 1, 1), -1);  // the invalid id 7 is kept as "none"
  EXPECT_EQ(t.expert(1, 0, 0), 2);
  EXPECT_FLOAT_EQ(t.weights[static_cast<size_t>((1 * 2 + 1) * 2 + 0)], 0.9f);
  EXPECT_EQ(t.counts().counts, r.counts().counts);
}

TEST(Summary, KnownTables) {
  CountTable t(2, 4);
  t.counts = {1, 1, 1, 1, 10, 0, 0, 0};
  const StatsSummary s = summarize(t);
  EXPECT_DOUBLE_EQ(s.layers[0].gini, 0.0);
  EXPECT_DOUBLE_EQ(s.layers[0].balancedness, 1.0);
  EXPECT_DOUBLE_EQ(s.layers[0].top25_share, 0.25);
  EXPECT_DOUBLE_EQ(s.layers[0].top10_share, 0.1);  // 0.4 of an expert, pro rata
  EXPECT_DOUBLE_EQ(s.layers[1].gini, 0.75);        // (E-1)/E
  EXPECT_DOUBLE_EQ(s.layers[1].balancedness, 0.25);
  EXPECT_DOUBLE_EQ(s.layers[1].top10_share, 0.4);  // 0.4 of the one hot expert
  EXPECT_DOUBLE_EQ(top_share(std::span<const double>(t.counts.data() + 4, 4), 0.25), 1.0);  // the hot expert alone
  EXPECT_DOUBLE_EQ(s.mean_top25, 0.625);
  EXPECT_NE(s.verdict.find("strongly skewed"), std::string::npos);
  EXPECT_NE(s.verdict.find("small samples overstate skew"), std::string::npos);
}

TEST(Summary, RealMixtralRoutingIsNearUniformAndOlmoeIsSkewed) {
  // The Fiddler MMLU counts: the hottest 2 of 8 experts take ~29% (Fiddler's own summary: 28.6% pooled).
  const CountTable mixtral = read_counts(data_dir() + "/placement/mixtral_mmlu_instruct_high_school_us_history.csv");
  ASSERT_EQ(mixtral.num_layers, 32);
  ASSERT_EQ(mixtral.num_experts, 8);
  EXPECT_DOUBLE_EQ(mixtral.total(), 2.0 * 56322 * 32);  // top-2 over 56,322 tokens, every layer
  const StatsSummary m = summarize(mixtral);
  EXPECT_GT(m.mean_top25, 0.26);
  EXPECT_LT(m.mean_top25, 0.32);
  EXPECT_EQ(m.verdict.rfind("routing is near-uniform: expected gain from frequency placement is small", 0), 0u);
  // OLMoE on arXiv: strongly domain-specialized (PROVENANCE: top-25% = 59.2% mean over the 3 layers).
  const StatsSummary o = summarize(read_counts(data_dir() + "/placement/olmoe_arxiv.csv"));
  EXPECT_NEAR(o.mean_top25, 0.592, 0.001);
  EXPECT_NE(o.verdict.find("strongly skewed"), std::string::npos);
}

}  // namespace
}  // namespace hymoe::test
