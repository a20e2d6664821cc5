// Reductions over one axis and concatenation along any axis. A tensor is seen as
// (outer, n, inner) around the axis: n its length, inner the product of the later axes.
#include "reduce.cuh"

// Y[o, i] = sum_k X[o, k, i] * scale (scale 1/n for mean), k in order. inner == 1: a warp per
// output (the axis is contiguous); else a thread per output (neighbours read neighbours).
template <typename T>
__global__ void reduce_axis(long long outer, int n, long long inner, T scale,
                            const T* __restrict__ X, T* __restrict__ Y) {
  const long long m = outer * inner;
  if (inner == 1) {
    const int lane = threadIdx.x & 31;
    const long long warps = ((long long)gridDim.x * blockDim.x) >> 5;
    for (long long o = (blockIdx.x * (long long)blockDim.x + threadIdx.x) >> 5; o < m;
         o += warps) {
      const T* x = X + o * n;
      T s = T(0);
      for (int k = lane; k < n; k += 32) s += x[k];
      s = warp_sum(s);
      if (lane == 0) Y[o] = s * scale;
    }
    return;
  }
  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < m;
       e += (long long)gridDim.x * blockDim.x) {
    const long long o = e / inner, i = e - o * inner;
    const T* x = X + o * n * inner + i;
    T s = T(0);
    for (int k = 0; k < n; ++k) s += x[k * inner];
    Y[e] = s * scale;
  }
}

// GX[o, k, i] = G[o, i] * scale: the reduction's gradient, broadcast back along the axis.
template <typename T>
__global__ void broadcast_axis(long long outer, int n, long long inner, T scale,
                               const T* __restrict__ G, T* __restrict__ GX) {
  const long long total = outer * n * inner;
  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < total;
       e += (long long)gridDim.x * blockDim.x) {
    const long long i = e % inner, o = e / (inner * n);
    GX[e] = G[o * inner + i] * scale;
  }
}

// One concat operand and its place in the result, both (outer, ., inner): DST[o, off + k, i]
// = SRC[o, k, i] for k < n; with TO_PART the other way (the backward's slice of the
// gradient). `total`: the result's length along the axis.
template <typename T, bool TO_PART>
__global__ void concat_part(long long outer, int n, int total, int off, long long inner,
                            const T* __restrict__ SRC, T* __restrict__ DST) {
  const long long part = (long long)n * inner, count = outer * part;
  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < count;
       e += (long long)gridDim.x * blockDim.x) {
    const long long o = e / part, r = e - o * part;  // r = k * inner + i
    const long long whole = (o * total + off) * inner + r;
    if (TO_PART) DST[e] = SRC[whole];
    else DST[whole] = SRC[e];
  }
}
