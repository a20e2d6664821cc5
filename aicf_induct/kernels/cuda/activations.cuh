// The activations every kernel shares: act_fwd<ACT>(z) and its derivative act_grad<ACT>(h, g).
// ACT is an activation's id, ACT_NONE (0, the identity) or one of ACT_RELU, ACT_GELU, ...:
// the launcher passes each id as -D (sources.py, from the op table ir/ops/activations.py),
// so the numbers are written nowhere here. act_grad reads h = the activation's output where
// the table says `from_output` (relu, tanh, sigmoid) and its input otherwise (gelu, silu).
// The formulas follow ir/ops/activations.py operation for operation.
#ifndef AICF_ACTIVATIONS_CUH
#define AICF_ACTIVATIONS_CUH

#define AICF_SQRT2 1.4142135623730951
#define AICF_SQRT_2_OVER_PI 0.7978845608028654
#define AICF_INV_SQRT_2PI 0.3989422804014327

template <int ACT, typename T>
__device__ __forceinline__ T act_fwd(T z) {
  if (ACT == ACT_RELU) return z > T(0) ? z : T(0);
  if (ACT == ACT_GELU) return T(0.5) * z * (T(1) + erf(z / T(AICF_SQRT2)));
  if (ACT == ACT_GELU_TANH) {
    T u = T(AICF_SQRT_2_OVER_PI) * (z + T(0.044715) * (z * z * z));
    return T(0.5) * z * (T(1) + tanh(u));
  }
  if (ACT == ACT_TANH) return tanh(z);
  if (ACT == ACT_SIGMOID) return T(1) / (T(1) + exp(-z));
  if (ACT == ACT_SILU) return z * (T(1) / (T(1) + exp(-z)));
  return z;
}

template <int ACT, typename T>
__device__ __forceinline__ T act_grad(T h, T g) {
  if (ACT == ACT_RELU) return h > T(0) ? g : T(0) * g;
  if (ACT == ACT_GELU) {
    T cdf = T(0.5) * (T(1) + erf(h / T(AICF_SQRT2)));
    T pdf = T(AICF_INV_SQRT_2PI) * exp(T(-0.5) * h * h);
    return g * (cdf + h * pdf);
  }
  if (ACT == ACT_GELU_TANH) {
    T u = T(AICF_SQRT_2_OVER_PI) * (h + T(0.044715) * (h * h * h));
    T t = tanh(u);
    T du = T(AICF_SQRT_2_OVER_PI) * (T(1) + T(3 * 0.044715) * (h * h));
    return g * (T(0.5) * (T(1) + t) + T(0.5) * h * (T(1) - t * t) * du);
  }
  // (1 - h)(1 + h), not 1 - h*h: near saturation h*h rounds away the difference from 1
  if (ACT == ACT_TANH) return g * ((T(1) - h) * (T(1) + h));
  if (ACT == ACT_SIGMOID) return g * h * (T(1) - h);
  if (ACT == ACT_SILU) {
    T s = T(1) / (T(1) + exp(-h));
    return g * s * (T(1) + h * (T(1) - s));
  }
  return g;
}

#endif  // AICF_ACTIVATIONS_CUH
