#include "sim/stage_table.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "runtime/bootstrap.h"
#include "runtime/csv.h"
#include "runtime/error.h"
#include "runtime/stats.h"

namespace spb {

std::string stage_shape_key(const GlaShape& s) {
  return stage_key({{"B", s.B}, {"T", s.T}, {"H", s.H}, {"dk", s.dk}, {"dv", s.dv}, {"pairs", s.pairs()}});
}

// --- the table ---------------------------------------------------------------------------------------------------

StageTable::StageTable(const std::string& path) : path_(path) {
  std::map<std::pair<std::string, std::string>, std::vector<double>> all;
  for (const auto& row : read_csv(path)) {
    auto get = [&](const char* c) {
      auto it = row.find(c);
      return it == row.end() ? std::string() : it->second;
    };
    if (get("level") != "stage") continue;
    const std::string ms = get("time_ms_median");
    SPB_USAGE(!ms.empty(), path + ": a stage row without time_ms_median (" + get("stage") + ")");
    all[{get("stage"), get("shape")}].push_back(std::stod(ms));
  }
  SPB_USAGE(!all.empty(), path + ": no row of level `stage` (the GPU's stage times: spbench operator --stage-times)");
  for (auto& [key, v] : all) {
    double sum = 0;
    for (double x : v) sum += x;
    ms_[key] = sum / double(v.size());
  }
}

double StageTable::seconds(const std::string& stage, const std::string& shape) const {
  auto it = ms_.find({stage, shape});
  SPB_USAGE_RANK(it != ms_.end(), "the stage table " + path_ + " has no time for " + stage + " at " + shape +
                                      ": record it on a GPU at this shape (spbench operator --stage-times)");
  return it->second * 1e-3;
}

std::vector<std::string> StageTable::shapes(const std::string& stage) const {
  std::vector<std::string> out;
  for (auto it = ms_.lower_bound({stage, std::string()}); it != ms_.end() && it->first.first == stage; ++it)
    out.push_back(it->first.second);
  return out;
}

// --- recording -------------------------------------------------------------------------------------------------

RecordingKernels::RecordingKernels(std::unique_ptr<GlaKernels> inner, Device& dev)
    : inner_(std::move(inner)), rec_(dev) {}

void RecordingKernels::chunk_cumsum(const GlaShape& s, const void* g, float* gc, float* lambda, Stream st) {
  rec_.timed("chunk_cumsum", stage_shape_key(s), st, [&] { inner_->chunk_cumsum(s, g, gc, lambda, st); });
}
void RecordingKernels::chunk_states_fwd(const GlaShape& s, const void* k, const void* v, const float* gc,
                                        const float* h0, void* hs, float* ht, Stream st) {
  rec_.timed("chunk_states_fwd", stage_shape_key(s), st,
             [&] { inner_->chunk_states_fwd(s, k, v, gc, h0, hs, ht, st); });
}
void RecordingKernels::chunk_output(const GlaShape& s, const void* q, const void* k, const void* v, const float* gc,
                                    const void* hs, void* o, Stream st) {
  rec_.timed("chunk_output", stage_shape_key(s), st, [&] { inner_->chunk_output(s, q, k, v, gc, hs, o, st); });
}
void RecordingKernels::output_add_initial(const GlaShape& s, const void* q, const float* gc, const float* S_in,
                                          void* o, Stream st) {
  rec_.timed("output_add_initial", stage_shape_key(s), st, [&] { inner_->output_add_initial(s, q, gc, S_in, o, st); });
}
void RecordingKernels::states_add_initial(const GlaShape& s, const float* gc, const float* S_in, void* hs, float* ht,
                                          Stream st) {
  rec_.timed("states_add_initial", stage_shape_key(s), st,
             [&] { inner_->states_add_initial(s, gc, S_in, hs, ht, st); });
}
void RecordingKernels::chunk_states_bwd(const GlaShape& s, const void* q, const void* d_o, const float* gc,
                                        const float* dht, void* dhs, float* dh0, Stream st) {
  rec_.timed("chunk_states_bwd", stage_shape_key(s), st,
             [&] { inner_->chunk_states_bwd(s, q, d_o, gc, dht, dhs, dh0, st); });
}
void RecordingKernels::chunk_grads(const GlaShape& s, const void* q, const void* k, const void* v, const float* gc,
                                   const void* hs, const float* ht, const void* dhs, const void* d_o, void* dq,
                                   void* dk, void* dv, void* dg, Stream st) {
  rec_.timed("chunk_grads", stage_shape_key(s), st,
             [&] { inner_->chunk_grads(s, q, k, v, gc, hs, ht, dhs, d_o, dq, dk, dv, dg, st); });
}
bool RecordingKernels::chunk_final_state(const GlaShape& s, const void* k, const void* v, const void* g, float* gc,
                                         float* ht, float* lambda, Stream st) {
  return rec_.timed("chunk_final_state", stage_shape_key(s), st,
                    [&] { return inner_->chunk_final_state(s, k, v, g, gc, ht, lambda, st); });
}
void RecordingKernels::chunk_initial_dstate(const GlaShape& s, const void* q, const void* d_o, const void* g,
                                            const float* gc, float* dh0, Stream st) {
  rec_.timed("chunk_initial_dstate", stage_shape_key(s), st,
             [&] { inner_->chunk_initial_dstate(s, q, d_o, g, gc, dh0, st); });
}
void RecordingKernels::chunk_states_fwd_after_boundary(const GlaShape& s, const void* k, const void* v,
                                                       const float* gc, const float* h0, void* hs, float* ht,
                                                       Stream st) {
  rec_.timed("chunk_states_fwd_after_boundary", stage_shape_key(s), st,
             [&] { inner_->chunk_states_fwd_after_boundary(s, k, v, gc, h0, hs, ht, st); });
}
void RecordingKernels::chunk_states_bwd_after_boundary(const GlaShape& s, const void* q, const void* d_o,
                                                       const float* gc, const float* dht, void* dhs, float* dh0,
                                                       Stream st) {
  rec_.timed("chunk_states_bwd_after_boundary", stage_shape_key(s), st,
             [&] { inner_->chunk_states_bwd_after_boundary(s, q, d_o, gc, dht, dhs, dh0, st); });
}
void RecordingKernels::chunk_states_fwd_arriving(const GlaShape& s, const void* k, const void* v, const float* gc,
                                                 const ArrivingState& h0, void* hs, float* ht, Stream st) {
  rec_.timed("chunk_states_fwd_arriving", stage_shape_key(s), st,
             [&] { inner_->chunk_states_fwd_arriving(s, k, v, gc, h0, hs, ht, st); });
}
void RecordingKernels::chunk_states_bwd_arriving(const GlaShape& s, const void* q, const void* d_o, const float* gc,
                                                 const ArrivingState& dht, void* dhs, float* dh0, Stream st) {
  rec_.timed("chunk_states_bwd_arriving", stage_shape_key(s), st,
             [&] { inner_->chunk_states_bwd_arriving(s, q, d_o, gc, dht, dhs, dh0, st); });
}
void RecordingKernels::chunk_states_settle(const GlaShape& s, bool reverse, const float* gc, const ArrivingState& init,
                                           void* hs, float* fin, Stream st) {
  rec_.timed(reverse ? "chunk_states_settle_bwd" : "chunk_states_settle_fwd", stage_shape_key(s), st,
             [&] { inner_->chunk_states_settle(s, reverse, gc, init, hs, fin, st); });
}
void RecordingKernels::signal_ready(uint32_t* ready, uint32_t epoch, Stream st) {
  rec_.timed("signal_ready", "-", st, [&] { inner_->signal_ready(ready, epoch, st); });
}
void RecordingKernels::state_fold(size_t rows, size_t cols, const float* decay, const float* x, const float* y,
                                  float* out, Stream st) {
  rec_.timed("state_fold", stage_key({{"rows", (long long)rows}, {"cols", (long long)cols}}), st,
             [&] { inner_->state_fold(rows, cols, decay, x, y, out, st); });
}
void RecordingKernels::vec_add(size_t n, const float* a, const float* b, float* out, Stream st) {
  rec_.timed("vec_add", stage_key({{"n", (long long)n}}), st, [&] { inner_->vec_add(n, a, b, out, st); });
}
void RecordingKernels::copy_4d(void* dst, const void* src, size_t elem_bytes, const int64_t dims[4],
                               const int64_t dst_strides[4], const int64_t src_strides[4], Stream st) {
  const size_t bytes = elem_bytes * size_t(dims[0] * dims[1] * dims[2] * dims[3]);
  rec_.timed("copy_4d", stage_key({{"bytes", (long long)bytes}}), st,
             [&] { inner_->copy_4d(dst, src, elem_bytes, dims, dst_strides, src_strides, st); });
}

// --- rows ----------------------------------------------------------------------------------------------------------

const std::vector<std::string>& stage_columns() {
  // attention: the family the run computed (a late column, runtime/csv.h: a file from before it holds gla rows).
  static const std::vector<std::string> cols = {"stage", "shape", "calls_per_iter", "nodes", "ranks_per_node",
                                                "attention"};
  return cols;
}

void append_stage_rows(const Bootstrap& boot, const std::vector<StageSample>& mine, int iters, const ResultRow& base,
                       CsvAppender* csv) {
  // Every rank's samples as text lines "stage|shape|median|min|max|calls", gathered on rank 0.
  std::string text;
  for (const StageSample& s : mine) {
    const Summary m = summarize(s.ms);
    char buf[64];
    std::snprintf(buf, sizeof buf, "|%.9g|%.9g|%.9g|%zu\n", m.median, m.min, m.max, s.ms.size());
    text += s.stage + "|" + s.shape + buf;
  }
  long long len = (long long)text.size(), most = (long long)boot.max(double(len));
  text.resize(size_t(most) + 1, '\0');
  const std::vector<char> all = boot.gather(text.data(), text.size());
  if (boot.rank() != 0 || !csv) return;
  struct Merged {
    std::vector<double> median, min, max;
    size_t calls = 0;
  };
  std::map<std::pair<std::string, std::string>, Merged> merged;
  for (int r = 0; r < boot.size(); ++r) {
    const char* part = all.data() + size_t(r) * text.size();
    std::string lines(part, strnlen(part, text.size()));
    for (size_t at = 0; at < lines.size();) {
      const size_t end = lines.find('\n', at);
      const std::string line = lines.substr(at, end - at);
      at = end + 1;
      std::vector<std::string> f;
      for (size_t a = 0;;) {
        const size_t b = line.find('|', a);
        f.push_back(line.substr(a, b - a));
        if (b == std::string::npos) break;
        a = b + 1;
      }
      Merged& m = merged[{f[0], f[1]}];
      m.median.push_back(std::stod(f[2])), m.min.push_back(std::stod(f[3])), m.max.push_back(std::stod(f[4]));
      m.calls = std::max(m.calls, size_t(std::stoull(f[5])));
    }
  }
  auto mean = [](const std::vector<double>& v) {
    double s = 0;
    for (double x : v) s += x;
    return s / double(v.size());
  };
  for (auto& [key, m] : merged) {
    ResultRow r = base;
    r.set("level", std::string("stage")).set("pass", std::string("stage"));
    r.set("stage", key.first).set("shape", key.second);
    if (r.get("attention").empty()) r.set("attention", std::string("gla"));  // the model level's rows: GLA-1B's
    r.set("calls_per_iter", double(m.calls) / double(iters));
    r.set("time_ms_median", mean(m.median)).set("time_ms_mean", mean(m.median));
    r.set("time_ms_min", *std::min_element(m.min.begin(), m.min.end()));
    r.set("time_ms_max", *std::max_element(m.max.begin(), m.max.end()));
    r.set("err_rel_rms", std::string());
    csv->append(r);
  }
}

}  // namespace spb
