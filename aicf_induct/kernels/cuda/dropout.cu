// Dropout with Philox4x64-10 (see philox.py): element e keeps when the double from word
// e % 4 of block e / 4 + 1 is >= p; y = x * (keep ? scale : 0). The key's low word is the
// step: read from device memory inside a CUDA graph (step_ptr), else from step_val.

#include "philox.cuh"

template <typename T>
__global__ void dropout_apply(long long n, const T* __restrict__ X, T* __restrict__ Y,
                              double p, T scale, unsigned long long key_hi,
                              unsigned long long k1, const long long* __restrict__ step_ptr,
                              long long step_val) {
  const long long step = step_ptr != nullptr ? step_ptr[0] : step_val;
  const unsigned long long k0 = key_hi | ((unsigned long long)step & 0xFFFFFFFFull);
  const long long nblocks = (n + 3) / 4;
  for (long long b = blockIdx.x * (long long)blockDim.x + threadIdx.x; b < nblocks;
       b += (long long)gridDim.x * blockDim.x) {
    unsigned long long w[4];
    philox4x64_10((unsigned long long)b + 1ull, k0, k1, w);
    #pragma unroll
    for (int t = 0; t < 4; ++t) {
      const long long e = 4 * b + t;
      if (e < n) {
        const double u = philox_unit(w[t]);
        Y[e] = X[e] * (u >= p ? scale : T(0));
      }
    }
  }
}
