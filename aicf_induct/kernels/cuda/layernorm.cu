// Layernorm over the last axis: one warp per row, statistics in two passes (mean, then the
// mean squared deviation) as the reference does. The backward writes gx and the per-row
// (mean, rstd) to `stats`; ln_bwd_params then sums g*xhat and g down the columns.
#include "reduce.cuh"

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
