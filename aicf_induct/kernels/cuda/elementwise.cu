// Elementwise epilogues and the activation-backward + bias-gradient reduction.
#include "activations.cuh"
#include "reduce.cuh"

// out = act(cin + bias[j]); Z = cin + bias[j] when given. cin may alias Z or out (each
// element is read before it is written, by the same thread). VEC: 4 floats a load (N % 4 == 0
// and 16-byte aligned rows, the host checks); each thread keeps EW_ILP loads in flight (-D from gemm.py: EW_ILP).
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
        h[u] = ACT != ACT_NONE ? H[off] : T(0);
      }
      #pragma unroll
      for (int u = 0; u < 4; ++u) {
        const T gz = ACT != ACT_NONE ? act_grad<ACT, T>(h[u], g[u]) : g[u];
        if (GZ != nullptr) GZ[(long long)(i + 32 * u) * N + j] = gz;
        s += gz;
      }
    }
    for (; i < r1; i += 32) {
      const long long off = (long long)i * N + j;
      T g = G[off];
      if (ACT != ACT_NONE) g = act_grad<ACT, T>(H[off], g);
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
