"""CUDA C++ sources, one named constant per family; `compile.function` builds them with
NVRTC (through CuPy) on first use, one template instantiation at a time.

Activation ids (template parameter ACT), shared by every kernel:
0 none, 1 relu, 2 gelu (erf), 3 gelu (tanh), 4 tanh, 5 sigmoid, 6 silu. The derivative
`act_grad<ACT>(h, g)` reads h = the activation's output for relu/tanh/sigmoid and its input
for gelu/silu (`kernels.fused.ACT_FROM_OUTPUT`). Formulas follow `ir/ops/activations.py`
operation for operation.
"""

from __future__ import annotations

ACT_IDS = {None: 0, "relu": 1, "gelu": 2, "gelu_tanh": 3, "tanh": 4, "sigmoid": 5, "silu": 6}

COMMON = r"""
#define AICF_SQRT2 1.4142135623730951
#define AICF_SQRT_2_OVER_PI 0.7978845608028654
#define AICF_INV_SQRT_2PI 0.3989422804014327

template <int ACT, typename T>
__device__ __forceinline__ T act_fwd(T z) {
  if (ACT == 1) return z > T(0) ? z : T(0);
  if (ACT == 2) return T(0.5) * z * (T(1) + erf(z / T(AICF_SQRT2)));
  if (ACT == 3) {
    T u = T(AICF_SQRT_2_OVER_PI) * (z + T(0.044715) * (z * z * z));
    return T(0.5) * z * (T(1) + tanh(u));
  }
  if (ACT == 4) return tanh(z);
  if (ACT == 5) return T(1) / (T(1) + exp(-z));
  if (ACT == 6) return z * (T(1) / (T(1) + exp(-z)));
  return z;
}

template <int ACT, typename T>
__device__ __forceinline__ T act_grad(T h, T g) {
  if (ACT == 1) return h > T(0) ? g : T(0) * g;
  if (ACT == 2) {
    T cdf = T(0.5) * (T(1) + erf(h / T(AICF_SQRT2)));
    T pdf = T(AICF_INV_SQRT_2PI) * exp(T(-0.5) * h * h);
    return g * (cdf + h * pdf);
  }
  if (ACT == 3) {
    T u = T(AICF_SQRT_2_OVER_PI) * (h + T(0.044715) * (h * h * h));
    T t = tanh(u);
    T du = T(AICF_SQRT_2_OVER_PI) * (T(1) + T(3 * 0.044715) * (h * h));
    return g * (T(0.5) * (T(1) + t) + T(0.5) * h * (T(1) - t * t) * du);
  }
  if (ACT == 4) return g * (T(1) - h * h);
  if (ACT == 5) return g * h * (T(1) - h);
  if (ACT == 6) {
    T s = T(1) / (T(1) + exp(-h));
    return g * s * (T(1) + h * (T(1) - s));
  }
  return g;
}

template <typename T>
__device__ __forceinline__ T warp_sum(T v) {
  #pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

template <typename T>
__device__ __forceinline__ T warp_max(T v) {
  #pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmax(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

template <typename T> __device__ __forceinline__ T neg_inf();
template <> __device__ __forceinline__ float neg_inf<float>() { return __int_as_float(0xff800000); }
template <> __device__ __forceinline__ double neg_inf<double>() {
  return __longlong_as_double(0xfff0000000000000ll);
}

template <bool B, class X, class Y> struct pick { typedef X type; };
template <class X, class Y> struct pick<false, X, Y> { typedef Y type; };

// Sum of v over the block (blockDim.x a multiple of 32, at most 1024); every thread gets it.
template <typename T>
__device__ T block_sum(T v) {
  __shared__ T part[32];
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
  v = warp_sum(v);
  __syncthreads();
  if (lane == 0) part[w] = v;
  __syncthreads();
  T t = lane < nw ? part[lane] : T(0);
  return warp_sum(t);
}
"""

# C = op(A) · op(B) with a fused epilogue, SIMT, for any strides. A(i, k) is
# A[i*lda + k] (A_KC) or A[k*lda + i]; B(k, j) is B[k*ldb + j] (B_NC) or B[j*ldb + k].
# ACT_A != 0 scales A on load by act'(H) (H laid out like A): the backward's gz = act'·g
# is never stored. EPI 0: C = acc. EPI 1 (forward): z = acc + bias[j]; Z = z (if given);
# C = act<ACT_OUT>(z). EPI 2 (weight gradient): C = acc, and blocks of the first column
# tile write dbias[i] = sum_k A(i, k) (the bias gradient, from the tiles already loaded).
GEMM_TILED = COMMON + r"""
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
        if (ACT_A != 0) rh[r] = H[off];
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
        As[k][i] = ACT_A != 0 ? act_grad<ACT_A, T>(rh[r], ra[r]) : ra[r];
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
"""

# Forward linear on tensor cores (WMMA), epilogue inside: C = act(X Wᵀ + b), X (M, K) and
# W (N, K) row-major fp32. PREC 1: operands rounded to tf32 (m16n16k8); PREC 2: to bf16
# (m16n16k16); accumulation in fp32. Block tile 64x64x32, four warps of 32x32.
GEMM_WMMA = COMMON + r"""
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
"""

# Elementwise epilogues and the activation-backward + bias-gradient reduction.
ELEMENTWISE = COMMON + r"""
// out = act(cin + bias[j]); Z = cin + bias[j] when given. cin may alias Z or out (each
// element is read before it is written, by the same thread). VEC: 4 floats a load (N % 4 == 0
// and 16-byte aligned rows, the host checks); each thread keeps EW_ILP loads in flight.
#define EW_ILP 4
template <typename T, int ACT, int VEC>
__global__ void __launch_bounds__(256)
bias_act(long long M, int N, const T* cin, const T* __restrict__ bias, T* Z, T* out) {
  const long long n = M * N / VEC;  // vectors
  const int nv = N / VEC;  // vectors per row
  const bool small = n < 2147483647LL;
  const long long stride = (long long)gridDim.x * blockDim.x;
  typedef typename pick<VEC == 4, float4, T>::type V;
  for (long long base = blockIdx.x * (long long)blockDim.x + threadIdx.x; base < n;
       base += EW_ILP * stride) {
    V x[EW_ILP];
    #pragma unroll
    for (int r = 0; r < EW_ILP; ++r) {
      const long long e = base + r * stride;
      if (e < n) x[r] = ((const V*)cin)[e];
    }
    #pragma unroll
    for (int r = 0; r < EW_ILP; ++r) {
      const long long e = base + r * stride;
      if (e >= n) break;
      T* v = (T*)&x[r];
      if (bias != nullptr) {
        const int c = VEC * (small ? (int)((unsigned)e % (unsigned)nv) : (int)(e % nv));
        #pragma unroll
        for (int q = 0; q < VEC; ++q) v[q] += bias[c + q];
      }
      if (Z != nullptr) ((V*)Z)[e] = x[r];
      #pragma unroll
      for (int q = 0; q < VEC; ++q) v[q] = act_fwd<ACT, T>(v[q]);
      ((V*)out)[e] = x[r];
    }
  }
}

// gx = act'(h) * g, elementwise (an activation's own backward).
template <typename T, int ACT>
__global__ void __launch_bounds__(256)
act_bwd(long long n, const T* __restrict__ H, const T* __restrict__ G, T* __restrict__ GX) {
  const long long stride = (long long)gridDim.x * blockDim.x;
  for (long long base = blockIdx.x * (long long)blockDim.x + threadIdx.x; base < n;
       base += EW_ILP * stride) {
    T h[EW_ILP], g[EW_ILP];
    #pragma unroll
    for (int r = 0; r < EW_ILP; ++r) {
      const long long e = base + r * stride;
      h[r] = e < n ? H[e] : T(0);
      g[r] = e < n ? G[e] : T(0);
    }
    #pragma unroll
    for (int r = 0; r < EW_ILP; ++r) {
      const long long e = base + r * stride;
      if (e < n) GX[e] = act_grad<ACT, T>(h[r], g[r]);
    }
  }
}

// gz = act'(h) * g (stored in GZ when given) and its column sums, the bias gradient, in one
// launch. Block (32, 32): x over 32 columns, y over rows; grid (ceil(N/32), R): R row chunks.
// With R = 1 the sums go to db. Else each chunk writes partial[R][N]; the last chunk block of
// a column block to finish (a ticket per column block, reset after use) sums the R partials
// (row thread y takes chunks y, y + 32, ..., then the 32 in order): deterministic.
template <typename T, int ACT>
__global__ void __launch_bounds__(1024)
act_bwd_bias(int M, int N, int rows_per_chunk, const T* __restrict__ G,
             const T* __restrict__ H, T* __restrict__ GZ, T* partial, T* __restrict__ db,
             unsigned int* tickets) {
  __shared__ T red[32][33];
  __shared__ bool last;
  const int j = blockIdx.x * 32 + threadIdx.x;
  const int r0 = blockIdx.y * rows_per_chunk;
  const int r1 = min(M, r0 + rows_per_chunk);
  T s = T(0);
  if (j < N) {
    int i = r0 + threadIdx.y;
    for (; i + 96 < r1; i += 128) {  // four rows' loads in flight, summed in row order
      T g[4], h[4];
      #pragma unroll
      for (int u = 0; u < 4; ++u) {
        const long long off = (long long)(i + 32 * u) * N + j;
        g[u] = G[off];
        h[u] = ACT != 0 ? H[off] : T(0);
      }
      #pragma unroll
      for (int u = 0; u < 4; ++u) {
        const T gz = ACT != 0 ? act_grad<ACT, T>(h[u], g[u]) : g[u];
        if (GZ != nullptr) GZ[(long long)(i + 32 * u) * N + j] = gz;
        s += gz;
      }
    }
    for (; i < r1; i += 32) {
      const long long off = (long long)i * N + j;
      T g = G[off];
      if (ACT != 0) g = act_grad<ACT, T>(H[off], g);
      if (GZ != nullptr) GZ[off] = g;
      s += g;
    }
  }
  red[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  T t = T(0);
  if (threadIdx.y == 0 && j < N) {
    for (int r = 0; r < 32; ++r) t += red[r][threadIdx.x];
    if (gridDim.y == 1) db[j] = t;
    else partial[(long long)blockIdx.y * N + j] = t;
  }
  if (gridDim.y == 1) return;
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0 && threadIdx.y == 0)
    last = atomicAdd(&tickets[blockIdx.x], 1u) == gridDim.y - 1;
  __syncthreads();
  if (!last) return;
  __threadfence();
  T u = T(0);
  if (j < N)
    for (int r = threadIdx.y; r < (int)gridDim.y; r += 32)
      u += ((volatile T*)partial)[(long long)r * N + j];
  red[threadIdx.y][threadIdx.x] = u;
  __syncthreads();
  if (threadIdx.y == 0 && j < N) {
    T v = T(0);
    for (int r = 0; r < 32; ++r) v += red[r][threadIdx.x];
    db[j] = v;
  }
  if (threadIdx.x == 0 && threadIdx.y == 0) tickets[blockIdx.x] = 0u;
}

// out[j] = sum_r partial[r * stride + j], r in order (deterministic).
template <typename T>
__global__ void colsum_finalize(int R, int N, int stride, const T* __restrict__ partial,
                                T* __restrict__ out) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= N) return;
  T t = T(0);
  for (int r = 0; r < R; ++r) t += partial[(long long)r * stride + j];
  out[j] = t;
}
"""

# Softmax + cross-entropy over rows: a warp per row, rows strided over all the grid's warps;
# glogits = (softmax - q) * gy / M, q the (smoothed) one-hot target; gy may be null (1), and
# either output may be. The mean loss is summed in double in a fixed order: lane 0 of each
# warp over its rows, then the block (a fixed tree), then, with several blocks, the last
# block to finish over the blocks' partials (each thread a fixed set, then the tree).
# One row of softmax + cross-entropy, by one warp: writes the row's gradient (when g is
# given) and returns its loss (every lane; 0 when !want_loss). Shared by softmax_ce and the
# whole-step MLP kernel, so both round alike.
CE_ROW = r"""
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
"""

# Softmax + cross-entropy over rows: a warp per row, rows strided over all the grid's warps;
# glogits = (softmax - q) * gy / M, q the (smoothed) one-hot target; gy may be null (1), and
# either output may be. The mean loss is summed in double in a fixed order: lane 0 of each
# warp over its rows, then the block (a fixed tree), then, with several blocks, the last
# block to finish over the blocks' partials (each thread a fixed set, then the tree).
LOSSES = COMMON + CE_ROW + r"""
template <typename T>
__global__ void softmax_ce(int M, int C, const T* __restrict__ logits,
                           const long long* __restrict__ labels, const T* __restrict__ gy,
                           double eps, T* __restrict__ loss, T* __restrict__ glogits,
                           double* partials, unsigned int* counter) {
  const int lane = threadIdx.x & 31;
  const int nw = (gridDim.x * blockDim.x) >> 5;
  const T scale = (gy != nullptr ? gy[0] : T(1)) / T(M);
  double acc = 0.0;
  for (int row = (blockIdx.x * blockDim.x + threadIdx.x) >> 5; row < M; row += nw) {
    const T row_loss = ce_row<T>(C, logits + (long long)row * C, labels[row], eps, scale,
                                 loss != nullptr,
                                 glogits != nullptr ? glogits + (long long)row * C : nullptr);
    if (lane == 0) acc += (double)row_loss;
  }
  if (loss == nullptr) return;
  const double total = block_sum(acc);
  if (gridDim.x == 1) {
    if (threadIdx.x == 0) loss[0] = (T)(total / M);
    return;
  }
  __shared__ bool last;
  if (threadIdx.x == 0) {
    partials[blockIdx.x] = total;
    __threadfence();
    last = atomicAdd(counter, 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  double t = 0.0;
  for (unsigned int b = threadIdx.x; b < gridDim.x; b += blockDim.x)
    t += ((volatile double*)partials)[b];
  t = block_sum(t);
  if (threadIdx.x == 0) {
    loss[0] = (T)(t / M);
    counter[0] = 0u;
  }
}

template <typename T>
__global__ void mse_fwd(long long n, const T* __restrict__ p, const T* __restrict__ t,
                        T* __restrict__ loss) {
  double acc = 0.0;
  for (long long e = threadIdx.x; e < n; e += blockDim.x) {
    const T d = p[e] - t[e];
    acc += (double)(d * d);
  }
  const double total = block_sum(acc);
  if (threadIdx.x == 0) loss[0] = (T)(total / n);
}

template <typename T>
__global__ void mse_vjp(long long n, const T* __restrict__ p, const T* __restrict__ t,
                        const T* __restrict__ gy, T* __restrict__ g) {
  const T s = (T(2) * gy[0]) / T(n);
  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < n;
       e += (long long)gridDim.x * blockDim.x)
    g[e] = (p[e] - t[e]) * s;
}
"""

# Layernorm over the last axis: one warp per row, statistics in two passes (mean, then the
# mean squared deviation) as the reference does. The backward writes gx and the per-row
# (mean, rstd) to `stats`; ln_bwd_params then sums g*xhat and g down the columns.
LAYERNORM = COMMON + r"""
template <typename T>
__device__ __forceinline__ void row_stats(const T* x, int D, double eps, T& mu, T& rstd) {
  const int lane = threadIdx.x & 31;
  T s = T(0);
  for (int c = lane; c < D; c += 32) s += x[c];
  mu = warp_sum(s) / T(D);
  T v = T(0);
  for (int c = lane; c < D; c += 32) { const T d = x[c] - mu; v += d * d; }
  v = warp_sum(v) / T(D);
  rstd = T(1) / sqrt(v + T(eps));
}

template <typename T>
__global__ void layernorm_fwd(int M, int D, const T* __restrict__ X, const T* __restrict__ W,
                              const T* __restrict__ B, double eps, T* __restrict__ Y) {
  const int row = (blockIdx.x * blockDim.x + threadIdx.x) >> 5, lane = threadIdx.x & 31;
  if (row >= M) return;
  const T* x = X + (long long)row * D;
  T* y = Y + (long long)row * D;
  T mu, rstd;
  row_stats(x, D, eps, mu, rstd);
  for (int c = lane; c < D; c += 32) {
    T v = (x[c] - mu) * rstd;
    if (W != nullptr) v = v * W[c] + B[c];
    y[c] = v;
  }
}

template <typename T>
__global__ void layernorm_bwd(int M, int D, const T* __restrict__ X, const T* __restrict__ W,
                              const T* __restrict__ G, double eps, T* __restrict__ GX,
                              T* __restrict__ stats) {
  const int row = (blockIdx.x * blockDim.x + threadIdx.x) >> 5, lane = threadIdx.x & 31;
  if (row >= M) return;
  const T* x = X + (long long)row * D;
  const T* g = G + (long long)row * D;
  T mu, rstd;
  row_stats(x, D, eps, mu, rstd);
  if (stats != nullptr && lane == 0) { stats[2 * row] = mu; stats[2 * row + 1] = rstd; }
  if (GX == nullptr) return;
  T m1 = T(0), m2 = T(0);
  for (int c = lane; c < D; c += 32) {
    const T xh = (x[c] - mu) * rstd;
    const T gh = W != nullptr ? g[c] * W[c] : g[c];
    m1 += gh;
    m2 += gh * xh;
  }
  m1 = warp_sum(m1) / T(D);
  m2 = warp_sum(m2) / T(D);
  T* gx = GX + (long long)row * D;
  for (int c = lane; c < D; c += 32) {
    const T xh = (x[c] - mu) * rstd;
    const T gh = W != nullptr ? g[c] * W[c] : g[c];
    gx[c] = rstd * (gh - m1 - xh * m2);
  }
}

// partial[r][0][c] = sum g*xhat, partial[r][1][c] = sum g over row chunk r.
template <typename T>
__global__ void ln_bwd_params(int M, int D, int rows_per_chunk, const T* __restrict__ X,
                              const T* __restrict__ G, const T* __restrict__ stats,
                              T* __restrict__ partial) {
  __shared__ T red[2][32][33];
  const int c = blockIdx.x * 32 + threadIdx.x;
  const int r0 = blockIdx.y * rows_per_chunk;
  const int r1 = min(M, r0 + rows_per_chunk);
  T sw = T(0), sb = T(0);
  if (c < D) {
    for (int i = r0 + threadIdx.y; i < r1; i += 32) {
      const long long off = (long long)i * D + c;
      const T xh = (X[off] - stats[2 * i]) * stats[2 * i + 1];
      sw += G[off] * xh;
      sb += G[off];
    }
  }
  red[0][threadIdx.y][threadIdx.x] = sw;
  red[1][threadIdx.y][threadIdx.x] = sb;
  __syncthreads();
  if (threadIdx.y == 0 && c < D) {
    T tw = T(0), tb = T(0);
    for (int r = 0; r < 32; ++r) { tw += red[0][r][threadIdx.x]; tb += red[1][r][threadIdx.x]; }
    partial[(long long)blockIdx.y * 2 * D + c] = tw;
    partial[(long long)blockIdx.y * 2 * D + D + c] = tb;
  }
}
"""

# Dropout with Philox4x64-10 (see philox.py): element e keeps when the double from word
# e % 4 of block e / 4 + 1 is >= p; y = x * (keep ? scale : 0). The key's low word is the
# step: read from device memory inside a CUDA graph (step_ptr), else from step_val.
DROPOUT = r"""
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
"""

# The optimizer over the whole flat buffer, with the gradient norm, clipping and the
# update ratio's sums. Element order of operations mirrors runtime/optimizers.py (built with
# --fmad=false so no multiply-add is contracted). Parameters come in segments of equal step
# count (seg_end, exclusive ends); hyper (double) holds [lr, lr*wd, -, -] then per segment
# [a, b]: Adam a = -lr/bc1, b = sqrt(bc2); SGD a = 1 on the segment's first step.
# stats (double): [0] sum g^2 (before clipping), [1] sum theta^2 (before), [2] sum delta^2,
# [3] the loss. Each thread takes OPT_ILP elements a grid stride apart per round, all loads
# first (memory-level parallelism: the update is bound by bandwidth). Blocks write partial
# sums; the last block to finish adds them, each thread a fixed set in order, then a fixed
# tree: deterministic, and a few loads deep instead of one serial chain over all blocks.
OPTIM = r"""
#define OPT_ILP 4

__device__ double block_sum_d(double v) {
  __shared__ double part[32];
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
  #pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  __syncthreads();
  if (lane == 0) part[w] = v;
  __syncthreads();
  double t = lane < nw ? part[lane] : 0.0;
  #pragma unroll
  for (int o = 16; o > 0; o >>= 1) t += __shfl_xor_sync(0xffffffffu, t, o);
  return t;
}

// Each block adds its NS sums to partials (stride 3); the last block sums all of them into
// stats[first + q] (q < NS), copies the loss, resets the counter. Returns in every thread.
template <int NS>
__device__ void finish_sums(const double s[NS], int first, double* partials,
                            unsigned int* counter, double* stats, const void* loss,
                            int loss_double) {
  __shared__ bool last;
  double b[NS];
  #pragma unroll
  for (int q = 0; q < NS; ++q) b[q] = block_sum_d(s[q]);
  if (threadIdx.x == 0) {
    #pragma unroll
    for (int q = 0; q < NS; ++q) partials[3 * blockIdx.x + q] = b[q];
    __threadfence();
    last = atomicAdd(counter, 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  double t[NS];
  #pragma unroll
  for (int q = 0; q < NS; ++q) t[q] = 0.0;
  for (unsigned int k = threadIdx.x; k < gridDim.x; k += blockDim.x) {
    #pragma unroll
    for (int q = 0; q < NS; ++q) t[q] += ((volatile double*)partials)[3 * k + q];
  }
  #pragma unroll
  for (int q = 0; q < NS; ++q) t[q] = block_sum_d(t[q]);
  if (threadIdx.x == 0) {
    #pragma unroll
    for (int q = 0; q < NS; ++q) stats[first + q] = t[q];
    if (loss != nullptr)
      stats[3] = loss_double ? ((const double*)loss)[0] : (double)((const float*)loss)[0];
    counter[0] = 0u;
  }
}

template <typename T>
__global__ void __launch_bounds__(256) grad_sumsq(long long n, const T* __restrict__ g,
                                                  double* partials, unsigned int* counter,
                                                  double* stats) {
  const long long stride = (long long)gridDim.x * blockDim.x;
  double s[1] = {0.0};
  for (long long base = blockIdx.x * (long long)blockDim.x + threadIdx.x; base < n;
       base += OPT_ILP * stride) {
    T x[OPT_ILP];
    #pragma unroll
    for (int r = 0; r < OPT_ILP; ++r) {
      const long long i = base + r * stride;
      x[r] = i < n ? g[i] : T(0);
    }
    #pragma unroll
    for (int r = 0; r < OPT_ILP; ++r) s[0] += (double)x[r] * (double)x[r];
  }
  finish_sums<1>(s, 0, partials, counter, stats, nullptr, 0);
}

template <typename T>
__device__ __forceinline__ T clip_coef(const double* stats, double max_norm, bool& scale) {
  const double norm = sqrt(stats[0]);
  const double c = max_norm / (norm + 1e-6);
  scale = c < 1.0 && isfinite(norm);
  return (T)c;
}

__device__ __forceinline__ int segment_of(long long i, const long long* seg_end, int nseg) {
  int s = 0;
  while (s < nseg - 1 && i >= seg_end[s]) ++s;
  return s;
}

template <typename T, bool CLIP, bool COUPLED_WD, bool DECOUPLED_WD>
__global__ void __launch_bounds__(256)
adam_step(long long n, T* __restrict__ theta, T* __restrict__ grad, T* __restrict__ m,
          T* __restrict__ v, const double* __restrict__ hyper,
          const long long* __restrict__ seg_end, int nseg, double one_m_b1, double b2,
          double one_m_b2, double eps, double wd, double max_norm, double* partials,
          unsigned int* counter, double* stats, const void* loss, int loss_double) {
  bool scale = false;
  const T coef = CLIP ? clip_coef<T>(stats, max_norm, scale) : T(1);
  const T t_b1 = (T)one_m_b1, t_b2 = (T)b2, t_1b2 = (T)one_m_b2, t_eps = (T)eps;
  const T t_wd = (T)wd, t_lrwd = (T)hyper[1];
  const T step0 = (T)hyper[4], bc2_0 = (T)hyper[5];  // segment 0 (the only one, usually)
  const long long stride = (long long)gridDim.x * blockDim.x;
  double sg = 0.0, st = 0.0, sd = 0.0;
  for (long long base = blockIdx.x * (long long)blockDim.x + threadIdx.x; base < n;
       base += OPT_ILP * stride) {
    T th_[OPT_ILP], g_[OPT_ILP], m_[OPT_ILP], v_[OPT_ILP];
    #pragma unroll
    for (int r = 0; r < OPT_ILP; ++r) {
      const long long i = base + r * stride;
      const bool in = i < n;
      th_[r] = in ? theta[i] : T(0);
      g_[r] = in ? grad[i] : T(0);
      m_[r] = in ? m[i] : T(0);
      v_[r] = in ? v[i] : T(0);
    }
    #pragma unroll
    for (int r = 0; r < OPT_ILP; ++r) {
      const long long i = base + r * stride;
      if (i >= n) break;
      T neg_step = step0, bc2 = bc2_0;
      if (nseg > 1) {
        const int s = segment_of(i, seg_end, nseg);
        neg_step = (T)hyper[4 + 2 * s];
        bc2 = (T)hyper[5 + 2 * s];
      }
      const T th = th_[r];
      T g = g_[r];
      if (!CLIP) sg += (double)g * (double)g;
      if (CLIP && scale) { g = g * coef; grad[i] = g; }
      if (COUPLED_WD) { const T gw = th * t_wd; g = gw + g; }
      T mi = m_[r];
      T tmp = g - mi;
      tmp = tmp * t_b1;
      mi = mi + tmp;
      m[i] = mi;
      T vi = v_[r];
      vi = vi * t_b2;
      tmp = g * t_1b2;
      tmp = tmp * g;
      vi = vi + tmp;
      v[i] = vi;
      tmp = sqrt(vi);
      tmp = tmp / bc2;
      tmp = tmp + t_eps;
      T d = mi * neg_step;
      d = d / tmp;
      if (DECOUPLED_WD) { const T dw = th * t_lrwd; d = d - dw; }
      st += (double)th * (double)th;
      sd += (double)d * (double)d;
      theta[i] = th + d;
    }
  }
  if (CLIP) {
    const double s[2] = {st, sd};
    finish_sums<2>(s, 1, partials, counter, stats, loss, loss_double);
  } else {
    const double s[3] = {sg, st, sd};
    finish_sums<3>(s, 0, partials, counter, stats, loss, loss_double);
  }
}

template <typename T, bool CLIP, bool COUPLED_WD, bool MOMENTUM, bool NESTEROV>
__global__ void __launch_bounds__(256)
sgd_step(long long n, T* __restrict__ theta, T* __restrict__ grad, T* __restrict__ buf,
         const double* __restrict__ hyper, const long long* __restrict__ seg_end, int nseg,
         double momentum, double one_m_damp, int damp, double wd, double max_norm,
         double* partials, unsigned int* counter, double* stats, const void* loss,
         int loss_double) {
  bool scale = false;
  const T coef = CLIP ? clip_coef<T>(stats, max_norm, scale) : T(1);
  const T t_mom = (T)momentum, t_1d = (T)one_m_damp, t_wd = (T)wd, neg_lr = (T)(-hyper[0]);
  const long long stride = (long long)gridDim.x * blockDim.x;
  double sg = 0.0, st = 0.0, sd = 0.0;
  for (long long base = blockIdx.x * (long long)blockDim.x + threadIdx.x; base < n;
       base += OPT_ILP * stride) {
    T th_[OPT_ILP], g_[OPT_ILP], b_[OPT_ILP];
    #pragma unroll
    for (int r = 0; r < OPT_ILP; ++r) {
      const long long i = base + r * stride;
      const bool in = i < n;
      th_[r] = in ? theta[i] : T(0);
      g_[r] = in ? grad[i] : T(0);
      b_[r] = (MOMENTUM && in) ? buf[i] : T(0);
    }
    #pragma unroll
    for (int r = 0; r < OPT_ILP; ++r) {
      const long long i = base + r * stride;
      if (i >= n) break;
      const T th = th_[r];
      T g = g_[r];
      if (!CLIP) sg += (double)g * (double)g;
      if (CLIP && scale) { g = g * coef; grad[i] = g; }
      if (COUPLED_WD) { const T gw = th * t_wd; g = gw + g; }
      T u = g;
      if (MOMENTUM) {
        const int s = nseg > 1 ? segment_of(i, seg_end, nseg) : 0;
        T b;
        if (hyper[4 + 2 * s] != 0.0) {
          b = g;
        } else {
          b = b_[r] * t_mom;
          if (damp) { const T t = g * t_1d; b = b + t; } else { b = b + g; }
        }
        buf[i] = b;
        if (NESTEROV) { T t = b * t_mom; u = t + g; } else { u = b; }
      }
      const T d = u * neg_lr;
      st += (double)th * (double)th;
      sd += (double)d * (double)d;
      theta[i] = th + d;
    }
  }
  if (CLIP) {
    const double s[2] = {st, sd};
    finish_sums<2>(s, 1, partials, counter, stats, loss, loss_double);
  } else {
    const double s[3] = {sg, st, sd};
    finish_sums<3>(s, 0, partials, counter, stats, loss, loss_double);
  }
}
"""

# The whole training step of an MLP chain (linear [+ act] ... linear, softmax cross-entropy,
# backward) in one persistent launch: phases separated by a grid-wide barrier, each phase's
# work items strided over the blocks. For small models a step is a few dozen latency-bound
# launches; here it is one. Every gradient is overwritten (no memset); sums are taken in a
# fixed order (split-K partials included), so results are deterministic.
#
# Two schedules. SCHED 0 (layers): one phase per layer forward, one for the loss, one per
# layer backward (weight and data gradient together). SCHED 1 (rows): rows are independent
# until the weight gradients, so each block runs the forward, the loss and every data
# gradient of its 32-row tiles alone; after one barrier, all weight gradients at once. A
# GEMM whose K is long is split over S blocks; the block that finishes a tile last (a
# ticket) adds the S partial tiles in order and runs the epilogue.
#
# The grid must be co-resident (the host sizes it from the occupancy). Buffers written in
# one phase are read only in later ones (or, within a block, after a __syncthreads), and
# every buffer starts on a 256-byte boundary, so no cache line is read before its writes.
#
# `feed` holds the addresses of the batch (x, then int64 labels). meta, per layer (16
# int64): in, out, weight and bias offsets (-1: no bias) in the flat parameter/gradient
# buffers; offsets in `work` of the layer's output a (logits for the last), pre-activation
# z (-1 unless the derivative needs it), and g (the loss gradient with respect to a);
# splits of the forward, weight-gradient and data-gradient GEMMs; their partial-tile
# offsets in `part` and ticket offsets in `tickets`.
MLP_STEP = COMMON + CE_ROW + r"""
#define T_BM 32
#define T_BK 32
#define T_PAD 40  // row stride of the operand tiles: float4-aligned; the MMA fragment
                  // reads (rows k..k+3, 8 columns each) hit 32 distinct banks
#define T_NT 256
#define T_PART (T_BM * T_BM + T_BM)  // a partial 32x32 tile and its partial bias sums
#define MF 16
#define MAX_SMEM_LAYERS 32  // chains up to this deep keep their meta in shared memory

// v = p[0..3]; p 16-byte aligned (one vector load for float)
template <typename T>
__device__ __forceinline__ void load4(const T* p, T (&v)[4]) {
  v[0] = p[0]; v[1] = p[1]; v[2] = p[2]; v[3] = p[3];
}
template <>
__device__ __forceinline__ void load4<float>(const float* p, float (&v)[4]) {
  const float4 q = *reinterpret_cast<const float4*>(p);
  v[0] = q.x; v[1] = q.y; v[2] = q.z; v[3] = q.w;
}

__device__ __forceinline__ int cdiv(int a, int b) { return (a + b - 1) / b; }

// EPI 1 (forward): z = v + bias, Z = z if given, C = act<ACT>(z). EPI 0 and 2: C = v, times
// act'(Hc) at the same place when ACT != 0 (a data gradient becomes the gradient of the layer
// below's pre-activation, so neither of that layer's GEMMs applies act' on load). The one
// operand the epilogue reads (bias[j] or Hc[i, j]) is fetched apart, early when it can be.
template <typename T, int EPI, int ACT>
__device__ __forceinline__ T epilogue_operand(int i, int j, int M, int N, long long ldc,
                                              const T* bias, const T* Hc) {
  if (i >= M || j >= N) return T(0);
  if (EPI == 1) return bias != nullptr ? bias[j] : T(0);
  if (EPI == 0 && ACT != 0) return Hc[(long long)i * ldc + j];
  return T(0);
}
template <typename T, int EPI, int ACT>
__device__ __forceinline__ void epilogue(int i, int j, int M, int N, T v, T* C, long long ldc,
                                         T* Z, T operand) {
  if (i >= M || j >= N) return;
  const long long o = (long long)i * ldc + j;
  if (EPI == 1) {
    v += operand;
    if (Z != nullptr) Z[o] = v;
    v = act_fwd<ACT, T>(v);
  } else if (EPI == 0 && ACT != 0) {
    v = act_grad<ACT, T>(operand, v);
  }
  C[o] = v;
}

// Asynchronous global -> shared copies of one element (sm_80+: cp.async, zero-filled when
// !ok; before: a plain load and store), committed in groups and waited for by count.
template <typename T>
__device__ __forceinline__ void copy_async(T* dst, const T* src, bool ok) {
#if __CUDA_ARCH__ >= 800
  const unsigned int d = (unsigned int)__cvta_generic_to_shared(dst);
  asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(d), "l"(src),
               "n"((int)sizeof(T)), "r"(ok ? (int)sizeof(T) : 0));
#else
  *dst = ok ? *src : T(0);
#endif
}
__device__ __forceinline__ void copy_commit() {
#if __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::);
#endif
}
template <int N>
__device__ __forceinline__ void copy_wait() {
#if __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
#endif
}
// 16 bytes (sm_80+: one cp.async.cg), of which the first `bytes` come from src and the rest
// are zeros; dst and src 16-byte aligned
__device__ __forceinline__ void copy_async16(void* dst, const void* src, int bytes) {
#if __CUDA_ARCH__ >= 800
  const unsigned int d = (unsigned int)__cvta_generic_to_shared(dst);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src),
               "r"(bytes));
#else
  for (int b = 0; b < 16; ++b)
    ((char*)dst)[b] = b < bytes ? ((const char*)src)[b] : 0;
#endif
}
// Rows r < R of CW contiguous elements, src[r * ld + c] -> dst[r * stride + c], 16 bytes a
// copy, zeros where r >= r_lim or c >= c_lim. Vectors must not straddle c_lim's
// alignment: src, ld and stride are multiples of 16 bytes (aligned16).
template <typename T, int R, int CW>
__device__ __forceinline__ void copy_rows16(T* dst, int stride, const T* src, long long ld,
                                            int r_lim, int c_lim) {
  constexpr int V = 16 / (int)sizeof(T), PER_ROW = CW / V, COPIES = R * PER_ROW;
  #pragma unroll
  for (int p = 0; p < (COPIES + T_NT - 1) / T_NT; ++p) {
    const int v = threadIdx.x + p * T_NT;
    if (COPIES % T_NT != 0 && v >= COPIES) break;
    const int r = v / PER_ROW, c = (v % PER_ROW) * V;
    const int n = r < r_lim ? max(0, min(V, c_lim - c)) : 0;
    copy_async16(dst + r * stride + c, n > 0 ? src + r * ld + c : src, n * (int)sizeof(T));
  }
}
template <typename T>
__device__ __forceinline__ bool aligned16(const T* p, long long ld) {
  return ((reinterpret_cast<unsigned long long>(p) | (unsigned long long)(ld * sizeof(T)))
          & 15ull) == 0;
}

// TF32 tensor-core products (sm_80+; mlp_step.py asks for them only there, for the tf32
// policy): inputs rounded to TF32, sums in fp32.
__device__ __forceinline__ unsigned int to_tf32(float x) {
  unsigned int r = 0;
#if __CUDA_ARCH__ >= 800
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
#endif
  return r;
}
template <int N>
__device__ __forceinline__ void to_tf32(const float (&v)[N], unsigned int (&r)[N]) {
  #pragma unroll
  for (int q = 0; q < N; ++q) r[q] = to_tf32(v[q]);
}
// d += a b for a 16x8 fragment of A, 8x8 of B (PTX mma.m16n8k8 layouts)
__device__ __forceinline__ void mma_tf32(float (&d)[4], const unsigned int (&a)[4],
                                         const unsigned int (&b)[2]) {
#if __CUDA_ARCH__ >= 800
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}

// The K-chunk pipeline of a 32 x (32*NJ) tile: a stage holds one chunk's operands; NS
// stages (chosen by mlp_step.py to fit the shared memory it gives the kernel).
template <typename T, int NJ, int NS>
struct Stages {
  static constexpr int BN = T_BM * NJ, BPAD = BN + 8;  // as T_PAD
  static constexpr int SIZE = T_BK * T_PAD + T_BK * BPAD;  // elements a stage
  static constexpr int N = NS;
};

// Split ks of S of the 32 x (32*NJ) tile (bi, bj) of C = op(A) op(B), by 256 threads. The
// split's K chunks stream through NS shared-memory stages by cp.async (all at once when they
// fit). SIMT (MMA 0): four groups of 64 threads; group g computes 32x32 sub-tile g % NJ over
// a quarter (NJ 1) or half (NJ 2) of each chunk, a thread a 4x4 block, and the groups of the
// first K share add the others' sums. TF32 (MMA 1): each warp a column of 16x8 mma.sync
// fragments over whole chunks. A(i, k) is A[i*lda + k] (A_KC) or A[k*lda + i]; B(k, j) is
// B[k*ldb + j] (B_NC) or B[j*ldb + k]. The values go through epilogue<EPI, ACT> (Hc: act'
// input for EPI 0); EPI 2 also has the tiles of column 0 write dbias[i] = sum_k A(i, k). With
// S > 1, `part` holds this tile's S partials and `ticket` counts the splits done. Returns
// whether this block wrote the final values.
template <typename T, int NJ, int NS, bool A_KC, bool B_NC, int EPI, int ACT, int MMA>
__device__ bool tile32(T* smem, int bi, int bj, int M, int N, int K, int ks, int S,
                       const T* A, long long lda, const T* B, long long ldb,
                       T* C, long long ldc, const T* bias, T* Z, const T* Hc, T* dbias,
                       T* part, unsigned int* ticket) {
  typedef Stages<T, NJ, NS> St;
  constexpr int BN = St::BN, BPAD = St::BPAD, G = 4 / NJ, KG = T_BK / G;
  constexpr int PART = T_BM * BN + T_BM;  // one partial tile and its partial bias sums
  // stage s: As (k, i) then Bs (k, j); `red` reuses the stages once the K loop is done.
  // TF32 products keep an operand whose K is contiguous in memory K-contiguous in the stage
  // too, (i, k) or (j, k) (AT, BT: same sizes for 32-wide tiles), so that every operand
  // copies 16 bytes at a time (float, aligned). SIMT reads float4 along i and j and copies
  // an element at a time: its 16-byte copies, where the order allowed them, cost registers
  // and time (size 1 of step_gpu.py on an H100: 106 against 101.5 µs).
  constexpr bool AT = MMA != 0 && A_KC, BT = MMA != 0 && !B_NC && NJ == 1;
  auto As = [&](int s) { return reinterpret_cast<T (*)[T_PAD]>(smem + s * St::SIZE); };
  auto Bs = [&](int s) {
    return reinterpret_cast<T (*)[BPAD]>(smem + s * St::SIZE + T_BK * T_PAD);
  };
  auto a_at = [&](int s, int k, int i) -> T* {  // A(i, k)'s place in stage s
    return smem + s * St::SIZE + (AT ? i * T_PAD + k : k * T_PAD + i);
  };
  auto b_at = [&](int s, int k, int j) -> T* {
    return smem + s * St::SIZE + T_BK * T_PAD + (BT ? j * T_PAD + k : k * BPAD + j);
  };
  T (*red)[T_BM][T_BM + 1] = reinterpret_cast<T (*)[T_BM][T_BM + 1]>(smem);
  __shared__ int last;
  const int tid = threadIdx.x, grp = tid >> 6, lt = tid & 63;
  const int nj = grp % NJ, kg = grp / NJ;
  const int ti = (lt & 7) * 4, tj = (lt >> 3) * 4 + nj * T_BM;
  const int i0 = bi * T_BM, j0 = bj * BN;
  const bool do_bias = EPI == 2 && dbias != nullptr && bj == 0;
  const int per = cdiv(cdiv(K, T_BK), S) * T_BK;
  const int kb = ks * per, ke = min(K, kb + per), chunks = max(0, cdiv(ke - kb, T_BK));
  T acc[4][4];
  #pragma unroll
  for (int r = 0; r < 4; ++r)
    #pragma unroll
    for (int c = 0; c < 4; ++c) acc[r][c] = T(0);
  // Chunk q's operands into stage q % N, straight from global memory (zeros outside). A
  // thread copies the same places of every chunk: a column c of each operand's run of W
  // elements contiguous in memory, on rows s0, s0 + T_NT / W, ... (P passes).
  constexpr int AW = A_KC ? T_BK : T_BM, AP = T_BM * T_BK / T_NT;
  constexpr int BW = B_NC ? BN : T_BK, BP = T_BK * BN / T_NT;
  const int ac = tid % AW, as0 = tid / AW, bc = tid % BW, bs0 = tid / BW;
  const T* a0 = A + (A_KC ? (long long)(i0 + as0) * lda + kb + ac
                          : (long long)(kb + as0) * lda + i0 + ac);
  const T* b0 = B + (B_NC ? (long long)(kb + bs0) * ldb + j0 + bc
                          : (long long)(j0 + bs0) * ldb + kb + bc);
  const long long a_chunk = A_KC ? T_BK : T_BK * lda, b_chunk = B_NC ? T_BK * ldb : T_BK;
  // 16-byte copies where the stage keeps the operand's memory order and it is aligned
  constexpr bool VEC = sizeof(T) == 4 && MMA != 0;
  const bool va = VEC && A_KC == AT && aligned16(A, lda);
  const bool vb = VEC && B_NC != BT && aligned16(B, ldb);
  auto issue = [&](int q) {
    const int k0 = kb + q * T_BK, s = q % St::N;
    if (va && A_KC) {
      copy_rows16<T, T_BM, T_BK>(a_at(s, 0, 0), T_PAD, A + (long long)i0 * lda + k0, lda,
                                 M - i0, ke - k0);
    } else if (va) {
      copy_rows16<T, T_BK, T_BM>(a_at(s, 0, 0), T_PAD, A + (long long)k0 * lda + i0, lda,
                                 ke - k0, M - i0);
    } else {
      #pragma unroll
      for (int p = 0; p < AP; ++p) {
        const int sp = as0 + p * (T_NT / AW);
        const int i = A_KC ? sp : ac, k = A_KC ? ac : sp;
        const bool ok = i0 + i < M && k0 + k < ke;
        copy_async(a_at(s, k, i), ok ? a0 + q * a_chunk + p * (T_NT / AW) * lda : A, ok);
      }
    }
    if (vb && B_NC) {
      copy_rows16<T, T_BK, BN>(b_at(s, 0, 0), BPAD, B + (long long)k0 * ldb + j0, ldb,
                               ke - k0, N - j0);
    } else if (vb) {
      copy_rows16<T, BN, T_BK>(b_at(s, 0, 0), T_PAD, B + (long long)j0 * ldb + k0, ldb,
                               N - j0, ke - k0);
    } else {
      #pragma unroll
      for (int p = 0; p < BP; ++p) {
        const int sp = bs0 + p * (T_NT / BW);
        const int j = B_NC ? bc : sp, k = B_NC ? sp : bc;
        const bool ok = j0 + j < N && k0 + k < ke;
        copy_async(b_at(s, k, j), ok ? b0 + q * b_chunk + p * (T_NT / BW) * ldb : B, ok);
      }
    }
  };
  // One chunk from stage s. SIMT (MMA 0): a thread a 4x4 block over its group's share of
  // the chunk. TF32 (MMA 1): warp w the 16x8 fragments at rows m0 + (0..15), columns n0 + 32 t +
  // (0..7), t < NJ, over the whole chunk. The threads holding column 0's A values also sum
  // their rows of A (dbias).
  const int lane = tid & 31, warp = tid >> 5, fg = lane >> 2, ft = lane & 3;
  const int m0 = (warp & 1) * 16, n0 = (warp >> 1) * 8;
  const bool sums_rows = do_bias && (MMA == 0 ? tj == 0 : n0 == 0);
  T rows[4] = {T(0), T(0), T(0), T(0)};
  float d[NJ][4];
  #pragma unroll
  for (int t = 0; t < NJ; ++t)
    #pragma unroll
    for (int q = 0; q < 4; ++q) d[t][q] = 0.f;
  auto compute = [&](int s) {
    if constexpr (MMA == 0) {
      T (*as)[T_PAD] = As(s);
      T (*bs)[BPAD] = Bs(s);
      #pragma unroll
      for (int kk = 0; kk < KG; ++kk) {
        const int k = kg * KG + kk;
        T a[4], b[4];
        load4<T>(&as[k][ti], a);
        load4<T>(&bs[k][tj], b);
        #pragma unroll
        for (int r = 0; r < 4; ++r)
          #pragma unroll
          for (int c = 0; c < 4; ++c) acc[r][c] += a[r] * b[c];
        if (sums_rows) {
          #pragma unroll
          for (int r = 0; r < 4; ++r) rows[r] += a[r];
        }
      }
    } else {
      #pragma unroll
      for (int k = 0; k < T_BK; k += 8) {
        const float a[4] = {(float)*a_at(s, k + ft, m0 + fg), (float)*a_at(s, k + ft, m0 + fg + 8),
                            (float)*a_at(s, k + ft + 4, m0 + fg),
                            (float)*a_at(s, k + ft + 4, m0 + fg + 8)};
        if (sums_rows) {
          rows[0] += a[0] + a[2];
          rows[1] += a[1] + a[3];
        }
        unsigned int fa[4];
        to_tf32<4>(a, fa);
        #pragma unroll
        for (int t = 0; t < NJ; ++t) {
          const float b[2] = {(float)*b_at(s, k + ft, n0 + 32 * t + fg),
                              (float)*b_at(s, k + ft + 4, n0 + 32 * t + fg)};
          unsigned int fb[2];
          to_tf32<2>(b, fb);
          mma_tf32(d[t], fa, fb);
        }
      }
    }
  };
  // the epilogue's operands at this thread's outputs, fetched now so that their latency
  // hides behind the K loop (unsplit tiles; a split tile's last block fetches its own)
  constexpr bool PRE = EPI == 1 || (EPI == 0 && ACT != 0);
  T pre[MMA == 0 ? 16 : 4 * NJ];
  if (PRE && S == 1) {
    if constexpr (MMA == 0) {
      #pragma unroll
      for (int r = 0; r < 4; ++r)
        #pragma unroll
        for (int c = 0; c < 4; ++c)
          pre[4 * r + c] = kg == 0 ? epilogue_operand<T, EPI, ACT>(i0 + ti + r, j0 + tj + c, M,
                                                                   N, ldc, bias, Hc) : T(0);
    } else {
      #pragma unroll
      for (int t = 0; t < NJ; ++t)
        #pragma unroll
        for (int q = 0; q < 4; ++q)
          pre[4 * t + q] = epilogue_operand<T, EPI, ACT>(
              i0 + m0 + fg + (q >> 1) * 8, j0 + n0 + 32 * t + 2 * ft + (q & 1), M, N, ldc,
              bias, Hc);
    }
  }
  if (chunks <= St::N) {  // every chunk fits: one wait and one block barrier for them all
    for (int q = 0; q < chunks; ++q) issue(q);
    copy_commit();
    copy_wait<0>();
    __syncthreads();
    for (int q = 0; q < chunks; ++q) compute(q);
  } else {  // a ring of N stages, N - 1 chunks in flight
    #pragma unroll
    for (int q = 0; q < St::N - 1; ++q) {
      issue(q);
      copy_commit();
    }
    for (int q = 0; q < chunks; ++q) {
      // the stage chunk q + N - 1 goes to was last read by chunk q - 1: free since its end
      if (q + St::N - 1 < chunks) issue(q + St::N - 1);
      copy_commit();
      copy_wait<St::N - 1>();  // chunk q's group has landed (this thread's copies)
      __syncthreads();         // ... and every thread's
      compute(q % St::N);
      if (q + 1 < chunks) __syncthreads();
    }
  }
  __syncthreads();  // the stages are free: `red` and `rsum` reuse them
  T* rsum = smem + 3 * T_BM * (T_BM + 1);  // [RG][T_BM] row sums of A, after `red`
  constexpr int RG = MMA == 0 ? G : 1;
  if (MMA != 0 && sums_rows) {  // add the four lanes of a fragment row
    #pragma unroll
    for (int r = 0; r < 2; ++r) {
      rows[r] += __shfl_xor_sync(0xffffffffu, rows[r], 1);
      rows[r] += __shfl_xor_sync(0xffffffffu, rows[r], 2);
    }
    if (ft == 0) {
      rsum[m0 + fg] = rows[0];
      rsum[m0 + fg + 8] = rows[1];
    }
  } else if (sums_rows) {
    #pragma unroll
    for (int r = 0; r < 4; ++r) rsum[kg * T_BM + ti + r] = rows[r];
  }
  const int tl = tj - nj * T_BM;  // column within the sub-tile
  if (MMA == 0 && kg > 0) {
    #pragma unroll
    for (int r = 0; r < 4; ++r)
      #pragma unroll
      for (int c = 0; c < 4; ++c) red[(kg - 1) * NJ + nj][ti + r][tl + c] = acc[r][c];
  }
  __syncthreads();
  T* mine = part + (long long)ks * PART;
  if (MMA != 0) {
    #pragma unroll
    for (int t = 0; t < NJ; ++t)
      #pragma unroll
      for (int q = 0; q < 4; ++q) {
        const int r = m0 + fg + (q >> 1) * 8, c = n0 + 32 * t + 2 * ft + (q & 1);
        if (S == 1)
          epilogue<T, EPI, ACT>(i0 + r, j0 + c, M, N, T(d[t][q]), C, ldc, Z, pre[4 * t + q]);
        else
          mine[r * BN + c] = T(d[t][q]);
      }
  } else if (kg == 0) {
    #pragma unroll
    for (int r = 0; r < 4; ++r)
      #pragma unroll
      for (int c = 0; c < 4; ++c) {
        T v = acc[r][c];
        #pragma unroll
        for (int q = 1; q < G; ++q) v += red[(q - 1) * NJ + nj][ti + r][tl + c];
        if (S == 1)
          epilogue<T, EPI, ACT>(i0 + ti + r, j0 + tj + c, M, N, v, C, ldc, Z, pre[4 * r + c]);
        else
          mine[(ti + r) * BN + tj + c] = v;
      }
  }
  if (do_bias && tid < T_BM) {
    T rowsum = T(0);
    #pragma unroll
    for (int g = 0; g < RG; ++g) rowsum += rsum[g * T_BM + tid];
    if (S == 1) {
      if (i0 + tid < M) dbias[i0 + tid] = rowsum;
    } else {
      mine[T_BM * BN + tid] = rowsum;
    }
  }
  if (S > 1) {  // the last split to finish adds the partials, in split order
    __threadfence();
    __syncthreads();
    if (tid == 0) last = atomicAdd(ticket, 1u) == (unsigned int)(S - 1);
    __syncthreads();
    if (last) {
      __threadfence();
      #pragma unroll
      for (int q = 0; q < 4 * NJ; ++q) {
        const int o = tid + q * T_NT;
        T v = T(0);
        for (int s = 0; s < S; ++s) v += __ldcg(part + (long long)s * PART + o);
        const int i = i0 + o / BN, j = j0 + o % BN;
        epilogue<T, EPI, ACT>(i, j, M, N, v, C, ldc, Z,
                              epilogue_operand<T, EPI, ACT>(i, j, M, N, ldc, bias, Hc));
      }
      if (do_bias && tid < T_BM) {
        T v = T(0);
        for (int s = 0; s < S; ++s) v += __ldcg(part + (long long)s * PART + T_BM * BN + tid);
        if (i0 + tid < M) dbias[i0 + tid] = v;
      }
      if (tid == 0) *ticket = 0u;
    }
  }
  const bool wrote = S == 1 || last;
  __syncthreads();  // the operand tiles and `red` are reused by the next tile
  return wrote;
}

// All blocks wait here until every block has arrived; bar[0] counts arrivals, bar[1] is
// the generation (both self-resetting, so a replayed graph finds them ready).
__device__ __forceinline__ void grid_barrier(unsigned int* bar) {
  __syncthreads();
  if (threadIdx.x == 0) {
    volatile unsigned int* gen = bar + 1;
    const unsigned int g = *gen;
    __threadfence();
    if (atomicAdd(bar, 1u) == gridDim.x - 1) {
      atomicExch(bar, 0u);
      __threadfence();
      atomicAdd(bar + 1, 1u);
    } else {
      while (*gen == g) __nanosleep(20);
    }
    __threadfence();
  }
  __syncthreads();
}

// The blocks of one thread-block cluster (sm_90+) wait here for each other; release and
// acquire at cluster scope make each block's earlier global writes visible to the others.
__device__ __forceinline__ void cluster_barrier() {
#if __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.arrive.release.aligned;\n"
               "barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
#else
  __trap();  // mlp_step.py builds the cluster schedule only on sm_90 and newer
#endif
}

// Phase timestamps (benchmarks/step_bodies.py --phases; compiled in with -DMLP_PROFILE
// only): prof[slot * gridDim.x + block] in ns, slot 0 the kernel's start, then for each
// phase the time this block finished its work (odd) and left the barrier after it (even).
#ifdef MLP_PROFILE
#define MARK(slot)                                                               \
  do {                                                                           \
    if (threadIdx.x == 0 && prof != nullptr) {                                   \
      unsigned long long t_;                                                     \
      asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t_));                     \
      prof[(long long)(slot) * gridDim.x + blockIdx.x] = t_;                     \
    }                                                                            \
  } while (0)
#else
#define MARK(slot) do { (void)prof; } while (0)
#endif
#define PHASE_END(bar, nb) \
  do { MARK(1 + 2 * nb); grid_barrier(bar); MARK(2 + 2 * nb); ++nb; } while (0)

// The operands of layer l's three GEMMs, read from meta. g holds the gradient of the layer's
// pre-activation (its logits for the top layer), h_in the act' input of the layer below.
template <typename T, bool H_IS_Z>
struct Layer {
  int in, out, sf, sw, sd;
  const T *a_in, *w, *bias, *h_in;
  T *a, *z, *g, *gw, *gb, *g_in, *pf, *pw, *pd;
  unsigned int *tf, *tw, *td;
  __device__ Layer(const long long* meta, int l, const T* x, const T* P, T* G, T* work,
                   T* part, unsigned int* tickets) {
    const long long* m = meta + MF * l;
    const long long* below = meta + MF * (l > 0 ? l - 1 : 0);
    in = (int)m[0]; out = (int)m[1];
    a_in = l == 0 ? x : work + below[4];
    w = P + m[2];
    bias = m[3] >= 0 ? P + m[3] : nullptr;
    a = work + m[4];
    z = m[5] >= 0 ? work + m[5] : nullptr;
    g = work + m[6];
    h_in = l > 0 ? work + (H_IS_Z ? below[5] : below[4]) : nullptr;
    gw = G + m[2];
    gb = m[3] >= 0 ? G + m[3] : nullptr;
    g_in = l > 0 ? work + below[6] : nullptr;
    sf = (int)m[7]; sw = (int)m[8]; sd = (int)m[9];
    pf = part + m[10]; pw = part + m[11]; pd = part + m[12];
    tf = tickets + m[13]; tw = tickets + m[14]; td = tickets + m[15];
  }
};

template <typename T, int ACT, bool H_IS_Z, int NJ, int NS, int MMA>
__device__ bool fwd_tile(T* smem, const Layer<T, H_IS_Z>& y, bool hidden, int M, int bi, int bj,
                         int ks, int S) {
  const int tn = cdiv(y.out, T_BM * NJ);
  T* pf = y.pf + (long long)(bi * tn + bj) * S * T_PART;
  unsigned int* tf = y.tf + bi * tn + bj;
  if (hidden)
    return tile32<T, NJ, NS, true, false, 1, ACT, MMA>(
        smem, bi, bj, M, y.out, y.in, ks, S, y.a_in, y.in, y.w, y.in, y.a, y.out, y.bias, y.z,
        nullptr, nullptr, pf, tf);
  return tile32<T, NJ, NS, true, false, 1, 0, MMA>(
      smem, bi, bj, M, y.out, y.in, ks, S, y.a_in, y.in, y.w, y.in, y.a, y.out, y.bias, nullptr,
      nullptr, nullptr, pf, tf);
}

template <typename T, bool H_IS_Z, int NS, int MMA>
__device__ void wgrad_tile(T* smem, const Layer<T, H_IS_Z>& y, int M, int t, int S) {
  const int wn = cdiv(y.in, T_BM), tile = t / S, ks = t % S;
  T* pw = y.pw + (long long)tile * S * T_PART;
  tile32<T, 1, NS, false, true, 2, 0, MMA>(
      smem, tile / wn, tile % wn, y.out, y.in, M, ks, S, y.g, y.out, y.a_in, y.in, y.gw, y.in,
      nullptr, nullptr, nullptr, y.gb, pw, y.tw + tile);
}

// The data gradient of a layer above the first: the layer below's g, act' applied.
template <typename T, int ACT, bool H_IS_Z, int NJ, int NS, int MMA>
__device__ void dgrad_tile(T* smem, const Layer<T, H_IS_Z>& y, int M, int bi, int bj, int ks,
                           int S) {
  const int wn = cdiv(y.in, T_BM * NJ);
  T* pd = y.pd + (long long)(bi * wn + bj) * S * T_PART;
  unsigned int* td = y.td + bi * wn + bj;
  tile32<T, NJ, NS, true, true, 0, ACT, MMA>(
      smem, bi, bj, M, y.in, y.out, ks, S, y.g, y.out, y.w, y.in, y.g_in, y.in, nullptr,
      nullptr, y.h_in, nullptr, pd, td);
}

// Softmax cross-entropy of the 32 rows from r0 by this block's warps (rows share, share +
// shares, ... of them when blocks split the tile): their gradients into top.g; returns this
// thread's share of the loss sum (lane 0 of each warp).
template <typename T, bool H_IS_Z>
__device__ double ce_rows(const Layer<T, H_IS_Z>& top, int r0, int M, const long long* labels,
                          double eps, int share = 0, int shares = 1) {
  double acc = 0.0;
  const int C = top.out;
  for (int q = (threadIdx.x >> 5) * shares + share; q < T_BM && r0 + q < M;
       q += (T_NT / 32) * shares) {
    const int row = r0 + q;
    const T rl = ce_row<T>(C, top.a + (long long)row * C, labels[row], eps, T(1) / T(M), true,
                           top.g + (long long)row * C);
    if ((threadIdx.x & 31) == 0) acc += (double)rl;
  }
  return acc;
}

// The mean loss from the blocks' partial sums (one block, fixed order).
template <typename T>
__device__ void loss_total(const double* partials, int M, T* loss) {
  double s = 0.0;
  for (unsigned int b = threadIdx.x; b < gridDim.x; b += blockDim.x)
    s += ((volatile const double*)partials)[b];
  s = block_sum(s);
  if (threadIdx.x == 0) loss[0] = (T)(s / M);
}

// Every weight gradient at once (the items of all layers spread over the grid, split as
// meta says) and the mean loss: the last phase of "rows" and "clusters".
template <typename T, bool H_IS_Z, int N1, int MMA>
__device__ void weight_phase(T* smem, int L, int M, const long long* meta, const T* x,
                             const T* P, T* G, T* work, T* part, unsigned int* tickets,
                             const double* partials, T* loss) {
  typedef Layer<T, H_IS_Z> Ly;
  int items = 1;
  for (int l = 0; l < L; ++l) {
    const long long* m = meta + MF * l;
    items += cdiv((int)m[0], T_BM) * cdiv((int)m[1], T_BM) * (int)m[8];
  }
  for (int t = blockIdx.x; t < items; t += gridDim.x) {
    int u = t, l = 0;
    for (; l < L; ++l) {
      const long long* m = meta + MF * l;
      const int n = cdiv((int)m[0], T_BM) * cdiv((int)m[1], T_BM) * (int)m[8];
      if (u < n) break;
      u -= n;
    }
    if (l == L) {
      loss_total<T>(partials, M, loss);
    } else {
      const Ly y(meta, l, x, P, G, work, part, tickets);
      wgrad_tile<T, H_IS_Z, N1, MMA>(smem, y, M, u, y.sw);
    }
  }
}

#define T_CLUSTER 8  // blocks a cluster under "clusters" (mlp_step.py: CLUSTER)
#define MLP_STEP_PARAMS                                                                    \
  int L, int M, const long long *meta, const long long *feed, const T *P, T *G, T *work,   \
      double eps, T *loss, double *partials, unsigned int *bar, T *part,                   \
      unsigned int *tickets, unsigned long long *prof
#define MLP_STEP_ARGS \
  L, M, meta, feed, P, G, work, eps, loss, partials, bar, part, tickets, prof

template <typename T, int ACT, bool H_IS_Z, int SCHED, int N1, int N2, int MMA>
__device__ __forceinline__ void mlp_body(MLP_STEP_PARAMS) {
  int nb = 0;  // phases ended
  MARK(0);
  // the K-chunk stages (N1 of them for 32-wide tiles, N2 for 64-wide), then reused by the
  // tiles' reductions: sized by mlp_step.py
  extern __shared__ __align__(16) unsigned char dsmem[];
  T* smem = reinterpret_cast<T*>(dsmem);
  // the batch where the caller keeps it: its addresses arrive with the step's terms
  // the layers' meta, read once into shared memory (each phase reads it again)
  __shared__ long long smeta[MF * (MAX_SMEM_LAYERS > 0 ? MAX_SMEM_LAYERS : 1)];
  if (L <= MAX_SMEM_LAYERS) {
    for (int q = threadIdx.x; q < MF * L; q += blockDim.x) smeta[q] = meta[q];
    __syncthreads();
    meta = smeta;
  }
  const T* x = reinterpret_cast<const T*>(feed[0]);
  const long long* labels = reinterpret_cast<const long long*>(feed[1]);
  typedef Layer<T, H_IS_Z> Ly;
  const int lane = threadIdx.x & 31;
  const Ly top(meta, L - 1, x, P, G, work, part, tickets);
  const int C = top.out;
  double acc = 0.0;
  if (SCHED == 1) {
    // each block alone: forward, loss and data gradients of its row tiles
    for (int r = blockIdx.x; r < cdiv(M, T_BM); r += gridDim.x) {
      for (int l = 0; l < L; ++l) {
        const Ly y(meta, l, x, P, G, work, part, tickets);
        for (int j = 0; j < cdiv(y.out, 2 * T_BM); ++j)
          (void)fwd_tile<T, ACT, H_IS_Z, 2, N2, MMA>(smem, y, l < L - 1, M, r, j, 0, 1);
      }
      acc += ce_rows<T, H_IS_Z>(top, r * T_BM, M, labels, eps);
      __syncthreads();
      for (int l = L - 1; l > 0; --l) {
        const Ly y(meta, l, x, P, G, work, part, tickets);
        for (int j = 0; j < cdiv(y.in, 2 * T_BM); ++j)
          dgrad_tile<T, ACT, H_IS_Z, 2, N2, MMA>(smem, y, M, r, j, 0, 1);
      }
    }
  }
  if (SCHED == 2) {
    // a cluster of T_CLUSTER blocks a row tile: they split each layer's column tiles and
    // meet at the cluster's barrier between layers, the grid's only before the weights
    const int rank = blockIdx.x % T_CLUSTER, clusters = gridDim.x / T_CLUSTER;
    for (int r = blockIdx.x / T_CLUSTER; r < cdiv(M, T_BM); r += clusters) {
      for (int l = 0; l < L; ++l) {
        const Ly y(meta, l, x, P, G, work, part, tickets);
        for (int j = rank; j < cdiv(y.out, T_BM); j += T_CLUSTER)
          (void)fwd_tile<T, ACT, H_IS_Z, 1, N1, MMA>(smem, y, l < L - 1, M, r, j, 0, 1);
        // one tile of logits: its block runs the loss of its rows at once
        if (l < L - 1 || C > T_BM) cluster_barrier();
      }
      if (C <= T_BM) {
        if (rank == 0) acc += ce_rows<T, H_IS_Z>(top, r * T_BM, M, labels, eps);
      } else {
        acc += ce_rows<T, H_IS_Z>(top, r * T_BM, M, labels, eps, rank, T_CLUSTER);
      }
      cluster_barrier();
      for (int l = L - 1; l > 0; --l) {
        const Ly y(meta, l, x, P, G, work, part, tickets);
        for (int j = rank; j < cdiv(y.in, T_BM); j += T_CLUSTER)
          dgrad_tile<T, ACT, H_IS_Z, 1, N1, MMA>(smem, y, M, r, j, 0, 1);
        if (l > 1) cluster_barrier();  // the next row tile's rows are apart: none after
      }
    }
  }
  if (SCHED != 0) {
    const double total = block_sum(acc);
    if (threadIdx.x == 0) partials[blockIdx.x] = total;
    PHASE_END(bar, nb);
    weight_phase<T, H_IS_Z, N1, MMA>(smem, L, M, meta, x, P, G, work, part, tickets, partials,
                                     loss);
    MARK(1 + 2 * nb);
    return;
  }
  // SCHED 0: forward, one phase per layer. When one tile spans the logits' columns, the
  // block that writes a tile of logits runs the loss of its rows at once (no loss phase).
  const bool loss_in_fwd = C <= T_BM;
  for (int l = 0; l < L; ++l) {
    const Ly y(meta, l, x, P, G, work, part, tickets);
    const int tn = cdiv(y.out, T_BM), items = cdiv(M, T_BM) * tn * y.sf;
    for (int t = blockIdx.x; t < items; t += gridDim.x) {
      const int tile = t / y.sf;
      const bool wrote = fwd_tile<T, ACT, H_IS_Z, 1, N1, MMA>(smem, y, l < L - 1, M, tile / tn,
                                                     tile % tn, t % y.sf, y.sf);
      if (l == L - 1 && loss_in_fwd && wrote)
        acc += ce_rows<T, H_IS_Z>(top, (tile / tn) * T_BM, M, labels, eps);
    }
    if (l == L - 1 && loss_in_fwd) {
      const double total = block_sum(acc);
      if (threadIdx.x == 0) partials[blockIdx.x] = total;
    }
    PHASE_END(bar, nb);
  }
  if (!loss_in_fwd) {  // the loss: a warp per row
    for (int row = (blockIdx.x * blockDim.x + threadIdx.x) >> 5; row < M;
         row += (gridDim.x * blockDim.x) >> 5) {
      const T rl = ce_row<T>(C, top.a + (long long)row * C, labels[row], eps, T(1) / T(M),
                             true, top.g + (long long)row * C);
      if (lane == 0) acc += (double)rl;
    }
    const double total = block_sum(acc);
    if (threadIdx.x == 0) partials[blockIdx.x] = total;
    PHASE_END(bar, nb);
  }
  // backward, last layer first: weight and data gradients of a layer in one phase
  for (int l = L - 1; l >= 0; --l) {
    const Ly y(meta, l, x, P, G, work, part, tickets);
    const int wn = cdiv(y.in, T_BM);
    const int wi = cdiv(y.out, T_BM) * wn * y.sw;
    const int di = l > 0 ? cdiv(M, T_BM) * wn * y.sd : 0;
    const int items = wi + di + (l == L - 1 ? 1 : 0);
    for (int t = blockIdx.x; t < items; t += gridDim.x) {
      if (t < wi) {
        wgrad_tile<T, H_IS_Z, N1, MMA>(smem, y, M, t, y.sw);
      } else if (t < wi + di) {
        const int u = t - wi, tile = u / y.sd;
        dgrad_tile<T, ACT, H_IS_Z, 1, N1, MMA>(smem, y, M, tile / wn, tile % wn, u % y.sd, y.sd);
      } else {
        loss_total<T>(partials, M, loss);
      }
    }
    if (l > 0) PHASE_END(bar, nb);
  }
  MARK(1 + 2 * nb);
}

// "layers" fills the device with more, smaller items: two blocks a multiprocessor pay
// (fewer registers); "rows" runs long chains in few blocks: registers pay.
template <typename T, int ACT, bool H_IS_Z, int SCHED, int N1, int N2, int MMA>
__global__ void __launch_bounds__(T_NT, SCHED == 0 ? 2 : 1) mlp_step(MLP_STEP_PARAMS) {
  mlp_body<T, ACT, H_IS_Z, SCHED, N1, N2, MMA>(MLP_STEP_ARGS);
}

#if __CUDA_ARCH__ >= 900
// "clusters": its grid in clusters of T_CLUSTER blocks (sm_90+), two blocks a multiprocessor
template <typename T, int ACT, bool H_IS_Z, int N1, int MMA>
__global__ void __cluster_dims__(T_CLUSTER, 1, 1) __launch_bounds__(T_NT, 2)
mlp_step_clusters(MLP_STEP_PARAMS) {
  mlp_body<T, ACT, H_IS_Z, 2, N1, 1, MMA>(MLP_STEP_ARGS);
}
#endif
"""
