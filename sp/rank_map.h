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
//   dense           Gated DeltaNet (§12): per head a dk x dk matrix (rows = heads * dk, the transition
//                   [heads, dk, dk] row-major); it mixes the rows of a head's state but never its columns, so blocks
//                   are blocks of COLUMNS, and maps compose by a matrix product. Its arithmetic runs on the GdnKernels
//                   dense stages (kernels/gdn/gdn_kernels.h); a runtime without them makes every operation a
//                   UsageError. Split into K > 1 blocks, its states are COLUMN-BLOCKED: the K blocks of rows x cols/K
//                   one after another, each row-major (block(); the caller packs them, column_blocks_pack()).
// The backward scans the same way with the rank's backward map (A_p^T, D_p): for the diagonal map A^T = A, so the
// forward's transition serves both directions; the dense family hands A_p^T to the reverse scan (SpLocal).
// The diagonal map runs on GlaKernels::state_fold (apply), vec_add (compose) and Device::fill_zero (identity), so it
// runs wherever those do (CPU ranks, GPUs, the simulated device) with the same calls as before it existed.
#pragma once

#include <cstddef>
#include <string>

#include "kernels/gdn/gdn_kernels.h"
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
  // dense: the stages of the dense kind's arithmetic (nullable: none on this runtime).
  RankMap(GlaKernels& kern, Device& dev, RankMapType type, size_t rows, size_t cols, GdnKernels* dense = nullptr);

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

  // UsageError where this map's arithmetic has no kernels (a dense map on a runtime without GDN's): for a collective
  // scan to call on every rank before its first transfer, so that all ranks stop together.
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
  // Block k of K (splits_into(K)), n = block_extent() / K: rows [k n, (k + 1) n) of the state (diagonal,
  // block_part), or columns [k n, (k + 1) n) of a column-blocked state (dense: the part at k * rows * n, a
  // rows x n map with the whole transition).
  RankMapPart block(int k, int K) const;
  // `count` rows from `begin` along the block axis of a map whose blocks are rows, folded independently of the rest
  // (a dense map's columns are strided in a row-major state: UsageError; its scans take block()).
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
  GdnKernels* dense_;
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
// Gated DeltaNet's over the same state (the transition A, [B, H, dk, dk]), on rt.gdn.
RankMap gdn_rank_map(Runtime& rt, const GlaShape& s);

// A row-major rows x cols state to its K column blocks (rows x cols/K each, one after another) and back: the layout a
// dense map's K-block scan takes (RankMap::block). On the kernels' copy_4d; K = 1 is a plain copy.
void column_blocks_pack(GlaKernels& kern, size_t rows, size_t cols, int K, const float* state, float* blocked,
                        Stream st);
void column_blocks_unpack(GlaKernels& kern, size_t rows, size_t cols, int K, const float* blocked, float* state,
                          Stream st);

}  // namespace spb
