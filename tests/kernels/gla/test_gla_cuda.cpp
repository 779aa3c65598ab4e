// The CUDA GLA stages (bf16 activations and chunk states hs / dhs, the other states fp32) against the fp64 token loop
// (DESIGN §7): relative RMS error < 4e-3 for o and < 5e-3 for ht, dq, dk, dv, dg, dh0, on fresh random inputs rounded
// to bf16 before the reference sees them; lengths that are not multiples of 64, dk != dv, odd sizes, with and without
// h0 / dht. Every output and workspace buffer is poisoned with NaN (0xFF bytes) first, so an unwritten element fails.
// The SP helper stages are checked against the CPU stages on the same inputs. Skips itself where there is no CUDA
// device.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "runtime/cuda_check.h"
#include "runtime/device.h"
#include "sp/inputs.h"
#include "runtime/stats.h"
#include "kernels/gla/cpu/gla_reference.h"
#include "kernels/gla/cuda/gla_cuda.h"
#include "kernels/gla/cuda/gla_cuda_internal.h"
#include "kernels/gla/cuda/tf32_model.h"
#include "kernels/gla/gla.h"
#include "../../gpu_test_util.h"

namespace spb {
namespace {

using test::have_gpu;
using test::round_bf16;

std::vector<float> bf16_rounded(std::vector<float> x) {
  for (float& v : x) v = round_bf16(v);
  return x;
}

void poison(Buffer& b) {
  if (b.get()) SPB_CUDA(cudaMemset(b.get(), 0xFF, b.bytes()));  // NaN as fp32 and as bf16
}

std::vector<float> fetch(Device& dev, const Buffer& b, DType t, size_t n) {
  std::vector<float> x(n);
  dev.download_as(x.data(), b.get(), t, n);
  return x;
}

bool all_finite(const std::vector<float>& x) {
  for (float v : x)
    if (!std::isfinite(v)) return false;
  return true;
}

// The shapes of the state tests (CudaBoundaryState, CudaStatesBySpans) and their SCOPED_TRACE label.
struct StateShape {
  int B, T, H, dk, dv;
};
GlaShape gla_shape(const StateShape& sh) {
  GlaShape s;
  s.B = sh.B, s.T = sh.T, s.H = sh.H, s.dk = sh.dk, s.dv = sh.dv;
  return s;
}
std::string shape_label(const GlaShape& s) {
  return "B" + std::to_string(s.B) + " T" + std::to_string(s.T) + " H" + std::to_string(s.H) + " dk" +
         std::to_string(s.dk) + " dv" + std::to_string(s.dv);
}

// A shape's inputs on the device: q, k, v, g, d_o as bf16, h0 and dht as fp32 where x has them (empty otherwise).
struct DeviceInputs {
  Buffer q, k, v, g, d_o, h0, dht;
  DeviceInputs(Device& dev, const GlaShape& s, const HostTensors& x)
      : q(dev, s.qk_elems() * 2), k(dev, s.qk_elems() * 2), v(dev, s.v_elems() * 2), g(dev, s.qk_elems() * 2),
        d_o(dev, s.v_elems() * 2), h0(dev, x.h0.size() * 4), dht(dev, x.dht.size() * 4) {
    dev.upload_as(q.get(), DType::bf16, x.q.data(), s.qk_elems());
    dev.upload_as(k.get(), DType::bf16, x.k.data(), s.qk_elems());
    dev.upload_as(v.get(), DType::bf16, x.v.data(), s.v_elems());
    dev.upload_as(g.get(), DType::bf16, x.g.data(), s.qk_elems());
    dev.upload_as(d_o.get(), DType::bf16, x.d_o.data(), s.v_elems());
    if (!x.h0.empty()) dev.upload(h0.get(), x.h0.data(), x.h0.size() * 4);
    if (!x.dht.empty()) dev.upload(dht.get(), x.dht.data(), x.dht.size() * 4);
  }
};

enum class Gates { model, strong, extreme };  // extreme: strong x 6, decays past the sub-chunk guard

struct Case {
  int B, T, H, dk, dv;
  Gates gates;
  bool h0, dht;
  bool legacy_stream = false;  // run on the legacy default stream (Stream{nullptr})
  int states_bk = 0;           // the sequential state walk (set_states_variant(1)) at this tile (0: by spans)
  int variant = 0;             // force a variant of the A-matrix and dq/dk/dg kernels (0: their default)
};

std::string name_of(const testing::TestParamInfo<Case>& i) {
  const Case& c = i.param;
  const char* gn = c.gates == Gates::model ? "model" : c.gates == Gates::strong ? "strong" : "extreme";
  return "B" + std::to_string(c.B) + "T" + std::to_string(c.T) + "H" + std::to_string(c.H) + "_dk" +
         std::to_string(c.dk) + "_dv" + std::to_string(c.dv) + "_" + gn + (c.h0 ? "_h0" : "") + (c.dht ? "_dht" : "") +
         (c.legacy_stream ? "_stream0" : "") + (c.states_bk ? "_bk" + std::to_string(c.states_bk) : "") +
         (c.variant ? "_v" + std::to_string(c.variant) : "");
}

class CudaVsReference : public testing::TestWithParam<Case> {};

TEST_P(CudaVsReference, EveryOutputAndGradient) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  const Case c = GetParam();
  GlaShape s;
  s.B = c.B, s.T = c.T, s.H = c.H, s.dk = c.dk, s.dv = c.dv;
  const uint64_t seed = 7000 + 131 * c.T + 17 * c.dk + c.dv + (c.h0 ? 3 : 0) + int(c.gates);
  HostTensors x = generate_inputs(s, seed, c.gates == Gates::model ? GateKind::model : GateKind::strong, c.h0, c.dht);
  if (c.gates == Gates::extreme)
    for (float& v : x.g) v *= 6.f;
  // The GPU sees bf16 activations: the reference gets exactly those values.
  x.q = bf16_rounded(x.q), x.k = bf16_rounded(x.k), x.v = bf16_rounded(x.v), x.g = bf16_rounded(x.g);
  x.d_o = bf16_rounded(x.d_o);
  const GlaReferenceResult ref = gla_reference(s, x.q, x.k, x.v, x.g, x.h0, x.d_o, x.dht);

  auto dev = make_cuda_device(0);
  auto kern = make_cuda_kernels();
  ASSERT_EQ(kern->act_dtype(), DType::bf16);
  ASSERT_EQ(kern->chunk_state_type(), DType::bf16);
  const size_t QK = s.qk_elems(), V = s.v_elems(), S = s.state_elems();
  DeviceInputs in(*dev, s, x);
  Buffer &q = in.q, &k = in.k, &v = in.v, &g = in.g, &d_o = in.d_o, &h0 = in.h0, &dht = in.dht;
  Buffer o(*dev, V * 2), dq(*dev, QK * 2), dk(*dev, QK * 2), dv(*dev, V * 2), dg(*dev, QK * 2);
  Buffer ht(*dev, S * 4), dh0(*dev, S * 4);

  GlaWorkspace ws(*dev, *kern, s);
  ASSERT_EQ(ws.hs.bytes(), s.chunk_state_elems() * 2);
  ASSERT_EQ(ws.dhs.bytes(), s.chunk_state_elems() * 2);
  for (Buffer* b : {&o, &dq, &dk, &dv, &dg, &ht, &dh0, &ws.gc, &ws.lambda, &ws.hs, &ws.ht, &ws.dhs}) poison(*b);
  dev->synchronize();  // the memsets ran on the legacy stream; the compute stream does not wait for it

  const Stream st = c.legacy_stream ? Stream{} : dev->compute_stream();
  gla_cuda::set_states_variant(c.states_bk ? 1 : 0);
  gla_cuda::set_states_bk(c.states_bk);
  gla_cuda::set_intra_variant(c.variant);
  gla_cuda::set_dqk_variant(c.variant);
  const float* h0p = c.h0 ? h0.f32() : nullptr;
  const float* dhtp = c.dht ? dht.f32() : nullptr;
  gla_forward(*kern, ws, q.get(), k.get(), v.get(), g.get(), h0p, o.get(), ht.f32(), st);
  gla_backward(*kern, ws, q.get(), k.get(), v.get(), g.get(), h0p, d_o.get(), dhtp, dq.get(), dk.get(), dv.get(),
               dg.get(), dh0.f32(), st);
  dev->synchronize();
  gla_cuda::set_states_variant(0);
  gla_cuda::set_states_bk(0);
  gla_cuda::set_intra_variant(0);
  gla_cuda::set_dqk_variant(0);

  const std::vector<float> O = fetch(*dev, o, DType::bf16, V), HT = fetch(*dev, ht, DType::f32, S);
  const std::vector<float> DQ = fetch(*dev, dq, DType::bf16, QK), DK = fetch(*dev, dk, DType::bf16, QK);
  const std::vector<float> DV = fetch(*dev, dv, DType::bf16, V), DG = fetch(*dev, dg, DType::bf16, QK);
  const std::vector<float> DH0 = fetch(*dev, dh0, DType::f32, S);
  const std::vector<float> LAM = fetch(*dev, ws.lambda, DType::f32, s.state_rows());
  for (auto* t : {&O, &HT, &DQ, &DK, &DV, &DG, &DH0, &LAM}) EXPECT_TRUE(all_finite(*t)) << "NaN or unwritten element";

  const double eo = rel_rms_error(ref.o, O, V), eht = rel_rms_error(ref.ht, HT, S);
  const double edq = rel_rms_error(ref.dq, DQ, QK), edk = rel_rms_error(ref.dk, DK, QK);
  const double edv = rel_rms_error(ref.dv, DV, V), edg = rel_rms_error(ref.dg, DG, QK);
  const double edh0 = rel_rms_error(ref.dh0, DH0, S);
  // lambda = sum of g over all tokens, per (b, h, feature).
  std::vector<double> lam(s.state_rows(), 0.0);
  for (int b = 0; b < s.B; ++b)
    for (int t = 0; t < s.T; ++t)
      for (int h = 0; h < s.H; ++h)
        for (int i = 0; i < s.dk; ++i)
          lam[(size_t(b) * s.H + h) * s.dk + i] += x.g[((size_t(b) * s.T + t) * s.H + h) * s.dk + i];
  const double elam = rel_rms_error(lam, LAM, lam.size());
  std::printf("[ errors ] %-44s o %.2e ht %.2e dq %.2e dk %.2e dv %.2e dg %.2e dh0 %.2e lambda %.1e\n",
              name_of({c, 0}).c_str(), eo, eht, edq, edk, edv, edg, edh0, elam);
  EXPECT_LT(eo, 4e-3) << "o";
  EXPECT_LT(eht, 5e-3) << "ht";
  EXPECT_LT(edq, 5e-3) << "dq";
  EXPECT_LT(edk, 5e-3) << "dk";
  EXPECT_LT(edv, 5e-3) << "dv";
  EXPECT_LT(edg, 5e-3) << "dg";
  EXPECT_LT(edh0, 5e-3) << "dh0";
  EXPECT_LT(elam, 1e-5) << "lambda";
}

std::vector<Case> cases() {
  std::vector<Case> v;
  for (int T : {1, 63, 64, 65, 200, 1000})
    for (Gates g : {Gates::model, Gates::strong})
      for (bool with : {false, true}) v.push_back({2, T, 2, 32, 48, g, with, with});
  v.push_back({1, 130, 3, 16, 24, Gates::model, true, true, true});
  v.push_back({2, 77, 1, 24, 16, Gates::strong, false, true});
  v.push_back({1, 150, 2, 20, 12, Gates::model, true, false});  // rows not 16-byte multiples: element-wise loads
  v.push_back({1, 91, 2, 13, 7, Gates::strong, true, true});    // odd dk and dv
  v.push_back({1, 129, 2, 64, 64, Gates::strong, true, true});
  v.push_back({1, 70, 1, 96, 200, Gates::model, false, true});  // partial dk and dv tiles
  v.push_back({1, 300, 2, 128, 128, Gates::model, true, true});
  v.push_back({1, 257, 1, 128, 128, Gates::strong, false, false, true});
  v.push_back({1, 200, 1, 256, 512, Gates::model, true, true});
  v.push_back({1, 100, 2, 48, 64, Gates::extreme, true, true});  // the exact diagonal-block fallback
  v.push_back({1, 200, 1, 128, 128, Gates::extreme, false, true});
  v.push_back({1, 300, 2, 128, 128, Gates::strong, true, true, false, 32});  // the 32-row state tile
  v.push_back({2, 65, 1, 40, 72, Gates::model, true, true, false, 32});
  v.push_back({1, 129, 2, 64, 64, Gates::strong, true, true, false, 16});
  // the other variants of the A-matrix and dq/dk/dg kernels (A-matrix: 1: 32-wide slices, 2: 16-wide slices, 3 blocks
  // per SM, 3: 2 with one barrier per slice, their default 4: 3 with the state slice in quads; dq/dk/dg: its dv
  // slices 1, 2 or 3 (the default) ahead)
  for (int var : {1, 2, 3}) {
    v.push_back({1, 91, 2, 13, 7, Gates::strong, true, true, false, 0, var});
    v.push_back({1, 200, 1, 256, 512, Gates::model, true, true, false, 0, var});
    v.push_back({1, 100, 2, 48, 64, Gates::extreme, true, true, false, 0, var});
    v.push_back({2, 65, 1, 40, 72, Gates::strong, true, true, false, 0, var});
  }
  return v;
}

INSTANTIATE_TEST_SUITE_P(Cuda, CudaVsReference, testing::ValuesIn(cases()), name_of);

// ---- the SP helper stages against the CPU stages ------------------------------------------------------------------

std::vector<float> randn_vec(size_t n, uint64_t seed, float scale = 1.f) {
  GlaShape s;
  s.B = 1, s.T = int(n), s.H = 1, s.dk = 1, s.dv = 1;
  std::vector<float> x = generate_inputs(s, seed, GateKind::model, false, false).q;
  for (float& v : x) v *= scale;
  return x;
}

TEST(CudaHelpers, LateStateCorrectionsMatchCpu) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  for (const GlaShape& s : {GlaShape{2, 150, 2, 24, 40}, GlaShape{1, 257, 2, 128, 128}, GlaShape{1, 64, 1, 13, 7}}) {
    SCOPED_TRACE("dk " + std::to_string(s.dk) + " dv " + std::to_string(s.dv) + " T " + std::to_string(s.T));
    const HostTensors x = generate_inputs(s, 99 + s.T, GateKind::strong, true, true);
    const std::vector<float> q = bf16_rounded(x.q), g = bf16_rounded(x.g);
    auto dev = make_cuda_device(0);
    auto gpu = make_cuda_kernels();
    auto cpu = make_cpu_kernels();
    const size_t QK = s.qk_elems(), V = s.v_elems(), S = s.state_elems(), CS = s.chunk_state_elems();
    Buffer qd(*dev, QK * 2), gd(*dev, QK * 2), gcd(*dev, QK * 4), lam(*dev, s.state_rows() * 4);
    dev->upload_as(qd.get(), DType::bf16, q.data(), QK);
    dev->upload_as(gd.get(), DType::bf16, g.data(), QK);
    gpu->chunk_cumsum(s, gd.get(), gcd.f32(), lam.f32(), dev->compute_stream());
    std::vector<float> gc(QK), gc_cpu(QK), lam_cpu(s.state_rows());
    dev->download(gc.data(), gcd.get(), QK * 4);
    cpu->chunk_cumsum(s, g.data(), gc_cpu.data(), lam_cpu.data(), {});
    EXPECT_LT(rel_rms_error(gc_cpu, gc, QK), 1e-6) << "chunk_cumsum";
    EXPECT_LT(rel_rms_error(lam_cpu, fetch(*dev, lam, DType::f32, s.state_rows()), s.state_rows()), 1e-6) << "lambda";

    // output_add_initial (o is bf16 on the GPU: the result is rounded once more)
    const std::vector<float> S_in = randn_vec(S, 5), o0 = bf16_rounded(randn_vec(V, 6));
    Buffer Sd(*dev, S * 4), od(*dev, V * 2);
    dev->upload(Sd.get(), S_in.data(), S * 4);
    dev->upload_as(od.get(), DType::bf16, o0.data(), V);
    gpu->output_add_initial(s, qd.get(), gcd.f32(), Sd.f32(), od.get(), dev->compute_stream());
    std::vector<float> o_cpu = o0;
    cpu->output_add_initial(s, q.data(), gc.data(), S_in.data(), o_cpu.data(), {});
    EXPECT_LT(rel_rms_error(o_cpu, fetch(*dev, od, DType::bf16, V), V), 4e-3) << "output_add_initial";

    // states_add_initial, with and without ht: hs bf16 (read, added in fp32, rounded once), ht fp32
    for (bool edge : {true, false}) {
      const std::vector<float> hs0 = bf16_rounded(randn_vec(CS, 7)), e0 = randn_vec(S, 8);
      Buffer hsd(*dev, CS * 2), ed(*dev, S * 4);
      dev->upload_as(hsd.get(), DType::bf16, hs0.data(), CS);
      dev->upload(ed.get(), e0.data(), S * 4);
      std::vector<float> hs_cpu = hs0, e_cpu = e0;
      gpu->states_add_initial(s, gcd.f32(), Sd.f32(), hsd.get(), edge ? ed.f32() : nullptr, dev->compute_stream());
      cpu->states_add_initial(s, gc.data(), S_in.data(), hs_cpu.data(), edge ? e_cpu.data() : nullptr, {});
      EXPECT_LT(rel_rms_error(hs_cpu, fetch(*dev, hsd, DType::bf16, CS), CS), kOneBf16Rounding)
          << "states_add_initial";
      EXPECT_LT(rel_rms_error(e_cpu, fetch(*dev, ed, DType::f32, S), S), 1e-5) << "states_add_initial ht";
    }
  }
}

// Every tensor-core operand that is not exact bf16 goes through tf32_bits: it must round to nearest (ties to even),
// keep infinities and NaN, and leave the 13 low bits zero, bit for bit as the arithmetic model says.
TEST(CudaHelpers, Tf32RoundingIsNearestEven) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  const std::vector<float> x = gla_cuda::tf32_probe_values();
  const int n = int(x.size());
  auto dev = make_cuda_device(0);
  Buffer in(*dev, n * 4), out(*dev, n * 4);
  dev->upload(in.get(), x.data(), n * 4);
  gla_cuda::launch_tf32_bits(in.f32(), static_cast<uint32_t*>(out.get()), n, nullptr);
  std::vector<uint32_t> got(n);
  dev->download(got.data(), out.get(), n * 4);
  int wrong = 0;
  for (int i = 0; i < n; ++i) {
    if (gla_cuda::tf32_matches_model(x[i], got[i])) continue;
    const float want = gla_cuda::tf32_model(x[i]);
    uint32_t x_bits, want_bits;
    std::memcpy(&x_bits, &x[i], 4);
    std::memcpy(&want_bits, &want, 4);
    if (++wrong <= 5)
      ADD_FAILURE() << "tf32_bits(" << x[i] << " = 0x" << std::hex << x_bits
                    << ") = 0x" << got[i] << ", the model says 0x" << want_bits << std::dec;
  }
  EXPECT_EQ(wrong, 0) << "of " << n << " values";
}

TEST(CudaHelpers, StateAlgebraMatchesCpu) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  auto dev = make_cuda_device(0);
  auto gpu = make_cuda_kernels();
  auto cpu = make_cpu_kernels();
  const size_t rows = 300, cols = 37, n = rows * cols;
  std::vector<float> decay = randn_vec(rows, 11), x = randn_vec(n, 12), y = randn_vec(n, 13);
  for (float& d : decay) d = -std::fabs(d) * 3.f;
  decay[0] = 0.f, decay[1] = -0.6931471805599453f, decay[2] = -1000.f;
  Buffer dd(*dev, rows * 4), xd(*dev, n * 4), yd(*dev, n * 4), od(*dev, n * 4);
  dev->upload(dd.get(), decay.data(), rows * 4);
  dev->upload(xd.get(), x.data(), n * 4);
  dev->upload(yd.get(), y.data(), n * 4);
  std::vector<float> ref(n), ref2(n);
  cpu->state_fold(rows, cols, decay.data(), x.data(), y.data(), ref.data(), {});
  gpu->state_fold(rows, cols, dd.f32(), xd.f32(), yd.f32(), od.f32(), dev->compute_stream());
  const std::vector<float> out = fetch(*dev, od, DType::f32, n);
  EXPECT_LT(rel_rms_error(ref, out, n), 1e-6) << "state_fold";
  for (size_t c = 0; c < cols; ++c) {
    EXPECT_EQ(out[c], x[c] + y[c]);
    EXPECT_EQ(out[2 * cols + c], y[2 * cols + c]);
  }
  gpu->state_fold(rows, cols, dd.f32(), xd.f32(), yd.f32(), xd.f32(), dev->compute_stream());  // out aliases x
  EXPECT_LT(rel_rms_error(ref, fetch(*dev, xd, DType::f32, n), n), 1e-6) << "state_fold in place";

  dev->upload(xd.get(), x.data(), n * 4);
  gpu->vec_add(n, xd.f32(), yd.f32(), od.f32(), dev->compute_stream());
  cpu->vec_add(n, x.data(), y.data(), ref2.data(), {});
  EXPECT_EQ(ref2, fetch(*dev, od, DType::f32, n)) << "vec_add";

  // copy_4d: [B, T, H, D] -> [B, H, T, D] (the Ulysses layout change) for 2-, 4- and 3-byte elements, and a plain
  // transpose.
  const int64_t B = 2, T = 5, H = 3, D = 4;
  for (size_t eb : {size_t(2), size_t(4), size_t(3)}) {
    const size_t bytes = size_t(B * T * H * D) * eb;
    std::vector<unsigned char> src(bytes), want(bytes, 0), got(bytes, 0);
    for (size_t i = 0; i < bytes; ++i) src[i] = static_cast<unsigned char>(i * 7 + 3);
    const int64_t dims[4] = {B, T, H, D * 1};
    const int64_t ss[4] = {T * H * D, H * D, D, 1}, ds[4] = {H * T * D, D, T * D, 1};
    cpu->copy_4d(want.data(), src.data(), eb, dims, ds, ss, {});
    Buffer sd(*dev, bytes), dd2(*dev, bytes);
    dev->upload(sd.get(), src.data(), bytes);
    SPB_CUDA(cudaMemset(dd2.get(), 0, bytes));
    dev->synchronize();
    gpu->copy_4d(dd2.get(), sd.get(), eb, dims, ds, ss, dev->compute_stream());
    dev->download(got.data(), dd2.get(), bytes);
    EXPECT_EQ(want, got) << "copy_4d, element bytes " << eb;
  }
}

}  // namespace
}  // namespace spb

namespace spb {
namespace {
// The boundary states alone (chunk_final_state, chunk_initial_dstate: what an SP rank sends first) against the fp64
// loop's ht and dh0 from a zero h0 and dht, and against the recurrence's ht / dh0 on the same device inputs (the
// same tf32 rounding, another summation order): lengths with a partial chunk, shorter than one span, several spans
// with a partial last one; every state shape; B, H > 1. The result buffer is poisoned first. The forward starts from
// the raw gates (on the shapes where the kernel scans g itself it leaves gc alone, elsewhere it computes gc): its lambda
// and, where it says it wrote it, its gc must equal chunk_cumsum's.
TEST(CudaBoundaryState, EqualsTheRecurrencesEnd) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  const StateShape shapes[] = {{1, 1, 1, 64, 64},     {1, 100, 2, 64, 64},    {2, 1000, 3, 128, 128},
                               {1, 3000, 2, 128, 64}, {1, 4160, 1, 256, 512}, {1, 16384, 4, 128, 128},
                               {2, 777, 2, 64, 256},  {1, 2048, 1, 256, 256}, {1, 333, 2, 100, 60}};
  auto dev = make_cuda_device(0);
  auto kern = make_cuda_kernels();
  for (const StateShape& sh : shapes) {
    const GlaShape s = gla_shape(sh);
    SCOPED_TRACE(shape_label(s));
    HostTensors x = generate_inputs(s, 977 + s.T, GateKind::model, false, false);
    x.q = bf16_rounded(x.q), x.k = bf16_rounded(x.k), x.v = bf16_rounded(x.v), x.g = bf16_rounded(x.g);
    x.d_o = bf16_rounded(x.d_o);
    const bool with_ref = s.T <= 4160;  // the fp64 loop is slow on the longest case
    GlaReferenceResult ref;
    if (with_ref) ref = gla_reference(s, x.q, x.k, x.v, x.g, x.h0, x.d_o, x.dht);
    const size_t QK = s.qk_elems(), V = s.v_elems(), S = s.state_elems();
    DeviceInputs in(*dev, s, x);
    Buffer &q = in.q, &k = in.k, &v = in.v, &g = in.g, &d_o = in.d_o;
    Buffer ht(*dev, S * 4), dh0(*dev, S * 4), ht_rec(*dev, S * 4), dh0_rec(*dev, S * 4);
    Buffer gc_b(*dev, QK * 4), lam_b(*dev, s.state_rows() * 4);
    GlaWorkspace ws(*dev, *kern, s);
    for (Buffer* b : {&ht, &dh0, &ht_rec, &dh0_rec, &gc_b, &lam_b}) poison(*b);
    dev->synchronize();
    const Stream st = dev->compute_stream();
    kern->chunk_cumsum(s, g.get(), ws.gc.f32(), ws.lambda.f32(), st);
    const bool wrote_gc = kern->chunk_final_state(s, k.get(), v.get(), g.get(), gc_b.f32(), ht.f32(), lam_b.f32(), st);
    kern->chunk_initial_dstate(s, q.get(), d_o.get(), g.get(), ws.gc.f32(), dh0.f32(), st);
    kern->chunk_states_fwd(s, k.get(), v.get(), ws.gc.f32(), nullptr, nullptr, ht_rec.f32(), st);
    kern->chunk_states_bwd(s, q.get(), d_o.get(), ws.gc.f32(), nullptr, nullptr, dh0_rec.f32(), st);
    dev->synchronize();
    const std::vector<float> HT = fetch(*dev, ht, DType::f32, S), DH0 = fetch(*dev, dh0, DType::f32, S);
    const std::vector<float> HTr = fetch(*dev, ht_rec, DType::f32, S), DH0r = fetch(*dev, dh0_rec, DType::f32, S);
    const std::vector<float> LAM = fetch(*dev, lam_b, DType::f32, s.state_rows());
    EXPECT_TRUE(all_finite(LAM)) << "lambda: NaN or unwritten element";
    EXPECT_LT(rel_rms_error(fetch(*dev, ws.lambda, DType::f32, s.state_rows()), LAM, s.state_rows()), 1e-6)
        << "lambda against chunk_cumsum's";
    if (wrote_gc) EXPECT_EQ(fetch(*dev, gc_b, DType::f32, QK), fetch(*dev, ws.gc, DType::f32, QK)) << "gc";
    EXPECT_TRUE(all_finite(HT)) << "ht: NaN or unwritten element";
    EXPECT_TRUE(all_finite(DH0)) << "dh0: NaN or unwritten element";
    EXPECT_LT(rel_rms_error(HTr, HT, S), 1e-5) << "ht against the recurrence";
    EXPECT_LT(rel_rms_error(DH0r, DH0, S), 1e-5) << "dh0 against the recurrence";
    if (with_ref) {
      EXPECT_LT(rel_rms_error(ref.ht, HT, S), 5e-3) << "ht";
      EXPECT_LT(rel_rms_error(ref.dh0, DH0, S), 5e-3) << "dh0";
    }
    std::printf("[ errors ] CudaBoundaryState B%d T%d H%d dk%d dv%d: ht %.2e (rec %.2e) dh0 %.2e (rec %.2e)\n", s.B,
                s.T, s.H, s.dk, s.dv, with_ref ? rel_rms_error(ref.ht, HT, S) : -1.0, rel_rms_error(HTr, HT, S),
                with_ref ? rel_rms_error(ref.dh0, DH0, S) : -1.0, rel_rms_error(DH0r, DH0, S));
  }
}

// The chunk states by spans (chunk_states_fwd / _bwd's default: launch_states_spans) and after a boundary call
// (chunk_states_*_after_boundary, which reuses that call's partials) against the sequential walk on the same device
// inputs (set_states_variant(1): the same tf32 rounding, another order of fp32 sums), with an initial state and a final
// gradient, every output poisoned first. Then the contract's other side: a boundary call on zero keys, the keys changed
// under the same pointer, must leave hs wrong wherever states_reuse_boundary says the partials are reused.
TEST(CudaStatesBySpans, EqualTheSequentialWalk) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  const StateShape shapes[] = {{1, 100, 2, 64, 64},    {2, 1000, 3, 128, 128}, {1, 3000, 2, 128, 64},
                               {1, 4160, 1, 256, 512}, {1, 16384, 4, 128, 128}, {2, 777, 2, 64, 256},
                               {1, 333, 2, 100, 60},   {1, 1, 1, 128, 128}};
  auto dev = make_cuda_device(0);
  auto kern = make_cuda_kernels();
  for (const StateShape& sh : shapes) {
    const GlaShape s = gla_shape(sh);
    SCOPED_TRACE(shape_label(s));
    HostTensors x = generate_inputs(s, 1977 + s.T, GateKind::model, true, true);
    const size_t QK = s.qk_elems(), V = s.v_elems(), S = s.state_elems(), HS = s.chunk_state_elems();
    DeviceInputs in(*dev, s, x);
    Buffer &q = in.q, &k = in.k, &v = in.v, &g = in.g, &d_o = in.d_o, &h0 = in.h0, &dht = in.dht;
    Buffer kz(*dev, QK * 2), gc(*dev, QK * 4), gc2(*dev, QK * 4), fin(*dev, S * 4);
    const Stream st = dev->compute_stream();
    kern->chunk_cumsum(s, g.get(), gc.f32(), nullptr, st);
    // [0] sequential, [1] by spans, [2] after the boundary calls, [3] the stale case (forward only)
    std::vector<std::unique_ptr<Buffer>> hs, ht, dhs, dh0;
    for (int m = 0; m < 4; ++m) {
      hs.push_back(std::make_unique<Buffer>(*dev, HS * 2)), ht.push_back(std::make_unique<Buffer>(*dev, S * 4));
      dhs.push_back(std::make_unique<Buffer>(*dev, HS * 2)), dh0.push_back(std::make_unique<Buffer>(*dev, S * 4));
      for (Buffer* b : {hs[m].get(), ht[m].get(), dhs[m].get(), dh0[m].get()}) poison(*b);
    }
    dev->synchronize();
    for (int m = 0; m < 3; ++m) {
      gla_cuda::set_states_variant(m == 0 ? 1 : 0);
      if (m == 2) {
        kern->chunk_final_state(s, k.get(), v.get(), g.get(), gc2.f32(), fin.f32(), nullptr, st);
        kern->chunk_states_fwd_after_boundary(s, k.get(), v.get(), gc.f32(), h0.f32(), hs[m]->get(), ht[m]->f32(), st);
        kern->chunk_initial_dstate(s, q.get(), d_o.get(), g.get(), gc.f32(), fin.f32(), st);
        kern->chunk_states_bwd_after_boundary(s, q.get(), d_o.get(), gc.f32(), dht.f32(), dhs[m]->get(),
                                              dh0[m]->f32(), st);
      } else {
        kern->chunk_states_fwd(s, k.get(), v.get(), gc.f32(), h0.f32(), hs[m]->get(), ht[m]->f32(), st);
        kern->chunk_states_bwd(s, q.get(), d_o.get(), gc.f32(), dht.f32(), dhs[m]->get(), dh0[m]->f32(), st);
      }
    }
    gla_cuda::set_states_variant(0);
    dev->fill_zero(kz.get(), QK * 2, st);
    kern->chunk_final_state(s, kz.get(), v.get(), g.get(), gc2.f32(), fin.f32(), nullptr, st);
    dev->copy(kz.get(), k.get(), QK * 2, st);
    kern->chunk_states_fwd_after_boundary(s, kz.get(), v.get(), gc.f32(), h0.f32(), hs[3]->get(), ht[3]->f32(), st);
    dev->synchronize();
    const std::vector<float> HS0 = fetch(*dev, *hs[0], DType::bf16, HS), HT0 = fetch(*dev, *ht[0], DType::f32, S);
    const std::vector<float> DHS0 = fetch(*dev, *dhs[0], DType::bf16, HS), DH00 = fetch(*dev, *dh0[0], DType::f32, S);
    for (int m = 1; m < 3; ++m) {
      const std::vector<float> HSm = fetch(*dev, *hs[m], DType::bf16, HS), HTm = fetch(*dev, *ht[m], DType::f32, S);
      const std::vector<float> DHSm = fetch(*dev, *dhs[m], DType::bf16, HS);
      const std::vector<float> DH0m = fetch(*dev, *dh0[m], DType::f32, S);
      const char* w = m == 1 ? "by spans" : "after the boundary";
      for (auto* t : {&HSm, &HTm, &DHSm, &DH0m}) EXPECT_TRUE(all_finite(*t)) << w << ": NaN or unwritten element";
      const double e[4] = {rel_rms_error(HS0, HSm, HS), rel_rms_error(HT0, HTm, S), rel_rms_error(DHS0, DHSm, HS),
                           rel_rms_error(DH00, DH0m, S)};
      EXPECT_LT(e[0], kOneBf16Rounding) << w << ": hs";  // bf16, rounded from sums in another order
      EXPECT_LT(e[1], 1e-5) << w << ": ht";
      EXPECT_LT(e[2], kOneBf16Rounding) << w << ": dhs";
      EXPECT_LT(e[3], 1e-5) << w << ": dh0";
      std::printf("[ errors ] CudaStatesBySpans B%d T%d H%d dk%d dv%d %s: hs %.2e ht %.2e dhs %.2e dh0 %.2e\n", s.B,
                  s.T, s.H, s.dk, s.dv, w, e[0], e[1], e[2], e[3]);
    }
    const gla_cuda::Dims d{s.B, s.T, s.H, s.dk, s.dv, s.chunks(), s.scale()};
    const double e_stale = rel_rms_error(HS0, fetch(*dev, *hs[3], DType::bf16, HS), HS);
    if (gla_cuda::states_reuse_boundary(d)) EXPECT_GT(e_stale, 1e-3) << "the reduction was not reused";
    else EXPECT_LT(e_stale, kOneBf16Rounding) << "no reuse at this shape, yet hs changed";
  }
}

// The STORE kernel's staged bulk stores (set_states_staged_store's default) against its fragment stores: the same
// bits in hs / dhs (the same rounding of the same fp32 accumulators) and in ht / dh0, every output poisoned first.
// Whole tiles of every STORE configuration (128 x 128 with one and two dk tiles, 128 x 64, 64 x 128, 64 x 64, 32 x 64)
// and a shape of masked tiles, which keeps the fragment stores either way.
TEST(CudaStatesBySpans, StagedStoreGivesTheFragmentStoresBits) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  const StateShape shapes[] = {{1, 16384, 4, 128, 128}, {2, 1000, 3, 128, 128}, {1, 3000, 2, 128, 64},
                               {1, 4160, 1, 256, 512},  {2, 777, 2, 64, 256},   {1, 4000, 4, 32, 64},
                               {1, 1000, 2, 64, 64},    {1, 333, 2, 100, 60}};
  auto dev = make_cuda_device(0);
  auto kern = make_cuda_kernels();
  for (const StateShape& sh : shapes) {
    const GlaShape s = gla_shape(sh);
    SCOPED_TRACE(shape_label(s));
    HostTensors x = generate_inputs(s, 4977 + s.T, GateKind::model, true, true);
    const size_t QK = s.qk_elems(), S = s.state_elems(), HS = s.chunk_state_elems();
    DeviceInputs in(*dev, s, x);
    Buffer gc(*dev, QK * 4);
    const Stream st = dev->compute_stream();
    kern->chunk_cumsum(s, in.g.get(), gc.f32(), nullptr, st);
    std::vector<float> out[2][4];  // [staged][hs, ht, dhs, dh0]
    for (int m = 0; m < 2; ++m) {
      Buffer hs(*dev, HS * 2), ht(*dev, S * 4), dhs(*dev, HS * 2), dh0(*dev, S * 4);  // hs, dhs: bf16
      for (Buffer* b : {&hs, &ht, &dhs, &dh0}) poison(*b);
      gla_cuda::set_states_staged_store(m == 1);
      kern->chunk_states_fwd(s, in.k.get(), in.v.get(), gc.f32(), in.h0.f32(), hs.get(), ht.f32(), st);
      kern->chunk_states_bwd(s, in.q.get(), in.d_o.get(), gc.f32(), in.dht.f32(), dhs.get(), dh0.f32(), st);
      dev->synchronize();
      out[m][0] = fetch(*dev, hs, DType::bf16, HS), out[m][1] = fetch(*dev, ht, DType::f32, S);
      out[m][2] = fetch(*dev, dhs, DType::bf16, HS), out[m][3] = fetch(*dev, dh0, DType::f32, S);
    }
    gla_cuda::set_states_staged_store(true);
    const char* names[4] = {"hs", "ht", "dhs", "dh0"};
    for (int i = 0; i < 4; ++i) {
      EXPECT_TRUE(all_finite(out[1][i])) << names[i] << ": NaN or unwritten element";
      EXPECT_EQ(std::memcmp(out[0][i].data(), out[1][i].data(), out[0][i].size() * 4), 0)
          << names[i] << ": the staged store's bits differ from the fragment stores'";
    }
  }
}

// The chunk states beside the scan (chunk_states_*_arriving, then chunk_states_settle) against the states after the
// boundary call with the same initial state and final gradient given at once (the same device inputs and reduction;
// another order of fp32 sums), every output poisoned first. The word that says the state is complete is set before
// the call (every block adds it at its first chunk), never (it holds the previous pass's epoch, which must not count:
// the settle does everything), or by a kernel on another stream after a delay, while the chunk states run: at the
// paper's shape a walk of 32 chunks takes ~270 us after a ~100 us boundary call, so the delays put the arrival
// before, inside and after the blocks' walks.
TEST(CudaStatesArriving, EqualTheStatesAfterTheBoundary) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  const StateShape shapes[] = {{1, 16384, 16, 128, 128}, {2, 1000, 3, 128, 128}, {1, 4160, 1, 256, 512},
                               {1, 333, 2, 100, 60},     {1, 1, 1, 128, 128}};
  auto dev = make_cuda_device(0);
  auto kern = make_cuda_kernels();
  Buffer words(*dev, 2 * sizeof(uint32_t));
  uint32_t epoch = 0;  // grows across the cases, as in an SP method
  dev->fill_zero(words.get(), words.bytes(), dev->compute_stream());
  for (const StateShape& sh : shapes) {
    const GlaShape s = gla_shape(sh);
    SCOPED_TRACE(shape_label(s));
    HostTensors x = generate_inputs(s, 2977 + s.T, GateKind::model, true, true);
    const size_t QK = s.qk_elems(), S = s.state_elems(), HS = s.chunk_state_elems();
    DeviceInputs in(*dev, s, x);
    Buffer gc(*dev, QK * 4), gc2(*dev, QK * 4), fin(*dev, S * 4);
    Buffer hs0(*dev, HS * 2), ht0(*dev, S * 4), dhs0(*dev, HS * 2), dh00(*dev, S * 4);  // hs, dhs: bf16
    Buffer hs(*dev, HS * 2), ht(*dev, S * 4), dhs(*dev, HS * 2), dh0(*dev, S * 4);
    const Stream st = dev->compute_stream(), other = dev->comm_stream();
    kern->chunk_cumsum(s, in.g.get(), gc.f32(), nullptr, st);
    kern->chunk_final_state(s, in.k.get(), in.v.get(), in.g.get(), gc2.f32(), fin.f32(), nullptr, st);
    kern->chunk_states_fwd_after_boundary(s, in.k.get(), in.v.get(), gc.f32(), in.h0.f32(), hs0.get(), ht0.f32(), st);
    kern->chunk_initial_dstate(s, in.q.get(), in.d_o.get(), in.g.get(), gc.f32(), fin.f32(), st);
    kern->chunk_states_bwd_after_boundary(s, in.q.get(), in.d_o.get(), gc.f32(), in.dht.f32(), dhs0.get(), dh00.f32(),
                                          st);
    dev->synchronize();
    const std::vector<float> HS0 = fetch(*dev, hs0, DType::bf16, HS), HT0 = fetch(*dev, ht0, DType::f32, S);
    const std::vector<float> DHS0 = fetch(*dev, dhs0, DType::bf16, HS), DH00 = fetch(*dev, dh00, DType::f32, S);
    // when: -1 before, -2 never, else the delay in microseconds
    for (double when : {-1.0, -2.0, 20.0, 120.0, 250.0, 400.0, 900.0}) {
      const std::string w = when == -1 ? "before" : when == -2 ? "never" : "after " + std::to_string(int(when)) + " us";
      ++epoch;
      for (Buffer* b : {&hs, &ht, &dhs, &dh0}) poison(*b);
      auto* word = static_cast<uint32_t*>(words.get());
      const uint32_t now = when == -1 ? epoch : epoch - 1;  // what the words hold when the states start
      gla_cuda::launch_signal_after(word, now, 0, static_cast<cudaStream_t>(st.handle));
      gla_cuda::launch_signal_after(word + 1, now, 0, static_cast<cudaStream_t>(st.handle));
      dev->synchronize();
      // Each direction: its word set `when` after the boundary call's start (on another stream), the states beside it,
      // then the settle after the word's producer (a synchronisation here, an event in the SP methods) and before
      // any other states or boundary call.
      GlaKernels::ArrivingState fwd{in.h0.f32(), word, epoch}, bwd{in.dht.f32(), word + 1, epoch};
      if (when >= 0) gla_cuda::launch_signal_after(word, epoch, when, static_cast<cudaStream_t>(other.handle));
      kern->chunk_final_state(s, in.k.get(), in.v.get(), in.g.get(), gc2.f32(), fin.f32(), nullptr, st);
      kern->chunk_states_fwd_arriving(s, in.k.get(), in.v.get(), gc.f32(), fwd, hs.get(), ht.f32(), st);
      dev->synchronize();
      kern->chunk_states_settle(s, false, gc.f32(), fwd, hs.get(), ht.f32(), st);
      if (when >= 0) gla_cuda::launch_signal_after(word + 1, epoch, when, static_cast<cudaStream_t>(other.handle));
      kern->chunk_initial_dstate(s, in.q.get(), in.d_o.get(), in.g.get(), gc.f32(), fin.f32(), st);
      kern->chunk_states_bwd_arriving(s, in.q.get(), in.d_o.get(), gc.f32(), bwd, dhs.get(), dh0.f32(), st);
      dev->synchronize();
      kern->chunk_states_settle(s, true, gc.f32(), bwd, dhs.get(), dh0.f32(), st);
      dev->synchronize();
      const std::vector<float> HSw = fetch(*dev, hs, DType::bf16, HS), HTw = fetch(*dev, ht, DType::f32, S);
      const std::vector<float> DHSw = fetch(*dev, dhs, DType::bf16, HS), DH0w = fetch(*dev, dh0, DType::f32, S);
      for (auto* t : {&HSw, &HTw, &DHSw, &DH0w}) EXPECT_TRUE(all_finite(*t)) << w << ": NaN or unwritten element";
      const double e[4] = {rel_rms_error(HS0, HSw, HS), rel_rms_error(HT0, HTw, S), rel_rms_error(DHS0, DHSw, HS),
                           rel_rms_error(DH00, DH0w, S)};
      // A state stored before the late share came is rounded twice (its zero-start value, then the sum): two bf16
      // roundings against one.
      EXPECT_LT(e[0], 2 * kOneBf16Rounding) << w << ": hs";
      EXPECT_LT(e[1], 1e-5) << w << ": ht";
      EXPECT_LT(e[2], 2 * kOneBf16Rounding) << w << ": dhs";
      EXPECT_LT(e[3], 1e-5) << w << ": dh0";
      std::printf("[ errors ] CudaStatesArriving B%d T%d H%d dk%d dv%d %s: hs %.2e ht %.2e dhs %.2e dh0 %.2e\n", s.B,
                  s.T, s.H, s.dk, s.dv, w.c_str(), e[0], e[1], e[2], e[3]);
    }
  }
}

// The stages on ranges of (b, h) pairs, interleaved as zeco's head groups run them (each group's boundary call, then
// each group's states after it and the outputs; the backward in reverse group order), against the whole shape: the
// same results up to the order of fp32 sums (the span plan follows the pairs per launch), every output poisoned first.
// Then the reuse across groups: both groups' boundary calls on zero keys, the keys changed under the same pointer,
// must leave group 0's states wrong wherever states_reuse_boundary says its partials are reused, i.e. group 1's call
// kept them.
TEST(CudaPairRanges, InterleavedGroupsEqualTheWholeShape) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  const StateShape shapes[] = {{2, 1000, 3, 64, 64}, {1, 4160, 4, 128, 128}, {1, 2048, 3, 256, 512},
                               {1, 8192, 16, 128, 128}, {1, 333, 2, 100, 60}};
  auto dev = make_cuda_device(0);
  auto kern = make_cuda_kernels();
  for (const StateShape& sh : shapes) {
    const GlaShape s = gla_shape(sh);
    SCOPED_TRACE(shape_label(s));
    const int n0 = s.B * s.H / 2;
    const std::vector<GlaShape> groups = {s.pair_range(0, n0), s.pair_range(n0, s.B * s.H - n0)};
    HostTensors x = generate_inputs(s, 2977 + s.T, GateKind::model, true, true);
    const size_t QK = s.qk_elems(), V = s.v_elems(), S = s.state_elems(), HS = s.chunk_state_elems();
    DeviceInputs in(*dev, s, x);
    Buffer &q = in.q, &k = in.k, &v = in.v, &g = in.g, &d_o = in.d_o, &h0 = in.h0, &dht = in.dht;
    const Stream st = dev->compute_stream();
    struct Out {
      Buffer gc, lambda, fin, hs, ht, o, dfin, dhs, dh0, dq, dk, dv, dg;
      Out(Device& d, const GlaShape& s)
          : gc(d, s.qk_elems() * 4), lambda(d, s.state_rows() * 4), fin(d, s.state_elems() * 4),
            hs(d, s.chunk_state_elems() * 2), ht(d, s.state_elems() * 4), o(d, s.v_elems() * 2),
            dfin(d, s.state_elems() * 4), dhs(d, s.chunk_state_elems() * 2), dh0(d, s.state_elems() * 4),
            dq(d, s.qk_elems() * 2), dk(d, s.qk_elems() * 2), dv(d, s.v_elems() * 2), dg(d, s.qk_elems() * 2) {
        for (Buffer* b : {&gc, &lambda, &fin, &hs, &ht, &o, &dfin, &dhs, &dh0, &dq, &dk, &dv, &dg}) poison(*b);
      }
    };
    Out whole(*dev, s), parts(*dev, s);
    Buffer gc2(*dev, QK * 4), kz(*dev, QK * 2), hs_stale(*dev, HS * 2), ht_stale(*dev, S * 4);
    dev->synchronize();
    for (Out* r : {&whole, &parts}) {
      const std::vector<GlaShape> run = r == &whole ? std::vector<GlaShape>{s} : groups;
      kern->chunk_cumsum(s, g.get(), r->gc.f32(), nullptr, st);
      for (const GlaShape& p : run)
        kern->chunk_final_state(p, k.get(), v.get(), g.get(), gc2.f32(), r->fin.f32(), r->lambda.f32(), st);
      for (const GlaShape& p : run) {
        kern->chunk_states_fwd_after_boundary(p, k.get(), v.get(), r->gc.f32(), h0.f32(), r->hs.get(), r->ht.f32(),
                                              st);
        kern->chunk_output(p, q.get(), k.get(), v.get(), r->gc.f32(), r->hs.get(), r->o.get(), st);
      }
      for (auto p = run.rbegin(); p != run.rend(); ++p)
        kern->chunk_initial_dstate(*p, q.get(), d_o.get(), g.get(), r->gc.f32(), r->dfin.f32(), st);
      for (auto p = run.rbegin(); p != run.rend(); ++p) {
        kern->chunk_states_bwd_after_boundary(*p, q.get(), d_o.get(), r->gc.f32(), dht.f32(), r->dhs.get(),
                                              r->dh0.f32(), st);
        kern->chunk_grads(*p, q.get(), k.get(), v.get(), r->gc.f32(), r->hs.get(), r->ht.f32(), r->dhs.get(),
                          d_o.get(), r->dq.get(), r->dk.get(), r->dv.get(), r->dg.get(), st);
      }
    }
    dev->fill_zero(kz.get(), QK * 2, st);
    for (const GlaShape& p : groups)
      kern->chunk_final_state(p, kz.get(), v.get(), g.get(), gc2.f32(), ht_stale.f32(), nullptr, st);
    dev->copy(kz.get(), k.get(), QK * 2, st);
    kern->chunk_states_fwd_after_boundary(groups[0], kz.get(), v.get(), whole.gc.f32(), h0.f32(), hs_stale.get(),
                                          ht_stale.f32(), st);
    dev->synchronize();
    const struct {
      const char* name;
      Buffer Out::*b;
      DType t;
      size_t n;
      double bar;
    } outs[] = {{"gc", &Out::gc, DType::f32, QK, 0},          {"lambda", &Out::lambda, DType::f32, s.state_rows(), 1e-6},
                {"fin", &Out::fin, DType::f32, S, 1e-5},       {"hs", &Out::hs, DType::bf16, HS, kOneBf16Rounding},
                {"ht", &Out::ht, DType::f32, S, 1e-5},         {"o", &Out::o, DType::bf16, V, 1e-4},
                {"dfin", &Out::dfin, DType::f32, S, 1e-5},     {"dhs", &Out::dhs, DType::bf16, HS, kOneBf16Rounding},
                {"dh0", &Out::dh0, DType::f32, S, 1e-5},       {"dq", &Out::dq, DType::bf16, QK, 1e-4},
                {"dk", &Out::dk, DType::bf16, QK, 1e-4},       {"dv", &Out::dv, DType::bf16, V, 1e-4},
                {"dg", &Out::dg, DType::bf16, QK, 1e-4}};
    for (const auto& t : outs) {
      const std::vector<float> W = fetch(*dev, whole.*t.b, t.t, t.n), P = fetch(*dev, parts.*t.b, t.t, t.n);
      EXPECT_TRUE(all_finite(P)) << t.name << ": NaN or unwritten element";
      const double e = rel_rms_error(W, P, t.n);
      if (t.bar == 0) EXPECT_EQ(W, P) << t.name;
      else EXPECT_LT(e, t.bar) << t.name;
    }
    const size_t hs0 = size_t(n0) * s.chunks() * s.dk * s.dv;  // group 0's chunk states: the first pairs
    const std::vector<float> HSW = fetch(*dev, whole.hs, DType::bf16, hs0);
    const std::vector<float> HSS = fetch(*dev, hs_stale, DType::bf16, hs0);
    const double e_stale = rel_rms_error(HSW, HSS, hs0);
    const gla_cuda::Dims d0{s.B, s.T, s.H, s.dk, s.dv, s.chunks(), s.scale(), 0, n0};
    if (gla_cuda::states_reuse_boundary(d0)) EXPECT_GT(e_stale, 1e-3) << "group 0's reduction was not reused";
    else EXPECT_LT(e_stale, kOneBf16Rounding) << "no reuse at this shape, yet hs changed";
  }
}

// chunk_output and the dv stage with several column tiles per block (A built once per block) and with the state
// slice in quads (variant 4, the default, at one tile per block) against variant 3, one tile per block (A rebuilt for each, the state slice
// in rows): the same operations in the same order for every output column, so the same bits, at the plan's choice
// and at forced ones, 128- and 64-column tiles, extreme gates (the exact diagonal blocks).
// chunk_grads at a row stride (GlaShape::grad_ld: dq, dk, dv side by side in rows of ld, as the model's dproj) against
// the dense call, bit for bit, with the pad columns left poisoned: ld % 8 == 0 (16-byte stores of dq and dk) and odd
// (element stores), at GLA-1B's 4-head layer (dv 512: four column tiles) and at small shapes with B = 2.
TEST(CudaGradsAtARowStride, EqualTheDenseGradientsBitForBit) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  struct Shaped {
    StateShape sh;
    int pad;
  };
  const Shaped cases[] = {{{1, 1000, 4, 256, 512}, 16}, {{2, 150, 2, 24, 40}, 8}, {{2, 150, 2, 24, 40}, 3},
                          {{1, 91, 1, 13, 7}, 1}};
  auto dev = make_cuda_device(0);
  auto kern = make_cuda_kernels();
  using bf16 = __nv_bfloat16;
  for (const Shaped& c : cases) {
    const GlaShape s = gla_shape(c.sh);
    const int qw = s.H * s.dk, vw = s.H * s.dv, ld = 2 * qw + vw + c.pad;
    SCOPED_TRACE(shape_label(s) + " ld " + std::to_string(ld));
    const HostTensors x = generate_inputs(s, 77 + s.T, GateKind::strong, true, true);
    const size_t QK = s.qk_elems(), V = s.v_elems(), rows = size_t(s.B) * s.T;
    DeviceInputs in(*dev, s, x);
    GlaWorkspace ws(*dev, *kern, s);
    Buffer o(*dev, V * 2), ht(*dev, s.state_elems() * 4), dq(*dev, QK * 2), dk(*dev, QK * 2), dv(*dev, V * 2),
        dg(*dev, QK * 2), dg2(*dev, QK * 2), m(*dev, rows * ld * 2);
    const Stream st = dev->compute_stream();
    gla_forward(*kern, ws, in.q.get(), in.k.get(), in.v.get(), in.g.get(), in.h0.f32(), o.get(), ht.f32(), st);
    gla_backward_saved(*kern, ws, in.q.get(), in.k.get(), in.v.get(), ht.f32(), in.d_o.get(), in.dht.f32(), dq.get(),
                       dk.get(), dv.get(), dg.get(), nullptr, st);
    poison(m), poison(dg2);
    bf16* mp = static_cast<bf16*>(m.get());
    gla_backward_saved(*kern, ws, in.q.get(), in.k.get(), in.v.get(), ht.f32(), in.d_o.get(), in.dht.f32(), mp,
                       mp + qw, mp + 2 * qw, dg2.get(), nullptr, st, ld);
    dev->synchronize();
    auto words = [&](const Buffer& b, size_t n) {
      std::vector<uint16_t> h(n);
      dev->download(h.data(), b.get(), n * 2);
      return h;
    };
    const std::vector<uint16_t> M = words(m, rows * ld), DQ = words(dq, QK), DK = words(dk, QK), DV = words(dv, V);
    size_t wrong = 0, pad_written = 0;
    for (size_t r = 0; r < rows; ++r) {
      const uint16_t* row = M.data() + r * ld;
      for (int j = 0; j < qw; ++j) wrong += (row[j] != DQ[r * qw + j]) + (row[qw + j] != DK[r * qw + j]);
      for (int j = 0; j < vw; ++j) wrong += row[2 * qw + j] != DV[r * vw + j];
      for (int j = 2 * qw + vw; j < ld; ++j) pad_written += row[j] != 0xFFFF;
    }
    EXPECT_EQ(wrong, 0u) << "dq, dk or dv differ from the dense call";
    EXPECT_EQ(pad_written, 0u) << "the pad columns were written";
    EXPECT_EQ(words(dg2, QK), words(dg, QK)) << "dg";
  }
}

TEST(CudaIntraTiles, EqualOneTilePerBlockBitForBit) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  const StateShape shapes[] = {{1, 16384, 4, 256, 512}, {1, 200, 1, 256, 512}, {2, 333, 2, 40, 300},
                               {1, 70, 1, 16, 256}};
  auto dev = make_cuda_device(0);
  auto kern = make_cuda_kernels();
  for (const StateShape& sh : shapes) {
    const GlaShape s = gla_shape(sh);
    SCOPED_TRACE(shape_label(s));
    HostTensors x = generate_inputs(s, 2024 + s.T, GateKind::strong, true, true);
    if (s.dk == 16)
      for (float& v : x.g) v *= 6.f;  // extreme gates
    const size_t QK = s.qk_elems(), V = s.v_elems(), S = s.state_elems(), HS = s.chunk_state_elems();
    DeviceInputs in(*dev, s, x);
    Buffer &q = in.q, &k = in.k, &v = in.v, &g = in.g, &d_o = in.d_o, &h0 = in.h0, &dht = in.dht;
    Buffer gc(*dev, QK * 4), fin(*dev, S * 4), hs(*dev, HS * 2), dhs(*dev, HS * 2);  // hs, dhs: bf16
    Buffer o1(*dev, V * 2), dv1(*dev, V * 2), o2(*dev, V * 2), dv2(*dev, V * 2);
    const Stream st = dev->compute_stream();
    kern->chunk_cumsum(s, g.get(), gc.f32(), nullptr, st);
    kern->chunk_states_fwd(s, k.get(), v.get(), gc.f32(), h0.f32(), hs.get(), fin.f32(), st);
    kern->chunk_states_bwd(s, q.get(), d_o.get(), gc.f32(), dht.f32(), dhs.get(), fin.f32(), st);
    dev->synchronize();
    const gla_cuda::Dims d{s.B, s.T, s.H, s.dk, s.dv, s.chunks(), s.scale()};
    using bf16 = __nv_bfloat16;
    auto run = [&](int bv, int tiles, Buffer& o, Buffer& dv, int variant = 0) {
      poison(o), poison(dv);
      gla_cuda::set_intra_variant(variant);
      gla_cuda::set_intra_tiles(tiles);
      gla_cuda::launch_output(d, static_cast<const bf16*>(q.get()), static_cast<const bf16*>(k.get()),
                              static_cast<const bf16*>(v.get()), gc.f32(), static_cast<const bf16*>(hs.get()),
                              static_cast<bf16*>(o.get()), nullptr, bv);
      gla_cuda::launch_dv(d, static_cast<const bf16*>(q.get()), static_cast<const bf16*>(k.get()),
                          static_cast<const bf16*>(d_o.get()), gc.f32(), static_cast<const bf16*>(dhs.get()),
                          static_cast<bf16*>(dv.get()), nullptr, bv);
      gla_cuda::set_intra_tiles(0);
      gla_cuda::set_intra_variant(0);
      SPB_CUDA(cudaDeviceSynchronize());
    };
    auto bytes = [&](const Buffer& b) {
      std::vector<unsigned char> h(V * 2);
      dev->download(h.data(), b.get(), V * 2);
      return h;
    };
    run(128, 1, o1, dv1, 3);
    const std::vector<unsigned char> O1 = bytes(o1), DV1 = bytes(dv1);
    EXPECT_TRUE(all_finite(fetch(*dev, o1, DType::bf16, V))) << "o: NaN or unwritten element";
    EXPECT_TRUE(all_finite(fetch(*dev, dv1, DType::bf16, V))) << "dv: NaN or unwritten element";
    // Variant 3 at one tile only: with several tiles per block variant 4 runs the same kernel (rows).
    for (int variant : {3, 4})
      for (int bv : {128, 64})
        for (int tiles : variant == 3 ? std::vector<int>{1} : std::vector<int>{0, 1, 2, 3, 8}) {
          if (variant == 3 && bv == 128) continue;  // the reference itself
          run(bv, tiles, o2, dv2, variant);
          const std::string at = "variant " + std::to_string(variant) + ", " + std::to_string(bv) +
                                 "-column tiles, " + std::to_string(tiles) + " per block";
          EXPECT_TRUE(bytes(o2) == O1) << "o differs at " << at;
          EXPECT_TRUE(bytes(dv2) == DV1) << "dv differs at " << at;
        }
  }
}
}  // namespace
}  // namespace spb
