// The GPU time of each kernel the GLA language model calls outside the attention (model/model_kernels.h), at each
// shape: the model level's stage table, the twin of the GLA stages' (sim/stage_table.h). A GPU run writes it
// (`spbench model --stage-times FILE`: RecordingModelKernels below timing every ModelKernels call of the timed steps,
// beside RecordingKernels timing the SP method's GLA stages), rows of level `stage` in the stage CSV's schema, with
// the model's columns (model_stage_columns) after them; a simulated ModelKernels reads it back.
//
// A call is named by its ModelKernels method ("gemm", "rmsnorm_bwd", ...) and a shape key of everything that sets its
// time:
//   gemm                         "ta0 tb1 M16384 N2048 K2048 c_bf16" (C's type, c_fp32 or c_bf16; A and B are
//                                act_dtype, the row's dtype)
//   convert                      "n1163264000 fp32_to_bf16"
//   embedding_fwd, embedding_bwd "n16384 D2048"
//   rmsnorm_fwd, rmsnorm_add_fwd "n16384 D2048"
//   rmsnorm_bwd                  "n16384 D2048 dx_act1" (dx_act1: the act copy of dx written too)
//   forget_gate_fwd, _bwd        "n16384 C1024"
//   gated_rmsnorm_fwd            "rows524288 D64"
//   gated_rmsnorm_bwd            "rows524288 D64 heads32 ld6160" (ld0: dz dense; else its rows of ld elements)
//   swiglu_fwd                   "rows16384 F5632"
//   swiglu_bwd                   "rows16384 F5632 y1" (y1: SwiGLU's output made again in the same pass)
//   copy_columns                 "rows16384 cols1024 dst_cols6160"
//   cross_entropy                "n16384 V32000"
//   adamw                        "n1163264000 act_copy1" (act_copy1: the act copy of the new weights written too)
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "model/model_kernels.h"
#include "runtime/device.h"
#include "sim/stage_table_recorder.h"
#include "sim/stage_table.h"

namespace spb {

// The shape keys above that are more than stage_key's numbers, as the recorder writes them and the simulated model
// kernels (sim/sim_model_kernels.cpp) look them up.
std::string gemm_shape_key(bool trans_a, bool trans_b, int M, int N, int K, DType c_type);
std::string convert_shape_key(size_t n, DType src_type, DType dst_type);

// ModelKernels that run `inner` and, while recording, time every call on its stream (StageRecorder), as
// RecordingKernels does the GLA stages.
class RecordingModelKernels final : public ModelKernels {
 public:
  RecordingModelKernels(std::unique_ptr<ModelKernels> inner, Device& dev);
  void set_recording(bool on) { rec_.set_recording(on); }
  // Every recorded call since the last take, grouped by stage and shape (synchronizes the device).
  std::vector<StageSample> take() { return rec_.take(); }

  DType act_dtype() const override { return inner_->act_dtype(); }
  bool computes() const override { return inner_->computes(); }
  void gemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const void* A, const void* B, float beta,
            void* C, DType c_type, Stream st) override;
  void convert(size_t n, const void* src, DType src_type, void* dst, DType dst_type, Stream st) override;
  void embedding_fwd(int n, int D, const int32_t* tokens, const float* table, float* x, Stream st) override;
  void embedding_bwd(int n, int D, const int32_t* tokens, const float* dx, float* dtable, Stream st) override;
  void rmsnorm_fwd(int n, int D, const float* x, const float* w, float eps, void* y, float* rstd, Stream st) override;
  void rmsnorm_add_fwd(int n, int D, const float* x, const float* delta, const float* w, float eps, float* x_out,
                       void* y, float* rstd, Stream st) override;
  void rmsnorm_bwd(int n, int D, const float* x, const float* w, const float* rstd, const float* dy, float* dx,
                   float* dw, void* dx_act, Stream st) override;
  void forget_gate_fwd(int n, int C, const void* pre, const float* bias, float normaliser, void* g,
                       Stream st) override;
  void forget_gate_bwd(int n, int C, const void* pre, const float* bias, float normaliser, const void* dg, void* dpre,
                       float* dbias, Stream st) override;
  void gated_rmsnorm_fwd(int rows, int D, const void* o, const void* z, const float* w, float eps, void* y,
                         float* rstd, Stream st) override;
  void gated_rmsnorm_bwd(int rows, int D, const void* o, const void* z, const float* w, const float* rstd,
                         const void* dy, void* d_o, void* dz, float* dw, int heads, size_t dz_ld,
                         Stream st) override;
  void swiglu_fwd(int rows, int F, const void* ab, void* y, Stream st) override;
  void swiglu_bwd(int rows, int F, const void* ab, const void* dy, void* dab, void* y, Stream st) override;
  void copy_columns(int rows, int cols, const void* src, int dst_cols, int col, void* dst, Stream st) override;
  void cross_entropy(int n, int V, const float* logits, const int32_t* targets, float grad_scale, float* loss,
                     void* dlogits, Stream st) override;
  void adamw(size_t n, float* p, const float* grad, float* m, float* v, float lr, float beta1, float beta2, float eps,
             float weight_decay, int step, void* p_act, Stream st) override;

 private:
  std::unique_ptr<ModelKernels> inner_;
  StageRecorder rec_;
};

// The extra columns of a model stage CSV (after the schema): the stage CSV's, then the model's shape and schedule
// (layers, hidden, vocab, ...), which tell its rows from the GLA stages' of the operator level.
const std::vector<std::string>& model_stage_columns();

}  // namespace spb
