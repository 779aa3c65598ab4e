// check_npy_outputs IN OUT: the whole-sequence outputs spbench wrote to OUT (o, ht, dq, dk, dv, dg, dh0) against the
// fp64 token loop on the inputs in IN; exit 0 when every relative RMS error is < 1e-5 (fp32 CPU ranks).
#include <cstdio>

#include "runtime/error.h"
#include "sp/inputs.h"
#include "runtime/npy.h"
#include "runtime/stats.h"
#include "kernels/gla/cpu/gla_reference.h"

int main(int argc, char** argv) {
  if (argc != 3) return 2;
  const std::string in = argv[1], out = argv[2];
  const spb::GlaShape s = spb::npy_problem_shape(in);
  const spb::HostTensors x = spb::read_inputs(in, s, 0);
  const auto ref = spb::gla_reference(s, x.q, x.k, x.v, x.g, x.h0, x.d_o, x.dht);
  const std::vector<size_t> qk = {size_t(s.B), size_t(s.T), size_t(s.H), size_t(s.dk)};
  const std::vector<size_t> v = {size_t(s.B), size_t(s.T), size_t(s.H), size_t(s.dv)};
  const std::vector<size_t> st = {size_t(s.B), size_t(s.H), size_t(s.dk), size_t(s.dv)};
  int bad = 0;
  auto check = [&](const char* name, const std::vector<double>& r, const std::vector<size_t>& shape) {
    const std::vector<float> got = spb::read_npy(out + "/" + name + ".npy", shape);
    const double e = spb::rel_rms_error(r, got, r.size());
    std::printf("%-4s rel RMS error %.3e %s\n", name, e, e < 1e-5 ? "ok" : "TOO LARGE");
    bad += !(e < 1e-5);
  };
  check("o", ref.o, v);
  check("ht", ref.ht, st);
  check("dq", ref.dq, qk);
  check("dk", ref.dk, qk);
  check("dv", ref.dv, v);
  check("dg", ref.dg, qk);
  check("dh0", ref.dh0, st);
  return bad ? 1 : 0;
}
