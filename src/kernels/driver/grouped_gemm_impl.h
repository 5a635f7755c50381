// The implementations behind grouped_rows_gemm / grouped_weight_grad_gemm, for the dispatcher and the tests.
#pragma once

#include "kernels/driver/grouped_gemm.h"

namespace hymoe::kernels {

void grouped_rows_gemm_portable(const GroupedRowsGemm& p);
void grouped_weight_grad_gemm_portable(const GroupedWeightGradGemm& p);
// The ISA micro-kernels through the grouped driver (isa must not be Isa::kScalar). B (rows form) and G (weight
// grad) are packed per call: the backward's operands change every step.
void grouped_rows_gemm_packed(const GroupedRowsGemm& p, Isa isa);
void grouped_weight_grad_gemm_packed(const GroupedWeightGradGemm& p, Isa isa);

}  // namespace hymoe::kernels
