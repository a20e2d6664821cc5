// Token embeddings: `embedding` (rows of a table picked by int64 ids) and the FT-Transformer's
// `numeric_tokenizer` (y[b, f, :] = x[b, f] * W[f, :] + B[f, :]).
#include "reduce.cuh"

// Y (N, D) = W[ids]; an id below 0 or at least V gives a row of NaN (the reference raises; a check
// on the host would synchronise the device every step). TW, TY: the table's and the output's
// float types (the op's output is float64 whatever the table's dtype).
template <typename TW, typename TY>
__global__ void embedding_fwd(long long N, int D, int V, const long long* __restrict__ ids,
                              const TW* __restrict__ W, TY* __restrict__ Y) {
  const long long n = N * D;
  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < n;
       e += (long long)gridDim.x * blockDim.x) {
    const long long r = e / D;
    const int c = (int)(e - r * D);
    const long long id = ids[r];
    Y[e] = (id >= 0 && id < V) ? (TY)W[id * D + c] : (TY)nan("");
  }
}

// GW[ids[r], :] += G[r, :] with atomics (repeated ids add up); GW zeroed first by the host.
// Ids out of range add nothing.
template <typename TW, typename TY>
__global__ void embedding_bwd(long long N, int D, int V, const long long* __restrict__ ids,
                              const TY* __restrict__ G, TW* __restrict__ GW) {
  const long long n = N * D;
  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < n;
       e += (long long)gridDim.x * blockDim.x) {
    const long long r = e / D;
    const int c = (int)(e - r * D);
    const long long id = ids[r];
    if (id >= 0 && id < V) atomicAdd(&GW[id * D + c], (TW)G[e]);
  }
}

// Y (B, F, D) = X[b, f] * W[f, :] (+ Bias[f, :]).
template <typename T>
__global__ void tokenizer_fwd(long long B, int F, int D, const T* __restrict__ X,
                              const T* __restrict__ W, const T* __restrict__ Bias,
                              T* __restrict__ Y) {
  const long long FD = (long long)F * D, n = B * FD;
  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < n;
       e += (long long)gridDim.x * blockDim.x) {
    const long long b = e / FD;
    const long long fc = e - b * FD;
    T v = X[b * F + fc / D] * W[fc];
    if (Bias != nullptr) v += Bias[fc];
    Y[e] = v;
  }
}

// GX[b, f] = sum_c G[b, f, c] * W[f, c]: a warp per (b, f).
template <typename T>
__global__ void tokenizer_bwd_x(long long rows, int F, int D, const T* __restrict__ G,
                                const T* __restrict__ W, T* __restrict__ GX) {
  const long long warps = ((long long)gridDim.x * blockDim.x) >> 5;
  const int lane = threadIdx.x & 31;
  for (long long r = (blockIdx.x * (long long)blockDim.x + threadIdx.x) >> 5; r < rows;
       r += warps) {
    const T* g = G + r * D;
    const T* w = W + (r % F) * D;
    T s = T(0);
    for (int c = lane; c < D; c += 32) s += g[c] * w[c];
    s = warp_sum(s);
    if (lane == 0) GX[r] = s;
  }
}

// GW[f, c] = sum_b G[b, f, c] * X[b, f], GB[f, c] = sum_b G[b, f, c]: a block (32, 32) per 32
// columns of the F*D, rows strided over threadIdx.y, then summed down the block in order.
template <typename T>
__global__ void tokenizer_bwd_params(long long B, int F, int D, const T* __restrict__ G,
                                     const T* __restrict__ X, T* __restrict__ GW,
                                     T* __restrict__ GB) {
  __shared__ T red[2][32][33];
  const long long FD = (long long)F * D;
  const long long col = blockIdx.x * 32ll + threadIdx.x;
  T sw = T(0), sb = T(0);
  if (col < FD) {
    const long long f = col / D;
    for (long long b = threadIdx.y; b < B; b += 32) {
      const T g = G[b * FD + col];
      sw += g * X[b * F + f];
      sb += g;
    }
  }
  red[0][threadIdx.y][threadIdx.x] = sw;
  red[1][threadIdx.y][threadIdx.x] = sb;
  __syncthreads();
  if (threadIdx.y == 0 && col < FD) {
    T tw = T(0), tb = T(0);
    for (int r = 0; r < 32; ++r) { tw += red[0][r][threadIdx.x]; tb += red[1][r][threadIdx.x]; }
    if (GW != nullptr) GW[col] = tw;
    if (GB != nullptr) GB[col] = tb;
  }
}
