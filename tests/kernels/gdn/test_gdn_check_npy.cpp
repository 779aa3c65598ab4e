// gdn_check_npy (kernels/gdn/bench/gdn_check_npy.cpp) on a tiny fake dump: the fp32 chunked CPU stages
// (kernels/gdn/cpu/gdn_chunked.h, within 1e-5 of the token loop) stand in for fla, written through runtime/npy.h in
// the layout fla_gdn_kernel.py --dump writes. Every tensor must then be within its bar (exit 0); outputs beside them
// under a prefix, made without h0 and dht, with dg off by 1/ln 2 and one chunk of dk off by 1.5, must be found
// outside (exit 1), with that scale and that chunk.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <vector>

#include "kernels/gdn/cpu/gdn_chunked.h"
#include "runtime/npy.h"

#ifndef SPB_GDN_CHECK_NPY
#error "SPB_GDN_CHECK_NPY: the path of the gdn_check_npy executable (tests/CMakeLists.txt)"
#endif

namespace spb {
namespace {

namespace fs = std::filesystem;

const GdnShape kShape{1, 130, 2, 16, 8};  // T not a multiple of the chunk

struct Inputs {
  std::vector<float> q, k, v, g, beta, d_o, h0, dht;
  explicit Inputs(const GdnShape& s) {
    std::mt19937_64 rng{7};
    std::normal_distribution<float> n(0, 1);
    std::uniform_real_distribution<float> u(-3, 3);
    q.resize(s.qk_elems()), k.resize(s.qk_elems()), v.resize(s.v_elems()), d_o.resize(s.v_elems());
    g.resize(s.gate_elems()), beta.resize(s.gate_elems()), h0.resize(s.state_elems()), dht.resize(s.state_elems());
    for (auto* x : {&q, &v, &d_o, &h0, &dht})
      for (float& e : *x) e = n(rng);
    for (float& x : g) x = -std::log1p(std::exp(-u(rng) - 2));  // log sigmoid: a log gate < 0, as the model's
    for (float& x : beta) x = 1 / (1 + std::exp(-u(rng)));
    for (size_t r = 0; r < s.qk_elems() / size_t(s.dk); ++r) {
      float norm = 0;
      for (int i = 0; i < s.dk; ++i) k[r * s.dk + i] = n(rng), norm += k[r * s.dk + i] * k[r * s.dk + i];
      for (int i = 0; i < s.dk; ++i) k[r * s.dk + i] /= std::sqrt(norm);
    }
  }
};

void write(const fs::path& dir, const std::string& name, const std::vector<size_t>& shape,
           const std::vector<float>& x) {
  write_npy((dir / (name + ".npy")).string(), shape, x.data());
}

// The fake dump's outputs under `prefix`: with h0 and dht, or without either (their meta.json says so).
void write_outputs(const fs::path& dir, const std::string& prefix, const Inputs& in, bool with_states,
                   float dg_factor) {
  const GdnShape& s = kShape;
  const std::vector<size_t> qk{1, 130, 2, 16}, vv{1, 130, 2, 8}, gate{1, 130, 2}, state{1, 2, 16, 8};
  const std::vector<float> none;
  const GdnForward f = gdn_chunked_forward(s, in.q, in.k, in.v, in.g, in.beta, with_states ? in.h0 : none);
  GdnBackward b = gdn_chunked_backward(s, in.q, in.k, in.v, in.g, in.beta, with_states ? in.h0 : none, in.d_o,
                                       with_states ? in.dht : none);
  for (float& x : b.dg) x *= dg_factor;
  if (dg_factor != 1.0f)  // and one chunk of one head's dk wrong: tokens 64..127 of head 1
    for (int tok = 64; tok < 128; ++tok)
      for (int i = 0; i < s.dk; ++i) b.dk[(size_t(tok) * s.H + 1) * s.dk + i] *= 1.5f;
  write(dir, prefix + "o", vv, f.o);
  write(dir, prefix + "ht", state, f.ht);
  write(dir, prefix + "dq", qk, b.dq);
  write(dir, prefix + "dk", qk, b.dk);
  write(dir, prefix + "dv", vv, b.dv);
  write(dir, prefix + "dg", gate, b.dg);
  write(dir, prefix + "dbeta", gate, b.dbeta);
  if (with_states) write(dir, prefix + "dh0", state, b.dh0);
  std::ofstream meta(dir / (prefix + "meta.json"));
  meta << "{\n  \"producer\": \"test_gdn_check_npy\",\n  \"fla_commit\": \"fake\",\n  \"triton\": \"none\",\n"
       << "  \"triton_guard_lifted\": false,\n  \"initial_state\": " << (with_states ? "true" : "false")
       << ",\n  \"dht\": " << (with_states ? "true" : "false") << "\n}\n";
}

fs::path fake_dump() {
  const fs::path dir = fs::path(SPB_TEST_WORK_DIR) / "gdn_check_npy_fake";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const Inputs in(kShape);
  const std::vector<size_t> qk{1, 130, 2, 16}, vv{1, 130, 2, 8}, gate{1, 130, 2}, state{1, 2, 16, 8};
  write(dir, "q", qk, in.q), write(dir, "k", qk, in.k), write(dir, "v", vv, in.v), write(dir, "g", gate, in.g);
  write(dir, "beta", gate, in.beta), write(dir, "do", vv, in.d_o), write(dir, "h0", state, in.h0);
  write(dir, "dht", state, in.dht);
  write_outputs(dir, "", in, true, 1.0f);
  write_outputs(dir, "bad_", in, false, float(1 / std::log(2.0)));
  return dir;
}

// The checker's exit status, its CSV's lines and its printed output.
struct CheckRun {
  int status = -1;
  std::vector<std::string> csv;
  std::string printed;
};
CheckRun check(const fs::path& dir, const std::string& args) {
  const fs::path csv = dir / "check.csv", log = dir / "check.log";
  fs::remove(csv);
  const std::string cmd = std::string("\"") + SPB_GDN_CHECK_NPY + "\" \"" + dir.string() + "\" " + args +
                          " --csv \"" + csv.string() + "\" > \"" + log.string() + "\" 2>&1";
  CheckRun r;
  const int raw = std::system(cmd.c_str());
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  std::ifstream f(csv);
  for (std::string line; std::getline(f, line);) r.csv.push_back(line);
  std::stringstream ss;
  ss << std::ifstream(log).rdbuf();
  r.printed = ss.str();
  return r;
}

std::vector<std::string> fields(const std::string& line) {
  std::vector<std::string> out;
  std::string cur;
  bool quoted = false;
  for (char c : line) {
    if (c == '"') quoted = !quoted;
    else if (c == ',' && !quoted) out.push_back(cur), cur.clear();
    else cur += c;
  }
  out.push_back(cur);
  return out;
}

size_t col(const std::vector<std::string>& header, const std::string& name) {
  for (size_t i = 0; i < header.size(); ++i)
    if (header[i] == name) return i;
  ADD_FAILURE() << "no column " << name;
  return 0;
}

TEST(GdnCheckNpy, TheChunkedStagesAreWithinEveryBar) {
  const fs::path dir = fake_dump();
  const CheckRun r = check(dir, "");
  EXPECT_EQ(r.status, 0) << r.printed;
  ASSERT_EQ(r.csv.size(), 9u) << r.printed;  // the header and o, ht, dq, dk, dv, dg, dbeta, dh0
  const std::vector<std::string> header = fields(r.csv[0]);
  ASSERT_EQ(header[0], "tensor");
  for (size_t i = 1; i < r.csv.size(); ++i) {
    const std::vector<std::string> f = fields(r.csv[i]);
    ASSERT_EQ(f.size(), header.size()) << r.csv[i];
    EXPECT_EQ(f[col(header, "within_bar")], "1") << r.csv[i];
    EXPECT_LT(std::stod(f[col(header, "err_rel_rms")]), 1e-5) << r.csv[i];  // the CPU stages' bar, inside the GPU's
    EXPECT_NEAR(std::stod(f[col(header, "fit_scale")]), 1.0, 1e-4) << r.csv[i];
    EXPECT_EQ(f[col(header, "tokens")], "130") << r.csv[i];
    EXPECT_EQ(f[col(header, "fla_commit")], "fake") << r.csv[i];
  }
}

TEST(GdnCheckNpy, AWrongFactorIsFoundAndMeasured) {
  const fs::path dir = fake_dump();
  const CheckRun r = check(dir, "--prefix bad_");
  EXPECT_EQ(r.status, 1) << r.printed;
  ASSERT_EQ(r.csv.size(), 8u) << r.printed;  // no dh0: made without h0
  const std::vector<std::string> header = fields(r.csv[0]);
  for (size_t i = 1; i < r.csv.size(); ++i) {
    const std::vector<std::string> f = fields(r.csv[i]);
    EXPECT_EQ(f[col(header, "initial_state")], "0") << r.csv[i];
    EXPECT_EQ(f[col(header, "dht")], "0") << r.csv[i];
    const bool wrong = f[0] == "dg" || f[0] == "dk";
    EXPECT_EQ(f[col(header, "within_bar")], wrong ? "0" : "1") << r.csv[i];
    if (f[0] == "dg") EXPECT_NEAR(std::stod(f[col(header, "fit_scale")]), 1 / std::log(2.0), 1e-4) << r.csv[i];
    if (f[0] == "dk") EXPECT_EQ(f[col(header, "worst_block")], "b 0 h 1 tokens 64..127") << r.csv[i];
  }
}

TEST(GdnCheckNpy, MissingFilesAreAUsageError) {
  const fs::path dir = fs::path(SPB_TEST_WORK_DIR) / "gdn_check_npy_empty";
  fs::remove_all(dir);
  fs::create_directories(dir);
  EXPECT_EQ(check(dir, "").status, 2);
}

}  // namespace
}  // namespace spb
