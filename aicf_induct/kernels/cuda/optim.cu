// The optimizer over the whole flat buffer, with the gradient norm, clipping and the
// update ratio's sums. Element order of operations mirrors runtime/optimizers.py (built with
// --fmad=false so no multiply-add is contracted). Parameters come in segments of equal step
// count (seg_end, exclusive ends); hyper (double) holds [lr, lr*wd, -, -] then per segment
// [a, b]: Adam a = -lr/bc1, b = sqrt(bc2); SGD a = 1 on the segment's first step.
// stats (double): [0] sum g^2 (before clipping), [1] sum theta^2 (before), [2] sum delta^2,
// [3] the loss. Each thread takes OPT_ILP elements a grid stride apart per round, all loads
// first (memory-level parallelism: the update is bound by bandwidth). Blocks write partial
// sums; the last block to finish adds them, each thread a fixed set in order, then a fixed
// tree: deterministic, and a few loads deep instead of one serial chain over all blocks.
// OPT_ILP comes from the launcher (optim.py: ILP), as -D.

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
