// gdn_check_npy DIR [--prefix P] [--csv FILE]: another implementation's Gated DeltaNet outputs and gradients
// (fla's chunk_gated_delta_rule, written by baselines/pytorch/fla_gdn_kernel.py --dump DIR) against spbench's fp64
// token loop (kernels/gdn/cpu/gdn_reference.h) on the same inputs, by relative RMS error (DESIGN §7), each against
// spbench's GPU bar: < 4e-3 for o, < 5e-3 for ht and every gradient.
//
// DIR holds fp32 C-order .npy files in spbench's layouts: the inputs q, k [B, T, H, dk]; v, do [B, T, H, dv]; g,
// beta [B, T, H]; h0, dht [B, H, dk, dv] (each optional); the checked tensors P+o, P+ht, P+dq, P+dk, P+dv, P+dg,
// P+dbeta, P+dh0 (o required, the others checked where present), and P+meta.json (optional: its "initial_state" and
// "dht" false say the outputs were made without h0 / dht; "fla_commit", "triton", "triton_guard_lifted" go into the
// rows). The prefix P ("" by default) lets other runs' outputs sit beside the first ones (fla_gdn_cp.py writes cp1_).
//
// Prints one line per tensor (its error, the bar, the scale s minimising |ref s - x|, which tells a wrong factor
// from noise, and the (b, h, 64-token chunk) of the largest error, over the tensor's reference RMS, which tells a
// wrong chunk or head from a uniform error); --csv appends one row per tensor. Exit 0: every tensor within its bar; 1: one or more outside (or not
// finite); 2: bad arguments or files.
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <sys/stat.h>
#include <vector>

#include "kernels/gdn/cpu/gdn_chunked.h"  // kGdnChunk, the blocks of the error profile
#include "kernels/gdn/cpu/gdn_reference.h"
#include "runtime/error.h"
#include "runtime/npy.h"
#include "runtime/stats.h"

namespace {

using spb::GdnShape;

bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// The value of "key" in a flat JSON object as text: a string without its quotes, or a number/true/false as written;
// "" when the key is absent. Enough for the meta.json the scripts of baselines/pytorch write (no nesting used).
std::string json_value(const std::string& text, const std::string& key) {
  const std::string quoted = "\"" + key + "\"";
  size_t at = text.find(quoted);
  if (at == std::string::npos) return "";
  at = text.find(':', at + quoted.size());
  if (at == std::string::npos) return "";
  ++at;
  while (at < text.size() && std::isspace(static_cast<unsigned char>(text[at]))) ++at;
  if (at < text.size() && text[at] == '"') {
    std::string out;
    for (size_t i = at + 1; i < text.size() && text[i] != '"'; ++i) {
      if (text[i] == '\\' && i + 1 < text.size()) ++i;
      out += text[i];
    }
    return out;
  }
  size_t end = at;
  while (end < text.size() && text[end] != ',' && text[end] != '}' && text[end] != '\n') ++end;
  std::string out = text.substr(at, end - at);
  while (!out.empty() && std::isspace(static_cast<unsigned char>(out.back()))) out.pop_back();
  return out;
}

std::vector<double> wide(const std::vector<float>& x) { return std::vector<double>(x.begin(), x.end()); }

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

const char* kColumns =
    "tensor,err_rel_rms,bar,within_bar,fit_scale,worst_block_err,worst_block,shape,batch,tokens,heads,dk,dv,initial_state,dht,prefix,fla_commit,"
    "triton,triton_guard_lifted,producer,date";

int usage(const std::string& why) {
  std::cerr << "gdn_check_npy: error: " << why << "\n"
            << "usage: gdn_check_npy DIR [--prefix P] [--csv FILE]\n";
  return 2;
}

int run(int argc, char** argv) {
  std::string dir, prefix, csv;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if ((a == "--prefix" || a == "--csv") && i + 1 < argc) {
      (a == "--prefix" ? prefix : csv) = argv[++i];
    } else if (a.rfind("--prefix=", 0) == 0) {
      prefix = a.substr(9);
    } else if (a.rfind("--csv=", 0) == 0) {
      csv = a.substr(6);
    } else if (a == "-h" || a == "--help") {
      std::cout << "usage: gdn_check_npy DIR [--prefix P] [--csv FILE]\n";
      return 0;
    } else if (!a.empty() && a[0] != '-' && dir.empty()) {
      dir = a;
    } else {
      return usage("unexpected argument '" + a + "'");
    }
  }
  if (dir.empty()) return usage("no DIR");
  const auto in = [&](const std::string& name) { return dir + "/" + name + ".npy"; };
  const auto out = [&](const std::string& name) { return dir + "/" + prefix + name + ".npy"; };

  // The shape from q and v; every other file must agree with it.
  const std::vector<size_t> qs = spb::read_npy_header(in("q")).shape, vs = spb::read_npy_header(in("v")).shape;
  SPB_USAGE(qs.size() == 4 && vs.size() == 4 && qs[0] == vs[0] && qs[1] == vs[1] && qs[2] == vs[2],
            "q " + spb::shape_str(qs) + " and v " + spb::shape_str(vs) + " are not [B, T, H, dk] and [B, T, H, dv]");
  GdnShape s;
  s.B = int(qs[0]), s.T = int(qs[1]), s.H = int(qs[2]), s.dk = int(qs[3]), s.dv = int(vs[3]);
  const std::vector<size_t> qk_shape = qs, v_shape = vs, gate_shape = {qs[0], qs[1], qs[2]},
                            state_shape = {qs[0], qs[2], qs[3], vs[3]};

  std::string meta, meta_out;
  if (exists(dir + "/meta.json")) meta = slurp(dir + "/meta.json");
  if (!prefix.empty() && exists(dir + "/" + prefix + "meta.json")) meta_out = slurp(dir + "/" + prefix + "meta.json");
  const auto meta_of = [&](const std::string& key) {
    const std::string v = meta_out.empty() ? "" : json_value(meta_out, key);
    return v.empty() ? json_value(meta, key) : v;
  };
  const bool use_h0 = exists(in("h0")) && meta_of("initial_state") != "false";
  const bool use_dht = exists(in("dht")) && meta_of("dht") != "false";

  const std::vector<double> q = wide(spb::read_npy(in("q"), qk_shape)), k = wide(spb::read_npy(in("k"), qk_shape)),
                            v = wide(spb::read_npy(in("v"), v_shape)), g = wide(spb::read_npy(in("g"), gate_shape)),
                            beta = wide(spb::read_npy(in("beta"), gate_shape));
  const std::vector<double> h0 = use_h0 ? wide(spb::read_npy(in("h0"), state_shape)) : std::vector<double>{};
  const std::vector<double> dht = use_dht ? wide(spb::read_npy(in("dht"), state_shape)) : std::vector<double>{};

  struct Checked {
    std::string name;
    std::vector<size_t> shape;
    double bar;
  };
  const std::vector<Checked> all = {{"o", v_shape, 4e-3},     {"ht", state_shape, 5e-3}, {"dq", qk_shape, 5e-3},
                                    {"dk", qk_shape, 5e-3},   {"dv", v_shape, 5e-3},     {"dg", gate_shape, 5e-3},
                                    {"dbeta", gate_shape, 5e-3}, {"dh0", state_shape, 5e-3}};
  SPB_USAGE(exists(out("o")), "no " + out("o"));
  bool any_grad = false;
  for (const auto& c : all)
    if (c.name[0] == 'd' && exists(out(c.name))) any_grad = true;
  SPB_USAGE(!any_grad || exists(in("do")), "gradients in " + dir + " but no do.npy");
  const std::vector<double> d_o = any_grad ? wide(spb::read_npy(in("do"), v_shape)) : std::vector<double>{};

  std::cout << "# gdn_check_npy " << dir << (prefix.empty() ? "" : " (prefix " + prefix + ")") << ": B " << s.B
            << ", T " << s.T << ", H " << s.H << ", dk " << s.dk << ", dv " << s.dv << ", h0 " << (use_h0 ? "yes" : "no")
            << ", dht " << (use_dht ? "yes" : "no") << ", fla " << meta_of("fla_commit") << ", triton "
            << meta_of("triton") << ", guard lifted " << meta_of("triton_guard_lifted") << std::endl;
  std::cout << "# the fp64 token loop (" << s.B * s.H << " heads of " << s.T << " tokens)..." << std::endl;
  const spb::GdnReferenceResult ref = spb::gdn_reference(s, q, k, v, g, beta, h0, d_o, dht);
  const auto ref_of = [&](const std::string& n) -> const std::vector<double>& {
    if (n == "o") return ref.o;
    if (n == "ht") return ref.ht;
    if (n == "dq") return ref.dq;
    if (n == "dk") return ref.dk;
    if (n == "dv") return ref.dv;
    if (n == "dg") return ref.dg;
    if (n == "dbeta") return ref.dbeta;
    return ref.dh0;
  };

  char date[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  std::vector<std::string> rows;
  int outside = 0, checked = 0;
  for (const auto& c : all) {
    if (!exists(out(c.name))) {
      std::printf("  %-6s absent\n", c.name.c_str());
      continue;
    }
    if (c.name == "dh0" && !use_h0) {
      std::printf("  %-6s skipped (outputs made without h0)\n", c.name.c_str());
      continue;
    }
    const std::vector<float> x = spb::read_npy(out(c.name), c.shape);
    const std::vector<double>& r = ref_of(c.name);
    const double err = spb::rel_rms_error(r, x, x.size());
    double rx = 0, rr = 0;
    for (size_t i = 0; i < x.size(); ++i) rx += r[i] * double(x[i]), rr += r[i] * r[i];
    const double fit = rr > 0 ? rx / rr : 0.0;
    // Where the error sits: the (b, h, chunk of 64 tokens) whose RMS error is the largest, over the whole tensor's
    // reference RMS (states: per (b, h)), so that a wrong chunk or head shows beside a uniform error.
    const bool per_token = c.shape.size() >= 3 && c.name != "ht" && c.name != "dh0";
    const size_t inner = per_token ? (c.shape.size() == 4 ? c.shape[3] : 1) : size_t(s.dk) * s.dv;
    const int blocks = per_token ? (s.T + spb::kGdnChunk - 1) / spb::kGdnChunk : 1;
    std::vector<double> block_sq(size_t(s.B) * s.H * blocks, 0.0), block_n(block_sq.size(), 0.0);
    for (size_t i = 0; i < x.size(); ++i) {
      const size_t row = i / inner;  // (b, t, h) for token tensors, (b, h) for states
      size_t at;
      if (per_token) {
        const size_t h = row % s.H, t = (row / s.H) % s.T, b = row / (size_t(s.H) * s.T);
        at = (b * s.H + h) * blocks + t / spb::kGdnChunk;
      } else {
        at = row;
      }
      const double d = r[i] - double(x[i]);
      block_sq[at] += d * d, block_n[at] += 1;
    }
    const double ref_rms = std::sqrt(rr / double(std::max<size_t>(x.size(), 1)));
    size_t worst = 0;
    for (size_t i = 0; i < block_sq.size(); ++i)
      if (!(block_sq[i] / std::max(block_n[i], 1.0) <= block_sq[worst] / std::max(block_n[worst], 1.0))) worst = i;
    const double worst_err =
        std::sqrt(block_sq[worst] / std::max(block_n[worst], 1.0)) / (ref_rms > 0 ? ref_rms : 1.0);
    const int worst_b = int(worst / (size_t(s.H) * blocks)), worst_h = int(worst / blocks % s.H);
    const std::string where = "b " + std::to_string(worst_b) + " h " + std::to_string(worst_h) +
                              (per_token ? " tokens " + std::to_string(int(worst % blocks) * spb::kGdnChunk) + ".." +
                                               std::to_string(std::min(s.T, int(worst % blocks + 1) * spb::kGdnChunk) - 1)
                                         : std::string());
    const bool ok = err < c.bar;  // a NaN or an infinity never passes
    ++checked;
    outside += !ok;
    std::printf("  %-6s err_rel_rms %.3e  bar %.0e  %-7s  fit scale %.6f  worst %s: %.3e  %s\n", c.name.c_str(), err,
                c.bar, ok ? "within" : "OUTSIDE", fit, where.c_str(), worst_err, spb::shape_str(c.shape).c_str());
    char e[32], b[16], f[32];
    std::snprintf(e, sizeof e, "%.6g", err);
    std::snprintf(b, sizeof b, "%.0e", c.bar);
    std::snprintf(f, sizeof f, "%.6g", fit);
    char w[32];
    std::snprintf(w, sizeof w, "%.6g", worst_err);
    std::ostringstream row;
    row << c.name << ',' << e << ',' << b << ',' << (ok ? 1 : 0) << ',' << f << ',' << w << ',' << csv_field(where) << ','
        << csv_field(spb::shape_str(c.shape)) << ',' << s.B << ',' << s.T << ',' << s.H << ',' << s.dk << ','
        << s.dv << ',' << (use_h0 ? 1 : 0) << ',' << (use_dht ? 1 : 0) << ',' << csv_field(prefix) << ','
        << csv_field(meta_of("fla_commit")) << ',' << csv_field(meta_of("triton")) << ','
        << csv_field(meta_of("triton_guard_lifted")) << ',' << csv_field(meta_of("producer")) << ',' << date;
    rows.push_back(row.str());
  }
  std::printf("# %d tensors checked, %d outside the bar\n", checked, outside);

  if (!csv.empty()) {
    const bool fresh = !exists(csv) || slurp(csv).empty();
    if (!fresh) {
      const std::string text = slurp(csv);
      SPB_USAGE(text.substr(0, text.find('\n')) == kColumns, "--csv " + csv + ": the file has other columns");
      SPB_USAGE(text.back() == '\n', "--csv " + csv + ": its last line is not terminated");
    }
    std::ofstream f(csv, std::ios::app);
    SPB_USAGE(bool(f), "--csv " + csv + ": cannot open it to append");
    std::string all_rows = fresh ? std::string(kColumns) + "\n" : "";
    for (const auto& r : rows) all_rows += r + "\n";
    f << all_rows;
    f.flush();
    SPB_USAGE(bool(f), "--csv " + csv + ": the write failed");
  }
  return outside ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const spb::UsageError& e) {
    std::cerr << "gdn_check_npy: error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "gdn_check_npy: error: " << e.what() << "\n";
    return 2;
  }
}
