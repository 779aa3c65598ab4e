// The model level's plan: its options (the flags, add_model_command) validated on every rank, and what follows from
// them before anything is allocated; the memory check once the runtime exists.
#pragma once

#include <string>
#include <vector>

#include "harness/model_level.h"
#include "model/gla_model.h"
#include "runtime/bootstrap.h"
#include "sp/method.h"
#include "sp/runtime.h"

namespace spb {

// What run_model measures: the options (backend resolved) and what follows from them.
struct ModelPlan {
  ModelOptions o;
  GlaModelConfig mc;
  int T = 0, L = 0;  // tokens of a whole sequence, of a rank
  Recompute recompute = Recompute::none;
  SpConfig sp;
  std::vector<std::string> methods, left_out;  // left_out: by `all`, the methods that cannot run this configuration
};

// The options, validated the same way on every rank (or agreed on), and what follows from them; every file rank 0
// will write checked. Nothing is allocated yet.
ModelPlan validated_model_plan(const Bootstrap& boot, const ModelOptions& opt);

// The levels --recompute=auto tries, fastest first: recompute_auto's pick (states where a block's chunk states
// outweigh its k and v, else none), elementwise after none, then states+elementwise and blocks, each holding less
// than the one before. (all is left out: states+elementwise holds less and makes less again.)
std::vector<Recompute> auto_recompute_levels(const GlaModelConfig& c);
// --recompute=auto: plan.recompute becomes the first of auto_recompute_levels that fits this runtime's memory (the
// last where none does: check_model_memory then says so), rank 0 saying which where it is not the first. Collective.
void choose_auto_recompute(const Bootstrap& boot, Runtime& rt, ModelPlan& plan, bool gpu);
// --plan: on rank 0, every --recompute level's memory against what is free, and auto's pick. Collective.
void print_memory_plan(const Bootstrap& boot, Runtime& rt, const ModelPlan& plan, bool gpu);

// Memory: the model's own tensors plus the SP methods' chunk states and gc (per block, or one block's with
// --recompute=all, states or states+elementwise, and one dhs for every block: GlaModel::device_bytes), against what
// the device has free; every rank agrees before any allocation. Returns GiB per rank.
double check_model_memory(const Bootstrap& boot, Runtime& rt, const ModelPlan& plan, bool gpu);

}  // namespace spb
