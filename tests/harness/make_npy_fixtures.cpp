// Writes the .npy inputs of the CLI tests: a valid problem (good/), one with a mis-shaped k (misshaped/), one with a
// q that is not a .npy file (malformed/), one with no g (missing/), and one with a NaN in v (nonfinite/).
#include <filesystem>
#include <cmath>
#include <fstream>

#include "sp/inputs.h"
#include "runtime/npy.h"

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  namespace fs = std::filesystem;
  const fs::path root = argv[1];
  spb::GlaShape s;
  s.B = 2, s.T = 90, s.H = 2, s.dk = 8, s.dv = 12;
  const spb::HostTensors x = spb::generate_inputs(s, 99, spb::GateKind::strong, true, true);
  const std::vector<size_t> qk = {2, 90, 2, 8}, v = {2, 90, 2, 12}, st = {2, 2, 8, 12};
  for (const char* dir : {"good", "misshaped", "malformed", "missing", "nonfinite"}) {
    fs::create_directories(root / dir);
    spb::write_npy(root / dir / "q.npy", qk, x.q.data());
    spb::write_npy(root / dir / "k.npy", qk, x.k.data());
    spb::write_npy(root / dir / "v.npy", v, x.v.data());
    spb::write_npy(root / dir / "g.npy", qk, x.g.data());
  }
  spb::write_npy(root / "good" / "do.npy", v, x.d_o.data());
  spb::write_npy(root / "good" / "h0.npy", st, x.h0.data());
  spb::write_npy(root / "good" / "dht.npy", st, x.dht.data());
  spb::write_npy(root / "misshaped" / "k.npy", {2, 90, 2, 7}, x.k.data());
  std::ofstream(root / "malformed" / "q.npy") << "not numpy at all";
  fs::remove(root / "missing" / "g.npy");
  std::vector<float> v_nan = x.v;
  v_nan[5] = NAN;
  spb::write_npy(root / "nonfinite" / "v.npy", v, v_nan.data());
  return 0;
}
