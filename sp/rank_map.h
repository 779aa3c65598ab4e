// The rank map (DESIGN §2, §12): all of an SP rank's tokens together act on the state entering it as one affine map,
//     S_out = A_p S_in + M_p,
// with M_p the rank's state from a zero start (D_p, its initial-state gradient, in the backward) and A_p its
// transition. What a rank hands on is the pair (A_p, M_p); the scans of the SP methods (zeco's All-Scans, lasp2's
// fold, ring's accumulation) need only the operations below, so they are written once for every family:
//   apply     out = A x + b                                 (the All-Scan's combine)
//   compose   (A2, b2) after (A1, b1) = (A2 A1, A2 b1 + b2)  (the node-aware scans' aggregates, ring, lasp2)
//   identity  the transition of x -> x
//   blocks    how a state splits into K blocks that the map folds independently (block k of A x + b needs only
//             block k of x and of b), which is what lets the All-Scan pipeline K blocks
// Seen by the scan, a state is a rows x cols fp32 matrix, row-major; a transition is transition_elems() fp32.
//   diagonal_decay  GLA: A = diag(exp t), t a log-decay per row ([rows]: per head the dk-vector Lambda_p); maps
//                   compose by adding t (the log domain); rows are independent, so blocks are blocks of whole ROWS.
//   dense           Gated DeltaNet (§12; no kernels yet, every operation is a UsageError): per head a dk x dk
//                   matrix (rows = heads * dk, the transition [heads, dk, dk] row-major); it mixes the rows of a
//                   head's state but never its columns, so blocks would be blocks of COLUMNS, and maps compose by a
//                   matrix product.
// The backward scans the same way with the rank's backward map (A_p^T, D_p): for the diagonal map A^T = A, so the
// forward's transition serves both directions; a dense family's boundary stage hands on A_p^T for the reverse scan.
// The diagonal map runs on GlaKernels::state_fold (apply), vec_add (compose) and Device::fill_zero (identity), so it
// runs wherever those do (CPU ranks, GPUs, the simulated device) with the same calls as before it existed.
#pragma once

#include <cstddef>
#include <string>

#include "kernels/gla/gla_kernels.h"
#include "runtime/device.h"

namespace spb {

struct Runtime;

// How a family holds its transition A_p.
enum class TransitionKind { diagonal_decay, dense };
// Which dimension of the state its independent blocks cut.
enum class BlockAxis { rows, cols };

// A family's kind of rank map, without a state shape: what AllScanArgs names beside a transition pointer.
struct RankMapType {
  TransitionKind kind = TransitionKind::diagonal_decay;
  size_t head_rows = 0;  // dense: dk, the state rows of one head (its transition is dk x dk); 0 for the diagonal map

  static RankMapType diagonal_decay() { return {}; }
  static RankMapType dense(size_t dk) { return {TransitionKind::dense, dk}; }
  const char* name() const;  // "diagonal-decay", "dense"
  BlockAxis block_axis() const;
  // The fp32 elements of one rank's transition over a rows x cols state: rows (diagonal), rows * dk (dense).
  size_t transition_elems(size_t rows, size_t cols) const;
  bool operator==(const RankMapType& o) const { return kind == o.kind && head_rows == o.head_rows; }
  bool operator!=(const RankMapType& o) const { return !(*this == o); }
};

struct RankMapPart;

// A rank map of one type over a rows x cols state, its arithmetic on the runtime's kernels and device. Pointers are
// the device's (host memory on CPU ranks); every operation is enqueued on `st`. A value type: parts of a state (its
// blocks, a range of heads) are maps of their own.
class RankMap {
 public:
  RankMap(GlaKernels& kern, Device& dev, RankMapType type, size_t rows, size_t cols);

  const RankMapType& type() const { return type_; }
  TransitionKind kind() const { return type_.kind; }
  BlockAxis block_axis() const { return type_.block_axis(); }
  size_t rows() const { return rows_; }
  size_t cols() const { return cols_; }
  size_t state_elems() const { return rows_ * cols_; }
  size_t state_bytes() const { return state_elems() * 4; }
  size_t transition_elems() const { return type_.transition_elems(rows_, cols_); }
  size_t transition_bytes() const { return transition_elems() * 4; }
  // The state's extent along the block axis: the rows (diagonal), the columns (dense).
  size_t block_extent() const { return block_axis() == BlockAxis::rows ? rows_ : cols_; }

  // UsageError where this map's arithmetic has no kernels (the dense map): for a collective scan to call on every rank
  // before its first transfer, so that all ranks stop together.
  void require_arithmetic() const;

  // out = A x + b, A from the transition t (out may alias x or b). Diagonal: state_fold.
  void apply(const float* t, const float* x, const float* b, float* out, Stream st) const;
  // t_out = the transition of "second after first", A_second A_first (t_out may alias either). Diagonal:
  // vec_add(t_second, t_first).
  void compose_transitions(const float* t_second, const float* t_first, float* t_out, Stream st) const;
  // The map "second after first": (t_out, b_out) = (A2 A1, A2 b1 + b2). The offset is computed first, so t_out may
  // alias t2 and b_out b2 (an aggregate that a map arriving from before it is composed into, in place).
  void compose(const float* t2, const float* b2, const float* t1, const float* b1, float* t_out, float* b_out,
               Stream st) const;
  // t = the transition of the identity map, x -> x. Diagonal: zeros (fill_zero).
  void identity(float* t, Stream st) const;

  // Whether K blocks split the state: K >= 1 dividing block_extent().
  bool splits_into(int K) const;
  // Block k of K (splits_into(K)): block_part(k * n / K, n / K), n = block_extent().
  RankMapPart block(int k, int K) const;
  // `count` rows (diagonal) or columns (dense) from `begin` along the block axis, folded independently of the rest.
  // The diagonal map's part is contiguous; a dense map's column part is strided in a row-major state, which no
  // operation takes yet (UsageError).
  RankMapPart block_part(size_t begin, size_t count) const;
  // `count` state rows from `begin`, whole heads for a dense map (independent for every kind: heads never mix): a head
  // group's share of the state.
  RankMapPart rows_part(size_t begin, size_t count) const;

  // Whether the transitions compose by a fold of their own, as states (diagonal: t2 after t1 = 1 * t1 + t2, the fold
  // of a rows x 1 state under the identity map; dense: no, a matrix product). A scan may then compose the transitions
  // of a run of ranks by scanning them with transition_scan_map(), whose every rank has the identity's transition.
  bool transitions_fold_as_states() const { return kind() == TransitionKind::diagonal_decay; }
  RankMap transition_scan_map() const;  // UsageError where !transitions_fold_as_states()

 private:
  GlaKernels* kern_;
  Device* dev_;
  RankMapType type_;
  size_t rows_, cols_;
};

// A part of a state and of its transition: a map of its own, and where the part starts in each (elements).
struct RankMapPart {
  RankMap map;
  size_t state_offset = 0;
  size_t transition_offset = 0;
};

// GLA's map over a state of shape s ([B, H, dk, dv]: B*H*dk rows of dv; the transition is lambda, [B, H, dk]).
RankMap gla_rank_map(Runtime& rt, const GlaShape& s);

}  // namespace spb
