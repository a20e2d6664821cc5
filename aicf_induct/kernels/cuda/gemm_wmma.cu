// Forward linear on tensor cores (WMMA), epilogue inside: C = act(X Wᵀ + b), X (M, K) and
// W (N, K) row-major fp32. PREC 1: operands rounded to tf32 (m16n16k8); PREC 2: to bf16
// (m16n16k16); accumulation in fp32. Block tile 64x64x32, four warps of 32x32.
#include "activations.cuh"
#include "reduce.cuh"

#include <mma.h>
#include <cuda_bf16.h>
using namespace nvcuda;

template <int ACT, int PREC>
__global__ void __launch_bounds__(128)
gemm_wmma_fwd(int M, int N, int K, const float* __restrict__ X, const float* __restrict__ W,
              const float* __restrict__ bias, float* __restrict__ Z, float* __restrict__ C) {
  constexpr int BM = 64, BN = 64, BK = 32;
  typedef typename pick<PREC == 1, float, __nv_bfloat16>::type S;
  constexpr int LDS = PREC == 1 ? BK + 4 : BK + 8;
  constexpr int LDC = BN + 4;
  constexpr int FK = PREC == 1 ? 8 : 16;
  typedef typename pick<PREC == 1, wmma::precision::tf32, __nv_bfloat16>::type FT;
  __shared__ __align__(32) S As[BM * LDS];
  __shared__ __align__(32) S Bs[BN * LDS];
  __shared__ __align__(32) float Cs[BM * LDC];
  const int tid = threadIdx.x, warp = tid >> 5;
  const int wm = warp >> 1, wn = warp & 1;
  const int i0 = blockIdx.y * BM, j0 = blockIdx.x * BN;
  wmma::fragment<wmma::accumulator, 16, 16, FK, float> acc[2][2];
  #pragma unroll
  for (int a = 0; a < 2; ++a)
    #pragma unroll
    for (int b = 0; b < 2; ++b) wmma::fill_fragment(acc[a][b], 0.0f);
  for (int k0 = 0; k0 < K; k0 += BK) {
    for (int e = tid; e < BM * BK; e += 128) {
      const int r = e / BK, k = e % BK;
      const int gi = i0 + r, gj = j0 + r, gk = k0 + k;
      float xa = (gi < M && gk < K) ? X[(long long)gi * K + gk] : 0.0f;
      float wb = (gj < N && gk < K) ? W[(long long)gj * K + gk] : 0.0f;
      if constexpr (PREC == 1) {
        As[r * LDS + k] = wmma::__float_to_tf32(xa);
        Bs[r * LDS + k] = wmma::__float_to_tf32(wb);
      } else {
        As[r * LDS + k] = __float2bfloat16(xa);
        Bs[r * LDS + k] = __float2bfloat16(wb);
      }
    }
    __syncthreads();
    #pragma unroll
    for (int kk = 0; kk < BK; kk += FK) {
      wmma::fragment<wmma::matrix_a, 16, 16, FK, FT, wmma::row_major> fa[2];
      wmma::fragment<wmma::matrix_b, 16, 16, FK, FT, wmma::col_major> fb[2];
      #pragma unroll
      for (int a = 0; a < 2; ++a)
        wmma::load_matrix_sync(fa[a], As + (wm * 32 + a * 16) * LDS + kk, LDS);
      #pragma unroll
      for (int b = 0; b < 2; ++b)
        wmma::load_matrix_sync(fb[b], Bs + (wn * 32 + b * 16) * LDS + kk, LDS);
      #pragma unroll
      for (int a = 0; a < 2; ++a)
        #pragma unroll
        for (int b = 0; b < 2; ++b) wmma::mma_sync(acc[a][b], fa[a], fb[b], acc[a][b]);
    }
    __syncthreads();
  }
  #pragma unroll
  for (int a = 0; a < 2; ++a)
    #pragma unroll
    for (int b = 0; b < 2; ++b)
      wmma::store_matrix_sync(Cs + (wm * 32 + a * 16) * LDC + wn * 32 + b * 16, acc[a][b],
                              LDC, wmma::mem_row_major);
  __syncthreads();
  for (int e = tid; e < BM * BN; e += 128) {
    const int r = e / BN, c = e % BN;
    const int i = i0 + r, j = j0 + c;
    if (i < M && j < N) {
      float v = Cs[r * LDC + c];
      if (bias != nullptr) v += bias[j];
      if (Z != nullptr) Z[(long long)i * N + j] = v;
      C[(long long)i * N + j] = act_fwd<ACT, float>(v);
    }
  }
}
