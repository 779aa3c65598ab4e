// The simulated kernels of the GLA language model (`spbench model --backend sim`, DESIGN §10): each ModelKernels call
// runs no arithmetic and advances its stream by the GPU's time for that call at that shape, read from the model's
// stage table (sim/model_stage_table.h: `spbench model --stage-times` on a GPU, results/<kind>_model_stages.csv). A
// call the table has no row of is a UsageError naming the stage, the shape key and the file. computes() is false,
// so the model draws no weights and copies in no tokens.
#pragma once

#include <memory>

#include "model/model_kernels.h"
#include "sim/sim_device.h"
#include "sim/stage_table.h"

namespace spb {

// act: the activations' type the model runs in, bf16 as on the GPUs the table was recorded on (fp32 where a test
// replays a table its CPU ranks recorded).
std::unique_ptr<ModelKernels> make_sim_model_kernels(SimDevice& dev, StageTable table, DType act = DType::bf16);

}  // namespace spb
