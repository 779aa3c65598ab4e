// The alpha-beta cost model behind the report's predictions for more GPUs than were measured (DESIGN §6).
//
// A link moves `bytes` in alpha + bytes / beta seconds. Inside a node of `gpus_per_node` GPUs the link is NVLink, with
// alpha and beta fitted (weighted least squares on relative error) to the measured collective rows, one fit per
// pattern and backend; between nodes it is the network, whose alpha and beta are parameters (default 400 Gb/s
// InfiniBand, 5 us). Ranks are placed in order, so the hop p -> p+1 crosses the network when p+1 starts a node.
//
// The collective patterns (per-rank state of S bytes, All-Scan blocks of b bytes, K = S / b blocks, P ranks):
//   allscan   pipelined: block k leaves rank p once block k arrived from p-1 and block k-1 left p, so the last rank
//             is done after the P-1 hops of the first block plus K-1 more blocks through the slowest hop:
//             sum_h hop_h(b) + (K-1) max_h hop_h(b)      (= (P+K-2)(alpha + b/beta) on one link kind)
//   chain     LASP-1: one whole state per hop, P-1 hops in series: sum_h hop_h(S)
//   allgather ring all-gather of P records of S(1 + 1/dv) bytes (state + decay row): (P-1) steps of the slowest link
//   ring      P-1 rotation steps of S bytes through the slowest link
//   alltoall  S/P bytes to each of the other P-1 ranks: (P-1) alpha + (P-1)/P S / beta per link kind, the NVLink and
//             network parts at the same time
// The All-Scans across nodes (zeco/all_scan.h; --allscan names them), R = gpus_per_node ranks a node, N = P / R nodes,
// d = S / dv the decay row (rows x 4 bytes), pipe(n_in, n_net) = n_in hop_in(b) + n_net hop_net(b) + (K-1) x the
// slowest of the hop kinds used (the flow line of K equal blocks through n_in NVLink and n_net network hops):
//   host           the chain: allscan above = pipe(P - N, N - 1)
//   host-hier      each node's chain and the chain of node aggregates form one flow line (a leader forwards block k
//                  once its node's block k and the previous node's are in), the decay row one more item ahead of the
//                  blocks inside the node, then the leader hands the whole prefix to its node (R - 1 sends at once to
//                  distinct peers, one hop): pipe(R - 1, N - 1) + hop_in(d) + hop_in(S)
//   host-logdepth  each node's chain, then ceil(log2 N) recursive-doubling steps of one whole aggregate (state and
//                  decay row) sent and one received at once, then the prefix handed on:
//                  pipe(R - 1, 0) + hop_in(d) + ceil(log2 N) hop_net(S + d) + hop_in(S)
// (R = 1: no hop_in terms). On one node (P <= R) all three are the chain; P > R needs R | P (zeco's nodes are equal).
// The local folds are not modelled (they are memory-bound passes over the state, microseconds at 2 MiB).
//
// and the operator level (local dp compute T_dp = t0 + t_token L, fitted to the dp rows; state S = B H dk dv fp32;
// activations of `act_bytes` per element):
//   dp        T_dp
//   lasp1     its published schedule (DESIGN §3, as the official code): a serial chain of P-1 hops, each carrying one
//             state, a rank computing between its receive and its send, so the P computes add up:
//             P T_dp + 2 chain(S)   (a chain per direction)
//   lasp2     an all-gather of P states (each with its decay row) per direction, then the fold of the P states:
//             T_dp + per direction max(0, allgather(S) + fold - overlap T_dir)   (fold: P states read at fold_Bps)
//   zeco      T_dp + per direction max(0, allscan(S, b) - overlap T_dir)
//   ring      T_dp + per direction (P-1) max(ring step of L H B (2 dk + dv) act_bytes, ring_step_fraction T_dir)
//   ulysses   T_dp + all-to-alls of q,k,v,g in, o out (forward) and do in, dq,dk,dv,dg out (backward); needs H % P == 0
// where T_dir is the direction's share of T_dp (forward from the dp fwd rows when measured, else a third).
//
// The model level (one training step of `layers` blocks, each with one attention of the operator shape `layer`):
//   step(P) = T_compute + layers x (operator(method, P) - operator(dp, P)) + allreduce(P, gradient bytes)
// where T_compute is dp's measured step time without its gradient all-reduce (everything token-local), the middle term
// what the method's attention adds over dp's in every block (its communication and extra local work), and the
// all-reduce a ring all-reduce of the weight gradients (a reduce-scatter and an all-gather): 2 (P-1) steps of
// bytes / P through the slowest link of the ring = 2 (P-1) alpha + 2 (P-1)/P bytes / beta.
#pragma once

#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace spb {

struct Link {
  double alpha_s = 0;   // per message / hop
  double beta_Bps = 0;  // bytes per second
  double hop(double bytes) const { return alpha_s + bytes / beta_Bps; }
};

struct ModelParams {
  int gpus_per_node = 8;
  Link network{5e-6, 400e9 / 8};   // between nodes: 400 Gb/s InfiniBand, ~5 us
  double overlap_fraction = 0.5;  // share of a direction's local compute that can hide zeco's / lasp2's collective
  double ring_step_fraction = 0.25;  // a ring step's compute (one foreign block's states) as a share of T_dir
  double fold_Bps = 2e12;            // lasp2's fold of P states (HBM read rate)
};

// One measured collective time (the inputs of a fit).
struct CollectivePoint {
  std::string pattern;  // allscan, chain, allgather, ring, alltoall
  int world = 0;
  double bytes = 0;        // per-rank state
  double block_bytes = 0;  // allscan only (0 or >= bytes: one block)
  int dv = 128;            // elements of a state row (the all-gather record adds one row of decay per dv)
  double time_s = 0;
  std::string git_sha, code_state;  // of the row it came from (code_state: report_data.h, "" where not marked)
};

// The pattern's time on P ranks when every hop crosses `intra` inside a node and `p.network` between nodes.
// Unknown pattern: nullopt. One rank: 0 (nothing moves).
std::optional<double> collective_time(const std::string& pattern, int world, double bytes, double block_bytes, int dv,
                                      const Link& intra, const ModelParams& p);
// The ring all-reduce of `bytes` on P ranks (the model level's weight gradients), over `intra` inside a node and
// `p.network` between nodes. One rank: 0.
double allreduce_time(int world, double bytes, const Link& intra, const ModelParams& p);
// The All-Scan algorithms across nodes, in the order a tie goes to (the simpler first): host, host-hier, host-logdepth.
const std::vector<std::string>& allscan_variants();
// A variant's time on P ranks (formulas above); nullopt for an unknown variant or P > R not a multiple of R.
std::optional<double> allscan_variant_time(const std::string& variant, int world, double bytes, double block_bytes,
                                           int dv, const Link& intra, const ModelParams& p);
// Of `names`, the fastest at each GPU count of `times` (count -> name -> seconds; a tie within 1e-9 relative goes to
// the name listed first), and the GPU count from which `name` is the fastest at every count of `times` from there on
// (nullopt: not at the largest count).
std::string fastest_of(const std::map<std::string, double>& times, const std::vector<std::string>& names);
std::optional<int> wins_from(const std::map<int, std::map<std::string, double>>& times,
                             const std::vector<std::string>& names, const std::string& name);

// A user's own link constants (`spbench report --constants FILE`): a CSV of `key,value` lines (an optional
// `key,value` header, blank lines and lines starting with # are skipped) with the keys intra_alpha_us and intra_gbps
// (the link inside a node), net_alpha_us and net_gbps (the network between nodes); alphas in microseconds, bandwidths
// in Gb/s (gigabits). Each pair is optional but comes whole. Anything else (an unknown or repeated key, a value that
// is not a number, a negative alpha, a bandwidth <= 0, half a pair, no pair at all, a file that cannot be read) is a
// UsageError naming --constants.
struct LinkConstants {
  std::optional<Link> intra, network;
};
LinkConstants read_link_constants(const std::string& path);

// On one link kind every pattern is linear in (alpha, 1/beta): time = a alpha + c / beta. Returns {a, c}.
std::optional<std::pair<double, double>> collective_features(const std::string& pattern, int world, double bytes,
                                                             double block_bytes, int dv);

struct LinkFit {
  Link link;
  int points = 0;
  double rms_rel_residual = 0;  // sqrt(mean(((model - measured) / measured)^2)) over the fitted points
  bool ok = false;
};
// Least squares on relative error, alpha and 1/beta constrained to >= 0. Points on more ranks than a node and
// patterns the model does not know are left out. Needs two points with independent features: an All-Scan swept at
// one block size only measures alpha + block / beta, not the two apart.
LinkFit fit_link(const std::vector<CollectivePoint>& points, const ModelParams& p);
// The same with beta given (taken from another pattern on the same link): fits alpha alone; needs one point.
LinkFit fit_link_alpha(const std::vector<CollectivePoint>& points, const ModelParams& p, double beta_Bps);

// The network link fitted to collective rows where every hop crosses the network (rows of runs on several (simulated)
// nodes with one rank per node): fit_link on one link kind. Not ok with fewer than two independent points.
LinkFit fit_network_link(const std::vector<CollectivePoint>& points);

// The dp kernel: T = t0 + per_token L, least squares over (L, time) points (t0 = 0 when one length was measured).
struct KernelFit {
  double t0_s = 0, per_token_s = 0;
  int points = 0;
  bool ok = false;
  double at(double tokens) const { return t0_s + per_token_s * tokens; }
  // The same kernel doing `factor` times the work per token (another attention shape): both terms scale.
  KernelFit scaled(double factor) const {
    KernelFit k = *this;
    k.t0_s *= factor, k.per_token_s *= factor;
    return k;
  }
};
KernelFit fit_kernel(const std::vector<std::pair<double, double>>& tokens_time_s);

struct OperatorShape {
  int world = 1, batch = 1, heads = 16, dk = 128, dv = 128;
  long long tokens_per_rank = 16384;
  double block_bytes = 65536;  // zeco's All-Scan block
  int act_bytes = 2;           // bf16 activations on GPUs, fp32 on CPU ranks
  double state_bytes() const { return 4.0 * batch * heads * dk * dv; }
  // The chunked GLA's work per token up to a constant factor (per head: the state products, 4 dk dv, and the
  // intra-chunk products, chunk (dk + dv)): the ratio of two shapes' values scales a dp kernel fit from one to the
  // other where the other was not measured.
  double work_per_token(int chunk) const { return double(batch) * heads * (4.0 * dk * dv + double(chunk) * (dk + dv)); }
};

// Fitted links per pattern (allscan, chain, allgather, ring, alltoall) and the dp kernel (fwd_bwd and, when
// measured, fwd): everything a prediction needs.
struct CostModel {
  std::map<std::string, LinkFit> links;
  KernelFit fwd_bwd, fwd;
  // A method's rank-local cost beyond dp's (its extra passes: state corrections, layout copies), as a fraction of
  // dp's time, measured where no communication happens: the method on one rank against dp (absent: 0).
  std::map<std::string, double> local_overhead;
  ModelParams params;
  const Link* link_for(const std::string& pattern) const;
  std::optional<double> collective(const std::string& pattern, int world, double bytes, double block_bytes,
                                   int dv) const;
  // nullopt: the method has no formula, a pattern it needs was not fitted, or the shape is impossible (ulysses with
  // H not divisible by P).
  std::optional<double> operator_time(const std::string& method, const OperatorShape& s) const;
  // The ring all-reduce of `bytes` over the all-gather's fitted link (NCCL's ring all-gather is one half of its ring
  // all-reduce), else the ring pattern's; nullopt when neither was fitted.
  std::optional<double> allreduce(int world, double bytes) const;
  // The model level's step time (the formula above) at world size layer.world; `compute_s` is T_compute and
  // `grad_bytes` the gradients all-reduced per step. nullopt where operator_time or allreduce has no answer.
  // `grad_overlap`: the gradients summed beside the backward (--grad-overlap, the default on GPUs at P > 1): the
  // all-reduce hides under the backward but for a tail, so it adds exposed_allreduce instead of the whole.
  std::optional<double> model_step_time(const std::string& method, const OperatorShape& layer, int layers,
                                        double grad_bytes, double compute_s, bool grad_overlap = false) const;
  // The part of an all-reduce of `ar_s` that a step waits for: all of it after the backward; beside the backward the
  // larger of the last block's share (ar / layers: its gradients are summed after the backward ends) and what the
  // backward (taken as 2/3 of T_compute, twice the forward's work) cannot cover.
  static double exposed_allreduce(double ar_s, int layers, double compute_s, bool grad_overlap);
};

// Methods and patterns the model has formulas for.
const std::vector<std::string>& model_methods();
const std::vector<std::string>& model_patterns();

// --- The hold-out by world size: how far the model is trusted beyond the measured P --------------------------------
// The model is fitted on one machine's rows of world_size <= kHoldOutFitMaxWorld only (report_data.h's fit_machine,
// model_for and fit_model_level: the links on the 2-rank collective rows, the dp kernel and each method's local
// overhead on the 1- and 2-rank operator rows, T_compute on dp's 1- and 2-rank model rows), the same fit the
// report's predictions come from, and predicts every row of that machine on more ranks (P = 4 on the machines
// measured so far), which it never saw:
//   collective  each configuration (pattern, backend, state, block) with the link fitted for its pattern and backend
//   operator    each forward+backward configuration (method, tokens per rank, shape; the default schedule, zeco with
//               one head group) with operator_time, zeco over the All-Scan link the report's model uses
//   model       each training-step configuration (method, tokens per rank, the model's configuration; the default
//               schedule) with model_step_time through fit_model_level, on dp's model rows of the same configuration
// Rows over several nodes are left out on both sides (the network's constants are not what this validates). A point's
// error is (predicted - measured) / measured of the time (a call, a forward+backward, a training step); a method's
// hold-out error is the largest |error| of its points, and where it exceeds kHoldOutWarn the report says so beside
// each of the method's predictions.
constexpr int kHoldOutFitMaxWorld = 2;
constexpr double kHoldOutWarn = 0.30;

struct HeldOutPoint {
  std::string level, method, backend;  // level: collective, operator or model; a collective's method: its pattern
  int world = 0;
  double bytes = 0, block_bytes = 0;  // collective: per-rank state and All-Scan block (0: one block)
  long long tokens_per_rank = 0;      // operator, model
  int batch = 0, heads = 0, dk = 0, dv = 0;  // operator shape (model: the attention's)
  std::string dtype;
  std::string config;                 // model: the model's configuration in words (report_data.h model_config_str)
  double measured_s = 0, predicted_s = NAN;  // predicted: NaN where the fit on the small P has no answer (`why`)
  std::string why;
  std::string git_sha, code_state;    // of the measured row held out
  bool predicted() const { return predicted_s == predicted_s; }
  double rel_error() const { return (predicted_s - measured_s) / measured_s; }  // signed; NaN when not predicted
};

// One method of one level (and, at the collective level, one backend: each has its own link): its points' errors.
struct HoldOutError {
  std::string level, method, backend;  // backend "": the operator or model level, every backend of the method
  int points = 0;                      // predicted
  int unpredicted = 0;                 // held out, but the small-P fit could not predict them
  double median_abs = NAN, max_abs = NAN;
  std::vector<int> worlds;             // the held-out world sizes
  // Beyond kHoldOutWarn as printed (whole percents: 30.4% is "30%", not beyond), so the words never contradict
  // themselves.
  bool exceeds() const { return points > 0 && std::round(100 * max_abs) > std::round(100 * kHoldOutWarn); }
};

// Per (level, method, backend), in the order first seen; operator and model points are summed over their backends.
std::vector<HoldOutError> summarize_holdout(const std::vector<HeldOutPoint>& points);

using Row = std::map<std::string, std::string>;  // a row of results/*.csv (report_data.h declares the same)

struct HoldOut {
  std::string machine;  // the rows' gpu column
  int fit_max_world = kHoldOutFitMaxWorld;
  std::vector<HeldOutPoint> points;
  std::vector<HoldOutError> errors;
  // The pattern -> backend whose link the model uses for the pattern (MachineFit::collective_model's choice).
  std::map<std::string, std::string> link_backend;
  // The hold-out error behind a prediction of `method` at `level`: at the collective level the backend given, else
  // the one whose link the model uses; at the operator and model levels every backend. nullptr: nothing of it was
  // held out.
  const HoldOutError* error_of(const std::string& level, const std::string& method,
                               const std::string& backend = "") const;
  // The held-out point of `method` at `level` at a prediction's own configuration: the same state (and, for the
  // All-Scan, block) at the collective level, the same tokens per rank at the operator and model levels; nullptr
  // where none was held out there. `backend` as for error_of.
  const HeldOutPoint* point_at(const std::string& level, const std::string& method, double size,
                               double block_bytes = 0, const std::string& backend = "") const;
  // The words to print beside a prediction of `method` at `level` (of state or tokens `size`, 0: any): the method's
  // hold-out error (its largest), the error at that configuration where one was held out, and, where the method's
  // error exceeds kHoldOutWarn, "exceeds 30%, not reliable":
  //   "hold-out error up to 89% at P = 4 (10 points; -29% at this size): exceeds 30%, not reliable"
  // "no hold-out (...)" where nothing of the method was measured above fit_max_world.
  std::string beside(const std::string& level, const std::string& method, double size = 0, double block_bytes = 0,
                     const std::string& backend = "") const;
  // The error of `method` at `level` at the largest held-out world size: that P and, of its points there, the signed
  // error of the largest |error|; nullopt where nothing was held out (backend as for error_of).
  struct AtLargest {
    int world = 0;
    double error = NAN;  // signed: (predicted - measured) / measured
    int points = 0;
    // Within kHoldOutWarn as printed (whole percents), as HoldOutError::exceeds.
    bool held() const { return std::round(100 * std::fabs(error)) <= std::round(100 * kHoldOutWarn); }
  };
  std::optional<AtLargest> at_largest(const std::string& level, const std::string& method,
                                      const std::string& backend = "") const;
  // The same in brief, for a table cell beside a number: the largest measured P and the error there, signed:
  // "hold-out at P = 4 (largest measured): +1.4%", "hold-out at P = 4 (largest measured): +89%: exceeds 30%, not
  // reliable", "no hold-out".
  std::string brief(const std::string& level, const std::string& method, const std::string& backend = "") const;
};
// The hold-out of machine `gpu` (see above). No rows above fit_max_world: no points.
HoldOut hold_out_by_world(const std::vector<Row>& rows, const std::string& gpu, const ModelParams& params,
                          int fit_max_world = kHoldOutFitMaxWorld);

}  // namespace spb
