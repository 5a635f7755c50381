// The shared expert half of the MoE forward (see expert_pass.h).
#include "moe/expert_pass.h"

#include "hymoe/error.h"
#include "kernels/driver/workspace.h"

namespace hymoe {

void run_expert_pass(const ExpertPassArgs& a) {
  const int64_t D = a.routed->shape().dim, T = a.num_tokens;
  const Dispatch& dispatch = *a.dispatch;
  // Temporaries come from a pooled workspace, reused call after call instead of being mapped afresh.
  const kernels::WorkspaceLease ws;
  const kernels::Workspace::Scope scope(*ws);
  float* const expert_out = ws->floats(dispatch.rows() * D);  // (R, D)
  if (dispatch.rows() > 0) {
    kernels::GroupedFfnArgs args;
    args.offsets = dispatch.offsets.data();
    args.x = a.x;
    args.x_rows = dispatch.row_token.data();  // the dispatch's gather, fused into the kernel's packing
    args.scale = a.row_scale;
    if (a.input_scale) {  // the rows w_r * x[token(r)], one float32 product each, as transformers forms them
      HYMOE_CHECK(!a.row_scale, "an expert pass scales its rows' inputs or their outputs, not both");
      float* const scaled = ws->floats(dispatch.rows() * D);
      for (int64_t r = 0; r < dispatch.rows(); ++r) {
        const float* src = a.x + dispatch.row_token[static_cast<size_t>(r)] * D;
        const float w = a.input_scale[r];
        for (int64_t d = 0; d < D; ++d) scaled[r * D + d] = src[d] * w;
      }
      args.x = scaled;
      args.x_rows = nullptr;
    }
    args.y = expert_out;
    args.saved_up = a.saved_up;
    args.saved_gate = a.saved_gate;
    a.routed->run(args);
    if (a.check_stage) a.check_stage("routed expert outputs", expert_out, dispatch.rows() * D, D, "routed row");
  }
  combine_rows(expert_out, D, dispatch, T, a.top_k, a.y);
  if (a.check_stage) a.check_stage("combined routed outputs", a.y, T * D, D, "token");
  if (a.shared) {
    float* const shared_out = ws->floats(T * D);  // (T, D)
    const int64_t offsets[2] = {0, T};
    kernels::GroupedFfnArgs args;
    args.offsets = offsets;
    args.x = a.x;
    args.scale = a.shared_token_scale;
    args.y = shared_out;
    args.saved_up = a.saved_shared_up;
    args.saved_gate = a.saved_shared_gate;
    a.shared->run(args);
    if (a.check_stage) a.check_stage("shared expert outputs", shared_out, T * D, D, "token");
    if (a.shared_average)  // (routed + shared) / 2: the halving is exact, as transformers' division by 2 is
      for (int64_t i = 0; i < T * D; ++i) a.y[i] = (a.y[i] + shared_out[i]) * 0.5f;
    else
      for (int64_t i = 0; i < T * D; ++i) a.y[i] += shared_out[i];
    if (a.check_stage) a.check_stage("layer outputs y (routed + shared)", a.y, T * D, D, "token");
  }
}

}  // namespace hymoe
