// The datasheet's dense bf16 tensor-core peak of a GPU, by the name the driver reports: the denominator of MFU as
// PaLM, Megatron and llm.c report it (model FLOPs per second over this peak).
#pragma once

#include <string>

namespace spb {
// TFLOP/s of dense bf16 (no sparsity) for a known GPU name; NaN for a name the table does not know (MFU is then left
// empty rather than guessed).
double datasheet_bf16_tflops(const std::string& gpu_name);
}  // namespace spb
