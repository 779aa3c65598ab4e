#include "report/src/cost_model.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>
#include <tuple>

#include "report/src/report_data.h"
#include "runtime/error.h"

namespace spb {

const std::vector<std::string>& model_patterns() {
  static const std::vector<std::string> p = {"allscan", "chain", "allgather", "ring", "alltoall"};
  return p;
}

const std::vector<std::string>& model_methods() {
  static const std::vector<std::string> m = {"dp", "zeco", "lasp2", "lasp1", "ring", "ulysses"};
  return m;
}

namespace {

bool crosses_network(int to_rank, const ModelParams& p) { return to_rank % p.gpus_per_node == 0; }

// The block actually sent and the number of blocks: 0 or a block >= the state means one block.
std::pair<double, double> blocks_of(double bytes, double block_bytes) {
  const double b = block_bytes <= 0 || block_bytes >= bytes ? bytes : block_bytes;
  return {b, std::max(1.0, std::round(bytes / b))};
}

double record_bytes(double bytes, int dv) { return bytes * (1.0 + 1.0 / dv); }

// The flow line of K equal blocks of b bytes through n_in hops over `in` and n_net over `net`: the first block's
// hops, then K-1 more blocks through the slowest hop used.
double pipe(int n_in, const Link& in, int n_net, const Link& net, double b, double K) {
  double worst = 0;
  if (n_in > 0) worst = in.hop(b);
  if (n_net > 0) worst = std::max(worst, net.hop(b));
  return n_in * in.hop(b) + n_net * net.hop(b) + (K - 1) * worst;
}

}  // namespace

std::optional<double> collective_time(const std::string& pattern, int P, double bytes, double block_bytes, int dv,
                                      const Link& intra, const ModelParams& p) {
  if (std::find(model_patterns().begin(), model_patterns().end(), pattern) == model_patterns().end())
    return std::nullopt;
  if (P <= 1) return 0.0;
  const Link& net = p.network;
  auto hop_link = [&](int h) -> const Link& { return crosses_network(h + 1, p) ? net : intra; };  // hop h -> h+1
  const bool multi_node = P > p.gpus_per_node;
  const Link& slowest_ring = multi_node ? net : intra;  // a ring over several nodes crosses the network
  if (pattern == "allscan" || pattern == "chain") {
    auto [b, K] = pattern == "chain" ? std::pair<double, double>{bytes, 1.0} : blocks_of(bytes, block_bytes);
    int n_net = 0;
    for (int h = 0; h + 1 < P; ++h) n_net += &hop_link(h) == &net;
    return pipe(P - 1 - n_net, intra, n_net, net, b, K);
  }
  if (pattern == "allgather") return (P - 1) * slowest_ring.hop(record_bytes(bytes, dv));
  if (pattern == "ring") return (P - 1) * slowest_ring.hop(bytes);
  // alltoall: the NVLink peers and the network peers are served at the same time
  const int in_node = std::min(P, p.gpus_per_node) - 1, off_node = P - 1 - in_node;
  const double part = bytes / P;
  const double t_in = in_node * intra.hop(part), t_off = off_node * net.hop(part);
  return std::max(t_in, t_off);
}

const std::vector<std::string>& allscan_variants() {
  static const std::vector<std::string> v = {"host", "host-hier", "host-logdepth"};
  return v;
}

std::optional<double> allscan_variant_time(const std::string& variant, int P, double bytes, double block_bytes,
                                           int dv, const Link& intra, const ModelParams& p) {
  if (std::find(allscan_variants().begin(), allscan_variants().end(), variant) == allscan_variants().end())
    return std::nullopt;
  const int R = p.gpus_per_node;
  if (variant == "host" || P <= R) return collective_time("allscan", P, bytes, block_bytes, dv, intra, p);
  if (P % R != 0) return std::nullopt;
  const int N = P / R;
  const auto [b, K] = blocks_of(bytes, block_bytes);
  const double d = bytes / dv;
  const double hand_on = R > 1 ? intra.hop(d) + intra.hop(bytes) : 0.0;  // the decay row ahead, the prefix after
  if (variant == "host-hier") return pipe(R - 1, intra, N - 1, p.network, b, K) + hand_on;
  const int steps = int(std::ceil(std::log2(double(N))));
  return pipe(R - 1, intra, 0, p.network, b, K) + steps * p.network.hop(bytes + d) + hand_on;
}

std::string fastest_of(const std::map<std::string, double>& times, const std::vector<std::string>& names) {
  std::string best;
  double t_best = INFINITY;
  for (const auto& n : names) {
    auto it = times.find(n);
    if (it == times.end() || !std::isfinite(it->second)) continue;
    if (best.empty() || it->second < t_best * (1 - 1e-9)) best = n, t_best = it->second;
  }
  return best;
}

std::optional<int> wins_from(const std::map<int, std::map<std::string, double>>& times,
                             const std::vector<std::string>& names, const std::string& name) {
  std::optional<int> from;
  for (auto it = times.rbegin(); it != times.rend() && fastest_of(it->second, names) == name; ++it) from = it->first;
  return from;
}

LinkConstants read_link_constants(const std::string& path) {
  const std::string where = "--constants " + path + ": ";
  std::ifstream in(path);
  SPB_USAGE(bool(in), where + "cannot be read");
  std::map<std::string, double> v;
  const std::set<std::string> keys = {"intra_alpha_us", "intra_gbps", "net_alpha_us", "net_gbps"};
  std::string line;
  for (int no = 1; std::getline(in, line); ++no) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) line.pop_back();
    const size_t start = line.find_first_not_of(" \t");
    if (start == std::string::npos || line[start] == '#') continue;
    line = line.substr(start);
    const size_t comma = line.find(',');
    const std::string at = where + "line " + std::to_string(no) + ": ";
    SPB_USAGE(comma != std::string::npos, at + "'" + line + "' is not key,value");
    std::string key = line.substr(0, comma), val = line.substr(comma + 1);
    while (!key.empty() && key.back() == ' ') key.pop_back();
    val.erase(0, std::min(val.size(), val.find_first_not_of(' ')));
    if (no == 1 && key == "key" && val == "value") continue;
    SPB_USAGE(keys.count(key), at + "unknown key '" + key + "' (keys: intra_alpha_us, intra_gbps, net_alpha_us, net_gbps)");
    SPB_USAGE(!v.count(key), at + key + " given twice");
    char* end = nullptr;
    const double x = std::strtod(val.c_str(), &end);
    SPB_USAGE(!val.empty() && end && *end == '\0' && std::isfinite(x), at + key + " = '" + val + "' is not a number");
    const bool alpha = key.find("alpha") != std::string::npos;
    SPB_USAGE(alpha ? x >= 0 : x > 0, at + key + " = " + val + (alpha ? " is negative" : " is not > 0"));
    v[key] = x;
  }
  LinkConstants c;
  for (const char* kind : {"intra", "net"}) {
    const std::string a = std::string(kind) + "_alpha_us", g = std::string(kind) + "_gbps";
    SPB_USAGE(v.count(a) == v.count(g), where + "gives " + (v.count(a) ? a : g) + " without " + (v.count(a) ? g : a));
    if (!v.count(a)) continue;
    (std::string(kind) == "intra" ? c.intra : c.network) = Link{v[a] * 1e-6, v[g] * 1e9 / 8};
  }
  SPB_USAGE(c.intra || c.network, where + "no constants (keys: intra_alpha_us, intra_gbps, net_alpha_us, net_gbps)");
  return c;
}

LinkFit fit_network_link(const std::vector<CollectivePoint>& points) {
  ModelParams one_kind;  // every hop is the link fitted: no node boundary to leave points out at
  one_kind.gpus_per_node = INT_MAX;
  return fit_link(points, one_kind);
}

double allreduce_time(int P, double bytes, const Link& intra, const ModelParams& p) {
  if (P <= 1) return 0.0;
  const Link& slowest_ring = P > p.gpus_per_node ? p.network : intra;
  return 2.0 * (P - 1) * slowest_ring.hop(bytes / P);
}

std::optional<std::pair<double, double>> collective_features(const std::string& pattern, int P, double bytes,
                                                             double block_bytes, int dv) {
  if (std::find(model_patterns().begin(), model_patterns().end(), pattern) == model_patterns().end())
    return std::nullopt;
  if (P <= 1) return std::pair<double, double>{0, 0};
  if (pattern == "allscan") {
    auto [b, K] = blocks_of(bytes, block_bytes);
    const double hops = P - 1 + K - 1;
    return std::pair<double, double>{hops, hops * b};
  }
  if (pattern == "chain") return std::pair<double, double>{double(P - 1), (P - 1) * bytes};
  if (pattern == "allgather") return std::pair<double, double>{double(P - 1), (P - 1) * record_bytes(bytes, dv)};
  if (pattern == "ring") return std::pair<double, double>{double(P - 1), (P - 1) * bytes};
  return std::pair<double, double>{double(P - 1), double(P - 1) / P * bytes};  // alltoall
}

LinkFit fit_link(const std::vector<CollectivePoint>& points, const ModelParams& p) {
  // Relative error: each equation a alpha + c g = T is divided by T, so small and large sizes weigh the same.
  std::vector<std::pair<double, double>> xy;  // (a/T, c/T)
  for (const auto& pt : points) {
    if (pt.world <= 1 || pt.world > p.gpus_per_node || !(pt.time_s > 0)) continue;
    auto f = collective_features(pt.pattern, pt.world, pt.bytes, pt.block_bytes, pt.dv);
    if (!f) continue;
    xy.push_back({f->first / pt.time_s, f->second / pt.time_s});
  }
  LinkFit fit;
  fit.points = int(xy.size());
  if (xy.size() < 2) return fit;
  // Columns scaled to unit norm: alpha (~1e-6 s) and 1/beta (~1e-11 s/B) differ by orders of magnitude.
  double nx = 0, ny = 0;
  for (auto [x, y] : xy) nx += x * x, ny += y * y;
  nx = std::sqrt(nx), ny = std::sqrt(ny);
  if (!(nx > 0) || !(ny > 0)) return fit;
  double sxx = 0, sxy = 0, syy = 0, sx = 0, sy = 0;
  for (auto [x, y] : xy) {
    x /= nx, y /= ny;
    sxx += x * x, sxy += x * y, syy += y * y, sx += x, sy += y;
  }
  auto residual = [&](double a, double g) {  // in unscaled units
    double r = 0;
    for (auto [x, y] : xy) r += (a * x + g * y - 1) * (a * x + g * y - 1);
    return r;
  };
  const double det = sxx * syy - sxy * sxy;
  double a = -1, g = -1;
  if (det > 1e-12) {
    a = (sx * syy - sy * sxy) / det / nx;
    g = (sy * sxx - sx * sxy) / det / ny;
  }
  if (!(a >= 0 && g >= 0)) {
    // On the boundary: the better of latency only and bandwidth only.
    const double a_only = sx / sxx / nx, g_only = sy / syy / ny;
    if (det <= 1e-12) return fit;  // features not independent: alpha and beta cannot be told apart
    if (residual(a_only, 0) <= residual(0, g_only)) a = a_only, g = 0;
    else a = 0, g = g_only;
  }
  fit.link.alpha_s = a;
  fit.link.beta_Bps = g > 0 ? 1.0 / g : INFINITY;
  fit.rms_rel_residual = std::sqrt(residual(a, g) / double(xy.size()));
  fit.ok = true;
  return fit;
}

LinkFit fit_link_alpha(const std::vector<CollectivePoint>& points, const ModelParams& p, double beta_Bps) {
  LinkFit fit;
  double sxx = 0, sx = 0;  // minimise sum (x alpha - (1 - y g))^2 with x = a/T, y = c/T
  std::vector<std::pair<double, double>> xy;
  const double g = 1.0 / beta_Bps;
  for (const auto& pt : points) {
    if (pt.world <= 1 || pt.world > p.gpus_per_node || !(pt.time_s > 0)) continue;
    auto f = collective_features(pt.pattern, pt.world, pt.bytes, pt.block_bytes, pt.dv);
    if (!f) continue;
    const double x = f->first / pt.time_s, y = f->second / pt.time_s;
    xy.push_back({x, y});
    sxx += x * x, sx += x * (1 - y * g);
  }
  fit.points = int(xy.size());
  if (xy.empty() || !(sxx > 0) || !(beta_Bps > 0)) return fit;
  const double a = std::max(0.0, sx / sxx);
  double r = 0;
  for (auto [x, y] : xy) r += (a * x + g * y - 1) * (a * x + g * y - 1);
  fit.link = {a, beta_Bps};
  fit.rms_rel_residual = std::sqrt(r / double(xy.size()));
  fit.ok = true;
  return fit;
}

KernelFit fit_kernel(const std::vector<std::pair<double, double>>& pts) {
  KernelFit k;
  std::vector<std::pair<double, double>> use;
  for (auto [L, t] : pts)
    if (L > 0 && t > 0) use.push_back({L, t});
  k.points = int(use.size());
  if (use.empty()) return k;
  // Relative least squares of t = t0 + s L: rows (1/t, L/t) -> 1.
  double s00 = 0, s01 = 0, s11 = 0, b0 = 0, b1 = 0;
  for (auto [L, t] : use) {
    const double x0 = 1 / t, x1 = L / t;
    s00 += x0 * x0, s01 += x0 * x1, s11 += x1 * x1, b0 += x0, b1 += x1;
  }
  const double det = s00 * s11 - s01 * s01;
  double t0 = -1, s = -1;
  if (det > 1e-12 * s00 * s11) {
    t0 = (b0 * s11 - b1 * s01) / det;
    s = (b1 * s00 - b0 * s01) / det;
  }
  if (!(t0 >= 0 && s > 0)) t0 = 0, s = b1 / s11;  // one length measured, or an intercept below zero
  k.t0_s = t0, k.per_token_s = s, k.ok = true;
  return k;
}

const Link* CostModel::link_for(const std::string& pattern) const {
  auto it = links.find(pattern);
  return it != links.end() && it->second.ok ? &it->second.link : nullptr;
}

std::optional<double> CostModel::collective(const std::string& pattern, int world, double bytes, double block_bytes,
                                            int dv) const {
  if (world <= 1) return 0.0;
  const Link* l = link_for(pattern);
  if (!l) return std::nullopt;
  return collective_time(pattern, world, bytes, block_bytes, dv, *l, params);
}

std::optional<double> CostModel::operator_time(const std::string& method, const OperatorShape& s) const {
  if (!fwd_bwd.ok) return std::nullopt;
  const double L = double(s.tokens_per_rank), P = s.world;
  const double t_dp0 = fwd_bwd.at(L);
  const double t_fwd = std::min(t_dp0, fwd.ok ? fwd.at(L) : t_dp0 / 3), t_bwd = t_dp0 - t_fwd;
  const double S = s.state_bytes();
  if (method == "dp") return t_dp0;
  auto ov = local_overhead.find(method);
  const double t_dp = t_dp0 * (1 + (ov == local_overhead.end() ? 0.0 : ov->second));  // the method's local compute
  if (s.world <= 1 && method != "ulysses") return t_dp;
  if (method == "lasp1") {
    auto chain = collective("chain", s.world, S, 0, s.dv);
    if (!chain) return std::nullopt;
    return P * t_dp + 2 * *chain;
  }
  if (method == "zeco" || method == "lasp2") {
    std::optional<double> comm = method == "zeco" ? collective("allscan", s.world, S, s.block_bytes, s.dv)
                                                  : collective("allgather", s.world, S, 0, s.dv);
    if (!comm) return std::nullopt;
    if (method == "lasp2") *comm += P * S / params.fold_Bps;
    const double ov = params.overlap_fraction;
    return t_dp + std::max(0.0, *comm - ov * t_fwd) + std::max(0.0, *comm - ov * t_bwd);
  }
  if (method == "ring") {
    const double step_bytes = L * s.batch * s.heads * (2.0 * s.dk + s.dv) * s.act_bytes;
    auto all_steps = collective("ring", s.world, step_bytes, 0, s.dv);
    if (!all_steps) return std::nullopt;
    const double step = *all_steps / (P - 1), sig = params.ring_step_fraction;
    return t_dp + (P - 1) * (std::max(step, sig * t_fwd) + std::max(step, sig * t_bwd));
  }
  if (method == "ulysses") {
    if (s.heads % s.world != 0) return std::nullopt;
    if (s.world <= 1) return t_dp;
    const double per_elem = L * s.batch * s.heads * s.act_bytes;
    const double qkvg = per_elem * (3.0 * s.dk + s.dv), o = per_elem * s.dv;
    double comm = 0;
    for (double bytes : {qkvg, o, o, qkvg}) {  // forward: q,k,v,g in, o out; backward: do in, dq,dk,dv,dg out
      auto t = collective("alltoall", s.world, bytes, 0, s.dv);
      if (!t) return std::nullopt;
      comm += *t;
    }
    return t_dp + comm;
  }
  return std::nullopt;
}

std::optional<double> CostModel::allreduce(int world, double bytes) const {
  if (world <= 1) return 0.0;
  const Link* l = link_for("allgather");
  if (!l) l = link_for("ring");
  if (!l) return std::nullopt;
  return allreduce_time(world, bytes, *l, params);
}

std::optional<double> CostModel::model_step_time(const std::string& method, const OperatorShape& layer, int layers,
                                                 double grad_bytes, double compute_s, bool grad_overlap) const {
  const auto t = operator_time(method, layer), t_dp = operator_time("dp", layer);
  const auto ar = allreduce(layer.world, grad_bytes);
  if (!t || !t_dp || !ar) return std::nullopt;
  return compute_s + layers * (*t - *t_dp) + exposed_allreduce(*ar, layers, compute_s, grad_overlap);
}

double CostModel::exposed_allreduce(double ar_s, int layers, double compute_s, bool grad_overlap) {
  if (!grad_overlap || ar_s <= 0) return ar_s;
  return std::max(ar_s / std::max(layers, 1), ar_s - 2.0 / 3.0 * compute_s);
}

// --- the hold-out by world size ----------------------------------------------------------------------------------------

std::vector<HoldOutError> summarize_holdout(const std::vector<HeldOutPoint>& points) {
  std::vector<HoldOutError> out;
  std::vector<std::vector<double>> errs;
  for (const HeldOutPoint& p : points) {
    const std::string backend = p.level == "collective" ? p.backend : "";
    size_t i = 0;
    while (i < out.size() && !(out[i].level == p.level && out[i].method == p.method && out[i].backend == backend)) ++i;
    if (i == out.size()) {
      out.push_back({p.level, p.method, backend});
      errs.emplace_back();
    }
    HoldOutError& e = out[i];
    if (std::find(e.worlds.begin(), e.worlds.end(), p.world) == e.worlds.end()) e.worlds.push_back(p.world);
    if (p.predicted() && p.measured_s > 0) errs[i].push_back(std::fabs(p.rel_error()));
    else e.unpredicted += 1;
  }
  for (size_t i = 0; i < out.size(); ++i) {
    std::vector<double>& v = errs[i];
    std::sort(out[i].worlds.begin(), out[i].worlds.end());
    out[i].points = int(v.size());
    if (v.empty()) continue;
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    out[i].median_abs = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    out[i].max_abs = v.back();
  }
  return out;
}

const HoldOutError* HoldOut::error_of(const std::string& level, const std::string& method,
                                      const std::string& backend) const {
  std::string be = backend;
  if (level != "collective") be = "";
  else if (be.empty()) {
    auto it = link_backend.find(method);
    if (it == link_backend.end()) return nullptr;
    be = it->second;
  }
  for (const HoldOutError& e : errors)
    if (e.level == level && e.method == method && e.backend == be) return &e;
  return nullptr;
}

namespace {

std::string pct(double v) {
  char b[32];
  std::snprintf(b, sizeof b, v < 0.095 ? "%.1f%%" : "%.0f%%", 100 * v);
  return b;
}

std::string worlds_str(const std::vector<int>& w) {
  std::string s;
  for (int x : w) s += (s.empty() ? "" : ", ") + std::to_string(x);
  return s;
}

}  // namespace

const HeldOutPoint* HoldOut::point_at(const std::string& level, const std::string& method, double size,
                                      double block_bytes, const std::string& backend) const {
  const HoldOutError* e = error_of(level, method, backend);
  if (!e || !(size > 0)) return nullptr;
  const HeldOutPoint* best = nullptr;
  for (const HeldOutPoint& p : points) {
    if (p.level != level || p.method != method || !p.predicted()) continue;
    if (level == "collective" && (p.backend != e->backend || p.bytes != size)) continue;
    if (level != "collective" && double(p.tokens_per_rank) != size) continue;
    const double b = p.block_bytes <= 0 || p.block_bytes >= p.bytes ? p.bytes : p.block_bytes;
    const double want = block_bytes <= 0 || block_bytes >= size ? size : block_bytes;
    if (level == "collective" && method == "allscan" && b != want) continue;
    if (!best || std::fabs(p.rel_error()) > std::fabs(best->rel_error())) best = &p;  // the worst of several
  }
  return best;
}

std::string HoldOut::beside(const std::string& level, const std::string& method, double size, double block_bytes,
                            const std::string& backend) const {
  const HoldOutError* e = error_of(level, method, backend);
  if (!e || e->points == 0)
    return "no hold-out (nothing of " + method + " measured above P = " + std::to_string(fit_max_world) + ")";
  std::string s = "hold-out error up to " + pct(e->max_abs) + " at P = " + worlds_str(e->worlds) + " (" +
                  std::to_string(e->points) + (e->points == 1 ? " point" : " points");
  if (const HeldOutPoint* p = point_at(level, method, size, block_bytes, backend))
    s += std::string("; ") + (p->rel_error() < 0 ? "-" : "+") + pct(std::fabs(p->rel_error())) + " at this " +
         (level == "collective" ? "size" : "length");
  s += ")";
  if (e->exceeds()) s += ": exceeds " + pct(kHoldOutWarn) + ", not reliable";
  return s;
}

std::optional<HoldOut::AtLargest> HoldOut::at_largest(const std::string& level, const std::string& method,
                                                       const std::string& backend) const {
  const HoldOutError* e = error_of(level, method, backend);
  if (!e || e->points == 0) return std::nullopt;
  AtLargest a;
  for (const HeldOutPoint& p : points)
    if (p.level == level && p.method == method && p.predicted() && (level != "collective" || p.backend == e->backend))
      a.world = std::max(a.world, p.world);
  for (const HeldOutPoint& p : points) {
    if (p.level != level || p.method != method || !p.predicted() || p.world != a.world) continue;
    if (level == "collective" && p.backend != e->backend) continue;
    ++a.points;
    if (!(std::fabs(p.rel_error()) <= std::fabs(a.error))) a.error = p.rel_error();
  }
  return a;
}

std::string HoldOut::brief(const std::string& level, const std::string& method, const std::string& backend) const {
  const auto a = at_largest(level, method, backend);
  if (!a) return "no hold-out";
  std::string s = "hold-out at P = " + std::to_string(a->world) + " (largest measured): " +
                  (a->error < 0 ? "-" : "+") + pct(std::fabs(a->error));
  if (!a->held()) s += ": exceeds " + pct(kHoldOutWarn) + ", not reliable";
  return s;
}

HoldOut hold_out_by_world(const std::vector<Row>& rows, const std::string& gpu, const ModelParams& params,
                          int fit_max_world) {
  HoldOut h;
  h.machine = gpu, h.fit_max_world = fit_max_world;
  // The fit the report's predictions come from (fit_machine: one node, P <= fit_max_world), and the rows it never saw
  // (one node too: the network is not what this validates).
  const MachineFit f = fit_machine(rows, gpu, params, fit_max_world);
  std::vector<Row> held;
  for (const Row& r : rows)
    if (col(r, "gpu") == gpu && !(num(r, "nodes") > 1) && inum(r, "world_size") > fit_max_world) held.push_back(r);
  for (const std::string& pattern : model_patterns())
    if (const std::string be = f.backend_for(pattern); !be.empty()) h.link_backend[pattern] = be;

  // Collective: each held-out configuration with its own pattern's and backend's link.
  std::map<std::string, std::vector<Row>> by_backend;
  for (const Row& r : held)
    if (col(r, "level") == "collective") by_backend[col(r, "backend")].push_back(r);
  for (const auto& [backend, sub] : by_backend)
    for (const CollectivePoint& c : collective_points(sub, gpu)) {
      if (std::find(model_patterns().begin(), model_patterns().end(), c.pattern) == model_patterns().end()) continue;
      HeldOutPoint p;
      p.level = "collective", p.method = c.pattern, p.backend = backend, p.world = c.world;
      p.bytes = c.bytes, p.block_bytes = c.block_bytes, p.dv = c.dv, p.measured_s = c.time_s;
      p.git_sha = c.git_sha, p.code_state = c.code_state;
      const MachineFit::Pattern* pf = nullptr;
      for (const auto& x : f.patterns)
        if (x.pattern == c.pattern && x.backend == backend && x.fit.ok) pf = &x;
      if (!pf) p.why = "no " + c.pattern + " (" + backend + ") link fitted on P <= " + std::to_string(fit_max_world);
      else if (auto t = collective_time(c.pattern, c.world, c.bytes, c.block_bytes, c.dv, pf->fit.link, params))
        p.predicted_s = *t;
      else p.why = "no formula";
      h.points.push_back(p);
    }

  // Operator: each held-out forward+backward configuration of the default schedule.
  auto keep = [&](const Row& r) {
    return col(r, "level") == "operator" && col(r, "pass") == "fwd_bwd" && num(r, "time_ms_mean") > 0 &&
           default_order(r) &&
           std::find(model_methods().begin(), model_methods().end(), col(r, "method")) != model_methods().end();
  };
  auto key = [](const Row& r) {
    std::string k;
    for (const char* c : {"method", "backend", "world_size", "tokens_per_rank", "batch", "heads", "dk", "dv", "dtype",
                          "block_elems"})
      k += col(r, c) + "|";
    return k;
  };
  std::map<std::tuple<int, int, int, int, std::string, int>, CostModel> models;  // shape and P -> the small-P model
  for (const auto& [k, r] : newest_by(held, keep, key)) {
    HeldOutPoint p;
    p.level = "operator", p.method = col(*r, "method"), p.backend = col(*r, "backend");
    p.world = inum(*r, "world_size"), p.tokens_per_rank = lnum(*r, "tokens_per_rank");
    p.batch = inum(*r, "batch"), p.heads = inum(*r, "heads"), p.dk = inum(*r, "dk"), p.dv = inum(*r, "dv");
    p.dtype = col(*r, "dtype");
    p.block_bytes = num(*r, "block_elems") > 0 ? 4 * num(*r, "block_elems") : 0;
    p.measured_s = num(*r, "time_ms_mean") * 1e-3;
    p.git_sha = col(*r, "git_sha"), p.code_state = col(*r, kCodeStateCol);
    auto mk = std::make_tuple(p.batch, p.heads, p.dk, p.dv, p.dtype, p.world);
    auto it = models.find(mk);
    if (it == models.end())
      it = models.emplace(mk, f.model_for(p.batch, p.heads, p.dk, p.dv, p.dtype, p.world)).first;
    OperatorShape s;
    s.world = p.world, s.batch = p.batch, s.heads = p.heads, s.dk = p.dk, s.dv = p.dv;
    s.tokens_per_rank = p.tokens_per_rank, s.block_bytes = p.block_bytes, s.act_bytes = p.dtype == "fp32" ? 4 : 2;
    if (!it->second.fwd_bwd.ok) p.why = "no dp rows at this shape on P <= " + std::to_string(fit_max_world);
    else if (auto t = it->second.operator_time(p.method, s)) p.predicted_s = *t;
    else p.why = p.method == "ulysses" && p.heads % p.world ? "H not divisible by P" : "a pattern it needs was not fitted";
    h.points.push_back(p);
  }

  // Model: each held-out training-step configuration of the default schedule (as the model tables show it), on dp's
  // model rows of the same configuration and schedule that were fitted (the one at the same tokens per rank first,
  // then the fewest ranks, then the newest).
  auto model_step = [](const Row& r) {
    return col(r, "level") == "model" && (col(r, "pass").empty() || col(r, "pass") == "step") &&
           num(r, "time_ms_mean") > 0 && default_order(r);
  };
  auto model_key = [](const Row& r) {
    return col(r, "method") + "|" + col(r, "backend") + "|" + col(r, "world_size") + "|" + col(r, "tokens_per_rank") +
           "|" + col(r, "block_elems") + "|" + model_config_key(r);
  };
  std::vector<const Row*> fitted_dp;
  for (const auto& [k, r] : newest_by(f.rows, [&](const Row& r) { return model_step(r) && col(r, "method") == "dp"; },
                                      model_key))
    fitted_dp.push_back(r);
  auto is_model_method = [&](const Row& r) {
    return model_step(r) &&
           std::find(model_methods().begin(), model_methods().end(), col(r, "method")) != model_methods().end();
  };
  for (const auto& [k, r] : newest_by(held, is_model_method, model_key)) {
    HeldOutPoint p;
    p.level = "model", p.method = col(*r, "method"), p.backend = col(*r, "backend");
    p.world = inum(*r, "world_size"), p.tokens_per_rank = lnum(*r, "tokens_per_rank");
    p.batch = inum(*r, "batch"), p.heads = inum(*r, "heads"), p.dk = inum(*r, "dk"), p.dv = inum(*r, "dv");
    p.dtype = col(*r, "dtype"), p.config = model_config_str(*r);
    p.block_bytes = num(*r, "block_elems") > 0 ? 4 * num(*r, "block_elems") : 0;
    p.measured_s = num(*r, "time_ms_mean") * 1e-3;
    p.git_sha = col(*r, "git_sha"), p.code_state = col(*r, kCodeStateCol);
    std::vector<const Row*> dp;
    for (const Row* d : fitted_dp)
      if (model_config_key(*d) == model_config_key(*r)) dp.push_back(d);
    std::stable_sort(dp.begin(), dp.end(), [&](const Row* a, const Row* b) {
      auto order = [&](const Row* x) {
        return std::make_tuple(lnum(*x, "tokens_per_rank") != p.tokens_per_rank, lnum(*x, "world_size"));
      };
      return order(a) < order(b) || (order(a) == order(b) && col(*a, "date") > col(*b, "date"));
    });
    const ModelLevelFit mf = fit_model_level(f, dp, p.tokens_per_rank, p.block_bytes);
    const auto [t, why_not] = mf.step_s(p.method, p.world, lnum(*r, "grad_overlap") != 0);
    if (std::isfinite(t)) p.predicted_s = t;
    else p.why = why_not;
    h.points.push_back(p);
  }
  std::stable_sort(h.points.begin(), h.points.end(), [](const HeldOutPoint& a, const HeldOutPoint& b) {
    auto order = [](const HeldOutPoint& p) {
      const auto& names = p.level == "collective" ? model_patterns() : model_methods();
      return int(std::find(names.begin(), names.end(), p.method) - names.begin());
    };
    auto level = [](const HeldOutPoint& p) { return p.level == "collective" ? 0 : p.level == "operator" ? 1 : 2; };
    return std::make_tuple(level(a), order(a), a.backend, a.world, a.bytes, a.block_bytes, a.tokens_per_rank,
                           a.config) < std::make_tuple(level(b), order(b), b.backend, b.world, b.bytes, b.block_bytes,
                                                       b.tokens_per_rank, b.config);
  });
  h.errors = summarize_holdout(h.points);
  return h;
}

}  // namespace spb
