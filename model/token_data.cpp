#include "model/token_data.h"

#include <fstream>
#include <iterator>

#include "runtime/error.h"
#include "sp/inputs.h"

namespace spb {

TokenData::TokenData(const std::string& path, int vocab, int batch, int seq, uint64_t seed)
    : vocab_(vocab), batch_(batch), seq_(seq), seed_(seed) {
  if (path.empty()) return;
  SPB_USAGE(vocab >= 256, "--data: byte tokens need --vocab >= 256 (got " + std::to_string(vocab) + ")");
  std::ifstream f(path, std::ios::binary);
  SPB_USAGE(f.good(), "--data " + path + ": cannot open");
  bytes_.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  SPB_USAGE(bytes_.size() >= size_t(seq) + 1, "--data " + path + ": " + std::to_string(bytes_.size()) +
                                                  " bytes, fewer than the " + std::to_string(seq + 1) +
                                                  " tokens of one sequence (-T + 1)");
}

std::vector<int32_t> TokenData::window(int step, int t0, int t1) const {
  const int n = t1 - t0 + 1;
  std::vector<int32_t> out(size_t(batch_) * n);
  for (int b = 0; b < batch_; ++b) {
    const uint64_t row = uint64_t(step) * batch_ + b;
    // A file is read in consecutive windows of seq tokens (each window's last target is the next one's first input),
    // wrapping around at its end.
    const size_t start = from_file() ? size_t(row * seq_ % (bytes_.size() - size_t(seq_))) : 0;
    for (int t = t0; t <= t1; ++t) {
      int32_t tok;
      if (from_file()) tok = bytes_[start + size_t(t)];
      else tok = int32_t(splitmix64(seed_ ^ splitmix64(row * 0x100000001b3ULL + uint64_t(t))) % uint64_t(vocab_));
      out[size_t(b) * n + (t - t0)] = tok;
    }
  }
  return out;
}

}  // namespace spb
