// One GPU: cudaMalloc memory, a compute stream, a second compute stream and a communication stream (all
// non-blocking, so that NCCL and the kernels overlap), CUDA events for ordering and timing, bf16 activations.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <vector>

#include "runtime/cuda_check.h"
#include "runtime/device.h"

namespace spb {
namespace {

__global__ void f32_to_bf16(const float* in, __nv_bfloat16* out, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    out[i] = __float2bfloat16(in[i]);
}
__global__ void bf16_to_f32(const __nv_bfloat16* in, float* out, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    out[i] = __bfloat162float(in[i]);
}

class CudaDevice final : public Device {
 public:
  explicit CudaDevice(int ordinal) : ordinal_(ordinal) {
    SPB_CUDA(cudaSetDevice(ordinal));
    cudaDeviceProp prop;
    SPB_CUDA(cudaGetDeviceProperties(&prop, ordinal));
    name_ = prop.name;
    SPB_CUDA(cudaStreamCreateWithFlags(&compute_, cudaStreamNonBlocking));
    SPB_CUDA(cudaStreamCreateWithFlags(&compute2_, cudaStreamNonBlocking));
    SPB_CUDA(cudaStreamCreateWithFlags(&comm_, cudaStreamNonBlocking));
  }
  ~CudaDevice() override {
    cudaStreamDestroy(compute_);
    cudaStreamDestroy(compute2_);
    cudaStreamDestroy(comm_);
  }
  std::string name() const override { return name_; }
  bool is_gpu() const override { return true; }

  void* alloc(size_t bytes) override {
    void* p = nullptr;
    SPB_CUDA(cudaMalloc(&p, bytes));
    return p;
  }
  void free(void* p) override { cudaFree(p); }
  // cudaMemcpy from pageable memory returns once the data is staged, and its last DMA runs on the legacy stream,
  // which the non-blocking streams do not wait for: a kernel enqueued next could read the buffer's old contents.
  // Enqueued on the compute stream and waited for, the upload has landed when it returns.
  void upload(void* dst, const void* src, size_t bytes) override {
    SPB_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, compute_));
    SPB_CUDA(cudaStreamSynchronize(compute_));
  }
  void download(void* dst, const void* src, size_t bytes) override {
    SPB_CUDA(cudaDeviceSynchronize());
    SPB_CUDA(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
  }
  void copy(void* dst, const void* src, size_t bytes, Stream s) override {
    SPB_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream(s)));
  }
  void fill_zero(void* p, size_t bytes, Stream s) override { SPB_CUDA(cudaMemsetAsync(p, 0, bytes, stream(s))); }

  void upload_as(void* dst, DType t, const float* src, size_t n) override {
    if (t == DType::f32) return upload(dst, src, n * 4);
    float* tmp = static_cast<float*>(alloc(n * 4));
    upload(tmp, src, n * 4);
    f32_to_bf16<<<1024, 256>>>(tmp, static_cast<__nv_bfloat16*>(dst), n);
    SPB_CUDA_LAUNCH();
    SPB_CUDA(cudaDeviceSynchronize());
    free(tmp);
  }
  void download_as(float* dst, const void* src, DType t, size_t n) override {
    if (t == DType::f32) return download(dst, src, n * 4);
    float* tmp = static_cast<float*>(alloc(n * 4));
    SPB_CUDA(cudaDeviceSynchronize());
    bf16_to_f32<<<1024, 256>>>(static_cast<const __nv_bfloat16*>(src), tmp, n);
    SPB_CUDA_LAUNCH();
    download(dst, tmp, n * 4);
    free(tmp);
  }

  Stream compute_stream() override { return {compute_}; }
  Stream comm_stream() override { return {comm_}; }
  Stream second_compute_stream() override { return {compute2_}; }
  Event create_event(EventUse use) override {
    cudaEvent_t e;
    SPB_CUDA(cudaEventCreateWithFlags(&e, use == EventUse::order ? cudaEventDisableTiming : cudaEventDefault));
    return {e};
  }
  void destroy_event(Event e) override { cudaEventDestroy(static_cast<cudaEvent_t>(e.handle)); }
  void record(Event e, Stream s) override { SPB_CUDA(cudaEventRecord(static_cast<cudaEvent_t>(e.handle), stream(s))); }
  void wait(Stream s, Event e) override {
    SPB_CUDA(cudaStreamWaitEvent(stream(s), static_cast<cudaEvent_t>(e.handle), 0));
  }
  void synchronize() override { SPB_CUDA(cudaDeviceSynchronize()); }
  double elapsed_ms(Event a, Event b) override {
    SPB_CUDA(cudaEventSynchronize(static_cast<cudaEvent_t>(b.handle)));
    float ms = 0;
    SPB_CUDA(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(a.handle), static_cast<cudaEvent_t>(b.handle)));
    return ms;
  }
  size_t free_memory_bytes() override {
    size_t free = 0, total = 0;
    SPB_CUDA(cudaMemGetInfo(&free, &total));
    return free;
  }
  size_t used_memory_bytes() override {
    size_t free = 0, total = 0;
    SPB_CUDA(cudaMemGetInfo(&free, &total));
    return total - free;
  }

 private:
  cudaStream_t stream(Stream s) const { return s.handle ? static_cast<cudaStream_t>(s.handle) : compute_; }
  int ordinal_;
  std::string name_;
  cudaStream_t compute_ = nullptr, compute2_ = nullptr, comm_ = nullptr;
};

}  // namespace

std::unique_ptr<Device> make_cuda_device(int ordinal) { return std::make_unique<CudaDevice>(ordinal); }

}  // namespace spb
