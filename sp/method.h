// The SP method interface and its registry (DESIGN §3). A method is one file under zeco/ or baselines/ that
// subclasses SpMethod and registers a name with SPB_REGISTER_METHOD; the harness, the tests, the tables and the plots
// find it by that name. A method is written once over the Runtime and runs on CPU ranks and on GPUs alike.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "sp/runtime.h"
#include "kernels/gla/gla_kernels.h"

namespace spb {

struct GlaStateBuffers;  // kernels/gla/gla.h

// What zeco and lasp2 overlap their communication with (--overlap; sp/sp_local.h has the schedules):
//   none    in order: the boundary state alone, the communication, then the chunk states from the true incoming
//           state and the outputs;
//   output  the zero-start chunk states and the output during the communication, the output corrected after;
//   states  in order, but the chunk states start beside the communication and take the incoming state as it arrives.
enum class SpOverlap { none = 0, output = 1, states = 2 };

// The attention family a method computes (DESIGN §12; --attention): GLA, the paper's and the default, or Gated
// DeltaNet, whose rank map is dense (sp/rank_map.h).
enum class Attention { gla = 0, gdn = 1 };
const char* attention_name(Attention a);  // "gla", "gdn"
Attention parse_attention(const std::string& name);  // UsageError naming --attention

struct SpConfig {
  GlaShape local;                // this rank's tensors: T = tokens per rank
  int blocks = 1;                // All-Scan block count K (zeco): K blocks of whole state rows
  // All-Scan backend (zeco): "host" (over the communicator), "device", or "auto" (device where this rank's GPU peers
  // are reachable over NVLink/P2P, host otherwise; the method says which in comm_backend() and notice()).
  std::string allscan = "host";
  // zeco, lasp2: what overlaps the communication (SpOverlap; see sp/sp_local.h for what each costs).
  SpOverlap overlap = SpOverlap::none;
  // zeco, in order: the heads split into this many groups, each scanned on its own so that one group's scan overlaps
  // another group's compute (0: the method's default, one group; zeco/method_zeco.cpp).
  int head_groups = 0;
  // The chunk states' gradient buffer (GlaWorkspace::dhs) the method's workspace uses instead of one of its own
  // (nullptr: its own), of at least chunk_state_bytes(kern, local); its owner keeps it for the method's life. For a
  // caller that runs one method object's backward() at a time over several objects (the model's blocks), so that one
  // dhs serves them all. A method may use it only within backward(), on streams that backward() joins back to the
  // compute stream before it returns (the next object's backward writes it on that stream's order), and never beside
  // its forward.
  const Buffer* shared_dhs = nullptr;
  // gc and the chunk states hs the method's workspace borrows instead of keeping its own from the forward for the
  // backward (nullptr: its own), lent by a caller with the same order of calls as shared_dhs's: it runs every
  // object's forward, then their backwards, one object at a time. The method's backward then makes them again from
  // the forward's k, v and g (which the caller keeps) and the initial state it used there (gla_remake_states) before
  // it reads them; forward() uses them as its own, so they too serve one object at a time, and a method's forward
  // leaves no work reading them on a stream the next object's forward does not wait for (its streams are joined).
  const GlaStateBuffers* remade_states = nullptr;
  Attention attention = Attention::gla;  // the family; Gated DeltaNet runs the in-order schedule only
};

// This rank's tensors (device pointers, layouts of gla_kernels.h; Gated DeltaNet's of gdn_kernels.h, whose g and beta
// are [B, T, H] fp32). h0 is the initial state of the whole sequence and
// is the same on every rank (nullptr: zero); h_out receives the state after this rank's last token, so on the last
// rank it is the final state of the whole sequence.
struct SpForwardArgs {
  const void *q = nullptr, *k = nullptr, *v = nullptr, *g = nullptr;
  const float* h0 = nullptr;
  void* o = nullptr;
  float* h_out = nullptr;
  const float* beta = nullptr;  // Gated DeltaNet only
};

// dht is the gradient of the whole sequence's final state, the same on every rank (nullptr: zero); dh_in receives the
// gradient of the state entering this rank, so on rank 0 it is dh0 of the whole sequence.
struct SpBackwardArgs {
  const void* d_o = nullptr;
  const float* dht = nullptr;
  void *dq = nullptr, *dk = nullptr, *dv = nullptr, *dg = nullptr;
  float* dh_in = nullptr;
  // The row stride, in elements, of dq, dk and dv (GlaShape::grad_ld; 0: dense), for a method whose takes_grad_ld().
  int grad_ld = 0;
  float* dbeta = nullptr;  // Gated DeltaNet only
};

class SpMethod {
 public:
  virtual ~SpMethod() = default;
  virtual void forward(const SpForwardArgs& a) = 0;
  // Runs after forward() on the same inputs (methods keep what they need from it).
  virtual void backward(const SpForwardArgs& fwd, const SpBackwardArgs& a) = 0;
  // After the timed iterations, before the check: report any failure the method detected asynchronously (the device
  // All-Scan's timeouts) by throwing.
  virtual void finish() {}
  // What carries the method's communication when it is not the communicator itself ("device": the device All-Scan).
  virtual std::string comm_backend() const { return ""; }
  // A line for the output, e.g. that zeco's `auto` All-Scan fell back to the host one, and why.
  virtual std::string notice() const { return ""; }
  // dp computes each rank's tokens as a sequence of their own; every other method, the whole sequence.
  virtual bool independent_sequences() const { return false; }
  // How many head groups the method pipelines its communication over (SpConfig::head_groups); 1: none.
  virtual int head_groups() const { return 1; }
  // Whether backward() writes dq, dk and dv at SpBackwardArgs::grad_ld (its GLA gradients go straight to them); a
  // method that lays them out itself (ulysses, after its all-to-all) writes them dense and refuses a grad_ld.
  virtual bool takes_grad_ld() const { return false; }
};

using MethodFactory = std::function<std::unique_ptr<SpMethod>(Runtime&, const SpConfig&)>;
// Why a method cannot run a configuration on `world` ranks, or "" where it can (ulysses: the heads must divide).
using MethodLimit = std::function<std::string(const SpConfig&, int world)>;

struct MethodInfo {
  std::string name;
  std::string summary;
  MethodFactory make;
  MethodLimit limit;  // empty: no limit
};

// Registers at static-initialisation time; returns true so it can initialise a namespace-scope constant.
bool register_method(MethodInfo info);
const MethodInfo* find_method(const std::string& name);
// The method called `name`, or a UsageError naming --method and every registered method.
const MethodInfo& require_method(const std::string& name);
// Every registered method: the paper's tables' order (dp, zeco, lasp2, lasp1, ring, ulysses), then the rest by name.
std::vector<std::string> method_names();
// "a,b,c" -> {a, b, c}; "all" -> every registered method (the --method flag of the operator and model levels).
std::vector<std::string> split_method_list(const std::string& list);
// The methods of a --method list to run `c` on `world` ranks. "all" leaves out the methods whose limit says they
// cannot, each as "name: why" in *left_out; a method named in the list that cannot is a UsageError saying why, as is an
// unknown name or an empty list.
std::vector<std::string> methods_to_run(const std::string& list, const SpConfig& c, int world,
                                        std::vector<std::string>* left_out);

}  // namespace spb

#define SPB_REGISTER_METHOD(NAME, SUMMARY, CLASS) SPB_REGISTER_METHOD_LIMITED(NAME, SUMMARY, CLASS, nullptr)
// LIMIT: a function std::string(const SpConfig&, int world), MethodInfo::limit.
#define SPB_REGISTER_METHOD_LIMITED(NAME, SUMMARY, CLASS, LIMIT)                                          \
  namespace {                                                                                           \
  const bool spb_registered_##CLASS = ::spb::register_method(                                           \
      {NAME, SUMMARY, [](::spb::Runtime& rt, const ::spb::SpConfig& c) -> std::unique_ptr<::spb::SpMethod> { \
         return std::make_unique<CLASS>(rt, c);                                                          \
       }, LIMIT});                                                                                      \
  }
