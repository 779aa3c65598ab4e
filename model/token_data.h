// The tokens a training step reads: random ids drawn from a seed (for throughput), or the bytes of a text file as
// tokens 0..255 (so a user can watch the model learn). Both are functions of (step, batch row, position), so every
// rank draws its own slice, and rank 0 the whole sequence, without exchanging anything.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace spb {

class TokenData {
 public:
  // path empty: random tokens in [0, vocab). Otherwise the file's bytes; UsageError (naming --data) when it is
  // missing, unreadable, shorter than seq + 1 bytes, or vocab < 256.
  TokenData(const std::string& path, int vocab, int batch, int seq, uint64_t seed);
  // Tokens [t0, t1 + 1) of every batch row of `step` (0-based), row-major [B, t1 - t0 + 1]: the inputs of positions
  // t0..t1-1 and the target of the last.
  std::vector<int32_t> window(int step, int t0, int t1) const;
  bool from_file() const { return !bytes_.empty(); }

 private:
  int vocab_, batch_, seq_;
  uint64_t seed_;
  std::vector<uint8_t> bytes_;
};

}  // namespace spb
