// HfConfig: typed look-ups over a parsed config.json. All JSON parsing of model files goes through
// parse_json_object below, so switching parsers is a change in one place.
#include <cstdint>

#include <nlohmann/json.hpp>

#include "hymoe/error.h"
#include "hymoe/file_io.h"
#include "hymoe/model.h"
#include "io/json_io.h"

namespace hymoe {

struct HfConfig::Json {
  nlohmann::json value;
};

namespace {

// The project's one JSON parser (bounded nesting, duplicate keys refused), plus "the top level is an object".
nlohmann::json parse_json_object(const std::string& text, const std::string& label) {
  nlohmann::json j = parse_json(text, label);
  if (!j.is_object()) fail(label, ": expected a JSON object at the top level");
  return j;
}

std::string key_list(std::initializer_list<const char*> keys) {
  std::string out;
  for (const char* k : keys) out += std::string(out.empty() ? "'" : " / '") + k + "'";
  return out;
}

}  // namespace

HfConfig::HfConfig(std::unique_ptr<Json> json, std::string label) : json_(std::move(json)), label_(std::move(label)) {}
HfConfig::~HfConfig() = default;
HfConfig::HfConfig(const HfConfig& o) : json_(std::make_unique<Json>(*o.json_)), label_(o.label_) {}
HfConfig& HfConfig::operator=(const HfConfig& o) {
  json_ = std::make_unique<Json>(*o.json_);
  label_ = o.label_;
  return *this;
}

HfConfig HfConfig::parse(const std::string& text, const std::string& label) {
  return HfConfig(std::make_unique<Json>(Json{parse_json_object(text, label)}), label);
}

HfConfig HfConfig::load(const std::string& path) { return parse(read_text_file(path), path); }

bool HfConfig::has(const std::string& key) const {
  auto it = json_->value.find(key);
  return it != json_->value.end() && !it->is_null();
}

bool HfConfig::is_list(const std::string& key) const {
  auto it = json_->value.find(key);
  return it != json_->value.end() && it->is_array();
}

bool HfConfig::is_null(const std::string& key) const {
  auto it = json_->value.find(key);
  return it != json_->value.end() && it->is_null();
}

namespace {

template <typename T, typename Check>
std::optional<T> find(const nlohmann::json& j, const std::string& label, std::initializer_list<const char*> keys,
                      Check is_kind, const char* kind) {
  for (const char* k : keys) {
    auto it = j.find(k);
    if (it == j.end() || it->is_null()) continue;
    if (!is_kind(*it)) fail(label, ": '", k, "' must be ", kind, ", got ", it->dump());
    return it->template get<T>();
  }
  return std::nullopt;
}

template <typename T>
T required(std::optional<T> v, const std::string& label, std::initializer_list<const char*> keys) {
  if (!v) fail(label, ": missing ", key_list(keys));
  return *v;
}

const auto kIsInteger = [](const nlohmann::json& v) { return v.is_number_integer() && !(v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)); };
const auto kIsNumber = [](const nlohmann::json& v) { return v.is_number(); };
const auto kIsString = [](const nlohmann::json& v) { return v.is_string(); };
const auto kIsBool = [](const nlohmann::json& v) { return v.is_boolean(); };

}  // namespace

int64_t HfConfig::integer(std::initializer_list<const char*> keys) const {
  return required(find<int64_t>(json_->value, label_, keys, kIsInteger, "an integer"), label_, keys);
}
double HfConfig::number(std::initializer_list<const char*> keys) const {
  return required(find<double>(json_->value, label_, keys, kIsNumber, "a number"), label_, keys);
}
std::string HfConfig::string(std::initializer_list<const char*> keys) const {
  return required(find<std::string>(json_->value, label_, keys, kIsString, "a string"), label_, keys);
}
bool HfConfig::boolean(std::initializer_list<const char*> keys) const {
  return required(find<bool>(json_->value, label_, keys, kIsBool, "true or false"), label_, keys);
}
int64_t HfConfig::integer_or(std::initializer_list<const char*> keys, int64_t fallback) const {
  return find<int64_t>(json_->value, label_, keys, kIsInteger, "an integer").value_or(fallback);
}
double HfConfig::number_or(std::initializer_list<const char*> keys, double fallback) const {
  return find<double>(json_->value, label_, keys, kIsNumber, "a number").value_or(fallback);
}
std::string HfConfig::string_or(std::initializer_list<const char*> keys, const std::string& fallback) const {
  return find<std::string>(json_->value, label_, keys, kIsString, "a string").value_or(fallback);
}
bool HfConfig::boolean_or(std::initializer_list<const char*> keys, bool fallback) const {
  return find<bool>(json_->value, label_, keys, kIsBool, "true or false").value_or(fallback);
}

std::vector<int64_t> HfConfig::integer_list_or(const char* key, std::vector<int64_t> fallback) const {
  auto it = json_->value.find(key);
  if (it == json_->value.end() || it->is_null()) return fallback;
  if (!it->is_array()) fail(label_, ": '", key, "' must be a list of integers, got ", it->dump());
  std::vector<int64_t> out;
  for (const auto& v : *it) {
    if (!v.is_number_integer()) fail(label_, ": '", key, "' must be a list of integers, got ", it->dump());
    out.push_back(v.get<int64_t>());
  }
  return out;
}

int64_t HfConfig::integer_per_layer_or(const char* key, int64_t layer, int64_t fallback) const {
  auto it = json_->value.find(key);
  if (it == json_->value.end() || it->is_null()) return fallback;
  if (it->is_number_integer()) return it->get<int64_t>();
  const std::vector<int64_t> list = integer_list_or(key, {});  // names the key if it is neither
  if (layer < 0 || layer >= static_cast<int64_t>(list.size()))
    fail(label_, ": '", key, "' lists ", list.size(), " values, none for layer ", layer);
  return list[static_cast<size_t>(layer)];
}

std::optional<double> HfConfig::number_of_layer(const char* key, int64_t layer) const {
  auto it = json_->value.find(key);
  if (it == json_->value.end() || it->is_null()) return std::nullopt;
  if (!it->is_array()) fail(label_, ": '", key, "' must be a list with a number or null per layer, got ", it->dump());
  if (layer < 0 || layer >= static_cast<int64_t>(it->size()))
    fail(label_, ": '", key, "' lists ", it->size(), " values, none for layer ", layer);
  const auto& v = (*it)[static_cast<size_t>(layer)];
  if (v.is_null()) return std::nullopt;
  if (!v.is_number()) fail(label_, ": '", key, "' must hold numbers or null, got ", v.dump(), " for layer ", layer);
  return v.get<double>();
}

std::vector<std::string> HfConfig::string_list_or(const char* key, std::vector<std::string> fallback) const {
  auto it = json_->value.find(key);
  if (it == json_->value.end() || it->is_null()) return fallback;
  if (!it->is_array()) fail(label_, ": '", key, "' must be a list of strings, got ", it->dump());
  std::vector<std::string> out;
  for (const auto& v : *it) {
    if (!v.is_string()) fail(label_, ": '", key, "' must be a list of strings, got ", it->dump());
    out.push_back(v.get<std::string>());
  }
  return out;
}

std::optional<HfConfig> HfConfig::object(const char* key) const {
  auto it = json_->value.find(key);
  if (it == json_->value.end() || it->is_null()) return std::nullopt;
  if (!it->is_object()) fail(label_, ": '", key, "' must be an object");
  return HfConfig(std::make_unique<Json>(Json{*it}), label_ + " " + key);
}

std::vector<std::pair<std::string, std::string>> HfConfig::string_map(const char* key) const {
  auto it = json_->value.find(key);
  if (it == json_->value.end() || !it->is_object()) fail(label_, ": missing object '", key, "'");
  std::vector<std::pair<std::string, std::string>> out;
  for (auto e = it->begin(); e != it->end(); ++e) {
    if (!e.value().is_string()) fail(label_, ": '", key, "' entry '", e.key(), "' must be a string");
    out.emplace_back(e.key(), e.value().get<std::string>());
  }
  return out;
}

}  // namespace hymoe
