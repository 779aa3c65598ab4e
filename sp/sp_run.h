// What the operator level and the tests share to run an SP method and check it: a rank's tensors on its device, the
// single-device reference, slicing the whole sequence into a rank's tokens, and the error of every output.
#pragma once

#include <algorithm>
#include <vector>

#include "runtime/bootstrap.h"
#include "sp/inputs.h"
#include "sp/method.h"

namespace spb {

// A rank's tensors in the family's layouts (sp/method.h): GLA's g and dg in t, Gated DeltaNet's g, dg, beta and dbeta
// [B, T, H] fp32 (beta and dbeta empty for GLA).
struct DeviceTensors {
  Attention attention;
  Buffer q, k, v, g, beta, o, d_o, dq, dk, dv, dg, dbeta, h0, dht, h_out, dh_in;
  DeviceTensors(Device& dev, const GlaShape& s, DType t, Attention a = Attention::gla);
};

// Everything a forward+backward produces, on the host in fp32 (dbeta: Gated DeltaNet's alone).
struct HostResult {
  std::vector<float> o, dq, dk, dv, dg, dbeta, ht, dh0;
};

struct Errors {  // relative RMS error of each output
  double o = 0, ht = 0, dq = 0, dk = 0, dv = 0, dg = 0, dbeta = 0, dh0 = 0;
  double fwd() const { return std::max(o, ht); }
  double all() const { return std::max({o, ht, dq, dk, dv, dg, dbeta, dh0}); }
};

void upload_inputs(Device& dev, DType t, DeviceTensors& d, const HostTensors& x);
HostResult download_result(Device& dev, DType t, const GlaShape& s, DeviceTensors& d);
SpForwardArgs forward_args(DeviceTensors& d, const HostTensors& x);
SpBackwardArgs backward_args(DeviceTensors& d, const HostTensors& x);
void poison_outputs(Device& dev, DeviceTensors& d);  // every byte 0xFF: NaN in fp32 and bf16

// The single-device forward+backward of `x` (shape s, family x.attention) on this rank's device: the reference of
// every check.
HostResult single_device(Runtime& rt, const GlaShape& s, const HostTensors& x);
// Tokens [t0, t1) of the whole sequence's inputs / results (states stay whole).
HostTensors local_slice(const HostTensors& x, const GlaShape& whole, int t0, int t1);
HostResult slice_result(const HostResult& r, const GlaShape& whole, int t0, int t1);
// Max over ranks; ht is compared where the method defines it (the last rank, or every rank for independent
// sequences), dh0 on rank 0 (or every rank).
Errors compare(const Bootstrap& boot, const HostResult& ref, const HostResult& x, bool independent);

}  // namespace spb
