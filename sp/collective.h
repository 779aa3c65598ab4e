// The collective level's plug-ins (nccl-tests style): each communication pattern an SP method uses is a short class
// that says how a swept per-rank size maps to buffers, how to fill them, the call to time, how to check what arrived,
// and its bandwidth formula. The driver (harness/collective_level.cpp) does the rest.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "sp/rank_map.h"
#include "sp/runtime.h"

namespace spb {

struct CollectiveConfig {
  size_t elems = 0;        // fp32 elements per rank (the state: heads x dk x dv)
  size_t cols = 128;       // a state row (dv): GLA's All-Scan blocks are whole rows
  size_t block_elems = 0;  // All-Scan block size in elements (0: the whole state)
  std::string allscan = "host";
  // The family's rank map (GLA's diagonal decay, or Gated DeltaNet's dense map of dk x dk a head: its All-Scan
  // blocks are whole columns of every head, its record a transition of rows x dk).
  RankMapType map = RankMapType::diagonal_decay();
};

// The fp32 elements of a rank's transition for c (GLA: a decay a row; dense: dk a row).
size_t pattern_transition_elems(const CollectiveConfig& c);

class CollectivePattern {
 public:
  virtual ~CollectivePattern() = default;
  virtual void run(Stream st) = 0;  // the timed call, on the communication stream
  // Relative RMS error of what arrived on this rank against what should have (0 when exact).
  virtual double check() = 0;
  // nccl-tests' convention: algbw = algbw_bytes / time, busbw = algbw * busbw_factor (what one link carried).
  virtual double algbw_bytes() const = 0;
  virtual double busbw_factor() const = 0;
  // What carried it, for the `backend` column: "" = the communicator (nccl, mpi), else e.g. a device protocol.
  virtual std::string backend() const { return ""; }
};

using PatternFactory = std::function<std::unique_ptr<CollectivePattern>(Runtime&, const CollectiveConfig&)>;
struct PatternInfo {
  std::string name, summary;
  PatternFactory make;
};
bool register_pattern(PatternInfo info);
const PatternInfo* find_pattern(const std::string& name);
// The pattern called `name`, or a UsageError naming --pattern and every registered pattern.
const PatternInfo& require_pattern(const std::string& name);
std::vector<std::string> pattern_names();

// Deterministic test data of rank `rank` (a different stream per `salt`), host side.
std::vector<float> pattern_data(int rank, int salt, size_t n);
std::vector<float> pattern_decay(int rank, int salt, size_t rows);  // <= 0
// A dense transition of `heads` dk x dk matrices whose rows sum, in magnitude, to below 1 (so that a fold over many
// ranks stays bounded), of small integers over a power of two (exact in fp32).
std::vector<float> pattern_dense_transition(int rank, int salt, size_t heads, size_t dk);

}  // namespace spb

#define SPB_REGISTER_PATTERN(NAME, SUMMARY, CLASS)                                                           \
  namespace {                                                                                                \
  const bool spb_pattern_##CLASS = ::spb::register_pattern(                                                  \
      {NAME, SUMMARY, [](::spb::Runtime& rt, const ::spb::CollectiveConfig& c)                               \
                          -> std::unique_ptr<::spb::CollectivePattern> { return std::make_unique<CLASS>(rt, c); }}); \
  }
