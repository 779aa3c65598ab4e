// The GLA kernel stages (DESIGN §2), one interface for the CPU and the GPU.
//
// Tensors, per rank, all row-major:
//   q, k, g  [B, T, H, dk]   activations (act_dtype(): fp32 on the CPU, bf16 on the GPU)
//   v, o     [B, T, H, dv]   activations; the gradients dq, dk, dv, dg and do have the shape of their tensor
//   gc       [B, T, H, dk]   fp32: g cumulated inside each chunk of kChunk tokens (b_r of DESIGN §2)
//   hs, dhs  [B, H, NT, dk, dv] chunk_state_type() (fp32 on the CPU, bf16 on the GPU): state at the start of chunk
//            n / gradient of the state at its end. The stages compute them in fp32 and round where they store them;
//            every other state below stays fp32.
//   h0, ht, dht, dh0, S_in, dS_out  [B, H, dk, dv] fp32
//   lambda   [B, H, dk] fp32: sum of g over all T tokens (the rank's total log-decay)
// A stage's shape may name a range of (b, h) pairs (GlaShape::pair_range); it then computes those pairs alone.
// A state [B, H, dk, dv] is, for the scan, a matrix of B*H*dk rows of dv columns whose row r decays by
// exp(lambda[r]): rows are independent, which is why All-Scan may split a state into blocks of whole rows.
// Every exponent the stages take is a difference "later minus earlier" of a cumsum of g <= 0, so it never overflows.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "runtime/device.h"

namespace spb {

constexpr int kChunk = 64;

struct GlaShape {
  int B = 1, T = 1, H = 1, dk = 1, dv = 1;
  // The (b, h) pairs a stage computes, as flat indices b * H + h: [pair_begin, pair_begin + pairs()); pair_count 0
  // means all B * H. Pointers always address the whole tensors; a stage reads and writes only its pairs' parts (their
  // state rows are [pair_begin * dk, (pair_begin + pairs()) * dk)), so stages of disjoint ranges may be interleaved
  // (zeco pipelines its scans over head groups this way). The sizes below are always the whole tensors'.
  int pair_begin = 0, pair_count = 0;
  // The row stride, in elements, of chunk_grads' dq, dk and dv (0: dense, H * dk and H * dv): a consumer that wants
  // them side by side in one matrix (the model's [dq | dk | dv | ...] for one product) has them written there.
  int grad_ld = 0;
  bool grad_rows_fit() const { return grad_ld == 0 || long(grad_ld) >= long(H) * (dk > dv ? dk : dv); }
  int pairs() const { return pair_count ? pair_count : B * H; }
  bool all_pairs() const { return pair_begin == 0 && pairs() == B * H; }
  bool pairs_in_range() const {
    return pair_begin >= 0 && pair_count >= 0 && long(pair_begin) + pairs() <= long(B) * H;
  }
  GlaShape pair_range(int begin, int count) const;  // this shape restricted to pairs [begin, begin + count)
  // This shape's pairs in n consecutive ranges, as even as they come (the first ones one pair larger).
  std::vector<GlaShape> split_pairs(int n) const;
  int chunks() const { return (T + kChunk - 1) / kChunk; }
  size_t qk_elems() const { return size_t(B) * T * H * dk; }
  size_t v_elems() const { return size_t(B) * T * H * dv; }
  size_t state_elems() const { return size_t(B) * H * dk * dv; }
  size_t state_rows() const { return size_t(B) * H * dk; }
  size_t chunk_state_elems() const { return size_t(B) * H * chunks() * dk * dv; }
  float scale() const;  // dk^-1/2
};

class GlaKernels {
 public:
  virtual ~GlaKernels() = default;
  virtual DType act_dtype() const = 0;
  // The element type of the chunk states hs and dhs (their buffers hold chunk_state_elems() of it).
  virtual DType chunk_state_type() const = 0;

  // --- forward -------------------------------------------------------------------------------------------------
  // gc = in-chunk inclusive cumsum of g; lambda (nullable) = sum of g over all tokens.
  virtual void chunk_cumsum(const GlaShape& s, const void* g, float* gc, float* lambda, Stream st) = 0;
  // hs[n] = state at the start of chunk n, ht = state after the last token; h0 == nullptr means a zero state.
  virtual void chunk_states_fwd(const GlaShape& s, const void* k, const void* v, const float* gc, const float* h0,
                                void* hs, float* ht, Stream st) = 0;
  // o = s (Q*exp b) hs[n] + tril(A) V, chunk by chunk.
  virtual void chunk_output(const GlaShape& s, const void* q, const void* k, const void* v, const float* gc,
                            const void* hs, void* o, Stream st) = 0;
  // The correction for an initial state that arrives late: o_t += s S_in^T (q_t * exp c_t), c_t = cumsum of g
  // from the first token. Adding it to an output computed from a zero initial state gives the exact output.
  virtual void output_add_initial(const GlaShape& s, const void* q, const float* gc, const float* S_in, void* o,
                                  Stream st) = 0;
  // The same correction for the states: hs[n] += diag(exp c_<n) S_in, ht (nullable) += diag(exp lambda) S_in.
  virtual void states_add_initial(const GlaShape& s, const float* gc, const float* S_in, void* hs, float* ht,
                                  Stream st) = 0;

  // --- backward ------------------------------------------------------------------------------------------------
  // dhs[n] = gradient of the state at the end of chunk n, dh0 = gradient of the initial state; dht == nullptr
  // means a zero final-state gradient.
  virtual void chunk_states_bwd(const GlaShape& s, const void* q, const void* d_o, const float* gc,
                                const float* dht, void* dhs, float* dh0, Stream st) = 0;
  // dq, dk, dv (rows of s.grad_ld elements where it is set), dg of every token from the true states (hs, ht) and
  // state gradients (dhs).
  virtual void chunk_grads(const GlaShape& s, const void* q, const void* k, const void* v, const float* gc,
                           const void* hs, const float* ht, const void* dhs, const void* d_o, void* dq, void* dk,
                           void* dv, void* dg, Stream st) = 0;

  // --- the boundary states alone ------------------------------------------------------------------------------
  // What an SP rank sends before it computes anything else: the ht of chunk_states_fwd from a zero state and the dh0
  // of chunk_states_bwd from a zero final gradient, without the chunk states. The defaults run those stages and store
  // no chunk state; the GPU overrides them with a chunk-parallel reduction (kernels/gla/cuda/gla_boundary.cu).
  // chunk_final_state starts from the raw gates g: it writes ht and lambda (nullable; chunk_cumsum's, up to rounding)
  // and may use gc as scratch. It returns true where it left gc = chunk_cumsum(g) there (the default runs
  // chunk_cumsum first), false where it read g alone and left gc as it was (the caller then runs chunk_cumsum, with
  // no lambda, when it needs gc: on the GPU that overlaps the communication of ht).
  virtual bool chunk_final_state(const GlaShape& s, const void* k, const void* v, const void* g, float* gc, float* ht,
                                 float* lambda, Stream st) {
    chunk_cumsum(s, g, gc, lambda, st);
    chunk_states_fwd(s, k, v, gc, nullptr, nullptr, ht, st);
    return true;
  }
  // True where chunk_final_state at this shape reads g alone and neither reads nor writes gc: a caller may then run
  // chunk_cumsum (without lambda) on another stream at the same time.
  virtual bool final_state_reads_gates(const GlaShape& s) const {
    (void)s;
    return false;
  }
  // g and gc = chunk_cumsum(g) are both given; an implementation reads whichever costs it less.
  virtual void chunk_initial_dstate(const GlaShape& s, const void* q, const void* d_o, const void* g, const float* gc,
                                    float* dh0, Stream st) {
    (void)g;
    chunk_states_bwd(s, q, d_o, gc, nullptr, nullptr, dh0, st);
  }

  // The chunk states once the true initial state (h0 = S_in) or final gradient (dht = dS_out) is known, right after
  // chunk_final_state / chunk_initial_dstate of this rank: the same results as chunk_states_fwd / chunk_states_bwd,
  // but an implementation may reuse what that boundary call computed, if it was the last boundary call made on this
  // object with the same k, v, g (q, do, g), unchanged since. The defaults run the plain stages; the GPU reuses its
  // per-span partial states (kernels/gla/cuda/gla_states_spans.cu, launch_states_spans) and otherwise recomputes them.
  virtual void chunk_states_fwd_after_boundary(const GlaShape& s, const void* k, const void* v, const float* gc,
                                               const float* h0, void* hs, float* ht, Stream st) {
    chunk_states_fwd(s, k, v, gc, h0, hs, ht, st);
  }
  virtual void chunk_states_bwd_after_boundary(const GlaShape& s, const void* q, const void* d_o, const float* gc,
                                               const float* dht, void* dhs, float* dh0, Stream st) {
    chunk_states_bwd(s, q, d_o, gc, dht, dhs, dh0, st);
  }

  // --- the chunk states beside the scan that brings their initial state ----------------------------------------
  // The same results as chunk_states_*_after_boundary with h0 = init.state (forward) / dht = init.state (backward),
  // but init may still be travelling when the stage is enqueued: it is complete once the word init.ready holds
  // init.epoch or more, which another stream sets with signal_ready after the scan. An implementation may start at
  // once from a zero state and add init's share (diag(exp of the decay since init) init) to each state when it sees
  // the word; chunk_states_settle, enqueued on st after the scan (the caller orders st after it), then completes
  // whatever was stored before the word was seen. The defaults serve a device where work completes in call order
  // (the CPU: the scan is done when the call comes), so they read init at once and settle nothing.
  struct ArrivingState {
    const float* state = nullptr;     // [B, H, dk, dv] fp32
    const uint32_t* ready = nullptr;  // set to epoch (or more) once state is complete
    uint32_t epoch = 0;
  };
  virtual void chunk_states_fwd_arriving(const GlaShape& s, const void* k, const void* v, const float* gc,
                                         const ArrivingState& h0, void* hs, float* ht, Stream st) {
    chunk_states_fwd_after_boundary(s, k, v, gc, h0.state, hs, ht, st);
  }
  virtual void chunk_states_bwd_arriving(const GlaShape& s, const void* q, const void* d_o, const float* gc,
                                         const ArrivingState& dht, void* dhs, float* dh0, Stream st) {
    chunk_states_bwd_after_boundary(s, q, d_o, gc, dht.state, dhs, dh0, st);
  }
  // After chunk_states_*_arriving (the same shape, direction, init and outputs; no other chunk-state or boundary call
  // on this object between the two: the GPU keeps what the settle needs in its scratch) and after init's producer.
  virtual void chunk_states_settle(const GlaShape& s, bool reverse, const float* gc, const ArrivingState& init,
                                   void* hs, float* fin, Stream st) {
    (void)s, (void)reverse, (void)gc, (void)init, (void)hs, (void)fin, (void)st;
  }
  // *ready = epoch, on st after its earlier work (a release: what that work wrote is visible to whoever sees it).
  virtual void signal_ready(uint32_t* ready, uint32_t epoch, Stream st) {
    (void)st;
    *ready = epoch;
  }

  // --- state algebra for the SP methods ------------------------------------------------------------------------
  // out = diag(exp decay) x + y over `rows` rows of `cols` (out may alias x or y); the All-Scan combine.
  virtual void state_fold(size_t rows, size_t cols, const float* decay, const float* x, const float* y, float* out,
                          Stream st) = 0;
  // out = a + b, n elements (decays add along the sequence).
  virtual void vec_add(size_t n, const float* a, const float* b, float* out, Stream st) = 0;
  // A 4-D strided copy of elements of `elem_bytes` bytes (the Ulysses layout changes).
  virtual void copy_4d(void* dst, const void* src, size_t elem_bytes, const int64_t dims[4],
                       const int64_t dst_strides[4], const int64_t src_strides[4], Stream st) = 0;
};

std::unique_ptr<GlaKernels> make_cpu_kernels();

}  // namespace spb
