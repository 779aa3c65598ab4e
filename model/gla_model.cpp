#include "model/gla_model.h"

#include <cmath>
#include <numeric>

#include "kernels/gla/gla.h"
#include "runtime/error.h"
#include "sp/inputs.h"
#include "sp/timeline.h"

namespace spb {

const std::vector<Recompute>& recompute_levels() {
  static const std::vector<Recompute> levels = {Recompute::none,        Recompute::states,
                                                Recompute::elementwise, Recompute::states_elementwise,
                                                Recompute::all,         Recompute::blocks};
  return levels;
}

const char* recompute_name(Recompute r) {
  switch (r) {
    case Recompute::none: return "none";
    case Recompute::states: return "states";
    case Recompute::elementwise: return "elementwise";
    case Recompute::states_elementwise: return "states+elementwise";
    case Recompute::all: return "attention+elementwise";
    case Recompute::blocks: return "blocks";
  }
  return "?";
}

Recompute recompute_from_name(const std::string& name) {
  if (name == "all") return Recompute::all;  // --recompute alone
  for (Recompute r : recompute_levels())
    if (name == recompute_name(r)) return r;
  throw UsageError("--recompute: '" + name +
                   "' is none of none, states, elementwise, states+elementwise, all (attention+elementwise), blocks, "
                   "auto");
}

bool remakes_states(Recompute r) { return r == Recompute::states || r == Recompute::states_elementwise; }
bool remakes_elementwise(Recompute r) {
  return r == Recompute::elementwise || r == Recompute::states_elementwise || r == Recompute::all;
}
bool remakes_blocks(Recompute r) { return r == Recompute::blocks; }

Recompute recompute_auto(const GlaModelConfig& c) {
  const double per_token_states = double(c.dk()) * c.dv() / kChunk, per_token_kv = double(c.dk()) + c.dv();
  return per_token_states > per_token_kv ? Recompute::states : Recompute::none;
}

namespace {
// As many rows of row_bytes as `budget` bytes hold, in whole tiles of the products' 128 rows where there is one.
size_t rows_in(size_t budget, size_t row_bytes) {
  const size_t fit = std::max<size_t>(1, budget / row_bytes);
  return fit >= 128 ? fit / 128 * 128 : fit;
}
}  // namespace

int GlaModelConfig::logit_chunk(int rows) const {
  const size_t fit = rows_in(size_t(512) << 20, size_t(vocab) * 4);
  return int(std::min<size_t>(size_t(rows), logit_rows > 0 ? size_t(logit_rows) : fit));
}

int GlaModelConfig::mlp_chunk(int rows) const {
  const size_t fit = rows_in(size_t(512) << 20, size_t(2) * mlp_size() * 2);
  return int(std::min<size_t>(size_t(rows), mlp_rows > 0 ? size_t(mlp_rows) : fit));
}

void GlaModelConfig::validate() const {
  auto positive = [](double x, const char* flag) {
    SPB_USAGE(x > 0, std::string(flag) + " must be > 0 (got " + std::to_string(x) + ")");
  };
  positive(vocab, "--vocab");
  positive(hidden, "--hidden");
  positive(layers, "--layers");
  positive(heads, "--heads");
  positive(expand_k, "--expand-k");
  positive(expand_v, "--expand-v");
  positive(gate_rank, "--gate-rank");
  SPB_USAGE(mlp >= 0, "--mlp must be >= 0 (0: GLA's width)");
  SPB_USAGE(logit_rows >= 0, "the LM head's logit rows must be >= 0 (0: as many as 512 MiB hold)");
  SPB_USAGE(mlp_rows >= 0, "the MLP's rows at a time must be >= 0 (0: as many as 512 MiB of (a | b) hold)");
  auto whole = [&](double e, const char* flag) {
    const double d = e * hidden;
    SPB_USAGE(std::abs(d - std::round(d)) < 1e-9 && std::round(d) >= 1,
              std::string(flag) + " " + std::to_string(e) + " x --hidden " + std::to_string(hidden) +
                  " is not a whole number of dimensions");
  };
  whole(expand_k, "--expand-k");
  whole(expand_v, "--expand-v");
  SPB_USAGE(key_dim() % heads == 0, "--heads " + std::to_string(heads) + " does not divide the key dimension " +
                                        std::to_string(key_dim()) + " (--expand-k x --hidden)");
  SPB_USAGE(value_dim() % heads == 0, "--heads " + std::to_string(heads) + " does not divide the value dimension " +
                                          std::to_string(value_dim()) + " (--expand-v x --hidden)");
}

// The parameters of one block (offsets into the flat vector).
struct GlaModel::Layer {
  size_t attn_norm, wq, wk, wv, wg, wgk0, wgk1, bgk1, g_norm, wo, mlp_norm, w_gate, w_up, w_down;
};

// What the forward keeps of one block for its backward.
struct GlaModel::LayerActs {
  Buffer x_mid, rstd1, h1, q, k, v, z, gl, pre, g, o, rstd_gn, y, rstd2, h2;
  // [N, 2F]: the MLP's gate and up products side by side (one GEMM); one MLP slice's rows where the level
  // remakes_blocks (the backward makes each slice's again)
  Buffer ab;
};

// What the forward keeps for the backward (per block) and the backward's scratch (shared by the blocks).
struct GlaModel::Acts {
  // The residual stream entering block l (x[layers]: entering the final norm), f32 [N, D]. Where the level
  // remakes_blocks: x[0] the final norm's, and each block's input in `kept`.
  std::vector<Buffer> x;
  // remakes_blocks: block l's input, fp32 [N, D], written there by the forward and read there by the remade one,
  // which then is the forward (a bf16 copy moved the gradients 1-2% on GPUs)
  std::vector<Buffer> kept;
  std::vector<LayerActs> layer;  // per block, or one set for all where the level remakes_blocks
  Buffer h1s, h2s, ys;  // the blocks' h1, h2, y where the level remakes_elementwise
  Buffer gs;            // the blocks' g where the level remakes_states
  // SwiGLU's output m, one MLP slice's rows for every block: the forward's down product reads it right away, and
  // the backward's SwiGLU makes it again (swiglu_bwd's y) for the down product's weight gradient.
  Buffer ms;
  Buffer tokens, targets;              // int32 [N]
  // [N, D] f32: a block's o_proj or MLP down product, added to the residual stream by the next norm; in the
  // backward the input gradients' products (dh), which the norms' backward read. A forward's delta is read before
  // the next product writes (the remade forward's too, before its block's first gradient product), so the two are
  // never alive at once.
  Buffer delta;
  float* dh() const { return delta.f32(); }
  Buffer rstd_f, hf, logits, dlogits, losses;  // logits, dlogits: one chunk of rows (GlaModelConfig::logit_chunk)
  Buffer dx, dxa, dmy, dab, dq, dk, dv, dg, d_o, dpre, dgl;  // dmy, dab: one MLP slice's rows of dm and d(a | b)
  Buffer dproj;  // [N, 2Kd + 2Vd + R]: dq, dk, dv, dz, dgl side by side, for the one GEMM of each product below
};

namespace {
size_t align64(size_t x) { return (x + 63) / 64 * 64; }
}  // namespace

std::vector<ParamInfo> GlaModel::layout(const GlaModelConfig& c, std::vector<Layer>* layers, size_t* total) {
  const size_t D = c.hidden, Kd = c.key_dim(), Vd = c.value_dim(), F = c.mlp_size(), R = c.gate_rank;
  std::vector<ParamInfo> info;
  size_t n = 0;
  // Every tensor starts on 64 elements (aligned loads in the kernels), but for the projections that read one input
  // (q, k, v, g and the gate's rank-R one; the MLP's gate and up): each group is one matrix of stacked rows, so its
  // products are one GEMM.
  auto add = [&](const std::string& name, size_t rows, size_t cols, bool packed_with_next = false) {
    info.push_back({name, n, rows, cols});
    n = packed_with_next ? n + rows * cols : align64(n + rows * cols);
    return info.back().offset;
  };
  add("embed.weight", c.vocab, D);
  for (int l = 0; l < c.layers; ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    Layer y;
    y.attn_norm = add(p + "attn_norm.weight", 1, D);
    y.wq = add(p + "attn.q_proj.weight", Kd, D, true);
    y.wk = add(p + "attn.k_proj.weight", Kd, D, true);
    y.wv = add(p + "attn.v_proj.weight", Vd, D, true);
    y.wg = add(p + "attn.g_proj.weight", Vd, D, true);
    y.wgk0 = add(p + "attn.gk_proj.0.weight", R, D);
    y.wgk1 = add(p + "attn.gk_proj.1.weight", Kd, R);
    y.bgk1 = add(p + "attn.gk_proj.1.bias", 1, Kd);
    y.g_norm = add(p + "attn.g_norm.weight", 1, size_t(c.dv()));
    y.wo = add(p + "attn.o_proj.weight", D, Vd);
    y.mlp_norm = add(p + "mlp_norm.weight", 1, D);
    y.w_gate = add(p + "mlp.gate_proj.weight", F, D, true);
    y.w_up = add(p + "mlp.up_proj.weight", F, D);
    y.w_down = add(p + "mlp.down_proj.weight", D, F);
    if (layers) layers->push_back(y);
  }
  add("norm.weight", 1, D);
  add("lm_head.weight", c.vocab, D);
  *total = info.back().offset + info.back().elems();  // no padding after the last tensor
  return info;
}

// The list of the activation buffers (but the dense dq, dk, dv: plan_dense_grads): with a device it makes them,
// without one it adds them up (device_bytes).
size_t GlaModel::plan_acts(const GlaModelConfig& c, int rows, DType act, Recompute recompute, Acts& A, Device* dev) {
  const bool blocks = spb::remakes_blocks(recompute);  // one set of a block's activations for every block
  const bool shared = spb::remakes_elementwise(recompute) || blocks;  // h1, h2, y: one buffer each for every block
  const bool gates_shared = spb::remakes_states(recompute) || blocks;  // g: one buffer for every block
  const size_t N = rows, D = c.hidden, Kd = c.key_dim(), Vd = c.value_dim(), F = c.mlp_size(), R = c.gate_rank;
  const size_t S = size_t(c.mlp_chunk(rows));  // the MLP's rows at a time
  const size_t a = dtype_size(act), f = 4;
  size_t total = 0;
  auto take = [&](Buffer& b, size_t bytes) {
    total += bytes;
    if (dev) b = Buffer(*dev, bytes);
  };
  A.x.resize(blocks ? 1 : size_t(c.layers) + 1);
  for (Buffer& x : A.x) take(x, N * D * f);
  A.kept.resize(blocks ? size_t(c.layers) : 0);
  for (Buffer& x : A.kept) take(x, N * D * f);
  A.layer.resize(blocks ? 1 : size_t(c.layers));
  for (LayerActs& p : A.layer) {
    take(p.x_mid, N * D * f);
    take(p.rstd1, N * f), take(p.rstd2, N * f), take(p.rstd_gn, N * c.heads * f);
    if (!shared) take(p.h1, N * D * a), take(p.h2, N * D * a), take(p.y, N * Vd * a);
    take(p.q, N * Kd * a), take(p.k, N * Kd * a), take(p.pre, N * Kd * a);
    if (!gates_shared) take(p.g, N * Kd * a);
    take(p.v, N * Vd * a), take(p.z, N * Vd * a), take(p.o, N * Vd * a);
    take(p.gl, N * R * a);
    take(p.ab, (blocks ? S : N) * 2 * F * a);
  }
  // With recompute, one block's normalised inputs and gated output at a time: the backward makes them again from
  // what each block keeps (x, rstd, o, z).
  if (shared) take(A.h1s, N * D * a), take(A.h2s, N * D * a), take(A.ys, N * Vd * a);
  // Remaking the states, one block's forget gates at a time: the backward makes them again from its pre.
  if (gates_shared) take(A.gs, N * Kd * a);
  take(A.ms, S * F * a);  // SwiGLU's output, at every level: made again from each block's (a | b)
  take(A.delta, N * D * f);
  take(A.tokens, N * 4), take(A.targets, N * 4);
  take(A.rstd_f, N * f), take(A.hf, N * D * a);
  const size_t logit_elems = size_t(c.logit_chunk(rows)) * c.vocab;
  take(A.logits, logit_elems * f), take(A.dlogits, logit_elems * a), take(A.losses, N * f);
  take(A.dx, N * D * f), take(A.dxa, N * D * a);
  take(A.dmy, std::max(S * F, N * Vd) * a), take(A.dab, S * 2 * F * a);  // dmy: the o_proj's dy too
  take(A.dproj, N * (2 * Kd + 2 * Vd + R) * a);
  take(A.dg, N * Kd * a), take(A.dpre, N * Kd * a), take(A.d_o, N * Vd * a), take(A.dgl, N * R * a);
  return total;
}

// dq, dk, dv apart, for a method that writes them dense rather than into their columns of dproj (!takes_grad_ld()).
size_t GlaModel::plan_dense_grads(const GlaModelConfig& c, int rows, DType act, Acts& A, Device* dev) {
  const size_t N = rows, Kd = c.key_dim(), Vd = c.value_dim(), a = dtype_size(act);
  if (dev) A.dq = Buffer(*dev, N * Kd * a), A.dk = Buffer(*dev, N * Kd * a), A.dv = Buffer(*dev, N * Vd * a);
  return N * (2 * Kd + Vd) * a;
}

size_t GlaModel::device_bytes(const GlaModelConfig& c, int batch, int tokens_per_rank, DType act, DType chunk_state,
                              Recompute recompute, int optimizer_shards) {
  size_t n = 0;
  layout(c, nullptr, &n);
  Acts none;
  // fp32 master and gradient, the act copy where act is not fp32, and the two AdamW moments of this rank's part
  const size_t weights = n * (8 + (act == DType::f32 ? 0 : dtype_size(act))) +
                         8 * ((n + size_t(optimizer_shards) - 1) / size_t(optimizer_shards));
  // hs and gc of every method object (or the model's one pair they all borrow), and the one dhs
  const GlaShape s = local_shape(c, batch, tokens_per_rank);
  const size_t kept = spb::remakes_states(recompute) ? 1 : size_t(method_objects(c, recompute));
  const size_t states = s.chunk_state_elems() * dtype_size(chunk_state) * (kept + 1) + s.qk_elems() * 4 * kept;
  // The dense dq, dk, dv count too: every rank agrees on the memory before the method is known.
  return weights + plan_acts(c, batch * tokens_per_rank, act, recompute, none, nullptr) +
         plan_dense_grads(c, batch * tokens_per_rank, act, none, nullptr) + states;
}

GlaModel::GlaModel(Runtime& rt, std::unique_ptr<ModelKernels> kernels, const GlaModelConfig& c, int batch,
                   int tokens_per_rank, const std::string& method, const SpConfig& sp, Recompute recompute,
                   uint64_t seed)
    : rt_(rt), c_(c), B_(batch), L_(tokens_per_rank), N_(batch * tokens_per_rank), sp_(sp), recompute_(recompute),
      mk_(std::move(kernels)), grads_ready_(*rt.dev, EventUse::order), grads_reduced_(*rt.dev, EventUse::order),
      wgrad_fork_(*rt.dev, EventUse::order), wgrads_done_(*rt.dev, EventUse::order) {
  c_.validate();
  for (int k = 0; k < kWgradKinds; ++k) wgrad_done_.push_back(std::make_unique<EventHandle>(*rt.dev, EventUse::order));
  SPB_CHECK(mk_ != nullptr, "GlaModel: no model kernels");
  act_ = mk_->act_dtype();
  SPB_CHECK(act_ == rt.kern->act_dtype(), "the model's and the GLA stages' activations differ in type");
  info_ = layout(c_, &layers_, &n_params_);
  embed_ = info_.front().offset;
  final_norm_ = info_[info_.size() - 2].offset;
  lm_head_ = info_.back().offset;

  Device& dev = *rt.dev;
  const size_t world = size_t(rt.world());
  shard_elems_ = ((n_params_ + world - 1) / world + 255) / 256 * 256;  // the all-gathers' blocks stay aligned
  const size_t padded = world * shard_elems_;
  params_ = Buffer(dev, padded * 4);
  grads_ = Buffer(dev, padded * 4);
  if (act_ != DType::f32) act_weights_ = Buffer(dev, padded * dtype_size(act_));
  // The products overwrite their weights' gradients; the embedding, the norms' weights and the gate's bias are
  // accumulated into (+=) by their kernels, so only those are zeroed before a step (the rest once, here: padding,
  // which the reduce-scatter of a sharded optimizer sums).
  dev.fill_zero(grads_.get(), grads_.bytes(), dev.compute_stream());
  for (const ParamInfo& p : info_)
    if (p.name == "embed.weight" || p.name.find("norm.weight") != std::string::npos ||
        p.name.find(".bias") != std::string::npos)
      fp32_read_.push_back(&p);
  reset(seed);
  acts_ = std::make_unique<Acts>();
  plan_acts(c_, N_, act_, recompute_, *acts_, &dev);
  const GlaShape local = local_shape(c_, B_, L_);
  dhs_ = Buffer(dev, chunk_state_bytes(*rt.kern, local));
  if (remakes_states()) {
    remade_gc_ = Buffer(dev, local.qk_elems() * 4), remade_hs_ = Buffer(dev, chunk_state_bytes(*rt.kern, local));
    remade_ = GlaStateBuffers{&remade_gc_, &remade_hs_};
  }
  set_method(method);
}

GlaModel::~GlaModel() = default;

void GlaModel::set_method(const std::string& method) {
  const MethodInfo& info = require_method(method);
  methods_.clear();  // free the old workspaces before the new ones are made
  method_name_ = method;
  SpConfig cfg = sp_;
  cfg.local = local_shape(c_, B_, L_);
  cfg.shared_dhs = &dhs_;
  if (remakes_states()) cfg.remade_states = &remade_;
  for (int l = 0; l < method_objects(c_, recompute_); ++l) methods_.push_back(info.make(rt_, cfg));
  grads_in_dproj_ = methods_.front()->takes_grad_ld();
  if (grads_in_dproj_) acts_->dq = Buffer(), acts_->dk = Buffer(), acts_->dv = Buffer();
  else if (!acts_->dq.get()) plan_dense_grads(c_, N_, act_, *acts_, rt_.dev.get());
}

size_t GlaModel::dense_grad_bytes() const { return acts_->dq.bytes() + acts_->dk.bytes() + acts_->dv.bytes(); }

size_t GlaModel::param_count() const {
  size_t n = 0;
  for (const ParamInfo& p : info_) n += p.elems();
  return n;
}

double GlaModel::flops_per_token() const {
  const double attn = 3.0 * c_.heads * (4.0 * c_.dk() * c_.dv() + double(kChunk) * (c_.dk() + c_.dv()));
  return 6.0 * double(param_count() - embedding_params()) + c_.layers * attn;
}

void GlaModel::set_grad_overlap(bool on) {
  SPB_CHECK(!(on && shard_optimizer_), "set_grad_overlap: the optimizer is sharded (its sums are a reduce-scatter)");
  grad_overlap_ = on;
}

void GlaModel::set_shard_optimizer(bool on) {
  SPB_CHECK(step_ == 0, "set_shard_optimizer: before the first step");
  SPB_CHECK(!(on && grad_overlap_), "set_shard_optimizer: the gradients' sums overlap the backward (all-reduces)");
  shard_optimizer_ = on && rt_.world() > 1;
}

void GlaModel::reset(uint64_t seed) {
  adam_m_.reset(), adam_v_.reset();  // made again, zero, at the first step
  init_params(seed);
  step_ = 0;
}

void GlaModel::init_params(uint64_t seed) {
  if (!mk_->computes()) return;  // no values to draw: 4 bytes a parameter on the host per rank, for nothing
  std::vector<float> host(n_params_, 0.0f);
  const uint64_t base = splitmix64(seed ^ 0x6d6f64656cULL);  // "model": apart from the operator's input streams
  for (const ParamInfo& p : info_) {
    const bool ones = p.name.find("norm.weight") != std::string::npos;
    const bool zeros = p.name.find(".bias") != std::string::npos;
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < p.elems(); ++i) {
      float v = ones ? 1.0f : 0.0f;
      if (!ones && !zeros) {  // Box-Muller from two counter-based uniforms: any element drawn alone
        const uint64_t r1 = splitmix64(base + 2 * (p.offset + i)), r2 = splitmix64(base + 2 * (p.offset + i) + 1);
        const double u1 = (double(r1 >> 11) + 1.0) * 0x1.0p-53, u2 = double(r2 >> 11) * 0x1.0p-53;
        v = float(c_.init_std * std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2));
      }
      host[p.offset + i] = v;
    }
  }
  rt_.dev->upload(params_.get(), host.data(), n_params_ * 4);
  refresh_act_weights();
}

void GlaModel::refresh_act_weights() {
  if (act_ != DType::f32)
    mk_->convert(n_params_, params_.get(), DType::f32, act_weights_.get(), act_, rt_.dev->compute_stream());
}

// Pointers into the flat vectors at an element offset: fp32 masters and gradients, and the act copy the GEMMs read.
struct GlaModel::Views {
  float* p;
  float* g;
  char* w;
  size_t a;
  float* P(size_t off) const { return p + off; }
  float* G(size_t off) const { return g + off; }
  const void* W(size_t off) const { return w + off * a; }
};

GlaModel::Views GlaModel::views() const {
  return {params_.f32(), grads_.f32(), static_cast<char*>(act_ == DType::f32 ? params_.get() : act_weights_.get()),
          dtype_size(act_)};
}

void GlaModel::stage(const char* name) {
  if (clock_) clock_->mark(name);
}

void GlaModel::mm(bool ta, bool tb, int M, int N, int K, float alpha, const void* A, const void* B, float beta, void* C,
                  DType c_type, Stream st) {
  if (clock_) clock_->add_flops(2.0 * M * N * K);
  mk_->gemm(ta, tb, M, N, K, alpha, A, B, beta, C, c_type, st);
}

GlaModel::LayerActs& GlaModel::acts_of(int l) const { return acts_->layer[remakes_blocks() ? 0 : size_t(l)]; }

float* GlaModel::stream_of(int l) const {
  if (!remakes_blocks()) return acts_->x[size_t(l)].f32();
  return l == c_.layers ? acts_->x[0].f32() : acts_->kept[size_t(l)].f32();
}

GlaModel::Elementwise GlaModel::elementwise_of(int l) const {
  const LayerActs& A = acts_of(l);
  if (remakes_elementwise() || remakes_blocks())
    return {acts_->h1s.get(), acts_->h2s.get(), acts_->ys.get(), acts_->ms.get()};
  return {A.h1.get(), A.h2.get(), A.y.get(), acts_->ms.get()};
}

void* GlaModel::gates_of(int l) const {
  return remakes_states() || remakes_blocks() ? acts_->gs.get() : acts_of(l).g.get();
}

void GlaModel::wgrad(Wgrad kind, int n, int k, int rows, const void* dY, const void* X, bool accumulate, float* dW) {
  Device& dev = *rt_.dev;
  const Stream st = dev.compute_stream();
  const float beta = accumulate ? 1 : 0;
  if (!wgrad_beside_) return mm(true, false, n, k, rows, 1, dY, X, beta, dW, DType::f32, st);
  const Stream side = dev.second_compute_stream();
  dev.record(wgrad_fork_.get(), st);
  dev.wait(side, wgrad_fork_.get());
  {
    TimelineSpan span(rt_, "weight_gradient", Lane::compute2);
    mk_->gemm(true, false, n, k, rows, 1, dY, X, beta, dW, DType::f32, side);  // off the clock's compute stream
  }
  dev.record(wgrad_done_[size_t(kind)]->get(), side);
}

void GlaModel::wait_wgrad(Wgrad kind) {
  if (wgrad_beside_) rt_.dev->wait(rt_.dev->compute_stream(), wgrad_done_[size_t(kind)]->get());
}

void GlaModel::wait_wgrads(Stream s) {
  if (!wgrad_beside_) return;
  rt_.dev->record(wgrads_done_.get(), rt_.dev->second_compute_stream());
  rt_.dev->wait(s, wgrads_done_.get());
}

// The residual adds: block l's o_proj and MLP down products go to acts_->delta, and the norm after each adds it to
// the residual stream in its own pass (x_mid = x + o_proj; x[l + 1] = x_mid + MLP down, in block l + 1's first norm or
// the final norm), so that the stream is read and written once per add (not copied, then read and written by the
// product). The products write fp32: a bf16 delta would round every block's contribution to the stream.
void GlaModel::forward_layer(int l, bool remake) {
  const Views V = views();
  ModelKernels& k = *mk_;
  const Layer& y = layers_[size_t(l)];
  LayerActs& A = acts_of(l);
  const Stream st = rt_.dev->compute_stream();
  const int N = N_, D = c_.hidden, Kd = c_.key_dim(), Vd = c_.value_dim(), F = c_.mlp_size(), R = c_.gate_rank;
  const DType t = act_;
  float* x = stream_of(l);
  float* delta = acts_->delta.f32();
  const auto [h1, h2, yo, m] = elementwise_of(l);
  TimelineSpan span(rt_, remake ? "layer_remake" : "layer", Lane::compute);
  // A block made again keeps the backward's stage on the clock ("recompute"), not the forward's stages.
  auto stage = [&](const char* name) {
    if (!remake) this->stage(name);
  };

  stage("norms");
  if (l == 0 || remake)  // remake: x is the block's kept input
    k.rmsnorm_fwd(N, D, x, V.P(y.attn_norm), c_.norm_eps, h1, A.rstd1.f32(), st);
  else  // x = the previous block's x_mid + its MLP down product
    k.rmsnorm_add_fwd(N, D, acts_of(l - 1).x_mid.f32(), delta, V.P(y.attn_norm), c_.norm_eps, x, h1, A.rstd1.f32(),
                      st);
  stage("q, k, v, gate projections");
  mm(false, true, N, Kd, D, 1, h1, V.W(y.wq), 0, A.q.get(), t, st);
  mm(false, true, N, Kd, D, 1, h1, V.W(y.wk), 0, A.k.get(), t, st);
  mm(false, true, N, Vd, D, 1, h1, V.W(y.wv), 0, A.v.get(), t, st);
  mm(false, true, N, Vd, D, 1, h1, V.W(y.wg), 0, A.z.get(), t, st);
  stage("forget gate's rank-R products");
  mm(false, true, N, R, D, 1, h1, V.W(y.wgk0), 0, A.gl.get(), t, st);
  mm(false, true, N, Kd, R, 1, A.gl.get(), V.W(y.wgk1), 0, A.pre.get(), t, st);
  stage("forget gate");
  k.forget_gate_fwd(N, Kd, A.pre.get(), V.P(y.bgk1), c_.gate_normaliser, gates_of(l), st);
  stage("attention (SP method)");
  {
    TimelineSpan span(rt_, "attention", Lane::compute);
    method(l).forward({A.q.get(), A.k.get(), A.v.get(), gates_of(l), nullptr, A.o.get(), nullptr});
  }
  stage("output gate norm");
  k.gated_rmsnorm_fwd(N * c_.heads, c_.dv(), A.o.get(), A.z.get(), V.P(y.g_norm), c_.norm_eps, yo,
                      A.rstd_gn.f32(), st);
  stage("o_proj");
  mm(false, true, N, D, Vd, 1, yo, V.W(y.wo), 0, delta, DType::f32, st);

  stage("norms");
  k.rmsnorm_add_fwd(N, D, x, delta, V.P(y.mlp_norm), c_.norm_eps, A.x_mid.f32(), h2, A.rstd2.f32(), st);
  if (remake) return;  // the backward makes each MLP slice's (a | b) again; the down product feeds only the next block
  const size_t a = dtype_size(t);
  for (int r0 = 0, rows = c_.mlp_chunk(N); r0 < N; r0 += rows) {
    const int n = std::min(rows, N - r0);
    void* ab = mlp_ab_rows(l, r0);
    stage("MLP gate, up");
    mm(false, true, n, 2 * F, D, 1, static_cast<const char*>(h2) + size_t(r0) * D * a, V.W(y.w_gate), 0, ab, t,
       st);  // [Wgate; Wup] are one matrix
    stage("swiglu");
    k.swiglu_fwd(n, F, ab, m, st);
    stage("MLP down");
    mm(false, true, n, D, F, 1, m, V.W(y.w_down), 0, delta + size_t(r0) * D, DType::f32, st);
  }
}

void* GlaModel::mlp_ab_rows(int l, int r0) const {
  const size_t row = size_t(2) * c_.mlp_size() * dtype_size(act_);
  return static_cast<char*>(acts_of(l).ab.get()) + (remakes_blocks() ? 0 : size_t(r0) * row);
}

// acts_->dx holds the gradient of block l's output on entry and of its input on return.
void GlaModel::backward_layer(int l) {
  const Views V = views();
  ModelKernels& k = *mk_;
  const Layer& y = layers_[size_t(l)];
  LayerActs& A = acts_of(l);
  Acts& S = *acts_;
  const Stream st = rt_.dev->compute_stream();
  const int N = N_, D = c_.hidden, Kd = c_.key_dim(), Vd = c_.value_dim(), F = c_.mlp_size(), R = c_.gate_rank;
  const DType t = act_, f32 = DType::f32;
  float* x = stream_of(l);
  // With recompute, h1, h2 and y are made again (into one buffer each) just before the products that read them; m,
  // at every level, by SwiGLU's backward.
  const auto [h1, h2, yo, m] = elementwise_of(l);
  TimelineSpan span(rt_, "layer_backward", Lane::compute);
  if (remakes_blocks()) {
    stage("recompute");
    // The block above's weight gradients' products read buffers every block shares: the remade forward writes them.
    for (int kind = 0; kind < kWgradKinds; ++kind) wait_wgrad(Wgrad(kind));
    forward_layer(l, /*remake=*/true);
  }
  if (remakes_elementwise()) {
    stage("recompute");
    wait_wgrad(kWgradProj);  // the block above's last weight gradient: its products read the buffers made again here
    k.rmsnorm_fwd(N, D, A.x_mid.f32(), V.P(y.mlp_norm), c_.norm_eps, h2, A.rstd2.f32(), st);
    k.gated_rmsnorm_fwd(N * c_.heads, c_.dv(), A.o.get(), A.z.get(), V.P(y.g_norm), c_.norm_eps, yo, A.rstd_gn.f32(),
                        st);
    k.rmsnorm_fwd(N, D, x, V.P(y.attn_norm), c_.norm_eps, h1, A.rstd1.f32(), st);
  }

  // MLP (S.dxa: the act copy of dx, from the norm's backward above), a slice of rows at a time, its weight gradients
  // summed over the slices. With set_wgrad_beside, each wait_wgrad below guards a buffer that a weight gradient's
  // product still reads. The down product's input gradient first (it does not read m), then SwiGLU's backward,
  // which makes m again into the buffer every block shares, then the down product's weight gradient from it.
  const size_t a = dtype_size(t);
  for (int r0 = 0, rows = c_.mlp_chunk(N); r0 < N; r0 += rows) {
    const int n = std::min(rows, N - r0);
    const char* dxa = static_cast<const char*>(S.dxa.get()) + size_t(r0) * D * a;
    const char* h2_rows = static_cast<const char*>(h2) + size_t(r0) * D * a;
    void* ab = mlp_ab_rows(l, r0);
    if (remakes_blocks()) {
      stage("recompute");
      mm(false, true, n, 2 * F, D, 1, h2_rows, V.W(y.w_gate), 0, ab, t, st);
    }
    stage("bwd: MLP down");
    mm(false, false, n, F, D, 1, dxa, V.W(y.w_down), 0, S.dmy.get(), t, st);
    stage("bwd: swiglu");
    wait_wgrad(kWgradGateUp);  // the block above's (or the slice before's) reads dab
    wait_wgrad(kWgradDown);    // the block above's (or the slice before's) reads m
    k.swiglu_bwd(n, F, ab, S.dmy.get(), S.dab.get(), m, st);
    stage("bwd: MLP down");
    wgrad(kWgradDown, D, F, n, dxa, m, r0 > 0, V.G(y.w_down));
    stage("bwd: MLP gate, up");
    wgrad(kWgradGateUp, 2 * F, D, n, S.dab.get(), h2_rows, r0 > 0, V.G(y.w_gate));
    mm(false, false, n, D, 2 * F, 1, S.dab.get(), V.W(y.w_gate), 0, S.dh() + size_t(r0) * D, f32, st);
  }
  stage("bwd: norms");
  wait_wgrad(kWgradDown);  // reads dxa
  k.rmsnorm_bwd(N, D, A.x_mid.f32(), V.P(y.mlp_norm), A.rstd2.f32(), S.dh(), S.dx.f32(), V.G(y.mlp_norm),
                S.dxa.get(), st);

  // attention
  // [Wq; Wk; Wv; Wg; W0] are one matrix: with their output gradients side by side in dproj, one GEMM gives all five
  // weight gradients and one the input gradient (instead of five accumulating into dh, each reading and writing it
  // in fp32). The output gate's norm writes dz into its columns, and a method that takes_grad_ld() dq, dk and dv.
  const int P = 2 * Kd + 2 * Vd + R;
  char* const dproj = static_cast<char*>(S.dproj.get());
  stage("bwd: o_proj");
  wgrad(kWgradO, D, Vd, N, S.dxa.get(), yo, false, V.G(y.wo));
  mm(false, false, N, Vd, D, 1, S.dxa.get(), V.W(y.wo), 0, S.dmy.get(), t, st);
  stage("bwd: output gate norm");
  wait_wgrad(kWgradProj);  // the block above's reads dproj
  k.gated_rmsnorm_bwd(N * c_.heads, c_.dv(), A.o.get(), A.z.get(), V.P(y.g_norm), A.rstd_gn.f32(), S.dmy.get(),
                      S.d_o.get(), dproj + size_t(2 * Kd + Vd) * a, V.G(y.g_norm), c_.heads, size_t(P), st);
  if (remakes_states()) {  // the method makes gc and its chunk states again from them
    stage("recompute");
    k.forget_gate_fwd(N, Kd, A.pre.get(), V.P(y.bgk1), c_.gate_normaliser, gates_of(l), st);
  }
  stage("bwd: attention (SP method)");
  {
    TimelineSpan span(rt_, "attention", Lane::compute);
    const SpForwardArgs fa{A.q.get(), A.k.get(), A.v.get(), gates_of(l), nullptr, A.o.get(), nullptr};
    if (recompute_ == Recompute::all) method(l).forward(fa);  // (remakes_blocks: in the block's forward above)
    SpBackwardArgs ba{S.d_o.get(), nullptr, S.dq.get(), S.dk.get(), S.dv.get(), S.dg.get(), nullptr};
    if (grads_in_dproj_) ba.dq = dproj, ba.dk = dproj + Kd * a, ba.dv = dproj + 2 * Kd * a, ba.grad_ld = P;
    method(l).backward(fa, ba);
  }
  stage("bwd: forget gate");
  wait_wgrad(kWgradRank);  // the block above's reads dpre
  k.forget_gate_bwd(N, Kd, A.pre.get(), V.P(y.bgk1), c_.gate_normaliser, S.dg.get(), S.dpre.get(), V.G(y.bgk1), st);
  stage("bwd: forget gate's rank-R products");
  wgrad(kWgradRank, Kd, R, N, S.dpre.get(), A.gl.get(), false, V.G(y.wgk1));
  mm(false, false, N, R, Kd, 1, S.dpre.get(), V.W(y.wgk1), 0, S.dgl.get(), t, st);
  stage("bwd: output gradients side by side");
  if (!grads_in_dproj_) {
    k.copy_columns(N, Kd, S.dq.get(), P, 0, dproj, st);
    k.copy_columns(N, Kd, S.dk.get(), P, Kd, dproj, st);
    k.copy_columns(N, Vd, S.dv.get(), P, 2 * Kd, dproj, st);
  }
  k.copy_columns(N, R, S.dgl.get(), P, 2 * Kd + 2 * Vd, dproj, st);
  stage("bwd: q, k, v, gate projections");
  wgrad(kWgradProj, P, D, N, S.dproj.get(), h1, false, V.G(y.wq));
  mm(false, false, N, D, P, 1, S.dproj.get(), V.W(y.wq), 0, S.dh(), f32, st);
  stage("bwd: norms");
  wait_wgrad(kWgradO);  // reads dxa
  k.rmsnorm_bwd(N, D, x, V.P(y.attn_norm), A.rstd1.f32(), S.dh(), S.dx.f32(), V.G(y.attn_norm), S.dxa.get(),
                st);
}

double GlaModel::forward_backward(const std::vector<int32_t>& tokens) {
  const Views V = views();
  ModelKernels& k = *mk_;
  Acts& S = *acts_;
  Device& dev = *rt_.dev;
  const Stream st = dev.compute_stream();
  const int N = N_, D = c_.hidden, Vc = c_.vocab;

  dev.synchronize();  // the previous step may still read the token buffers
  if (k.computes()) {
    SPB_CHECK(tokens.size() == size_t(B_) * (L_ + 1), "forward_backward: B x (L + 1) tokens per rank");
    std::vector<int32_t> in(static_cast<size_t>(N)), out(static_cast<size_t>(N));
    for (int b = 0; b < B_; ++b)
      for (int t = 0; t < L_; ++t) {
        in[size_t(b) * L_ + t] = tokens[size_t(b) * (L_ + 1) + t];
        out[size_t(b) * L_ + t] = tokens[size_t(b) * (L_ + 1) + t + 1];
      }
    dev.upload(S.tokens.get(), in.data(), in.size() * 4);
    dev.upload(S.targets.get(), out.data(), out.size() * 4);
  }

  stage("embedding");
  k.embedding_fwd(N, D, static_cast<const int32_t*>(S.tokens.get()), V.P(embed_), stream_of(0), st);
  for (int l = 0; l < c_.layers; ++l) forward_layer(l);
  float* xl = stream_of(c_.layers);
  stage("norms");
  k.rmsnorm_add_fwd(N, D, acts_of(c_.layers - 1).x_mid.f32(), S.delta.f32(), V.P(final_norm_), c_.norm_eps, xl,
                    S.hf.get(), S.rstd_f.f32(), st);
  // The logits a chunk of rows at a time (fp32, [chunk, vocab]); cross-entropy turns each into its rows of the loss
  // and of dlogits (act type, [chunk, vocab]), and the LM head's backward takes that chunk at once: its rows of
  // dh = dlogits W and its share of dW = dlogits^T hf (accumulated over the chunks, in line on the compute stream,
  // before the next chunk's cross-entropy overwrites dlogits). Neither the logits nor their gradient is ever whole.
  const double tokens_world = double(N) * rt_.world();
  const size_t a = dtype_size(act_);
  for (int r0 = 0, chunk = c_.logit_chunk(N); r0 < N; r0 += chunk) {
    const int rows = std::min(chunk, N - r0);
    const char* hf = static_cast<const char*>(S.hf.get()) + size_t(r0) * D * a;
    stage("LM head");
    mm(false, true, rows, Vc, D, 1, hf, V.W(lm_head_), 0, S.logits.get(), DType::f32, st);
    stage("cross-entropy");
    k.cross_entropy(rows, Vc, S.logits.f32(), static_cast<const int32_t*>(S.targets.get()) + r0,
                    float(1.0 / tokens_world), S.losses.f32() + r0, S.dlogits.get(), st);
    stage("bwd: LM head");
    mm(true, false, Vc, D, rows, 1, S.dlogits.get(), hf, r0 == 0 ? 0.f : 1.f, V.G(lm_head_), DType::f32, st);
    mm(false, false, rows, D, Vc, 1, S.dlogits.get(), V.W(lm_head_), 0, S.dh() + size_t(r0) * D, DType::f32, st);
  }

  stage("zero gradients");
  for (const ParamInfo* p : fp32_read_) dev.fill_zero(V.G(p->offset), p->elems() * 4, st);
  stage("bwd: norms");
  dev.fill_zero(S.dx.get(), S.dx.bytes(), st);
  k.rmsnorm_bwd(N, D, xl, V.P(final_norm_), S.rstd_f.f32(), S.dh(), S.dx.f32(), V.G(final_norm_), S.dxa.get(),
                st);
  // The flat vector is [embedding | block 0 | ... | block L-1 | final norm, LM head]: each bucket is one range.
  reduce_grads_beside(final_norm_, n_params_);
  for (int l = c_.layers - 1; l >= 0; --l) {
    backward_layer(l);
    reduce_grads_beside(layers_[size_t(l)].attn_norm,
                        l + 1 < c_.layers ? layers_[size_t(l) + 1].attn_norm : final_norm_);
  }
  stage("bwd: embedding");
  k.embedding_bwd(N, D, static_cast<const int32_t*>(S.tokens.get()), S.dx.f32(), V.G(embed_), st);
  stage("gradient all-reduce");
  wait_wgrads(st);  // the sums and the optimizer read every gradient
  if (rt_.world() > 1 && shard_optimizer_) {
    TimelineSpan span(rt_, "grad_reduce_scatter", Lane::compute);
    rt_.comm->reduce_scatter_sum(grads_.f32(), shard_elems_, st);
  } else if (rt_.world() > 1 && grad_overlap_) {
    reduce_grads_beside(0, layers_.front().attn_norm);
    dev.record(grads_reduced_.get(), dev.comm_stream());
    dev.wait(st, grads_reduced_.get());  // the optimizer reads the sums
  } else if (rt_.world() > 1) {
    TimelineSpan span(rt_, "grad_all_reduce", Lane::compute);
    rt_.comm->all_reduce_sum(grads_.f32(), n_params_, st);
  }

  stage("loss to the host");
  std::vector<float> losses(static_cast<size_t>(N));
  dev.download(losses.data(), S.losses.get(), size_t(N) * 4);
  double sum = 0;
  for (float x : losses) sum += x;
  return rt_.boot.sum(sum) / tokens_world;
}

void GlaModel::reduce_grads_beside(size_t begin, size_t end) {
  if (!grad_overlap_ || rt_.world() == 1) return;
  Device& dev = *rt_.dev;
  dev.record(grads_ready_.get(), dev.compute_stream());
  dev.wait(dev.comm_stream(), grads_ready_.get());
  wait_wgrads(dev.comm_stream());
  TimelineSpan span(rt_, "grad_all_reduce", Lane::comm);
  rt_.comm->all_reduce_sum(grads_.f32() + begin, end - begin, dev.comm_stream());
}

void GlaModel::optimizer_step(const AdamWConfig& o) {
  ++step_;
  stage("AdamW + bf16 weights");
  const Stream st = rt_.dev->compute_stream();
  const Views V = views();
  const size_t b = shard_optimizer_ ? shard_begin() : 0, e = shard_optimizer_ ? shard_end() : n_params_;
  if (!adam_m_.get()) {  // AdamW's two moments, of the part this rank steps, made at the first step
    const size_t n = shard_optimizer_ ? shard_elems_ : n_params_;
    adam_m_ = Buffer(*rt_.dev, n * 4), adam_v_ = Buffer(*rt_.dev, n * 4);
    rt_.dev->fill_zero(adam_m_.get(), adam_m_.bytes(), st);
    rt_.dev->fill_zero(adam_v_.get(), adam_v_.bytes(), st);
  }
  if (e > b)
    mk_->adamw(e - b, V.P(b), V.G(b), adam_m_.f32(), adam_v_.f32(), o.lr, o.beta1, o.beta2, o.eps, o.weight_decay,
               step_, act_ == DType::f32 ? nullptr : static_cast<char*>(act_weights_.get()) + b * V.a, st);
  if (shard_optimizer_) {
    // Every rank's part of what the products read: the act copy, or the fp32 masters where that is what they read.
    stage("weights to every rank");
    TimelineSpan span(rt_, "weights_all_gather", Lane::compute);
    if (act_ == DType::f32) {
      gather_parts(params_, 4);
    } else {
      gather_parts(act_weights_, V.a);
      share_fp32_read_masters();
    }
  }
}

// Sharded with an act copy, a rank's fp32 masters are current in its own part only, but the kernels read the
// embedding, the norms' weights and the gate's bias as fp32 masters: each of their elements is kept by the rank that
// stepped it and zeroed on the others, then summed (x + 0 + ... = x exactly), all in one group.
void GlaModel::share_fp32_read_masters() {
  const Stream st = rt_.dev->compute_stream();
  const size_t b = shard_begin(), e = shard_end();
  float* p = params_.f32();
  for (const ParamInfo* t : fp32_read_) {
    const size_t lo = t->offset, hi = t->offset + t->elems();
    if (lo < std::min(hi, b)) rt_.dev->fill_zero(p + lo, (std::min(hi, b) - lo) * 4, st);
    if (std::max(lo, e) < hi) rt_.dev->fill_zero(p + std::max(lo, e), (hi - std::max(lo, e)) * 4, st);
  }
  rt_.comm->group_start();
  for (const ParamInfo* t : fp32_read_) rt_.comm->all_reduce_sum(p + t->offset, t->elems(), st);
  rt_.comm->group_end();
}

void GlaModel::gather_parts(const Buffer& flat, size_t elem_bytes) const {
  char* base = static_cast<char*>(flat.get());
  rt_.comm->all_gather(base + size_t(rt_.rank()) * shard_elems_ * elem_bytes, base, shard_elems_ * elem_bytes,
                       rt_.dev->compute_stream());
}

std::vector<float> GlaModel::download_params() const {
  // Sharded, a rank's fp32 masters are current in its own part only (where the products read the act copy).
  if (shard_optimizer_ && act_ != DType::f32) gather_parts(params_, 4);
  std::vector<float> h(n_params_);
  rt_.dev->download(h.data(), params_.get(), n_params_ * 4);
  return h;
}

void GlaModel::upload_params(const std::vector<float>& p) {
  SPB_CHECK(p.size() == n_params_, "upload_params: " + std::to_string(p.size()) + " elements for " +
                                       std::to_string(n_params_));
  rt_.dev->upload(params_.get(), p.data(), n_params_ * 4);
  refresh_act_weights();
}

std::vector<float> GlaModel::download_grads() const {
  // Sharded, each rank holds the sum of its own part: every part to every rank.
  if (shard_optimizer_) gather_parts(grads_, 4);
  std::vector<float> h(n_params_);
  rt_.dev->download(h.data(), grads_.get(), n_params_ * 4);
  return h;
}

double GlaModel::grad_norm() const {
  const std::vector<float> g = download_grads();
  double s = 0;
#pragma omp parallel for reduction(+ : s) schedule(static)
  for (size_t i = 0; i < g.size(); ++i) s += double(g[i]) * g[i];
  return std::sqrt(s);
}

}  // namespace spb
