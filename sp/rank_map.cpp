#include "sp/rank_map.h"

#include <string>

#include "runtime/error.h"
#include "sp/runtime.h"

namespace spb {
namespace {

// A rows x cols state to or from its K column blocks: a 4-D copy over {1, K, rows, n = cols/K}, element (k, r, j)
// at r * cols + k * n + j in the state and at (k * rows + r) * n + j in the blocks.
void column_blocks_copy(GlaKernels& kern, size_t rows, size_t cols, int K, const float* src, float* dst, bool pack,
                        Stream st) {
  const int64_t n = int64_t(cols) / K, R = int64_t(rows), C = int64_t(cols);
  const int64_t dims[4] = {1, K, R, n};
  const int64_t state[4] = {0, n, C, 1}, blocked[4] = {0, R * n, n, 1};
  kern.copy_4d(dst, src, 4, dims, pack ? blocked : state, pack ? state : blocked, st);
}

}  // namespace

const char* RankMapType::name() const { return kind == TransitionKind::dense ? "dense" : "diagonal-decay"; }

BlockAxis RankMapType::block_axis() const {
  return kind == TransitionKind::dense ? BlockAxis::cols : BlockAxis::rows;
}

size_t RankMapType::transition_elems(size_t rows, size_t cols) const {
  (void)cols;
  return kind == TransitionKind::dense ? rows * head_rows : rows;
}

RankMap::RankMap(GlaKernels& kern, Device& dev, RankMapType type, size_t rows, size_t cols, GdnKernels* dense)
    : kern_(&kern), dev_(&dev), dense_(dense), type_(type), rows_(rows), cols_(cols) {
  SPB_CHECK(type_.kind != TransitionKind::dense || (type_.head_rows > 0 && rows_ % type_.head_rows == 0),
            "a dense rank map of " + std::to_string(rows_) + " rows in heads of " + std::to_string(type_.head_rows));
}

void RankMap::require_arithmetic() const {
  SPB_USAGE(kind() != TransitionKind::dense || dense_,
            "the dense rank map (Gated DeltaNet, DESIGN §12) needs GDN's kernels, which this runtime does not have");
}

void RankMap::apply(const float* t, const float* x, const float* b, float* out, Stream st) const {
  if (kind() == TransitionKind::dense) {
    require_arithmetic();
    return dense_->dense_apply(rows_ / type_.head_rows, type_.head_rows, cols_, t, x, b, out, st);
  }
  kern_->state_fold(rows_, cols_, t, x, b, out, st);
}

void RankMap::compose_transitions(const float* t_second, const float* t_first, float* t_out, Stream st) const {
  if (kind() == TransitionKind::dense) {
    require_arithmetic();
    return dense_->dense_product(rows_ / type_.head_rows, type_.head_rows, t_second, t_first, t_out, st);
  }
  kern_->vec_add(rows_, t_second, t_first, t_out, st);
}

void RankMap::compose(const float* t2, const float* b2, const float* t1, const float* b1, float* t_out, float* b_out,
                      Stream st) const {
  apply(t2, b1, b2, b_out, st);  // before t_out, which may be t2
  compose_transitions(t2, t1, t_out, st);
}

void RankMap::identity(float* t, Stream st) const {
  if (kind() == TransitionKind::dense) {
    require_arithmetic();
    return dense_->dense_identity(rows_ / type_.head_rows, type_.head_rows, t, st);
  }
  dev_->fill_zero(t, transition_bytes(), st);
}

bool RankMap::splits_into(int K) const { return K >= 1 && block_extent() % size_t(K) == 0; }

RankMapPart RankMap::block(int k, int K) const {
  SPB_CHECK(splits_into(K) && k >= 0 && k < K,
            "block " + std::to_string(k) + " of " + std::to_string(K) + " of a state of " + std::to_string(rows_) +
                " x " + std::to_string(cols_));
  const size_t n = block_extent() / size_t(K);
  if (block_axis() == BlockAxis::rows) return block_part(size_t(k) * n, n);
  return {RankMap(*kern_, *dev_, type_, rows_, n, dense_), size_t(k) * rows_ * n, 0};
}

RankMapPart RankMap::block_part(size_t begin, size_t count) const {
  if (block_axis() == BlockAxis::cols)
    throw UsageError(std::string("the ") + type_.name() +
                     " rank map splits the state into blocks of columns, strided in a row-major state: a scan takes "
                     "them as block() of a column-blocked state");
  return rows_part(begin, count);
}

RankMapPart RankMap::rows_part(size_t begin, size_t count) const {
  SPB_CHECK(begin + count <= rows_, "rows [" + std::to_string(begin) + ", " + std::to_string(begin + count) +
                                        ") of a state of " + std::to_string(rows_));
  SPB_CHECK(kind() != TransitionKind::dense || (begin % type_.head_rows == 0 && count % type_.head_rows == 0),
            "rows of a dense rank map in parts of whole heads");
  return {RankMap(*kern_, *dev_, type_, count, cols_, dense_), begin * cols_, type_.transition_elems(begin, cols_)};
}

RankMap RankMap::transition_scan_map() const {
  SPB_USAGE(transitions_fold_as_states(),
            std::string("the ") + type_.name() +
                " rank map composes its transitions by a matrix product, not by a fold: a scan of transitions "
                "needs a product scan");
  return RankMap(*kern_, *dev_, RankMapType::diagonal_decay(), transition_elems(), 1);
}

RankMap gla_rank_map(Runtime& rt, const GlaShape& s) {
  return RankMap(*rt.kern, *rt.dev, RankMapType::diagonal_decay(), s.state_rows(), size_t(s.dv));
}

RankMap gdn_rank_map(Runtime& rt, const GlaShape& s) {
  return RankMap(*rt.kern, *rt.dev, RankMapType::dense(size_t(s.dk)), s.state_rows(), size_t(s.dv), rt.gdn.get());
}

void column_blocks_pack(GlaKernels& kern, size_t rows, size_t cols, int K, const float* state, float* blocked,
                        Stream st) {
  column_blocks_copy(kern, rows, cols, K, state, blocked, /*pack=*/true, st);
}

void column_blocks_unpack(GlaKernels& kern, size_t rows, size_t cols, int K, const float* blocked, float* state,
                          Stream st) {
  column_blocks_copy(kern, rows, cols, K, blocked, state, /*pack=*/false, st);
}

}  // namespace spb
