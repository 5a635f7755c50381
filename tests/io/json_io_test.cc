// The JSON helper every reader shares: bounded nesting, duplicate keys refused, messages that name the source and
// quote input only as a short escaped excerpt; and the integer and value-description helpers built on it.
#include "io/json_io.h"

#include <gtest/gtest.h>

#include <limits>
#include <string>

#include "hymoe/error.h"
#include "test_util.h"

namespace hymoe {
namespace {

std::string parse_error(const std::string& text, const std::string& label = "doc.json") {
  return test::error_of([&] { parse_json(text, label); });
}

std::string nested_arrays(int depth) { return std::string(static_cast<size_t>(depth), '[') + std::string(static_cast<size_t>(depth), ']'); }

TEST(ParseJson, ParsesAnOrdinaryDocument) {
  const nlohmann::json j = parse_json(R"({"a": [1, 2, {"b": "c"}], "d": {"a": 1}})", "doc.json");
  EXPECT_EQ(j["a"][1].get<int>(), 2);
  EXPECT_EQ(j["a"][2]["b"].get<std::string>(), "c");
  EXPECT_EQ(j["d"]["a"].get<int>(), 1);  // the same key in two different objects is fine
}

TEST(ParseJson, AcceptsNestingUpToTheLimitAndRefusesOneMore) {
  EXPECT_EQ(parse_json(nested_arrays(kMaxJsonDepth), "doc.json").size(), 1u);
  const std::string e = parse_error(nested_arrays(kMaxJsonDepth + 1));
  EXPECT_NE(e.find("doc.json"), std::string::npos) << e;
  EXPECT_NE(e.find("nested deeper than 64"), std::string::npos) << e;
  // Objects count as levels too.
  std::string objects;
  for (int i = 0; i <= kMaxJsonDepth; ++i) objects += "{\"k\":";
  objects += "1" + std::string(static_cast<size_t>(kMaxJsonDepth + 1), '}');
  EXPECT_NE(parse_error(objects).find("nested deeper than 64"), std::string::npos);
}

TEST(ParseJson, RefusesAHundredThousandNestedArraysWithoutCrashing) {
  // The 200 KB document that once overflowed the stack wherever a message printed it.
  const std::string e = parse_error(nested_arrays(100000), "deep.json");
  EXPECT_NE(e.find("deep.json: JSON nested deeper than 64"), std::string::npos) << e;
  // Unclosed, as an attacker would send it, too.
  EXPECT_NE(parse_error(std::string(100000, '[')).find("nested deeper"), std::string::npos);
}

TEST(ParseJson, RefusesDuplicateKeysNamingKeyAndFile) {
  EXPECT_NE(parse_error(R"({"dim": 1, "dim": 2})", "config.json").find("config.json: duplicate key 'dim'"),
            std::string::npos);
  // Nested objects are checked too, and the key is escaped.
  const std::string e = parse_error("{\"outer\": {\"a\\u001b[31m\": 1, \"a\\u001b[31m\": 2}}");
  EXPECT_NE(e.find("duplicate key 'a\\x1b[31m'"), std::string::npos) << e;
  EXPECT_EQ(e.find('\x1b'), std::string::npos) << "a control character reached the message";
}

TEST(ParseJson, SyntaxErrorsNameTheLabelAndQuoteAShortExcerpt) {
  const std::string e = parse_error(R"({"dim": 16, )", "config.json");
  EXPECT_EQ(e.rfind("config.json: not valid JSON: ", 0), 0u) << e;
  EXPECT_NE(e.find("line 1"), std::string::npos) << e;
  EXPECT_EQ(e.find("[json.exception"), std::string::npos) << e;
  // An unterminated 1 MB string: nlohmann's excerpt would be the whole token; ours is a bounded, escaped prefix.
  const std::string long_token = "[\"" + std::string(1 << 20, 'x') + "\x01";
  const std::string e2 = parse_error(long_token);
  EXPECT_LT(e2.size(), 400u) << e2.substr(0, 400);
  EXPECT_NE(e2.find("not valid JSON"), std::string::npos) << e2;
  // Found by json_fuzz: an unterminated string that itself contains "'; expected " once made everything after
  // that text the message's tail, unbounded and unescaped.
  const std::string e3 = parse_error("[\"xx'; expected " + std::string(5000, 'x') + "\x1b");
  EXPECT_LT(e3.size(), 400u) << e3.substr(0, 400);
  EXPECT_EQ(e3.find('\x1b'), std::string::npos) << e3.substr(0, 400);
  // nlohmann's own "; expected ..." after the excerpt is kept.
  EXPECT_NE(parse_error("{\"a\" 1}").find("; expected ':'"), std::string::npos) << parse_error("{\"a\" 1}");
}

TEST(ParseJson, NumbersPastDoubleAreRefusedWithABoundedExcerpt) {
  EXPECT_EQ(parse_error("[1e400]"), "doc.json: not valid JSON: number overflow parsing '1e400'");
  const std::string e = parse_error("[1" + std::string(100000, '0') + "e400]");
  EXPECT_NE(e.find("number overflow parsing '1000"), std::string::npos) << e.substr(0, 300);
  EXPECT_NE(e.find("... (100005 bytes)"), std::string::npos) << e.substr(0, 300);
  EXPECT_LT(e.size(), 200u);
}

TEST(JsonStructureGuard, CountsDepthAndKeysPerObject) {
  JsonStructureGuard g("stream.json");
  g.open();
  g.key("a");
  g.open();
  g.key("a");  // a different object
  g.close();
  EXPECT_THROW(g.key("a"), Error);
  g.close();
  JsonStructureGuard deep("stream.json");
  for (int i = 0; i < kMaxJsonDepth; ++i) deep.open();
  try {
    deep.open();
    ADD_FAILURE() << "depth past the limit accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("stream.json"), std::string::npos);
  }
}

TEST(DescribeJson, ShowsScalarsAndSizesNeverContents) {
  EXPECT_EQ(describe_json(nlohmann::json(3)), "3");
  EXPECT_EQ(describe_json(nlohmann::json(true)), "true");
  EXPECT_EQ(describe_json(nlohmann::json("wide")), "'wide'");
  EXPECT_EQ(describe_json(nlohmann::json::array({1, 2, 3})), "an array of 3 entries");
  EXPECT_EQ(describe_json(nlohmann::json::object({{"a", 1}})), "an object of 1 fields");
  EXPECT_EQ(describe_json(nlohmann::json(std::numeric_limits<double>::infinity())), "a number too large to represent");
  const std::string long_text = describe_json(nlohmann::json(std::string(10000, 'y')));
  EXPECT_EQ(long_text, "'" + std::string(kMaxQuotedBytes, 'y') + "'... (10000 bytes)");
}

TEST(JsonInt64, AcceptsIntegersAndIntegralFloatsInRange) {
  EXPECT_EQ(json_int64(parse_json("64", "x"), "c.json", "dim"), 64);
  EXPECT_EQ(json_int64(parse_json("64.0", "x"), "c.json", "dim"), 64);
  EXPECT_EQ(json_int64(parse_json("-3", "x"), "c.json", "dim"), -3);
  EXPECT_EQ(json_int64(parse_json("9223372036854775807", "x"), "c.json", "dim"), INT64_MAX);
}

TEST(JsonInt64, RefusesWhatItCannotRepresentNamingTheField) {
  auto error = [](const std::string& text, int64_t lo = INT64_MIN, int64_t hi = INT64_MAX) {
    return test::error_of([&] { json_int64(parse_json(text, "x"), "c.json", "dim", lo, hi); });
  };
  // Once reported as dim=-1: nlohmann keeps it unsigned and get<int64_t>() wraps.
  EXPECT_NE(error("18446744073709551615").find("c.json: field 'dim' = 18446744073709551615 is out of range"),
            std::string::npos);
  EXPECT_NE(error("1.5").find("field 'dim' must be an integer, got 1.5"), std::string::npos);
  EXPECT_NE(error("\"64\"").find("must be an integer, got '64'"), std::string::npos);
  EXPECT_NE(error("1e300").find("out of range"), std::string::npos);
  EXPECT_NE(error("0", 1, 10).find("field 'dim' = 0 is out of range [1, 10]"), std::string::npos);
  EXPECT_NE(error("11", 1, 10).find("out of range [1, 10]"), std::string::npos);
}

}  // namespace
}  // namespace hymoe
