// config.json quantization_config: which released quantized formats the loader decodes.
#include "hymoe/error.h"
#include "hymoe/model.h"

namespace hymoe {

std::string Quantization::name() const {
  switch (method) {
    case Method::kNone: return "none";
    case Method::kFp8Block:
      return "fp8 e4m3, block [" + std::to_string(block_n) + ", " + std::to_string(block_k) + "]";
    case Method::kMxfp4: return "mxfp4";
  }
  return "?";
}

Quantization parse_quantization(const HfConfig& config) {
  Quantization q;
  const std::optional<HfConfig> qc = config.object("quantization_config");
  if (!qc) return q;
  const std::string method = qc->string({"quant_method"});
  if (method == "fp8") {
    const std::string fmt = qc->string_or({"fmt"}, "e4m3");
    if (fmt != "e4m3") fail(qc->label(), ": fmt='", fmt, "' is not supported (known: e4m3)");
    q.method = Quantization::Method::kFp8Block;
    const std::vector<int64_t> block = qc->integer_list_or("weight_block_size", {128, 128});
    if (block.size() != 2 || block[0] <= 0 || block[1] <= 0)
      fail(qc->label(), ": weight_block_size must be two positive integers [block_n, block_k]");
    q.block_n = block[0];
    q.block_k = block[1];
  } else if (method == "mxfp4") {
    q.method = Quantization::Method::kMxfp4;
  } else {
    fail(qc->label(), ": quant_method='", method, "' is not supported (known: fp8 (block-scaled e4m3), mxfp4)");
  }
  return q;
}

}  // namespace hymoe
