#include "kernels/gla/gla.h"

#include <string>

#include "runtime/error.h"

namespace spb {

Buffer GlaWorkspace::own_or_lent(Device& dev, size_t bytes, const Buffer* lent, const char* what) {
  if (!lent) return Buffer(dev, bytes);
  SPB_CHECK(lent->bytes() >= bytes, std::string("GlaWorkspace: the lent ") + what + " holds " +
                                        std::to_string(lent->bytes()) + " bytes, the shape's " +
                                        std::to_string(bytes));
  return Buffer::borrowed(*lent);
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

void gla_remake_states(GlaKernels& kern, GlaWorkspace& ws, const void* k, const void* v, const void* g,
                       const float* h0, Stream st) {
  const GlaShape& s = ws.shape;
  kern.chunk_cumsum(s, g, ws.gc.f32(), nullptr, st);
  kern.chunk_states_fwd(s, k, v, ws.gc.f32(), h0, ws.hs.get(), ws.ht.f32(), st);
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
