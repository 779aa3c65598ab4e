// Launchers of the CUDA GLA kernels (one .cu file per stage family), called by the GlaKernels implementation in
// gla_cuda.cu. Internal to kernels/gla/cuda. Every launcher enqueues on `stream` and checks the launch.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace spb {
namespace gla_cuda {

struct Dims {
  int B, T, H, dk, dv, NT;
  float scale;  // dk^-1/2
  // The (b, h) pairs a launch computes (GlaShape::pair_range): [bh0, bh0 + pairs()); nbh 0 means all B * H. Every
  // kernel takes its pair as bh0 + its grid index and addresses the whole tensors with it.
  int bh0 = 0, nbh = 0;
  int pairs() const { return nbh ? nbh : B * H; }
  int grad_ld = 0;  // GlaShape::grad_ld: the row stride of dq, dk and dv (0: dense)
};

inline bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

// gla_cuda.cu: features per thread of the cumsum kernel (2: default; 4: for the benchmark's comparison).
void set_cumsum_vec(int v);
// gla_cuda.cu: *ready = epoch `us` microseconds after this kernel starts on `stream` (GlaKernels::signal_ready: 0; the
// tests of a state that arrives while the chunk states run: a delay).
void launch_signal_after(uint32_t* ready, uint32_t epoch, double us, cudaStream_t stream);
// gla_cuda.cu: out[i] = tf32_bits(in[i]), the rounding every kernel applies to a tensor-core operand that is not exact
// bf16; for the tests, which compare it with tf32_model.h.
void launch_tf32_bits(const float* in, uint32_t* out, int n, cudaStream_t stream);

// The chunk states hs / dhs [B*H, NT, dk, dv] are bf16 in every launcher below (GlaKernels::chunk_state_type): the
// kernels compute them in fp32, round to nearest even where they store them and widen them exactly where they load
// them. Every other state (init, fin, scratch, the late state) is fp32.
//
// gla_states.cu: the sequential chunk recurrence.
//   forward  (reverse == false): x = k, y = v, hs[n] = state at the start of chunk n, fin = ht, init = h0.
//   backward (reverse == true):  x = q, y = do, hs[n] = dhs[n] (gradient at the end of chunk n), fin = dh0,
//                                init = dht.
// Rows of the state per block: 16 or 32 (0: 16 where that grid fits one wave of two blocks per SM). For tests and
// the benchmark.
void set_states_bk(int bk);
// Which chunk_states_fwd / _bwd runs: 0 (default) launch_states_spans (gla_states_spans.cu), 1 launch_states (the
// sequential walk above). For tests and the benchmark.
void set_states_variant(int v);
int states_variant();
void launch_states(const Dims& d, bool reverse, const __nv_bfloat16* x, const __nv_bfloat16* y, const float* gc,
                   const float* init, __nv_bfloat16* hs, float* fin, cudaStream_t stream);

// gla_boundary.cu: the boundary state alone, without the chunk states: a reduction over spans of chunks.
//   forward  (reverse == false): fin = the ht that launch_states(d, false, x = k, y = v, gc, init = nullptr, ...) gives
//   backward (reverse == true):  fin = the dh0 of launch_states(d, true, x = q, y = do, gc, init = nullptr, ...)
// scratch: boundary_scratch_elems(d) floats of device memory, owned by the caller (per-span partial states, decays);
// 0 where one span covers the sequence (scratch may then be nullptr). The plan depends on d, on the current
// device's SM count and on the two overrides below only, so the size stays valid for every launch with the same d
// on that device while the overrides are unchanged.
// set_boundary_span: chunks per span (0: chosen by grid size); set_boundary_variant: the kernel variant, 1 ..
// boundary_variants() (0: the default; see gla_boundary.cu). For tests and the benchmark; the scratch size follows.
size_t boundary_scratch_elems(const Dims& d);
void launch_boundary(const Dims& d, bool reverse, const __nv_bfloat16* x, const __nv_bfloat16* y, const float* gc,
                     float* fin, float* scratch, cudaStream_t stream);
// The same from the raw gates g instead of gc (each chunk scanned in the kernel: 25 % fewer bytes, and no
// chunk_cumsum needed first), where boundary_reads_gates(d) (the default variant at dk tiles of 128 rows, dv <= 128);
// forward: lambda (nullable) = the sum of g over all tokens per (b, h, row), as chunk_cumsum's up to rounding.
bool boundary_reads_gates(const Dims& d);
void launch_boundary_gates(const Dims& d, bool reverse, const __nv_bfloat16* x, const __nv_bfloat16* y,
                           const __nv_bfloat16* g, float* fin, float* lambda, float* scratch, cudaStream_t stream);
void set_boundary_span(int chunks);
void set_boundary_variant(int v);
int boundary_variants();

// gla_states_spans.cu: the chunk states by spans (what chunk_states_fwd / _bwd run by default): stage 1 of the
// reduction above (skipped where reuse: the partials of the launch_boundary / launch_boundary_gates call just made at
// this d, with the same x, y and gates, are still in scratch), a fold that turns the partials into each span's initial
// state from init (h0 / dht, nullable) and writes fin (nullable), then the recurrence of every span from its initial
// state at once, storing hs (the STORE kernel). Same fin as launch_states up to the order of fp32 sums, the same hs
// up to that order and its bf16 rounding (a sum that differs in its last fp32 bits may round to the next bf16
// value). scratch: boundary_scratch_elems(d) floats. reuse needs states_reuse_boundary(d): the reduction has several
// spans, the same as the states'.
// late (nullable) replaces init (then nullptr): the initial state may still be travelling (GlaKernels::ArrivingState);
// each block of the STORE kernel starts from its zero-start state and adds late's share once it sees *ready reach
// epoch, and records in pending[states_pending_count(d)] whether it never did; launch_states_settle, enqueued after
// late's producer, completes those blocks' states (and fin) from the same scratch, gc and pending. A state stored
// before late's share came is rounded twice: its zero-start value to bf16, then the sum with the share.
struct LateInit {
  const float* state;
  const uint32_t* ready;
  uint32_t epoch;
  int* pending;
};
bool states_reuse_boundary(const Dims& d);
size_t states_pending_count(const Dims& d);
void launch_states_spans(const Dims& d, bool reverse, const __nv_bfloat16* x, const __nv_bfloat16* y,
                         const float* gc, const float* init, __nv_bfloat16* hs, float* fin, float* scratch, bool reuse,
                         cudaStream_t stream, const LateInit* late = nullptr);
void launch_states_settle(const Dims& d, bool reverse, const float* gc, const LateInit& late, __nv_bfloat16* hs,
                          float* fin, float* scratch, cudaStream_t stream);
// How the STORE kernel writes hs (gla_boundary_kernel.cu): true (default) staged through shared memory and stored by
// 1-D bulk copies wherever the tiles are whole, hs is 16-byte aligned and there is no late state; false: 4-byte
// stores from the accumulator fragments everywhere. The same bits either way. For tests and the benchmark.
void set_states_staged_store(bool on);
bool states_staged_store();

// gla_intra.cu: per (chunk, dv tile) blocks that build the in-chunk score matrix A and add an inter-chunk product.
//   o  = s (Q*exp b) hs[n] + tril(A) V                      (chunk_output)
//   dv = (K*exp(B-b)) dhs[n] + tril(A)^T dO                  (the dv part of chunk_grads)
// bv: columns per block, 64 or 128; 0 picks (128 where dv > 64). The benchmark tries both.
// set_intra_variant: tuning override of the feature slice and occupancy (0: default; 1: 32-feature slices, 2 blocks
// per SM; 2: 16-feature slices, 3 blocks per SM; 3: as 2 with one barrier per slice; 4: as 3 with the state slice in
// 16-byte quads, one load per two mmas). For tests and the benchmark.
void set_intra_variant(int v);
// set_intra_tiles: column tiles per block (0: intra_tiles_per_block's plan; 1: A rebuilt for every tile).
// intra_tiles_per_block: that plan, for ntile column tiles, other_blocks blocks per column tile (chunks x B x H) and
// `resident` blocks per wave. For tests and the benchmark.
void set_intra_tiles(int tiles);
int intra_tiles_per_block(int ntile, long other_blocks, int resident);
void launch_output(const Dims& d, const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v,
                   const float* gc, const __nv_bfloat16* hs, __nv_bfloat16* o, cudaStream_t stream, int bv = 0);
void launch_dv(const Dims& d, const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* d_o,
               const float* gc, const __nv_bfloat16* dhs, __nv_bfloat16* dv, cudaStream_t stream, int bv = 0);

// gla_dqk.cu: per (chunk, dk tile) blocks: dq, dk and dg.
// set_dqk_variant: tuning override, how many dv slices phase 1 loads ahead (0: the default, 3; 1, 2; any other value
// is 3). For tests and the benchmark.
void set_dqk_variant(int v);
void launch_dqk(const Dims& d, const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v,
                const __nv_bfloat16* d_o, const float* gc, const __nv_bfloat16* hs, const __nv_bfloat16* dhs,
                __nv_bfloat16* dq, __nv_bfloat16* dk, __nv_bfloat16* dg, cudaStream_t stream);

}  // namespace gla_cuda
}  // namespace spb
