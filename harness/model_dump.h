// spbench model --dump DIR: the .npy and CSV files tests/model/torch_reference.py reads (tests/model/README.md).
#pragma once

#include <string>
#include <vector>

#include "harness/model_level.h"
#include "model/gla_model.h"
#include "runtime/bootstrap.h"

namespace spb {

// Rank 0 writes the files; every rank agrees on whether it could, at each of the three writes (write_start,
// write_first_grads, write_steps), so every rank calls each of them.
struct ModelDump {
  std::string dir;
  std::vector<float> tokens, losses;  // every step's: the whole sequences (rank 0 alone keeps them), the loss
  // Before the first step: the directory, config.csv, manifest.csv and the initial params.npy.
  void write_start(const Bootstrap& boot, const GlaModel& model, const GlaModelConfig& c, const ModelOptions& o, int T,
                   const AdamWConfig& adam) const;
  // After the first step's backward, before its update: grads_step1.npy.
  void write_first_grads(const Bootstrap& boot, const GlaModel& model) const;
  // After the last of `steps` steps of `batch` sequences of T tokens: tokens.npy (each sequence's T inputs and its
  // last target, as TokenData::window gives them) and losses.npy.
  void write_steps(const Bootstrap& boot, int steps, int batch, int T) const;

 private:
  void config(const GlaModelConfig& c, const ModelOptions& o, int T, const AdamWConfig& adam) const;
  void manifest(const std::vector<ParamInfo>& info) const;
};

}  // namespace spb
