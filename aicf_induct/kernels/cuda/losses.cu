// Softmax + cross-entropy over rows: a warp per row, rows strided over all the grid's warps;
// glogits = (softmax - q) * gy / M, q the (smoothed) one-hot target; gy may be null (1), and
// either output may be. The mean loss is summed in double in a fixed order: lane 0 of each
// warp over its rows, then the block (a fixed tree), then, with several blocks, the last
// block to finish over the blocks' partials (each thread a fixed set, then the tree).
#include "reduce.cuh"
#include "ce_row.cuh"

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
