// The GLA language model (DESIGN §9), written once for CPU ranks and GPUs and for every SP method: embedding; per
// block RMSNorm -> GLA attention -> residual -> RMSNorm -> SwiGLU MLP -> residual; final RMSNorm; untied LM head;
// cross-entropy; AdamW. Every rank holds the same weights and B x L tokens of the sequence (its slice); everything but
// the attention's scan is token-local, and each block's attention goes through the SP method, so the method is the
// only part that talks across the sequence. The weight gradients are summed over the ranks, then AdamW steps every
// rank identically: a correct SP step gives the loss and the weights of the single-device step.
//
// The attention (GLA as published, fla's GatedLinearAttention): q, k, v = h Wq^T, h Wk^T, h Wv^T; the forget gate
// g = logsigmoid((h W0^T) W1^T + b1) / 16 (a rank-16 projection, hidden -> 16 -> key dim); o = GLA(q, k, v, g) over
// heads of dk x dv with scale dk^-1/2; y = RMSNorm_dv(o) * w * swish(h Wg^T) per head; out = y Wo^T.
// The MLP: (silu(h Wgate^T) * h Wup^T) Wdown^T.
//
// Precision: fp32 master weights, gradients and AdamW states; activations and the GEMMs' operands in act_dtype()
// (bf16 on GPUs, fp32 on CPU ranks) with fp32 accumulation; the residual stream, the norms' statistics and the logits
// in fp32.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "sp/method.h"
#include "sp/runtime.h"
#include "kernels/gla/gla.h"
#include "model/model_kernels.h"
#include "model/stage_clock.h"

namespace spb {

struct GlaModelConfig {
  int vocab = 32000, hidden = 2048, layers = 20, heads = 32;
  double expand_k = 0.5, expand_v = 1.0;  // key dim = expand_k * hidden, value dim = expand_v * hidden
  int mlp = 0;                            // intermediate size; 0: GLA's, 2/3 * 4 * hidden rounded up to 256
  int gate_rank = 16;                     // the forget gate's low rank
  float gate_normaliser = 16, norm_eps = 1e-6f;
  float init_std = 0.02f;                 // normal init of every matrix; norms 1, biases 0
  // rows of fp32 logits (and of their act gradient) the LM head makes at a time (0: as many as 512 MiB hold)
  int logit_rows = 0;
  // rows the MLP takes at a time: its (a | b), SwiGLU's output and their gradients exist for that many rows only (0: as
  // many as 512 MiB of bf16 (a | b) hold; where the level remakes_blocks, (a | b) too is one slice's)
  int mlp_rows = 0;

  int key_dim() const { return int(expand_k * hidden + 0.5); }
  int value_dim() const { return int(expand_v * hidden + 0.5); }
  int dk() const { return key_dim() / heads; }
  int dv() const { return value_dim() / heads; }
  int mlp_size() const { return mlp > 0 ? mlp : (int(hidden * 8 / 3) + 255) / 256 * 256; }
  // The rows of a chunk of logits for a step of `rows` tokens: the full [rows, vocab] fp32 logits are never made.
  int logit_chunk(int rows) const;
  // The rows of a slice of the MLP for a step of `rows` tokens (the last slice shorter).
  int mlp_chunk(int rows) const;
  // Throws UsageError naming the flag for a shape the model cannot have.
  void validate() const;
};

struct AdamWConfig {
  float lr = 3e-4f, beta1 = 0.9f, beta2 = 0.95f, eps = 1e-8f, weight_decay = 0.1f;
};

// What the backward makes again instead of keeping it from the forward. At every level SwiGLU's output is made again
// by SwiGLU's backward (one buffer for every block; the pass writes it beside (da | db), so it costs one more write
// and no more reads): the levels name what is remade besides.
enum class Recompute {
  none,                // every other activation kept
  states,              // the attention's forget gates g, their in-chunk cumsum gc and its chunk states hs, one buffer
                       // each for every block, made again as each block's attention backward starts (from the gate's
                       // pre-activation, k, v and the initial state the method used: SpConfig::remade_states)
  elementwise,         // each block's normalised inputs and gated output (one buffer for every block)
  states_elementwise,  // both
  all,                 // elementwise, and one method object for every block, its forward run again (which makes the
                       // chunk states again)
  blocks,              // block checkpointing: each block's input alone kept (fp32), every other activation one
                       // buffer for all blocks, and the block's forward run again inside its backward: its SP method's
                       // forward too, with its communication (one method object for every block)
};
// "none", "states", "elementwise", "states+elementwise", "attention+elementwise", "blocks": the CSV's recompute
// column, and --recompute's values ("all" for attention+elementwise)
const char* recompute_name(Recompute r);
const std::vector<Recompute>& recompute_levels();  // every level, in the enum's order
Recompute recompute_from_name(const std::string& name);  // throws UsageError naming --recompute
bool remakes_states(Recompute r);       // states, states_elementwise
bool remakes_elementwise(Recompute r);  // elementwise, states_elementwise, all
bool remakes_blocks(Recompute r);       // blocks
// The level `--recompute=auto` picks: `states` where a block's chunk states are larger than the k and v they are
// made from (dk dv / 64 > dk + dv per head and token: 4 heads of GLA-1B, not 32), so that making them again reads
// fewer bytes than keeping them holds; `none` otherwise.
Recompute recompute_auto(const GlaModelConfig& c);

// One parameter tensor in the flat parameter vector (offset in elements; a vector has rows = 1).
struct ParamInfo {
  std::string name;
  size_t offset, rows, cols;
  size_t elems() const { return rows * cols; }
};

class GlaModel {
 public:
  // method, sp: the SP method every block's attention runs (sp.local is filled in here). recompute: with `all`, one
  // method object for every block, whose forward runs again before its backward (the chunk states are not kept
  // between the passes); otherwise one method object per block, which with `states` and `states_elementwise` borrows
  // the model's one gc and hs and makes them again in its backward. With `elementwise`, `states_elementwise` or `all`,
  // each block's normalised inputs and gated output are made again in the backward (SwiGLU's output is at every
  // level). Weights are drawn from `seed`, the same on every rank. kernels: the model's kernels outside the attention,
  // chosen by the caller (make_model_kernels(*rt.dev), a recording wrapper of them, or a simulated device's); their
  // act_dtype() must be rt.kern's.
  GlaModel(Runtime& rt, std::unique_ptr<ModelKernels> kernels, const GlaModelConfig& c, int batch, int tokens_per_rank,
           const std::string& method, const SpConfig& sp, Recompute recompute, uint64_t seed);
  ~GlaModel();

  // tokens: this rank's B x (L + 1) tokens (inputs [b, 0, L), targets [b, 1, L + 1)); not read where the kernels do
  // not compute (ModelKernels::computes). Forward and backward; the gradients are then summed over the ranks
  // (grads()). Returns the loss: the mean over every rank's B x L tokens.
  double forward_backward(const std::vector<int32_t>& tokens);
  void optimizer_step(const AdamWConfig& o);  // AdamW from grads(); step counts from 1
  // Back to the initial weights drawn from `seed` (left as they are where the kernels do not compute), a fresh AdamW
  // state (its moments made, zero, at the next step) and step 0.
  void reset(uint64_t seed);
  // Replaces every block's SP method (the weights and the optimizer's state stay).
  void set_method(const std::string& method);

  const std::vector<ParamInfo>& params_info() const { return info_; }
  size_t param_elems() const { return n_params_; }     // of the flat vector, alignment gaps included
  size_t param_count() const;                          // the model's parameters
  size_t embedding_params() const { return size_t(c_.vocab) * c_.hidden; }
  // Model FLOPs of one token's forward and backward: 6 x the non-embedding parameters (the LM head included) plus
  // the attention's own (the chunked GLA: per layer, head and token 3 x (4 dk dv + 64 (dk + dv))).
  double flops_per_token() const;
  // With the optimizer sharded (set_shard_optimizer), these three are collective: every rank calls them together.
  std::vector<float> download_params() const;
  void upload_params(const std::vector<float>& p);  // the flat vector of download_params()
  std::vector<float> download_grads() const;        // summed over the ranks
  double grad_norm() const;  // of grads(), after forward_backward
  SpMethod& method(int layer) { return *methods_.at(method_objects(c_, recompute_) == 1 ? 0 : size_t(layer)); }
  int steps_done() const { return step_; }
  const GlaModelConfig& config() const { return c_; }
  Runtime& runtime() { return rt_; }
  ModelKernels& kernels() { return *mk_; }
  // Stage marks for a profile (nullptr: none); the caller ends each step on the clock.
  void set_clock(StageClock* clock) { clock_ = clock; }
  // The gradients' all-reduce at P > 1: one call after the whole backward (false, the default), or one call per
  // bucket as soon as its gradients are complete (the LM head and final norm, then each block, then the embedding),
  // on the communication stream beside the backward still to run (true). The sums are the same.
  void set_grad_overlap(bool on);
  // At P > 1, the optimizer sharded over the ranks (ZeRO stage 1): the gradients are reduce-scattered instead of
  // all-reduced, each rank runs AdamW on its 1/P of the flat vector (and keeps only that part's two moments), and
  // the updated weights the products read (the act copy; the fp32 masters on CPU ranks) are all-gathered, with the
  // fp32 masters that kernels read (share_fp32_read_masters). The same update as the default; about 6 bytes a
  // parameter cross the ranks instead of 8 (bf16 weights), and AdamW reads and writes 1/P of them. Set before the
  // first step; not with set_grad_overlap.
  void set_shard_optimizer(bool on);
  // The blocks' weight gradients' products (dW = dY^T X) on the device's second compute stream, beside the chain of
  // input gradients that the backward waits on (true), or in line on the compute stream (false, the default; the LM
  // head's, made chunk by chunk with its logits, always are). The compute
  // stream waits for one before it overwrites a buffer that product reads, and for all of them before the gradients
  // are summed or stepped; the sums are the same. In a profile the backward stages then time the compute stream
  // alone: the input gradients' products and the waits.
  void set_wgrad_beside(bool on) { wgrad_beside_ = on; }

  // Bytes of device memory the model allocates for `batch` x `tokens_per_rank` tokens, and the attention's chunk states
  // in `chunk_state` (GlaKernels::chunk_state_type) and gc: those of each SP method object (one per block; one with
  // Recompute::all, and the model's one pair that every block borrows where the level remakes_states) and the one dhs
  // they all use (the model's, SpConfig::shared_dhs); not the rest of the methods' own memory. optimizer_shards: the
  // ranks AdamW's moments are sharded over (1: not sharded).
  static size_t device_bytes(const GlaModelConfig& c, int batch, int tokens_per_rank, DType act, DType chunk_state,
                             Recompute recompute, int optimizer_shards = 1);
  // Bytes of the dense dq, dk, dv it holds now: none for a method that writes them into the stacked projections'
  // gradient (SpMethod::takes_grad_ld), which all but ulysses do.
  size_t dense_grad_bytes() const;

 private:
  struct Layer;
  struct LayerActs;  // what the forward keeps of one block
  struct Acts;
  struct Views;
  Views views() const;
  // The flat parameter vector's tensors (and each block's offsets into it, where `layers` is given).
  static std::vector<ParamInfo> layout(const GlaModelConfig& c, std::vector<Layer>* layers, size_t* total);
  static size_t plan_acts(const GlaModelConfig& c, int rows, DType act, Recompute recompute, Acts& A, Device* dev);
  static size_t plan_dense_grads(const GlaModelConfig& c, int rows, DType act, Acts& A, Device* dev);
  // The attention's tensors on this rank (SpConfig::local), and how many SP method objects the blocks run.
  static GlaShape local_shape(const GlaModelConfig& c, int batch, int tokens_per_rank) {
    return GlaShape{batch, tokens_per_rank, c.heads, c.dk(), c.dv()};
  }
  static int method_objects(const GlaModelConfig& c, Recompute r) {
    return r == Recompute::all || r == Recompute::blocks ? 1 : c.layers;
  }
  bool remakes_elementwise() const { return spb::remakes_elementwise(recompute_); }
  bool remakes_states() const { return spb::remakes_states(recompute_); }
  bool remakes_blocks() const { return spb::remakes_blocks(recompute_); }
  // Block l's activations: its own, or the one set every block shares where the level remakes_blocks.
  LayerActs& acts_of(int l) const;
  // The residual stream entering block l (l = layers: entering the final norm), fp32: each block's own, or where the
  // level remakes_blocks one buffer the blocks pass along (and the final norm's own), each block's input kept apart.
  float* stream_of(int l) const;
  // Block l's forget gates: its own buffer, or the one every block shares where the level remakes_states.
  void* gates_of(int l) const;
  struct Elementwise {
    void *h1, *h2, *y, *m;
  };
  // Block l's normalised inputs, gated output and SwiGLU output: its own buffers, or the ones all blocks share where
  // the backward makes them again (remakes_elementwise; SwiGLU's output always).
  Elementwise elementwise_of(int l) const;
  void stage(const char* name);
  // mk_->gemm, its FLOPs counted on the clock
  void mm(bool ta, bool tb, int M, int N, int K, float alpha, const void* A, const void* B, float beta, void* C,
          DType c_type, Stream st);
  // remake: inside the backward, where the level remakes_blocks: from the block's kept input, up to the MLP (whose
  // (a | b) the backward makes slice by slice; SwiGLU's output and the down product only the next block reads), off
  // the stage clock's forward stages.
  void forward_layer(int l, bool remake = false);
  // Block l's (a | b) from row r0 of its MLP slice: its rows of the block's own, or the one slice's buffer where the
  // level remakes_blocks.
  void* mlp_ab_rows(int l, int r0) const;
  void backward_layer(int l);
  // The products of the weight gradients, one event each: the compute stream waits on a kind's event before it
  // overwrites what that kind's last product read (wait_wgrad).
  enum Wgrad { kWgradDown, kWgradGateUp, kWgradO, kWgradRank, kWgradProj, kWgradKinds };
  // dW [n, k] = dY^T X (accumulate: dW +=) over the `rows` rows of dY [rows, n] and X [rows, k], fp32; beside the
  // compute stream (after its work so far) with set_wgrad_beside, else on it.
  void wgrad(Wgrad kind, int n, int k, int rows, const void* dY, const void* X, bool accumulate, float* dW);
  void wait_wgrad(Wgrad kind);
  void wait_wgrads(Stream s);  // s waits for every weight gradient's product enqueued so far
  void init_params(uint64_t seed);
  void refresh_act_weights();
  // With set_grad_overlap: grads_[begin, end) summed over the ranks on the communication stream, once the compute
  // stream's work so far is done.
  void reduce_grads_beside(size_t begin, size_t end);
  // The flat vector padded to world x shard_elems_; this rank's part of it is [shard_begin(), shard_end()).
  size_t shard_begin() const { return std::min(n_params_, size_t(rt_.rank()) * shard_elems_); }
  size_t shard_end() const { return std::min(n_params_, size_t(rt_.rank() + 1) * shard_elems_); }
  // Every rank's part of a flat vector of world x shard_elems_ elements of elem_bytes to every rank, in place, on the
  // compute stream.
  void gather_parts(const Buffer& flat, size_t elem_bytes) const;
  void share_fp32_read_masters();

  Runtime& rt_;
  GlaModelConfig c_;
  int B_, L_, N_;  // batch, tokens per rank, rows = B * L
  std::string method_name_;
  SpConfig sp_;
  Recompute recompute_;
  std::unique_ptr<ModelKernels> mk_;
  DType act_;
  std::vector<ParamInfo> info_;
  // The embedding, the norms' weights and the gate's bias: the kernels read these as fp32 masters (not through the
  // act copy) and add into their gradients (zeroed before every step).
  std::vector<const ParamInfo*> fp32_read_;
  std::vector<Layer> layers_;
  size_t n_params_ = 0, embed_ = 0, final_norm_ = 0, lm_head_ = 0;
  // ceil(n_params_ / world), rounded up to 256: params_, grads_ and act_weights_ hold world x it
  size_t shard_elems_ = 0;
  Buffer params_, grads_, adam_m_, adam_v_, act_weights_;
  std::unique_ptr<Acts> acts_;
  // The chunk states' gradients, one buffer for every block's method object (SpConfig::shared_dhs): each block's
  // backward makes and reads them before the next block's starts.
  Buffer dhs_;
  // Where the level remakes_states: gc and hs, one pair lent to every block's method object (SpConfig::remade_states).
  Buffer remade_gc_, remade_hs_;
  GlaStateBuffers remade_{};
  std::vector<std::unique_ptr<SpMethod>> methods_;
  int step_ = 0;
  StageClock* clock_ = nullptr;
  bool grad_overlap_ = false, shard_optimizer_ = false;
  bool grads_in_dproj_ = false;  // the method writes dq, dk, dv into their columns of dproj (SpMethod::takes_grad_ld)
  EventHandle grads_ready_, grads_reduced_;  // order only: compute -> comm, comm -> compute
  bool wgrad_beside_ = false;
  EventHandle wgrad_fork_, wgrads_done_;  // order only: compute -> second compute stream, and all of its work so far
  std::vector<std::unique_ptr<EventHandle>> wgrad_done_;  // by Wgrad kind
};

// Whether a step sums its gradients beside the backward (an all-reduce per block on the communication stream) unless
// told otherwise: on GPUs at P > 1, as PyTorch's DDP does, where the bucketed sums hide under the backward and couple
// the ranks at every block as an SP method's states do (model/NOTES.md, "The gradient sum beside the backward is the
// default on GPUs"). Not on CPU ranks, whose streams run in order on one thread; not with the sharded optimizer (a
// reduce-scatter after the backward) or zeco's --overlap 2 (a states kernel that waits for the scan on the
// communication stream, where a bucket may stand first). The report uses the same rule to tell a row's schedule.
inline bool grad_overlap_by_default(bool gpu, int world, bool shard_optimizer, int overlap) {
  return gpu && world > 1 && !shard_optimizer && overlap != 2;
}

}  // namespace spb
