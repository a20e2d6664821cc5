// Warp and block reductions, and small helpers shared by the kernels.
#ifndef AICF_REDUCE_CUH
#define AICF_REDUCE_CUH

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

#endif  // AICF_REDUCE_CUH
