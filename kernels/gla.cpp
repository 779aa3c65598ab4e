#include "kernels/gla.h"

#include <string>

#include "runtime/error.h"

namespace spb {

Buffer GlaWorkspace::state_gradients(Device& dev, const GlaKernels& kern, const GlaShape& s,
                                     const Buffer* shared_dhs) {
  const size_t bytes = chunk_state_bytes(kern, s);
  if (!shared_dhs) return Buffer(dev, bytes);
  SPB_CHECK(shared_dhs->bytes() >= bytes, "GlaWorkspace: the shared dhs holds " +
                                              std::to_string(shared_dhs->bytes()) + " bytes, the chunk states " +
                                              std::to_string(bytes));
  return Buffer::borrowed(*shared_dhs);
}

void gla_forward(GlaKernels& kern, GlaWorkspace& ws, const void* q, const void* k, const void* v, const void* g,
                 const float* h0, void* o, float* ht, Stream st) {
  const GlaShape& s = ws.shape;
  kern.chunk_cumsum(s, g, ws.gc.f32(), ws.lambda.f32(), st);
  kern.chunk_states_fwd(s, k, v, ws.gc.f32(), h0, ws.hs.get(), ht ? ht : ws.ht.f32(), st);
  kern.chunk_output(s, q, k, v, ws.gc.f32(), ws.hs.get(), o, st);
}

void gla_backward(GlaKernels& kern, GlaWorkspace& ws, const void* q, const void* k, const void* v, const void* g,
                  const float* h0, const void* d_o, const float* dht, void* dq, void* dk, void* dv, void* dg,
                  float* dh0, Stream st) {
  const GlaShape& s = ws.shape;
  kern.chunk_cumsum(s, g, ws.gc.f32(), ws.lambda.f32(), st);
  kern.chunk_states_fwd(s, k, v, ws.gc.f32(), h0, ws.hs.get(), ws.ht.f32(), st);
  gla_backward_saved(kern, ws, q, k, v, ws.ht.f32(), d_o, dht, dq, dk, dv, dg, dh0, st);
}

void gla_backward_saved(GlaKernels& kern, GlaWorkspace& ws, const void* q, const void* k, const void* v,
                        const float* forward_ht, const void* d_o, const float* dht, void* dq, void* dk, void* dv,
                        void* dg, float* dh0, Stream st, int grad_ld) {
  GlaShape s = ws.shape;
  kern.chunk_states_bwd(s, q, d_o, ws.gc.f32(), dht, ws.dhs.get(), dh0, st);
  s.grad_ld = grad_ld;
  kern.chunk_grads(s, q, k, v, ws.gc.f32(), ws.hs.get(), forward_ht, ws.dhs.get(), d_o, dq, dk, dv, dg, st);
}

}  // namespace spb
