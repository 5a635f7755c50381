// Router and MLP registries keyed by name. Built-ins are installed on first use from one table each; adding a
// router or an MLP kind is one register_* call (or one line in these tables).
#include <algorithm>
#include <map>
#include <mutex>

#include "hymoe/error.h"
#include "hymoe/moe.h"
#include "moe/routers.h"

namespace hymoe {
namespace {

template <typename Factory>
class Registry {
 public:
  explicit Registry(const char* kind, std::initializer_list<std::pair<const std::string, Factory>> builtins)
      : kind_(kind), entries_(builtins) {}
  void add(const std::string& name, Factory f) {
    std::lock_guard lock(mutex_);
    if (name.empty()) fail(kind_, " registry: empty name");
    if (!entries_.emplace(name, std::move(f)).second) fail(kind_, " registry: ", quote_for_message(name), " is already registered");
  }
  Factory get(const std::string& name) const {
    std::lock_guard lock(mutex_);
    auto it = entries_.find(name);
    if (it == entries_.end()) fail(kind_, " ", quote_for_message(name), " is not registered (known: ", names_locked(), ")");
    return it->second;
  }
  std::vector<std::string> names() const {
    std::lock_guard lock(mutex_);
    std::vector<std::string> out;
    for (const auto& [name, f] : entries_) out.push_back(name);
    return out;
  }

 private:
  std::string names_locked() const {
    std::string out;
    for (const auto& [name, f] : entries_) out += (out.empty() ? "" : ", ") + name;
    return out;
  }
  const char* kind_;
  mutable std::mutex mutex_;
  std::map<std::string, Factory> entries_;
};

ExpertMlp make_builtin_mlp(MlpActivation activation, int64_t dim, int64_t hidden) {
  ExpertMlp m;
  m.activation = activation;
  if (activation == MlpActivation::kSwiGLU) m.gate_proj = Tensor(Shape{hidden, dim});
  m.up_proj = Tensor(Shape{hidden, dim});
  m.down_proj = Tensor(Shape{dim, hidden});
  return m;
}

Registry<RouterFactory>& routers() {
  static Registry<RouterFactory> r("router", {{"softmax_topk", make_softmax_topk_router},
                                              {"sigmoid_topk", make_sigmoid_topk_router}});
  return r;
}

Registry<MlpFactory>& mlps() {
  static Registry<MlpFactory> r(
      "mlp", {{"swiglu", [](int64_t d, int64_t h) { return make_builtin_mlp(MlpActivation::kSwiGLU, d, h); }},
              {"standard_gelu", [](int64_t d, int64_t h) { return make_builtin_mlp(MlpActivation::kGelu, d, h); }},
              {"standard_relu", [](int64_t d, int64_t h) { return make_builtin_mlp(MlpActivation::kRelu, d, h); }}});
  return r;
}

}  // namespace

void register_router(const std::string& name, RouterFactory factory) { routers().add(name, std::move(factory)); }
std::unique_ptr<Router> make_router(const MoEConfig& config) { return routers().get(config.router_type)(config); }
std::vector<std::string> router_names() { return routers().names(); }

void register_mlp(const std::string& name, MlpFactory factory) { mlps().add(name, std::move(factory)); }
ExpertMlp make_mlp(const std::string& name, int64_t dim, int64_t hidden_dim) { return mlps().get(name)(dim, hidden_dim); }
std::vector<std::string> mlp_names() { return mlps().names(); }

std::string mlp_name_for_activation(const std::string& activation) {
  if (activation == "silu") return "swiglu";
  if (activation == "gelu") return "standard_gelu";
  if (activation == "relu") return "standard_relu";
  const auto names = mlp_names();
  if (std::find(names.begin(), names.end(), activation) != names.end()) return activation;  // a registered MLP
  fail("config: activation=", quote_for_message(activation), " is not one of silu, gelu, relu");
}

}  // namespace hymoe
