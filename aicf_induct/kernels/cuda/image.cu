// Image ops on NCHW tensors: conv2d's layout kernels around the GEMMs (im2col, col2im, and
// the (N*OH*OW, O) <-> (N, O, OH, OW) transposes), and max/avg pooling. Output sizes as the
// op table: OH = (H + 2*PH - KH) / SH + 1. Backward kernels gather (each input element sums
// what reaches it, in a fixed order): no atomics, results independent of scheduling.

#include "reduce.cuh"

struct Window {
  int C, H, W, OH, OW, KH, KW, SH, SW, PH, PW;
};
// A window's geometry as kernel arguments (CuPy passes scalars, not structs), and the struct.
#define WINDOW_ARGS int C, int H, int W, int OH, int OW, int KH, int KW, int SH, int SW, \
                    int PH, int PW
#define WINDOW Window{C, H, W, OH, OW, KH, KW, SH, SW, PH, PW}

// COLS (N*OH*OW, C*KH*KW): row (n, oy, ox), column (c, i, j) = X[n, c, oy*SH + i - PH,
// ox*SW + j - PW], 0 in the padding.
template <typename T>
__global__ void im2col(long long N, WINDOW_ARGS, const T* __restrict__ X, T* __restrict__ COLS) {
  const Window w = WINDOW;
  const long long K = (long long)w.C * w.KH * w.KW, n = N * w.OH * w.OW * K;
  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < n;
       e += (long long)gridDim.x * blockDim.x) {
    const long long row = e / K;
    const int col = (int)(e - row * K);
    const int ox = (int)(row % w.OW), oy = (int)((row / w.OW) % w.OH);
    const long long b = row / ((long long)w.OW * w.OH);
    const int j = col % w.KW, i = (col / w.KW) % w.KH, c = col / (w.KW * w.KH);
    const int y = oy * w.SH + i - w.PH, x = ox * w.SW + j - w.PW;
    COLS[e] = (y >= 0 && y < w.H && x >= 0 && x < w.W)
                  ? X[((b * w.C + c) * w.H + y) * w.W + x] : T(0);
  }
}

// GX (N, C, H, W) = the sum over every (kernel position, output) that read it of GCOLS.
template <typename T>
__global__ void col2im(long long N, WINDOW_ARGS, const T* __restrict__ GCOLS, T* __restrict__ GX) {
  const Window w = WINDOW;
  const long long K = (long long)w.C * w.KH * w.KW, n = N * w.C * w.H * w.W;
  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < n;
       e += (long long)gridDim.x * blockDim.x) {
    const int x = (int)(e % w.W), y = (int)((e / w.W) % w.H), c = (int)((e / ((long long)w.W * w.H)) % w.C);
    const long long b = e / ((long long)w.W * w.H * w.C);
    T s = T(0);
    for (int i = 0; i < w.KH; ++i) {
      const int ty = y + w.PH - i;
      if (ty < 0 || ty % w.SH) continue;
      const int oy = ty / w.SH;
      if (oy >= w.OH) continue;
      for (int j = 0; j < w.KW; ++j) {
        const int tx = x + w.PW - j;
        if (tx < 0 || tx % w.SW) continue;
        const int ox = tx / w.SW;
        if (ox >= w.OW) continue;
        const long long row = (b * w.OH + oy) * w.OW + ox;
        s += GCOLS[row * K + ((long long)c * w.KH + i) * w.KW + j];
      }
    }
    GX[e] = s;
  }
}

// Y (N, O, P) = R[n*P + p, o] (+ Bias[o]): the GEMM's rows back to channels first.
template <typename T>
__global__ void rows_to_nchw(long long N, int O, int P, const T* __restrict__ R,
                             const T* __restrict__ Bias, T* __restrict__ Y) {
  const long long n = N * O * P;
  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < n;
       e += (long long)gridDim.x * blockDim.x) {
    const int p = (int)(e % P), o = (int)((e / P) % O);
    const long long b = e / ((long long)P * O);
    T v = R[(b * P + p) * O + o];
    if (Bias != nullptr) v += Bias[o];
    Y[e] = v;
  }
}

// R (N*P, O) = G[n, o, p]: the output gradient as the GEMMs' rows.
template <typename T>
__global__ void nchw_to_rows(long long N, int O, int P, const T* __restrict__ G,
                             T* __restrict__ R) {
  const long long n = N * O * P;
  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < n;
       e += (long long)gridDim.x * blockDim.x) {
    const int o = (int)(e % O);
    const long long row = e / O;
    const int p = (int)(row % P);
    const long long b = row / P;
    R[e] = G[(b * O + o) * P + p];
  }
}

// The first maximum of window (oy, ox) of plane xc (H, W) in kernel order (i, j), padding
// -inf, as the reference's argmax; its flat kernel position goes to *at.
template <typename T>
__device__ __forceinline__ T window_max(const Window& w, const T* xc, int oy, int ox, int* at) {
  T best = T(0);
  int k = -1;
  for (int i = 0; i < w.KH; ++i) {
    const int y = oy * w.SH + i - w.PH;
    for (int j = 0; j < w.KW; ++j) {
      const int x = ox * w.SW + j - w.PW;
      const bool inside = y >= 0 && y < w.H && x >= 0 && x < w.W;
      if (!inside) {
        if (k < 0) { best = neg_inf<T>(); k = i * w.KW + j; }  // padding: -inf, first if alone
        continue;
      }
      const T v = xc[y * w.W + x];
      if (k < 0 || v > best) { best = v; k = i * w.KW + j; }
    }
  }
  *at = k;
  return best;
}

// Y (N, C, OH, OW): MAX_MODE the window's maximum, else its sum over KH*KW (padding counts).
template <typename T, bool MAX_MODE>
__global__ void pool_fwd(long long N, WINDOW_ARGS, const T* __restrict__ X, T* __restrict__ Y) {
  const Window w = WINDOW;
  const long long n = N * w.C * w.OH * w.OW;
  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < n;
       e += (long long)gridDim.x * blockDim.x) {
    const int ox = (int)(e % w.OW), oy = (int)((e / w.OW) % w.OH);
    const long long plane = e / ((long long)w.OW * w.OH);
    const T* xc = X + plane * w.H * w.W;
    if (MAX_MODE) {
      int k;
      Y[e] = window_max(w, xc, oy, ox, &k);
    } else {
      T s = T(0);
      for (int i = 0; i < w.KH; ++i) {
        const int y = oy * w.SH + i - w.PH;
        if (y < 0 || y >= w.H) continue;
        for (int j = 0; j < w.KW; ++j) {
          const int x = ox * w.SW + j - w.PW;
          if (x >= 0 && x < w.W) s += xc[y * w.W + x];
        }
      }
      Y[e] = s / T(w.KH * w.KW);
    }
  }
}

// GX (N, C, H, W): the sum over the windows that hold the element of, for max, the window's
// gradient where the element is the window's first maximum, for avg, gradient / (KH*KW).
template <typename T, bool MAX_MODE>
__global__ void pool_bwd(long long N, WINDOW_ARGS, const T* __restrict__ X,
                         const T* __restrict__ G, T* __restrict__ GX) {
  const Window w = WINDOW;
  const long long n = N * w.C * w.H * w.W;
  const T area = T(w.KH * w.KW);
  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < n;
       e += (long long)gridDim.x * blockDim.x) {
    const int x = (int)(e % w.W), y = (int)((e / w.W) % w.H);
    const long long plane = e / ((long long)w.W * w.H);
    const T* xc = X + plane * w.H * w.W;
    const T* gc = G + plane * w.OH * w.OW;
    T s = T(0);
    for (int i = 0; i < w.KH; ++i) {
      const int ty = y + w.PH - i;
      if (ty < 0 || ty % w.SH) continue;
      const int oy = ty / w.SH;
      if (oy >= w.OH) continue;
      for (int j = 0; j < w.KW; ++j) {
        const int tx = x + w.PW - j;
        if (tx < 0 || tx % w.SW) continue;
        const int ox = tx / w.SW;
        if (ox >= w.OW) continue;
        if (MAX_MODE) {
          int k;
          window_max(w, xc, oy, ox, &k);
          if (k == i * w.KW + j) s += gc[oy * w.OW + ox];
        } else {
          s += gc[oy * w.OW + ox] / area;
        }
      }
    }
    GX[e] = s;
  }
}
