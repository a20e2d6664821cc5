// One row of softmax + cross-entropy, by one warp: writes the row's gradient (when g is
// given) and returns its loss (every lane; 0 when !want_loss). Shared by softmax_ce and the
// whole-step MLP kernel, so both round alike.
#ifndef AICF_CE_ROW_CUH
#define AICF_CE_ROW_CUH
#include "reduce.cuh"

template <typename T>
__device__ __forceinline__ T ce_row(int C, const T* z, long long y, double eps, T scale,
                                    bool want_loss, T* g) {
  const int lane = threadIdx.x & 31;
  const T q_off = T(eps / C), q_on = T(eps / C) + T(1.0 - eps);
  T mx = neg_inf<T>();
  for (int c = lane; c < C; c += 32) mx = fmax(mx, z[c]);
  mx = warp_max(mx);
  T se = T(0);
  for (int c = lane; c < C; c += 32) se += exp(z[c] - mx);
  const T lse = log(warp_sum(se));
  const bool bad = y < 0 || y >= C;  // never read outside the row: the loss turns NaN
  if (bad) y = 0;
  T row_loss = T(0);
  if (want_loss) {
    T slp = T(0);
    if (eps != 0.0)
      for (int c = lane; c < C; c += 32) slp += (z[c] - mx) - lse;
    slp = warp_sum(slp);
    const T lpy = bad ? neg_inf<T>() * T(0) : (z[y] - mx) - lse;
    row_loss = -(T(eps / C) * slp + T(1.0 - eps) * lpy);
  }
  if (g != nullptr) {
    for (int c = lane; c < C; c += 32) {
      const T p = exp((z[c] - mx) - lse);
      g[c] = (p - (c == y && !bad ? q_on : q_off)) * scale;
    }
  }
  return row_loss;
}

#endif  // AICF_CE_ROW_CUH
