// Philox4x64-10 (see philox.py): the counter-based RNG behind dropout masks, shared by
// dropout.cu and attention.cu so both reproduce the reference generator bit for bit.
#ifndef AICF_PHILOX_CUH
#define AICF_PHILOX_CUH

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

// The uniform double (at least 0, below 1) from word w of a Philox block, as NumPy's
// Generator.random() makes it.
__device__ __forceinline__ double philox_unit(unsigned long long w) {
  return (double)(w >> 11) * (1.0 / 9007199254740992.0);
}

#endif  // AICF_PHILOX_CUH
