// Dropout with Philox4x64-10 (see philox.py): element e keeps when the double from word
// e % 4 of block e / 4 + 1 is >= p; y = x * (keep ? scale : 0). The key's low word is the
// step: read from device memory inside a CUDA graph (step_ptr), else from step_val.

__device__ __forceinline__ void philox4x64_10(unsigned long long ctr0, unsigned long long k0,
                                              unsigned long long k1,
                                              unsigned long long out[4]) {
  unsigned long long c0 = ctr0, c1 = 0, c2 = 0, c3 = 0;
  #pragma unroll
  for (int r = 0; r < 10; ++r) {
    if (r) { k0 += 0x9E3779B97F4A7C15ull; k1 += 0xBB67AE8584CAA73Bull; }
    const unsigned long long lo0 = 0xD2E7470EE14C6C93ull * c0;
    const unsigned long long hi0 = __umul64hi(0xD2E7470EE14C6C93ull, c0);
    const unsigned long long lo1 = 0xCA5A826395121157ull * c2;
    const unsigned long long hi1 = __umul64hi(0xCA5A826395121157ull, c2);
    const unsigned long long n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
    c0 = n0; c1 = lo1; c2 = n2; c3 = lo0;
  }
  out[0] = c0; out[1] = c1; out[2] = c2; out[3] = c3;
}

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
        const double u = (double)(w[t] >> 11) * (1.0 / 9007199254740992.0);
        Y[e] = X[e] * (u >= p ? scale : T(0));
      }
    }
  }
}
