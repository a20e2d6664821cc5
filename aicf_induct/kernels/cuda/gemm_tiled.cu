// C = op(A) · op(B) with a fused epilogue, SIMT, for any strides. A(i, k) is
// A[i*lda + k] (A_KC) or A[k*lda + i]; B(k, j) is B[k*ldb + j] (B_NC) or B[j*ldb + k].
// ACT_A != ACT_NONE scales A on load by act'(H) (H laid out like A): the backward's gz = act'·g
// is never stored. EPI 0: C = acc. EPI 1 (forward): z = acc + bias[j]; Z = z (if given);
// C = act<ACT_OUT>(z). EPI 2 (weight gradient): C = acc, and blocks of the first column
// tile write dbias[i] = sum_k A(i, k) (the bias gradient, from the tiles already loaded).
#include "activations.cuh"
#include "reduce.cuh"

template <typename T, int BM, int BN, int BK, int TM, int TN, bool A_KC, bool B_NC,
          int ACT_A, int EPI, int ACT_OUT>
__global__ void __launch_bounds__((BM / TM) * (BN / TN))
gemm_tiled(int M, int N, int K,
           const T* __restrict__ A, long long lda, const T* __restrict__ H,
           const T* __restrict__ B, long long ldb,
           T* __restrict__ C, long long ldc,
           const T* __restrict__ bias, T* __restrict__ Z, T* __restrict__ dbias) {
  constexpr int TX = BN / TN, TY = BM / TM, NT = TX * TY;
  __shared__ T As[BK][BM + 1];
  __shared__ T Bs[BK][BN + 1];
  const int tid = threadIdx.x, tx = tid % TX, ty = tid / TX;
  const int i0 = blockIdx.y * BM, j0 = blockIdx.x * BN;
  const bool do_bias = (EPI == 2) && dbias != nullptr && blockIdx.x == 0;
  T acc[TM][TN];
  #pragma unroll
  for (int r = 0; r < TM; ++r)
    #pragma unroll
    for (int c = 0; c < TN; ++c) acc[r][c] = T(0);
  T rowsum = T(0);
  // Register prefetch: the next tile's global loads are in flight while this one computes.
  constexpr int LA = (BM * BK + NT - 1) / NT, LB = (BK * BN + NT - 1) / NT;
  T ra[LA], rh[LA], rb[LB];
  auto fetch = [&](int k0) {
    #pragma unroll
    for (int r = 0; r < LA; ++r) {
      const int e = tid + r * NT;
      const int i = A_KC ? e / BK : e % BM;
      const int k = A_KC ? e % BK : e / BM;
      const int gi = i0 + i, gk = k0 + k;
      ra[r] = T(0);
      rh[r] = T(0);
      if (e < BM * BK && gi < M && gk < K) {
        const long long off = A_KC ? (long long)gi * lda + gk : (long long)gk * lda + gi;
        ra[r] = A[off];
        if (ACT_A != ACT_NONE) rh[r] = H[off];
      }
    }
    #pragma unroll
    for (int r = 0; r < LB; ++r) {
      const int e = tid + r * NT;
      const int k = B_NC ? e / BN : e % BK;
      const int j = B_NC ? e % BN : e / BK;
      const int gk = k0 + k, gj = j0 + j;
      rb[r] = T(0);
      if (e < BK * BN && gk < K && gj < N)
        rb[r] = B_NC ? B[(long long)gk * ldb + gj] : B[(long long)gj * ldb + gk];
    }
  };
  auto stash = [&]() {
    #pragma unroll
    for (int r = 0; r < LA; ++r) {
      const int e = tid + r * NT;
      if (e < BM * BK) {
        const int i = A_KC ? e / BK : e % BM;
        const int k = A_KC ? e % BK : e / BM;
        As[k][i] = ACT_A != ACT_NONE ? act_grad<ACT_A, T>(rh[r], ra[r]) : ra[r];
      }
    }
    #pragma unroll
    for (int r = 0; r < LB; ++r) {
      const int e = tid + r * NT;
      if (e < BK * BN) {
        const int k = B_NC ? e / BN : e % BK;
        const int j = B_NC ? e % BN : e / BK;
        Bs[k][j] = rb[r];
      }
    }
  };
  fetch(0);
  for (int k0 = 0; k0 < K; k0 += BK) {
    stash();
    __syncthreads();
    if (k0 + BK < K) fetch(k0 + BK);
    if (do_bias && tid < BM) {
      #pragma unroll
      for (int k = 0; k < BK; ++k) rowsum += As[k][tid];
    }
    #pragma unroll
    for (int k = 0; k < BK; ++k) {
      T a[TM], b[TN];
      #pragma unroll
      for (int r = 0; r < TM; ++r) a[r] = As[k][ty + r * TY];
      #pragma unroll
      for (int c = 0; c < TN; ++c) b[c] = Bs[k][tx + c * TX];
      #pragma unroll
      for (int r = 0; r < TM; ++r)
        #pragma unroll
        for (int c = 0; c < TN; ++c) acc[r][c] += a[r] * b[c];
    }
    __syncthreads();
  }
  if (do_bias && tid < BM && i0 + tid < M) dbias[i0 + tid] = rowsum;
  #pragma unroll
  for (int r = 0; r < TM; ++r) {
    const int i = i0 + ty + r * TY;
    if (i >= M) continue;
    #pragma unroll
    for (int c = 0; c < TN; ++c) {
      const int j = j0 + tx + c * TX;
      if (j >= N) continue;
      T v = acc[r][c];
      if (EPI == 1) {
        if (bias != nullptr) v += bias[j];
        if (Z != nullptr) Z[(long long)i * ldc + j] = v;
        v = act_fwd<ACT_OUT, T>(v);
      }
      C[(long long)i * ldc + j] = v;
    }
  }
}
