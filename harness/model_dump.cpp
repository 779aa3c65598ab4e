#include "harness/model_dump.h"

#include <cstdio>
#include <filesystem>

#include "runtime/collective_errors.h"
#include "runtime/error.h"
#include "runtime/npy.h"

namespace spb {

void ModelDump::write_start(const Bootstrap& boot, const GlaModel& model, const GlaModelConfig& c,
                            const ModelOptions& o, int T, const AdamWConfig& adam) const {
  agree_on_usage_errors(boot, [&] {
    if (boot.rank() != 0) return;
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    SPB_USAGE(!ec, "--dump " + dir + ": cannot create the directory (" + ec.message() + ")");
    config(c, o, T, adam);
    manifest(model.params_info());
    const std::vector<float> params = model.download_params();
    write_npy(dir + "/params.npy", {params.size()}, params.data());
  });
}

void ModelDump::write_first_grads(const Bootstrap& boot, const GlaModel& model) const {
  agree_on_usage_errors(boot, [&] {
    if (boot.rank() != 0) return;
    const std::vector<float> g = model.download_grads();
    write_npy(dir + "/grads_step1.npy", {g.size()}, g.data());
  });
}

void ModelDump::write_steps(const Bootstrap& boot, int steps, int batch, int T) const {
  agree_on_usage_errors(boot, [&] {
    if (boot.rank() != 0) return;
    write_npy(dir + "/tokens.npy", {size_t(steps), size_t(batch), size_t(T) + 1}, tokens.data());
    write_npy(dir + "/losses.npy", {size_t(steps)}, losses.data());
  });
}

void ModelDump::config(const GlaModelConfig& c, const ModelOptions& o, int T, const AdamWConfig& adam) const {
  FILE* f = std::fopen((dir + "/config.csv").c_str(), "w");
  SPB_USAGE(f, "--dump " + dir + ": cannot write config.csv");
  std::fprintf(f, "key,value\nvocab,%d\nhidden,%d\nlayers,%d\nheads,%d\ndk,%d\ndv,%d\nkey_dim,%d\nvalue_dim,%d\n",
               c.vocab, c.hidden, c.layers, c.heads, c.dk(), c.dv(), c.key_dim(), c.value_dim());
  std::fprintf(f, "mlp,%d\ngate_rank,%d\nbatch,%d\nseq,%d\nsteps,%d\n", c.mlp_size(), c.gate_rank, o.batch, T,
               o.warmup + o.steps);
  std::fprintf(f, "lr,%.9g\nbeta1,%.9g\nbeta2,%.9g\nadam_eps,%.9g\nweight_decay,%.9g\nnorm_eps,%.9g\n", adam.lr,
               adam.beta1, adam.beta2, adam.eps, adam.weight_decay, c.norm_eps);
  std::fprintf(f, "gate_normaliser,%.9g\n", c.gate_normaliser);
  std::fclose(f);
}

void ModelDump::manifest(const std::vector<ParamInfo>& info) const {
  FILE* f = std::fopen((dir + "/manifest.csv").c_str(), "w");
  SPB_USAGE(f, "--dump " + dir + ": cannot write manifest.csv");
  std::fprintf(f, "name,offset,rows,cols\n");
  for (const ParamInfo& p : info) std::fprintf(f, "%s,%zu,%zu,%zu\n", p.name.c_str(), p.offset, p.rows, p.cols);
  std::fclose(f);
}

}  // namespace spb
