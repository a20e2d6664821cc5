// Batchnorm over the batch axis of X (M, D): one thread per feature column, statistics in
// two passes (mean, then the mean squared deviation) as the reference does. Training:
// normalise by the batch's statistics and move the running statistics in place (momentum;
// the unbiased variance, as PyTorch tracks it); eval: normalise by the running statistics,
// rows split over blockIdx.y. Nothing is allocated: the kernels may be captured in a graph.

template <typename T>
__device__ __forceinline__ void column_stats(int M, int D, int c, const T* __restrict__ X,
                                             double eps, T& mu, T& var, T& rstd) {
  T s = T(0);
  for (int i = 0; i < M; ++i) s += X[(long long)i * D + c];
  mu = s / T(M);
  T v = T(0);
  for (int i = 0; i < M; ++i) {
    const T d = X[(long long)i * D + c] - mu;
    v += d * d;
  }
  var = v / T(M);
  rstd = T(1) / sqrt(var + T(eps));
}

template <typename T>
__global__ void batchnorm_fwd(int M, int D, int rows_per_block, const T* __restrict__ X,
                              const T* __restrict__ W, const T* __restrict__ B,
                              T* __restrict__ RM, T* __restrict__ RV, double eps,
                              double momentum, int training, T* __restrict__ Y) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= D) return;
  T mu, rstd;
  int r0 = 0, r1 = M;
  if (training) {  // one block row: the statistics need every row
    T var;
    column_stats(M, D, c, X, eps, mu, var, rstd);
    const T m = T(momentum);
    const T unbiased = var * (T(M) / T(M > 1 ? M - 1 : 1));
    RM[c] = (T(1) - m) * RM[c] + m * mu;
    RV[c] = (T(1) - m) * RV[c] + m * unbiased;
  } else {
    mu = RM[c];
    rstd = T(1) / sqrt(RV[c] + T(eps));
    r0 = blockIdx.y * rows_per_block;
    r1 = min(M, r0 + rows_per_block);
  }
  const T w = W != nullptr ? W[c] : T(1);
  const T b = W != nullptr ? B[c] : T(0);
  for (int i = r0; i < r1; ++i) {
    const long long o = (long long)i * D + c;
    Y[o] = (X[o] - mu) * rstd * w + b;
  }
}

// GW[c] = sum g*xhat, GB[c] = sum g (when W is given); GX as the reference's VJP.
template <typename T>
__global__ void batchnorm_bwd(int M, int D, const T* __restrict__ X, const T* __restrict__ W,
                              const T* __restrict__ G, const T* __restrict__ RM,
                              const T* __restrict__ RV, double eps, int training,
                              T* __restrict__ GX, T* __restrict__ GW, T* __restrict__ GB) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= D) return;
  T mu, var, rstd;
  if (training) {
    column_stats(M, D, c, X, eps, mu, var, rstd);
  } else {
    mu = RM[c];
    rstd = T(1) / sqrt(RV[c] + T(eps));
  }
  T sg = T(0), sgx = T(0);
  for (int i = 0; i < M; ++i) {
    const long long o = (long long)i * D + c;
    const T g = G[o];
    sg += g;
    sgx += g * ((X[o] - mu) * rstd);
  }
  if (GW != nullptr) {
    GW[c] = sgx;
    GB[c] = sg;
  }
  if (GX == nullptr) return;
  const T w = W != nullptr ? W[c] : T(1);
  const T m1 = training ? w * sg / T(M) : T(0);
  const T m2 = training ? w * sgx / T(M) : T(0);
  for (int i = 0; i < M; ++i) {
    const long long o = (long long)i * D + c;
    const T xh = (X[o] - mu) * rstd;
    GX[o] = rstd * (G[o] * w - m1 - xh * m2);
  }
}
