// The alpha-beta cost model (report/src/cost_model.h): every formula against a hand-computed value, the fit recovering a
// known alpha and beta exactly from synthetic times, the operator formulas (LASP-1 and LASP-2 as their schedules), a
// hold-out by size on real CPU-rank rows, and the hold-out by world size the report prints: fitted on P <= 2, it must
// predict P = 4 exactly where the rows follow the model (collective, operator and model level), change nothing when
// the rows of P = 4 are planted with absurd times, and on the real rows of the 4-GPU H200 machine (a committed copy of
// results/nvidia-h200-x4_{collective,operator}.csv) it must use nothing above P = 2 and say where it is off.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <string>

#include "report/src/cost_model.h"
#include "runtime/csv.h"
#include "runtime/error.h"
#include "report/src/report_data.h"

namespace spb {
namespace {

constexpr double kMiB = 1048576;
const Link kNvlink{2e-6, 100e9};

ModelParams one_node() {
  ModelParams p;
  p.gpus_per_node = 8;
  p.network = {5e-6, 50e9};
  return p;
}

double t(const std::string& pattern, int P, double bytes, double block, const Link& l, const ModelParams& p,
         int dv = 128) {
  auto v = collective_time(pattern, P, bytes, block, dv, l, p);
  EXPECT_TRUE(v.has_value()) << pattern;
  return v.value_or(NAN);
}

TEST(CostModel, FormulasInsideANode) {
  const ModelParams p = one_node();
  const double S = 2 * kMiB, b = 65536;  // the paper's setting: K = 32 blocks of 16384 fp32
  const double hop_b = 2e-6 + b / 100e9, hop_S = 2e-6 + S / 100e9;
  // All-Scan: the first block takes P-1 hops, the other K-1 follow one hop apart.
  EXPECT_DOUBLE_EQ(t("allscan", 4, S, b, kNvlink, p), (3 + 31) * hop_b);
  EXPECT_DOUBLE_EQ(t("allscan", 4, S, 0, kNvlink, p), 3 * hop_S);  // one block: the chain
  EXPECT_DOUBLE_EQ(t("chain", 4, S, b, kNvlink, p), 3 * hop_S);    // the chain ignores the block
  EXPECT_DOUBLE_EQ(t("allgather", 4, S, 0, kNvlink, p), 3 * (2e-6 + S * (1 + 1.0 / 128) / 100e9));
  EXPECT_DOUBLE_EQ(t("ring", 4, S, 0, kNvlink, p), 3 * hop_S);
  EXPECT_DOUBLE_EQ(t("alltoall", 4, S, 0, kNvlink, p), 3 * (2e-6 + S / 4 / 100e9));
  for (const auto& pat : model_patterns()) EXPECT_EQ(t(pat, 1, S, b, kNvlink, p), 0.0) << "one rank moves nothing";
  EXPECT_FALSE(collective_time("broadcast", 4, S, b, 128, kNvlink, p).has_value());
}

TEST(CostModel, FormulasAcrossNodes) {
  const ModelParams p = one_node();
  const Link net = p.network;
  const double S = 2 * kMiB, b = 65536, rec = S * (1 + 1.0 / 128);
  // 16 ranks on 2 nodes of 8: the hop 7 -> 8 crosses the network, and a ring closes through it.
  EXPECT_DOUBLE_EQ(t("allscan", 16, S, b, kNvlink, p), 14 * kNvlink.hop(b) + net.hop(b) + 31 * net.hop(b));
  EXPECT_DOUBLE_EQ(t("chain", 16, S, 0, kNvlink, p), 14 * kNvlink.hop(S) + net.hop(S));
  EXPECT_DOUBLE_EQ(t("allgather", 16, S, 0, kNvlink, p), 15 * net.hop(rec));
  EXPECT_DOUBLE_EQ(t("ring", 16, S, 0, kNvlink, p), 15 * net.hop(S));
  EXPECT_DOUBLE_EQ(t("alltoall", 16, S, 0, kNvlink, p), std::max(7 * kNvlink.hop(S / 16), 8 * net.hop(S / 16)));
  // 256 GPUs: All-Scan grows with P by one block per hop, the all-gather by one record per step.
  EXPECT_LT(t("allscan", 256, S, b, kNvlink, p), t("allgather", 256, S, 0, kNvlink, p) / 3);
}

TEST(CostModel, FeaturesAreTheFormulasOnOneLink) {
  const ModelParams p = one_node();
  for (const auto& pat : model_patterns())
    for (int P : {2, 3, 5, 8})
      for (double S : {65536.0, 2 * kMiB})
        for (double b : {0.0, 16384.0, 65536.0}) {
          auto f = collective_features(pat, P, S, b, 128);
          ASSERT_TRUE(f.has_value());
          EXPECT_NEAR(f->first * kNvlink.alpha_s + f->second / kNvlink.beta_Bps, t(pat, P, S, b, kNvlink, p),
                      1e-15)
              << pat << " P=" << P << " S=" << S << " b=" << b;
        }
}

// Times of every pattern from the model itself; the All-Scan at two block sizes (one would not separate alpha and
// beta: its hops would all carry the same block).
std::vector<CollectivePoint> synthetic(const Link& l, const ModelParams& p, std::vector<double> blocks = {16384, 65536}) {
  std::vector<CollectivePoint> pts;
  for (const auto& pat : model_patterns())
    for (int P : {2, 4, 8})
      for (double S = 65536; S <= 2 * kMiB; S *= 2)
        for (double b : pat == "allscan" ? blocks : std::vector<double>{0}) {
          CollectivePoint c{pat, P, S, b, 128, 0};
          c.time_s = t(pat, P, S, c.block_bytes, l, p);
          pts.push_back(c);
        }
  return pts;
}

TEST(CostModel, FitRecoversAKnownLinkExactly) {
  const ModelParams p = one_node();
  const Link truth{3.5e-6, 180e9};
  for (const auto& pat : model_patterns()) {
    std::vector<CollectivePoint> pts;
    for (auto& c : synthetic(truth, p))
      if (c.pattern == pat) pts.push_back(c);
    // Points on more ranks than a node cross the network: not used for the NVLink fit, whatever they say.
    pts.push_back({pat, 16, 2 * kMiB, 0, 128, 1.0});
    const LinkFit f = fit_link(pts, p);
    ASSERT_TRUE(f.ok) << pat;
    EXPECT_EQ(f.points, int(pts.size()) - 1) << pat;
    EXPECT_NEAR(f.link.alpha_s / truth.alpha_s, 1.0, 1e-9) << pat;
    EXPECT_NEAR(f.link.beta_Bps / truth.beta_Bps, 1.0, 1e-9) << pat;
    EXPECT_LT(f.rms_rel_residual, 1e-9) << pat;
  }
}

TEST(CostModel, FitKeepsAlphaAndBetaPhysical) {
  const ModelParams p = one_node();
  // Pure bandwidth (alpha = 0): the unconstrained optimum may round below zero; the fit stays at >= 0.
  const Link truth{0, 120e9};
  const LinkFit f = fit_link(synthetic(truth, p), p);
  ASSERT_TRUE(f.ok);
  EXPECT_GE(f.link.alpha_s, 0);
  EXPECT_LT(f.link.alpha_s, 1e-12);
  EXPECT_NEAR(f.link.beta_Bps / truth.beta_Bps, 1.0, 1e-9);
  // One point cannot separate alpha from beta.
  EXPECT_FALSE(fit_link({{"chain", 2, kMiB, 0, 128, 1e-4}}, p).ok);
  // Two points of the same features neither.
  EXPECT_FALSE(fit_link({{"chain", 2, kMiB, 0, 128, 1e-4}, {"chain", 2, kMiB, 0, 128, 1.1e-4}}, p).ok);
}

TEST(CostModel, AnAllScanAtOneBlockSizeNeedsBetaFromElsewhere) {
  const ModelParams p = one_node();
  const Link truth{1.5e-6, 160e9};
  std::vector<CollectivePoint> pts;
  for (auto& c : synthetic(truth, p, {65536}))
    if (c.pattern == "allscan") pts.push_back(c);
  EXPECT_FALSE(fit_link(pts, p).ok);  // every hop carries 64 KiB: only alpha + 64 KiB / beta is measured
  const LinkFit f = fit_link_alpha(pts, p, truth.beta_Bps);
  ASSERT_TRUE(f.ok);
  EXPECT_NEAR(f.link.alpha_s / truth.alpha_s, 1.0, 1e-9);
  EXPECT_EQ(f.link.beta_Bps, truth.beta_Bps);
}

TEST(CostModel, KernelFit) {
  const KernelFit k = fit_kernel({{1024, 0.2e-3 + 1024 * 3e-7}, {4096, 0.2e-3 + 4096 * 3e-7}, {16384, 0.2e-3 + 16384 * 3e-7}});
  ASSERT_TRUE(k.ok);
  EXPECT_NEAR(k.t0_s / 0.2e-3, 1.0, 1e-9);
  EXPECT_NEAR(k.per_token_s / 3e-7, 1.0, 1e-9);
  const KernelFit one = fit_kernel({{16384, 6.4e-3}, {16384, 6.6e-3}});  // one length: time per token, no intercept
  ASSERT_TRUE(one.ok);
  EXPECT_EQ(one.t0_s, 0);
  EXPECT_NEAR(one.at(16384), 6.5e-3, 0.02e-3);
  EXPECT_FALSE(fit_kernel({}).ok);
}

TEST(CostModel, OperatorFormulas) {
  CostModel m;
  m.params = one_node();
  m.params.overlap_fraction = 0;  // nothing hides: every collective is exposed
  for (const auto& pat : model_patterns()) {
    m.links[pat].ok = true;
    m.links[pat].link = kNvlink;
  }
  m.fwd_bwd = fit_kernel({{1000, 1e-3}, {2000, 2e-3}});
  m.fwd = fit_kernel({{1000, 0.25e-3}, {2000, 0.5e-3}});
  OperatorShape s;
  s.world = 4, s.batch = 1, s.heads = 16, s.dk = 128, s.dv = 128, s.tokens_per_rank = 16384;
  s.block_bytes = 65536, s.act_bytes = 2;
  const double dp = 16384e-6, S = 16.0 * 128 * 128 * 4;
  const ModelParams& p = m.params;
  EXPECT_NEAR(*m.operator_time("dp", s), dp, 1e-12);
  EXPECT_NEAR(*m.operator_time("lasp1", s), 4 * dp + 2 * t("chain", 4, S, 0, kNvlink, p), 1e-12);
  EXPECT_NEAR(*m.operator_time("zeco", s), dp + 2 * t("allscan", 4, S, 65536, kNvlink, p), 1e-12);
  EXPECT_NEAR(*m.operator_time("lasp2", s), dp + 2 * (t("allgather", 4, S, 0, kNvlink, p) + 4 * S / p.fold_Bps), 1e-12);
  const double step = kNvlink.hop(16384.0 * 16 * (2 * 128 + 128) * 2);
  const double tf = dp / 4, tb = dp - tf, sig = p.ring_step_fraction;
  EXPECT_NEAR(*m.operator_time("ring", s), dp + 3 * (std::max(step, sig * tf) + std::max(step, sig * tb)), 1e-12);
  const double qkvg = 16384.0 * 16 * (3 * 128 + 128) * 2, o = 16384.0 * 16 * 128 * 2;
  EXPECT_NEAR(*m.operator_time("ulysses", s),
              dp + 2 * t("alltoall", 4, qkvg, 0, kNvlink, p) + 2 * t("alltoall", 4, o, 0, kNvlink, p), 1e-12);
  // Overlap: with the whole pass available to hide it, zeco's small All-Scan costs nothing.
  m.params.overlap_fraction = 1;
  EXPECT_NEAR(*m.operator_time("zeco", s), dp, 1e-12);
  // A method's local overhead (its one-rank time over dp's) scales its compute, and only its own.
  m.local_overhead["zeco"] = 0.25;
  EXPECT_NEAR(*m.operator_time("zeco", s), 1.25 * dp, 1e-12);
  EXPECT_NEAR(*m.operator_time("dp", s), dp, 1e-12);
  m.local_overhead.clear();
  // Ulysses splits heads: H=16 over 32 ranks is impossible. An unknown method has no formula.
  s.world = 32;
  EXPECT_FALSE(m.operator_time("ulysses", s).has_value());
  EXPECT_FALSE(m.operator_time("attention", s).has_value());
  // Without the pattern it needs, no prediction.
  m.links.erase("chain");
  EXPECT_FALSE(m.operator_time("lasp1", s).has_value());
}

TEST(CostModel, ModelLevelFormulas) {
  const ModelParams p = one_node();
  const Link net = p.network;
  const double G = 4e9;  // the gradients of 1e9 fp32 parameters
  // Ring all-reduce: 2 (P-1) steps of G/P through the slowest link of the ring (the network once it spans nodes).
  EXPECT_DOUBLE_EQ(allreduce_time(1, G, kNvlink, p), 0.0);
  EXPECT_DOUBLE_EQ(allreduce_time(8, G, kNvlink, p), 2 * 7 * kNvlink.alpha_s + 2.0 * 7 / 8 * G / kNvlink.beta_Bps);
  EXPECT_DOUBLE_EQ(allreduce_time(16, G, kNvlink, p), 2 * 15 * net.hop(G / 16));

  CostModel m;
  m.params = p;
  m.params.overlap_fraction = 0;
  m.links["allscan"] = {kNvlink, 2, 0, true};
  m.links["ring"] = {Link{1e-6, 50e9}, 2, 0, true};
  m.fwd_bwd = fit_kernel({{1000, 1e-3}, {2000, 2e-3}});
  // The all-reduce runs over the all-gather's link where it was fitted, else over the ring pattern's.
  EXPECT_DOUBLE_EQ(*m.allreduce(8, G), allreduce_time(8, G, Link{1e-6, 50e9}, m.params));
  m.links["allgather"] = {kNvlink, 2, 0, true};
  EXPECT_DOUBLE_EQ(*m.allreduce(8, G), allreduce_time(8, G, kNvlink, m.params));
  // step = T_compute + layers x (the method's attention - dp's) + the all-reduce.
  OperatorShape s;
  s.world = 8, s.batch = 1, s.heads = 32, s.dk = 32, s.dv = 64, s.tokens_per_rank = 32768;
  s.block_bytes = 65536, s.act_bytes = 2;
  const double S = 4.0 * 32 * 32 * 64, ar = allreduce_time(8, G, kNvlink, m.params);
  EXPECT_NEAR(*m.model_step_time("dp", s, 20, G, 0.7), 0.7 + ar, 1e-12);
  EXPECT_NEAR(*m.model_step_time("zeco", s, 20, G, 0.7), 0.7 + 20 * 2 * t("allscan", 8, S, 65536, kNvlink, p) + ar,
              1e-12);
  EXPECT_FALSE(m.model_step_time("lasp1", s, 20, G, 0.7).has_value()) << "no chain fitted: no prediction";
  // One rank: no communication, dp's compute for every method.
  s.world = 1;
  EXPECT_NEAR(*m.model_step_time("zeco", s, 20, G, 0.7), 0.7, 1e-12);
  // Without the links it needs, no prediction.
  s.world = 8;
  m.links.erase("allgather"), m.links.erase("ring");
  EXPECT_FALSE(m.model_step_time("dp", s, 20, G, 0.7).has_value());
}

TEST(CostModel, KernelScaledToAnotherShape) {
  OperatorShape ref, layer;
  ref.heads = 16, ref.dk = 128, ref.dv = 128;
  layer.heads = 32, layer.dk = 32, layer.dv = 64;
  // 32 (4 32 64 + 64 96) / (16 (4 128 128 + 64 256)) = 458752 / 1310720
  EXPECT_DOUBLE_EQ(layer.work_per_token(64) / ref.work_per_token(64), 0.35);
  const KernelFit k = fit_kernel({{1000, 1.2e-3}, {2000, 2.2e-3}}).scaled(0.35);
  ASSERT_TRUE(k.ok);
  EXPECT_NEAR(k.at(4000), 0.35 * 4.2e-3, 1e-12);
}

// Hold-out on measured rows: the committed fixture is a real `spbench collective` run on CPU ranks (64 KiB to 2 MiB,
// All-Scan blocks of 4096, 16384 and 65536 elements, 5 warm-up and 50 timed calls). Each pattern is fitted on the
// 2-rank rows up to 512 KiB and must predict the 1 and 2 MiB rows, which it never saw: every point within 50% and the
// median within 25% (what shared-memory MPI on two cores gives: the fit's residual there is ~10%). The 4-rank rows
// of the fixture are left out: four ranks on a two-core machine time-share the cores, which no alpha-beta link
// describes (the report's CPU section shows those errors openly).
TEST(CostModel, HoldOutOnMeasuredRows) {
  const auto rows = read_csv(std::string(SPB_TEST_DATA_DIR) + "/cpu_collective_fixture.csv");
  ASSERT_FALSE(rows.empty());
  const auto pts = collective_points(rows, "cpu");
  const ModelParams p = one_node();
  int checked = 0;
  for (const auto& pat : model_patterns()) {
    std::vector<CollectivePoint> train, test;
    for (auto& c : pts)
      if (c.pattern == pat && c.world == 2) (c.bytes <= 512 * 1024 ? train : test).push_back(c);
    ASSERT_FALSE(train.empty()) << pat;
    ASSERT_FALSE(test.empty()) << pat;
    const LinkFit f = fit_link(train, p);
    ASSERT_TRUE(f.ok) << pat;
    std::vector<double> err;
    for (auto& c : test) {
      const double predicted = t(pat, c.world, c.bytes, c.block_bytes, f.link, p);
      err.push_back(std::fabs(predicted - c.time_s) / c.time_s);
      EXPECT_LE(err.back(), 0.5) << pat << " P=" << c.world << " bytes=" << c.bytes << " block=" << c.block_bytes
                                 << ": predicted " << predicted << " s, measured " << c.time_s << " s";
    }
    std::sort(err.begin(), err.end());
    EXPECT_LE(err[(err.size() - 1) / 2], 0.25) << pat << ": median hold-out error";
    ++checked;
  }
  EXPECT_EQ(checked, int(model_patterns().size()));
}


// --- the All-Scans across nodes, a user's constants, the network fit ---------------------------------------------------

TEST(CostModel, AllScanVariantsAcrossNodes) {
  const ModelParams p = one_node();  // 8 GPUs a node, network 5 us, 50 GB/s
  const Link in = kNvlink, net = p.network;
  const double S = 2 * kMiB, b = 65536, d = S / 128;  // K = 32 blocks; d the decay row
  auto v = [&](const char* variant, int P) {
    auto x = allscan_variant_time(variant, P, S, b, 128, in, p);
    EXPECT_TRUE(x.has_value()) << variant << " P=" << P;
    return x.value_or(NAN);
  };
  const double hand_on = in.hop(d) + in.hop(S);
  // 2 nodes: the chain crosses the network once in 15 hops; host-hier runs 7 NVLink hops and 1 network hop in one
  // flow line; host-logdepth the node's chain, then one exchange of a whole aggregate.
  EXPECT_DOUBLE_EQ(v("host", 16), 14 * in.hop(b) + net.hop(b) + 31 * net.hop(b));
  EXPECT_DOUBLE_EQ(v("host-hier", 16), 7 * in.hop(b) + net.hop(b) + 31 * net.hop(b) + hand_on);
  EXPECT_DOUBLE_EQ(v("host-logdepth", 16), (7 + 31) * in.hop(b) + net.hop(S + d) + hand_on);
  // 4 nodes: 3 network hops in a chain, 2 = log2 4 exchange steps.
  EXPECT_DOUBLE_EQ(v("host", 32), 28 * in.hop(b) + 3 * net.hop(b) + 31 * net.hop(b));
  EXPECT_DOUBLE_EQ(v("host-hier", 32), 7 * in.hop(b) + 3 * net.hop(b) + 31 * net.hop(b) + hand_on);
  EXPECT_DOUBLE_EQ(v("host-logdepth", 32), 38 * in.hop(b) + 2 * net.hop(S + d) + hand_on);
  EXPECT_DOUBLE_EQ(v("host-logdepth", 24), 38 * in.hop(b) + 2 * net.hop(S + d) + hand_on);  // ceil(log2 3) = 2
  // One node: all three are the chain. Nodes of unequal size, or an unknown variant: no answer.
  for (const char* variant : {"host", "host-hier", "host-logdepth"})
    EXPECT_DOUBLE_EQ(v(variant, 8), *collective_time("allscan", 8, S, b, 128, in, p)) << variant;
  EXPECT_FALSE(allscan_variant_time("host-hier", 20, S, b, 128, in, p).has_value());
  EXPECT_FALSE(allscan_variant_time("device-ll16", 16, S, b, 128, in, p).has_value());
  // One rank a node: no hand-on inside a node.
  ModelParams solo = p;
  solo.gpus_per_node = 1;
  EXPECT_DOUBLE_EQ(*allscan_variant_time("host-hier", 4, S, b, 128, in, solo), 3 * net.hop(b) + 31 * net.hop(b));
  EXPECT_DOUBLE_EQ(*allscan_variant_time("host-logdepth", 4, S, b, 128, in, solo), 2 * net.hop(S + d));
}

TEST(CostModel, Crossover) {
  const std::vector<std::string> names = {"host", "host-hier", "host-logdepth"};
  std::map<int, std::map<std::string, double>> t;
  t[8] = {{"host", 1}, {"host-hier", 1}, {"host-logdepth", 1}};  // a tie goes to the first listed
  t[16] = {{"host", 2}, {"host-hier", 1.5}, {"host-logdepth", 1.8}};
  t[32] = {{"host", 4}, {"host-hier", 2}, {"host-logdepth", 2.5}};
  t[64] = {{"host", 8}, {"host-hier", 3}, {"host-logdepth", 2.9}};
  t[128] = {{"host", 16}, {"host-hier", 5}, {"host-logdepth", 3.2}};
  EXPECT_EQ(fastest_of(t[8], names), "host");
  EXPECT_EQ(fastest_of(t[16], names), "host-hier");
  EXPECT_EQ(wins_from(t, names, "host-logdepth"), 64);
  EXPECT_FALSE(wins_from(t, names, "host-hier").has_value());  // wins at 16 and 32, not at the end
  EXPECT_FALSE(wins_from(t, names, "host").has_value());
  // The model at the report's default constants (NVLink as fitted in the ballpark, 400 Gb/s and 5 us between nodes):
  // the K - 1 network alphas of the pipelined chains cost more than log2 N whole states, so log-depth wins from 2 nodes.
  ModelParams p;
  std::map<int, std::map<std::string, double>> m;
  for (int P : {8, 16, 32, 64, 128, 256})
    for (const auto& v : names) m[P][v] = *allscan_variant_time(v, P, 2 * kMiB, 65536, 128, Link{0.2e-6, 367e9}, p);
  EXPECT_EQ(wins_from(m, names, "host-logdepth"), 16);
  // A slow network (sockets: 50 us, 10 Gb/s) turns it round from 4 nodes on: log2 N whole states over it outweigh the
  // alphas of N - 1 + K - 1 blocks.
  p.network = {50e-6, 10e9 / 8};
  for (int P : {8, 16, 32, 64, 128, 256})
    for (const auto& v : names) m[P][v] = *allscan_variant_time(v, P, 2 * kMiB, 65536, 128, Link{0.2e-6, 367e9}, p);
  EXPECT_EQ(fastest_of(m[16], names), "host-logdepth");
  EXPECT_EQ(wins_from(m, names, "host-hier"), 32);
}

std::string write_file(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path) << text;
  return path;
}

TEST(CostModel, ConstantsFile) {
  const auto k = read_link_constants(write_file(
      "constants.csv", "key,value\n# a cluster\nintra_alpha_us,2\nintra_gbps,7200\n\nnet_alpha_us, 3.5\nnet_gbps,400\n"));
  ASSERT_TRUE(k.intra && k.network);
  EXPECT_DOUBLE_EQ(k.intra->alpha_s, 2e-6);
  EXPECT_DOUBLE_EQ(k.intra->beta_Bps, 900e9);
  EXPECT_DOUBLE_EQ(k.network->alpha_s, 3.5e-6);
  EXPECT_DOUBLE_EQ(k.network->beta_Bps, 50e9);
  const auto net_only = read_link_constants(write_file("net.csv", "net_alpha_us,5\nnet_gbps,100\n"));
  EXPECT_FALSE(net_only.intra.has_value());
  EXPECT_TRUE(net_only.network.has_value());
  for (const char* bad : {"net_alpha_us,5\n",                       // half a pair
                          "net_alpha_us,5\nnet_gbps,fast\n",        // not a number
                          "net_alpha_us,-1\nnet_gbps,100\n",        // negative alpha
                          "net_alpha_us,5\nnet_gbps,0\n",           // no bandwidth
                          "net_alpha_us,5\nnet_gbps,100\nnet_gbps,200\n",  // twice
                          "wan_gbps,100\n",                         // unknown key
                          "net_alpha_us 5\n",                       // no comma
                          "# nothing\n"}) {
    try {
      read_link_constants(write_file("bad.csv", bad));
      ADD_FAILURE() << "accepted: " << bad;
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("--constants"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(read_link_constants(::testing::TempDir() + "/no_such_constants.csv"), UsageError);
}

// The network link from rows over several nodes of one rank each (a synthetic fixture: chain times of a known link,
// 20 us and 10 GB/s, plus a one-node row and a node-aware All-Scan row that must be left out).
TEST(CostModel, NetworkFitFromRowsOverSeveralNodes) {
  const auto rows = read_csv(std::string(SPB_TEST_DATA_DIR) + "/net_collective_fixture.csv");
  const auto pts = network_points(rows, "synthetic-net");
  EXPECT_EQ(pts.size(), 8u);
  const LinkFit f = fit_network_link(pts);
  ASSERT_TRUE(f.ok);
  EXPECT_NEAR(f.link.alpha_s, 20e-6, 1e-9);
  EXPECT_NEAR(f.link.beta_Bps, 10e9, 1e4);
  EXPECT_FALSE(fit_network_link({}).ok);  // no rows: the caller falls back to the flags or the default
  // The one-node fit leaves the rows over several nodes out.
  const MachineFit m = fit_machine(rows, "synthetic-net", ModelParams{});
  for (const auto& pf : m.patterns) EXPECT_LE(pf.fit.points, 1) << pf.pattern;
}


// --- LASP-1 and LASP-2 as their schedules ------------------------------------------------------------------------------

// LASP-1 (DESIGN §3, baselines/lasp1.cpp): a serial chain of P - 1 hops, each carrying one whole state, and a rank
// computes only after its predecessor's state arrived, so the ranks' computes add up: P x local + a chain per pass.
// LASP-2 (baselines/lasp2.cpp): each pass all-gathers P records (a state and its decay row) and folds them; nothing
// hides here (overlap 0). Both by hand, inside a node and across nodes.
TEST(CostModel, Lasp1AndLasp2AsTheirSchedules) {
  const Link in{3e-6, 150e9}, net{8e-6, 25e9};
  CostModel m;
  m.params.gpus_per_node = 8;
  m.params.network = net;
  m.params.overlap_fraction = 0;
  for (const auto& pat : model_patterns()) m.links[pat] = {in, 2, 0, true};
  m.fwd_bwd = fit_kernel({{1000, 1e-3}, {2000, 2e-3}});
  OperatorShape s;
  s.batch = 1, s.heads = 16, s.dk = 128, s.dv = 128, s.tokens_per_rank = 4000;
  const double T = 4e-3, S = 16.0 * 128 * 128 * 4, rec = S + S / 128;  // a record: the state and its decay row
  for (int P : {2, 3, 4, 8, 16, 32}) {
    s.world = P;
    const int net_hops = (P - 1) / 8;  // ranks in order, 8 a node: the hops 7 -> 8, 15 -> 16, ... cross the network
    const double chain = (P - 1 - net_hops) * (in.alpha_s + S / in.beta_Bps) + net_hops * (net.alpha_s + S / net.beta_Bps);
    EXPECT_NEAR(*collective_time("chain", P, S, 0, 128, in, m.params), chain, 1e-15) << "P=" << P;
    EXPECT_NEAR(*m.operator_time("lasp1", s), P * T + 2 * chain, 1e-12) << "P=" << P;
    const Link& ring = P > 8 ? net : in;  // a ring over several nodes crosses the network
    const double gather = (P - 1) * (ring.alpha_s + rec / ring.beta_Bps);
    EXPECT_NEAR(*collective_time("allgather", P, S, 0, 128, in, m.params), gather, 1e-15) << "P=" << P;
    EXPECT_NEAR(*m.operator_time("lasp2", s), T + 2 * (gather + P * S / m.params.fold_Bps), 1e-12) << "P=" << P;
  }
}

// --- the hold-out by world size ----------------------------------------------------------------------------------------

Row row(std::initializer_list<std::pair<const std::string, std::string>> kv) { return Row(kv); }
std::string str(double v) {
  char b[64];
  std::snprintf(b, sizeof b, "%.17g", v);
  return b;
}

// A machine whose every time follows the model (written out here by hand, not through cost_model.cpp): one link,
// alpha 3 us and beta 150 GB/s, and a dp kernel of 0.1 ms + 100 ns per token (a quarter of it forward). Rows at
// P = 1, 2 and 4; a row over two nodes and a row of another machine that must be left out. The model level: a model of
// 2 layers whose attention is the operator rows' shape, 1e6 parameters (4e6 bytes of gradients all-reduced over the
// all-gather's link), and everything token-local taking T_compute = 20 ms + 1 us per token; its training steps at
// 4096 and 16384 tokens per rank on 1, 2 and 4 ranks, and at 8192 on 4 ranks only (no dp row at 8192 on P <= 2: the
// model level's T_compute comes from the line through dp's steps at the other lengths).
// The model level's step on that machine, by hand (overlap 0, no local overhead): T_compute + 2 layers x the
// attention's time over dp's + the ring all-reduce of 4e6 bytes of gradients, 2 (P-1) hops of 4e6 / P bytes.
double synthetic_step(const std::string& method, int P, long long L, double alpha, double beta) {
  auto hop = [&](double bytes) { return alpha + bytes / beta; };
  const double T = 0.1e-3 + 1e-7 * L, S = 16.0 * 128 * 128 * 4, b = 65536;
  double excess = 0;  // the method's attention over dp's
  if (method == "lasp1") excess = (P - 1) * T + 2 * (P - 1) * hop(S);
  if (method == "lasp2") excess = 2 * ((P - 1) * hop(S * (1 + 1.0 / 128)) + P * S / 2e12);
  if (method == "zeco") excess = P == 1 ? 0 : 2 * (P - 1 + S / b - 1) * hop(b);
  // The default schedule: at P > 1 the gradients are summed beside the backward, so only the all-reduce's tail is
  // in the step (CostModel::exposed_allreduce, 2 layers).
  const double compute = 20e-3 + 1e-6 * L, ar = 2 * (P - 1) * hop(4e6 / P);
  return compute + 2 * excess + CostModel::exposed_allreduce(ar, 2, compute, P > 1);
}

std::vector<Row> synthetic_machine(const std::string& gpu, double alpha, double beta) {
  std::vector<Row> rows;
  auto hop = [&](double bytes) { return alpha + bytes / beta; };
  auto collective = [&](const std::string& pattern, const std::string& backend, int P, double bytes, double block,
                        double seconds, const std::string& nodes = "1") {
    rows.push_back(row({{"level", "collective"}, {"method", pattern}, {"backend", backend}, {"world_size", str(P)},
                        {"heads", "16"}, {"dk", "128"}, {"dv", "128"}, {"bytes", str(bytes)},
                        {"block_elems", str(block / 4)}, {"pass", "comm"}, {"time_ms_mean", str(seconds * 1e3)},
                        {"gpu", gpu}, {"date", "2026-01-01"}, {"nodes", nodes}}));
  };
  for (int P : {2, 4})
    for (double S = 262144; S <= 4194304; S *= 4) {
      collective("chain", "nccl", P, S, 0, (P - 1) * hop(S));
      collective("allgather", "nccl", P, S, 0, (P - 1) * hop(S * (1 + 1.0 / 128)));
      collective("ring", "nccl", P, S, 0, (P - 1) * hop(S));
      collective("alltoall", "nccl", P, S, 0, (P - 1) * hop(S / P));
      for (double b : {16384.0, 65536.0}) collective("allscan", "device-ll16", P, S, b, (P - 1 + S / b - 1) * hop(b));
    }
  collective("chain", "nccl", 4, 1048576, 0, 1.0, "2");  // over two nodes: the network, not validated here
  const double t0 = 0.1e-3, per_token = 1e-7, S = 16.0 * 128 * 128 * 4, b = 65536;
  auto op = [&](const std::string& method, const std::string& backend, int P, long long L, const char* pass,
                double seconds) {
    rows.push_back(row({{"level", "operator"}, {"method", method}, {"backend", backend}, {"world_size", str(P)},
                        {"batch", "1"}, {"heads", "16"}, {"dk", "128"}, {"dv", "128"},
                        {"tokens_per_rank", std::to_string(L)}, {"block_elems", method == "zeco" ? "16384" : "0"},
                        {"dtype", "bf16"}, {"pass", pass}, {"time_ms_mean", str(seconds * 1e3)}, {"gpu", gpu},
                        {"date", "2026-01-01"}, {"overlap", "0"}, {"head_groups", "1"}}));
  };
  for (int P : {1, 2, 4})
    for (long long L : {4096, 16384}) {
      const double T = t0 + per_token * L;
      op("dp", "nccl", P, L, "fwd", T / 4);
      op("dp", "nccl", P, L, "fwd_bwd", T);
      // One rank: no communication (and no local overhead over dp). More: overlap 0 in the test's parameters, so
      // every collective is exposed, once per pass.
      op("lasp1", "nccl", P, L, "fwd_bwd", P == 1 ? T : P * T + 2 * (P - 1) * hop(S));
      op("lasp2", "nccl", P, L, "fwd_bwd", P == 1 ? T : T + 2 * ((P - 1) * hop(S * (1 + 1.0 / 128)) + P * S / 2e12));
      op("zeco", "device-ll16", P, L, "fwd_bwd", P == 1 ? T : T + 2 * (P - 1 + S / b - 1) * hop(b));
    }
  auto model = [&](const std::string& method, const std::string& backend, int P, long long L) {
    rows.push_back(row({{"level", "model"}, {"method", method}, {"backend", backend}, {"world_size", str(P)},
                        {"batch", "1"}, {"heads", "16"}, {"dk", "128"}, {"dv", "128"},
                        {"tokens_per_rank", std::to_string(L)}, {"block_elems", method == "zeco" ? "16384" : "0"},
                        {"dtype", "bf16"}, {"pass", "step"}, {"time_ms_mean", str(synthetic_step(method, P, L, alpha,
                                                                                               beta) * 1e3)},
                        {"gpu", gpu}, {"date", "2026-01-01"}, {"chunk", "64"}, {"layers", "2"}, {"hidden", "256"},
                        {"vocab", "1000"}, {"expand_k", "0.5"}, {"expand_v", "1"}, {"mlp", "512"},
                        {"recompute", "none"}, {"params", "1000000"}, {"grad_overlap", P > 1 ? "1" : "0"}}));
  };  // the default schedule: on GPUs at P > 1 the gradients summed beside the backward
  for (int P : {1, 2, 4})
    for (long long L : {4096, 16384}) {
      model("dp", "nccl", P, L);
      model("lasp1", "nccl", P, L);
      model("lasp2", "nccl", P, L);
      model("zeco", "device-ll16", P, L);
    }
  model("dp", "nccl", 4, 8192);
  model("zeco", "device-ll16", 4, 8192);
  return rows;
}

ModelParams holdout_params() {
  ModelParams p;
  p.overlap_fraction = 0;
  p.fold_Bps = 2e12;
  return p;
}

TEST(CostModel, HoldOutByWorldPredictsAModelMachineExactly) {
  std::vector<Row> rows = synthetic_machine("model-gpu", 3e-6, 150e9);
  for (const Row& r : synthetic_machine("other-gpu", 9e-6, 20e9)) rows.push_back(r);  // another machine
  // Newer rows of another schedule (--no-grad-overlap), at a time the formula does not give: the hold-out takes each
  // configuration's row of the default schedule, as the report's model tables do.
  for (const Row& r : synthetic_machine("model-gpu", 3e-6, 150e9))
    if (col(r, "level") == "model" && inum(r, "world_size") > 1 && col(r, "method") == "dp") {
      Row other = r;
      other["grad_overlap"] = "0", other["date"] = "2026-02-01";
      other["time_ms_mean"] = str(num(r, "time_ms_mean") * 1.5);
      rows.push_back(other);
    }
  const HoldOut h = hold_out_by_world(rows, "model-gpu", holdout_params());
  EXPECT_EQ(h.machine, "model-gpu");
  EXPECT_EQ(h.fit_max_world, 2);
  // Every P = 4 configuration of the machine and nothing else: 3 sizes x (4 patterns + 2 All-Scan blocks); 2 lengths
  // x 4 methods (dp, lasp1, lasp2, zeco) at the operator level; the same and dp and zeco at 8192 tokens at the model
  // level.
  std::map<std::string, int> count;
  for (const HeldOutPoint& p : h.points) {
    EXPECT_EQ(p.world, 4) << p.level << " " << p.method;
    ASSERT_TRUE(p.predicted()) << p.level << " " << p.method << ": " << p.why;
    EXPECT_NEAR(p.rel_error(), 0.0, 1e-9) << p.level << " " << p.method << " " << p.backend << " bytes=" << p.bytes
                                          << " block=" << p.block_bytes << " L=" << p.tokens_per_rank;
    count[p.level] += 1;
  }
  EXPECT_EQ(count["collective"], 18);
  EXPECT_EQ(count["operator"], 8);
  EXPECT_EQ(count["model"], 10);
  for (const HoldOutError& e : h.errors) {
    EXPECT_GT(e.points, 0) << e.method;
    EXPECT_EQ(e.unpredicted, 0) << e.method;
    EXPECT_LT(e.max_abs, 1e-9) << e.level << " " << e.method;
    EXPECT_FALSE(e.exceeds());
    EXPECT_EQ(e.worlds, std::vector<int>{4});
  }
  EXPECT_EQ(h.link_backend.at("allscan"), "device-ll16");
  EXPECT_EQ(h.link_backend.at("chain"), "nccl");
  for (const char* m : {"dp", "lasp1", "lasp2", "zeco"}) ASSERT_NE(h.error_of("operator", m), nullptr) << m;
  for (const char* m : {"dp", "lasp1", "lasp2", "zeco"}) ASSERT_NE(h.error_of("model", m), nullptr) << m;
  EXPECT_EQ(h.error_of("operator", "ring"), nullptr);  // not measured
  EXPECT_EQ(h.beside("operator", "ring"), "no hold-out (nothing of ring measured above P = 2)");
  // Fitted on P <= 4, there would be nothing left to hold out.
  EXPECT_TRUE(hold_out_by_world(rows, "model-gpu", holdout_params(), 4).points.empty());
}

// The fit never sees a row above P = 2: rows of P = 4 planted with absurd times (a thousand times the true ones) change
// neither the fit the report's predictions come from (fit_machine: its links and dp kernel; fit_model_level) nor any
// held-out prediction, at any level; only the measured side moves, and with it every error, which the hold-out then
// flags. And the report's predictions are the hold-out's own: the model fit_machine gives predicts each held-out
// configuration exactly as the hold-out did.
TEST(CostModel, HoldOutIgnoresPlantedRowsAboveTwoRanks) {
  const std::vector<Row> rows = synthetic_machine("model-gpu", 3e-6, 150e9);
  std::vector<Row> planted = rows;
  int n = 0;
  for (Row& r : planted)
    if (inum(r, "world_size") > 2) r["time_ms_mean"] = str(num(r, "time_ms_mean") * 1000), ++n;
  ASSERT_EQ(n, 18 + 1 + 10 + 10);  // collective (and the row over two nodes), operator (dp's fwd too), model
  const ModelParams params = holdout_params();
  const HoldOut a = hold_out_by_world(rows, "model-gpu", params), b = hold_out_by_world(planted, "model-gpu", params);
  ASSERT_EQ(a.points.size(), 36u);
  ASSERT_EQ(a.points.size(), b.points.size());
  for (size_t i = 0; i < a.points.size(); ++i) {
    const HeldOutPoint &x = a.points[i], &y = b.points[i];
    ASSERT_EQ(x.level + x.method + x.backend, y.level + y.method + y.backend);
    ASSERT_TRUE(x.predicted() && y.predicted()) << x.level << " " << x.method;
    EXPECT_EQ(x.predicted_s, y.predicted_s) << x.level << " " << x.method << " L=" << x.tokens_per_rank;
    EXPECT_NEAR(y.measured_s / x.measured_s, 1000, 1e-9) << x.level << " " << x.method;
  }
  for (const HoldOutError& e : b.errors) EXPECT_TRUE(e.exceeds()) << e.level << " " << e.method;
  EXPECT_EQ(b.brief("model", "zeco"), "hold-out at P = 4 (largest measured): -100%: exceeds 30%, not reliable");

  const MachineFit fa = fit_machine(rows, "model-gpu", params), fb = fit_machine(planted, "model-gpu", params);
  EXPECT_EQ(fa.fit_max_world, 2);
  for (const Row& r : fb.rows) EXPECT_LE(inum(r, "world_size"), 2);
  ASSERT_EQ(fa.patterns.size(), fb.patterns.size());
  for (size_t i = 0; i < fa.patterns.size(); ++i) {
    EXPECT_EQ(fa.patterns[i].fit.link.alpha_s, fb.patterns[i].fit.link.alpha_s) << fa.patterns[i].pattern;
    EXPECT_EQ(fa.patterns[i].fit.link.beta_Bps, fb.patterns[i].fit.link.beta_Bps) << fa.patterns[i].pattern;
  }
  const CostModel ka = fa.model_for(1, 16, 128, 128, "bf16"), kb = fb.model_for(1, 16, 128, 128, "bf16");
  ASSERT_TRUE(ka.fwd_bwd.ok);
  EXPECT_EQ(ka.fwd_bwd.t0_s, kb.fwd_bwd.t0_s);
  EXPECT_EQ(ka.fwd_bwd.per_token_s, kb.fwd_bwd.per_token_s);
  EXPECT_EQ(ka.local_overhead, kb.local_overhead);

  std::vector<const Row*> dp;  // dp's model rows the fit keeps: P <= 2, 4096 and 16384 tokens
  for (const Row& r : fb.rows)
    if (col(r, "level") == "model" && col(r, "method") == "dp") dp.push_back(&r);
  ASSERT_EQ(dp.size(), 4u);
  for (const HeldOutPoint& p : b.points) {
    if (p.level == "operator") {
      OperatorShape s;
      s.world = p.world, s.batch = p.batch, s.heads = p.heads, s.dk = p.dk, s.dv = p.dv;
      s.tokens_per_rank = p.tokens_per_rank, s.block_bytes = p.block_bytes;
      EXPECT_EQ(*fb.model_for(p.batch, p.heads, p.dk, p.dv, p.dtype, p.world).operator_time(p.method, s), p.predicted_s)
          << p.method << " L=" << p.tokens_per_rank;
    }
    if (p.level == "model") {  // T_compute from the line through 4096 and 16384 where no dp row is at p's length
      const ModelLevelFit mf = fit_model_level(fb, dp, p.tokens_per_rank, p.block_bytes);
      ASSERT_TRUE(mf.why.empty()) << mf.why;
      EXPECT_EQ(mf.dp == nullptr, p.tokens_per_rank == 8192);
      EXPECT_NEAR(mf.step_s(p.method, p.world).first / p.predicted_s, 1.0, 1e-12)
          << p.method << " L=" << p.tokens_per_rank;
      EXPECT_NEAR(p.predicted_s / synthetic_step(p.method, 4, p.tokens_per_rank, 3e-6, 150e9), 1.0, 1e-9) << p.method;
    }
  }
}

TEST(CostModel, HoldOutSummaryAndItsWords) {
  auto pt = [](const char* level, const char* method, const char* backend, double bytes, long long L, double measured,
               double predicted) {
    HeldOutPoint p;
    p.level = level, p.method = method, p.backend = backend, p.world = 4, p.bytes = bytes, p.tokens_per_rank = L;
    p.measured_s = measured, p.predicted_s = predicted;
    return p;
  };
  HoldOut h;
  h.points = {pt("collective", "chain", "nccl", 65536, 0, 1.0, 1.45), pt("collective", "chain", "nccl", 2097152, 0, 1.0, 0.8),
              pt("collective", "chain", "nccl", 4194304, 0, 1.0, 1.1), pt("collective", "chain", "device", 65536, 0, 1.0, 1.0),
              pt("operator", "zeco", "device-ll16", 0, 16384, 2.0, 2.1), pt("operator", "zeco", "device", 0, 32768, 4.0, 4.4),
              pt("operator", "ring", "nccl", 0, 16384, 1.0, NAN)};
  h.errors = summarize_holdout(h.points);
  h.link_backend["chain"] = "nccl";
  ASSERT_EQ(h.errors.size(), 4u);  // chain nccl, chain device, zeco (both backends), ring
  const HoldOutError* chain = h.error_of("collective", "chain");
  ASSERT_NE(chain, nullptr);
  EXPECT_EQ(chain->backend, "nccl");
  EXPECT_EQ(chain->points, 3);
  EXPECT_NEAR(chain->median_abs, 0.2, 1e-12);
  EXPECT_NEAR(chain->max_abs, 0.45, 1e-12);
  EXPECT_TRUE(chain->exceeds());
  EXPECT_EQ(h.error_of("collective", "chain", "device")->max_abs, 0.0);
  const HoldOutError* zeco = h.error_of("operator", "zeco", "anything");  // the operator level: every backend
  ASSERT_NE(zeco, nullptr);
  EXPECT_EQ(zeco->points, 2);
  EXPECT_NEAR(zeco->median_abs, 0.075, 1e-12);
  EXPECT_NEAR(zeco->max_abs, 0.1, 1e-12);
  EXPECT_FALSE(zeco->exceeds());
  const HoldOutError* ring = h.error_of("operator", "ring");
  EXPECT_EQ(ring->points, 0);
  EXPECT_EQ(ring->unpredicted, 1);
  EXPECT_FALSE(ring->exceeds());
  EXPECT_EQ(h.beside("collective", "chain", 2097152),
            "hold-out error up to 45% at P = 4 (3 points; -20% at this size): exceeds 30%, not reliable");
  EXPECT_EQ(h.beside("collective", "chain"), "hold-out error up to 45% at P = 4 (3 points): exceeds 30%, not reliable");
  EXPECT_EQ(h.beside("operator", "zeco", 32768), "hold-out error up to 10% at P = 4 (2 points; +10% at this length)");
  EXPECT_EQ(h.beside("operator", "zeco", 8192), "hold-out error up to 10% at P = 4 (2 points)");
  EXPECT_EQ(h.beside("operator", "ring"), "no hold-out (nothing of ring measured above P = 2)");
  EXPECT_EQ(h.brief("collective", "chain"), "hold-out at P = 4 (largest measured): +45%: exceeds 30%, not reliable");
  EXPECT_EQ(h.brief("operator", "zeco"), "hold-out at P = 4 (largest measured): +10%");
  EXPECT_EQ(h.brief("operator", "ring"), "no hold-out");
  // The bar applies to the error as printed (whole percents), so the words never contradict themselves: 30.4% is
  // "30%" and not beyond it, 30.6% is "31%" and beyond.
  h.points = {pt("collective", "ring", "nccl", 65536, 0, 1.0, 1.304)};
  h.errors = summarize_holdout(h.points);
  EXPECT_FALSE(h.errors[0].exceeds());
  h.points = {pt("collective", "ring", "nccl", 65536, 0, 1.0, 0.694)};
  h.errors = summarize_holdout(h.points);
  EXPECT_TRUE(h.errors[0].exceeds());
}

// The real rows of the 4-GPU H200 machine (tests/report/data/h200x4_*_fixture.csv, a copy of
// results/nvidia-h200-x4_{collective,operator}.csv): the hold-out uses nothing above P = 2 (each prediction equals one
// from a link fitted here on the 2-rank rows alone), predicts every 4-rank configuration, and flags what it misses by
// more than 30%. What it finds
// (report/README.md, "The cost model"): the operator level within 28% (dp, zeco, LASP-1 and LASP-2 within 2%);
// the NCCL collectives on their own far off at small sizes, because a fit on 2 ranks cannot tell a call's fixed
// cost from a hop's latency, so it charges the fixed cost once per hop.
TEST(CostModel, HoldOutByWorldOnMeasuredGpuRows) {
  const std::string dir = std::string(SPB_REPORT_DATA_DIR) + "/";
  std::vector<Row> rows = read_csv(dir + "h200x4_collective_fixture.csv");
  for (const Row& r : read_csv(dir + "h200x4_operator_fixture.csv")) rows.push_back(r);
  ASSERT_GT(rows.size(), 200u);
  const ModelParams params;
  const HoldOut h = hold_out_by_world(rows, "NVIDIA H200", params);
  // Every 4-rank collective configuration of a pattern the model knows (the probes are not one), and every 4-rank
  // operator configuration of the default schedule.
  std::set<std::string> want, got;
  for (const CollectivePoint& c : collective_points(rows, "NVIDIA H200"))
    if (c.world == 4 && std::count(model_patterns().begin(), model_patterns().end(), c.pattern)) want.insert(c.pattern);
  int ops = 0, collectives = 0;
  for (const HeldOutPoint& p : h.points) {
    EXPECT_EQ(p.world, 4);
    EXPECT_TRUE(p.predicted()) << p.level << " " << p.method << " " << p.backend << ": " << p.why;
    if (p.level == "collective") got.insert(p.method), ++collectives;
    else ++ops;
  }
  EXPECT_EQ(got, want);
  EXPECT_EQ(ops, 12);  // 6 methods x 16K and 32K tokens per GPU
  EXPECT_GE(collectives, 80);
  // Nothing above P = 2 in the fit: the two-parameter links fitted here on the 2-rank rows alone give the same
  // predictions.
  std::map<std::string, std::vector<Row>> two_ranks;  // backend -> its 2-rank collective rows
  for (const Row& r : rows)
    if (col(r, "level") == "collective" && inum(r, "world_size") == 2) two_ranks[col(r, "backend")].push_back(r);
  std::map<std::pair<std::string, std::string>, std::vector<CollectivePoint>> two;
  for (const auto& [backend, sub] : two_ranks)
    for (const CollectivePoint& c : collective_points(sub, "NVIDIA H200")) two[{c.pattern, backend}].push_back(c);
  int checked = 0;
  for (const HeldOutPoint& p : h.points) {
    if (p.level != "collective") continue;
    const LinkFit f = fit_link(two[{p.method, p.backend}], params);
    if (!f.ok) continue;  // an All-Scan at one block size: its beta comes from another pattern
    const double t = *collective_time(p.method, 4, p.bytes, p.block_bytes, p.dv, f.link, params);
    EXPECT_NEAR(p.predicted_s / t, 1.0, 1e-9) << p.method << " " << p.backend << " bytes=" << p.bytes;
    ++checked;
  }
  EXPECT_GE(checked, 50);
  // The operator level: dp, zeco and LASP-1 within 5% (their time is the local compute and, for LASP-1, P of them
  // in series), every method within 30%.
  for (const char* m : {"dp", "zeco", "lasp1"}) EXPECT_LT(h.error_of("operator", m)->max_abs, 0.05) << m;
  for (const auto& m : model_methods()) {
    const HoldOutError* e = h.error_of("operator", m);
    ASSERT_NE(e, nullptr) << m;
    EXPECT_EQ(e->points, 2) << m;
    EXPECT_LT(e->max_abs, kHoldOutWarn) << m;
  }
  // Every error above 30% is flagged in the words beside a prediction, and no other.
  for (const HoldOutError& e : h.errors) {
    const bool flagged = h.beside(e.level, e.method, 0, 0, e.backend).find("exceeds 30%, not reliable") != std::string::npos;
    EXPECT_EQ(flagged, std::round(100 * e.max_abs) > 30) << e.level << " " << e.method << " " << e.backend;
  }
  EXPECT_TRUE(h.error_of("collective", "chain")->exceeds());
}

}  // namespace
}  // namespace spb
