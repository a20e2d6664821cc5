// Fused scaled-dot-product attention for short sequences (tabular FT-Transformers: tokens =
// features + 1): one block per (batch, head) holds the head's K and V (and in backward Q,
// dO and the S x S probabilities) in shared memory; a warp per query row, lane j owning keys
// j, j + 32, ... (S <= T_ATTNMAX). Q, K, V are read from the packed projection QKV (B*S, 3D),
// D = H * DH, head h at columns h*DH (q), D + h*DH (k), 2D + h*DH (v); O and dO are (B*S, D),
// dQKV is laid out as QKV. The probabilities follow the reference: s = q.k / sqrt(DH),
// p = exp(s - max) / sum; attention dropout multiplies p by keep / (1 - p_drop), keep drawn
// as dropout.cu draws it, element e of p's (B, H, S, S) layout from Philox block e / 4 + 1.
#include "reduce.cuh"
#include "philox.cuh"

static_assert(T_ATTNMAX % 32 == 0 && T_ATTNMAX >= 32 && T_ATTNMAX <= 128,
              "keys per lane: a whole number, at most 4");
constexpr int KPL = T_ATTNMAX / 32;  // keys per lane

struct DropKeys {
  double p;  // 0: no dropout
  unsigned long long k0, k1;
};

// The dropout factor of element e of the probabilities: keep / (1 - p), or 1 without dropout.
template <typename T>
__device__ __forceinline__ T drop_factor(const DropKeys& dk, long long e, T scale) {
  if (dk.p == 0.0) return T(1);
  unsigned long long w[4];
  philox4x64_10((unsigned long long)(e >> 2) + 1ull, dk.k0, dk.k1, w);
  return philox_unit(w[e & 3]) >= dk.p ? scale : T(0);
}

__device__ __forceinline__ DropKeys drop_keys(double p, unsigned long long key_hi,
                                              unsigned long long k1,
                                              const long long* step_ptr, long long step_val) {
  const long long step = step_ptr != nullptr ? step_ptr[0] : step_val;
  return DropKeys{p, key_hi | ((unsigned long long)step & 0xFFFFFFFFull), k1};
}

// Row i's probabilities for the keys of this lane (0 past S), from q (DH, shared) and K.
template <typename T>
__device__ __forceinline__ void softmax_row(int S, int DH, int ld, const T* q, const T* Ks,
                                            T pr[KPL]) {
  const int lane = threadIdx.x & 31;
  const T rs = sqrt(T(DH));
  T mx = neg_inf<T>();
  #pragma unroll
  for (int u = 0; u < KPL; ++u) {
    const int j = lane + 32 * u;
    pr[u] = T(0);
    if (j < S) {
      T acc = T(0);
      for (int c = 0; c < DH; ++c) acc += q[c] * Ks[j * ld + c];
      pr[u] = acc / rs;
      mx = fmax(mx, pr[u]);
    }
  }
  mx = warp_max(mx);
  T sum = T(0);
  #pragma unroll
  for (int u = 0; u < KPL; ++u) {
    if (lane + 32 * u < S) {
      pr[u] = exp(pr[u] - mx);
      sum += pr[u];
    }
  }
  sum = warp_sum(sum);
  #pragma unroll
  for (int u = 0; u < KPL; ++u) pr[u] = pr[u] / sum;  // 0 stays 0 past S
}

// Shared memory (elements of T): K, V with rows DH + 1 apart; per warp, a q row and a row of
// probabilities. The launcher sizes it as attention.py's fwd_smem.
template <typename T>
__global__ void attn_fwd(int H, int S, int DH, const T* __restrict__ QKV, T* __restrict__ O,
                         double p, T scale, unsigned long long key_hi, unsigned long long k1,
                         const long long* __restrict__ step_ptr, long long step_val) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* sm = reinterpret_cast<T*>(smem_raw);
  const int ld = DH + 1, D = H * DH, D3 = 3 * D;
  const int nw = blockDim.x >> 5, w = threadIdx.x >> 5, lane = threadIdx.x & 31;
  T* Ks = sm;
  T* Vs = Ks + S * ld;
  T* qrow = Vs + S * ld + w * (DH + S);
  T* prow = qrow + DH;
  const int bh = blockIdx.x, b = bh / H, h = bh % H;
  const long long row0 = (long long)b * S;
  const T* base = QKV + row0 * D3 + h * DH;
  for (int e = threadIdx.x; e < S * DH; e += blockDim.x) {
    const int t = e / DH, c = e % DH;
    Ks[t * ld + c] = base[(long long)t * D3 + D + c];
    Vs[t * ld + c] = base[(long long)t * D3 + 2 * D + c];
  }
  __syncthreads();
  const DropKeys dk = drop_keys(p, key_hi, k1, step_ptr, step_val);
  for (int i = w; i < S; i += nw) {
    for (int c = lane; c < DH; c += 32) qrow[c] = base[(long long)i * D3 + c];
    __syncwarp();
    T pr[KPL];
    softmax_row(S, DH, ld, qrow, Ks, pr);
    #pragma unroll
    for (int u = 0; u < KPL; ++u) {
      const int j = lane + 32 * u;
      if (j < S) prow[j] = pr[u] * drop_factor(dk, ((long long)bh * S + i) * S + j, scale);
    }
    __syncwarp();
    for (int c = lane; c < DH; c += 32) {
      T acc = T(0);
      for (int j = 0; j < S; ++j) acc += prow[j] * Vs[j * ld + c];
      O[(row0 + i) * D + h * DH + c] = acc;
    }
    __syncwarp();  // the next row overwrites qrow and prow
  }
}

// dQKV from QKV and dO (the reference's VJP); O (the forward's head outputs, which the output
// projection's weight gradient needs) as well when given. Shared memory: Q, K, V, dO with
// rows DH + 1 apart, then PD (dropped probabilities) and GS (score gradients), S x S each.
template <typename T>
__global__ void attn_bwd(int H, int S, int DH, const T* __restrict__ QKV,
                         const T* __restrict__ GO, T* __restrict__ GQKV, T* __restrict__ O,
                         double p, T scale, unsigned long long key_hi, unsigned long long k1,
                         const long long* __restrict__ step_ptr, long long step_val) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* sm = reinterpret_cast<T*>(smem_raw);
  const int ld = DH + 1, D = H * DH, D3 = 3 * D;
  const int nw = blockDim.x >> 5, w = threadIdx.x >> 5, lane = threadIdx.x & 31;
  T* Qs = sm;
  T* Ks = Qs + S * ld;
  T* Vs = Ks + S * ld;
  T* Gs = Vs + S * ld;
  T* PD = Gs + S * ld;
  T* GS = PD + S * S;
  const int bh = blockIdx.x, b = bh / H, h = bh % H;
  const long long row0 = (long long)b * S;
  const T* base = QKV + row0 * D3 + h * DH;
  for (int e = threadIdx.x; e < S * DH; e += blockDim.x) {
    const int t = e / DH, c = e % DH;
    const long long r = (long long)t * D3 + c;
    Qs[t * ld + c] = base[r];
    Ks[t * ld + c] = base[r + D];
    Vs[t * ld + c] = base[r + 2 * D];
    Gs[t * ld + c] = GO[(row0 + t) * D + h * DH + c];
  }
  __syncthreads();
  const DropKeys dk = drop_keys(p, key_hi, k1, step_ptr, step_val);
  const T rs = sqrt(T(DH));
  for (int i = w; i < S; i += nw) {  // a query row per warp: its probabilities and dq
    T pr[KPL], gp[KPL], m[KPL];
    softmax_row(S, DH, ld, Qs + i * ld, Ks, pr);
    T r = T(0);
    #pragma unroll
    for (int u = 0; u < KPL; ++u) {
      const int j = lane + 32 * u;
      gp[u] = T(0);
      m[u] = T(0);
      if (j < S) {
        m[u] = drop_factor(dk, ((long long)bh * S + i) * S + j, scale);
        T acc = T(0);
        for (int c = 0; c < DH; ++c) acc += Gs[i * ld + c] * Vs[j * ld + c];
        gp[u] = acc * m[u];
        r += gp[u] * pr[u];
      }
    }
    r = warp_sum(r);
    #pragma unroll
    for (int u = 0; u < KPL; ++u) {
      const int j = lane + 32 * u;
      if (j < S) {
        PD[i * S + j] = pr[u] * m[u];
        GS[i * S + j] = pr[u] * (gp[u] - r) / rs;
      }
    }
    __syncwarp();
    for (int c = lane; c < DH; c += 32) {
      T gq = T(0), o = T(0);
      for (int j = 0; j < S; ++j) {
        gq += GS[i * S + j] * Ks[j * ld + c];
        o += PD[i * S + j] * Vs[j * ld + c];
      }
      GQKV[(row0 + i) * D3 + h * DH + c] = gq;
      if (O != nullptr) O[(row0 + i) * D + h * DH + c] = o;
    }
  }
  __syncthreads();
  for (int j = w; j < S; j += nw) {  // a key row per warp: dk and dv
    for (int c = lane; c < DH; c += 32) {
      T gk = T(0), gv = T(0);
      for (int i = 0; i < S; ++i) {
        gk += GS[i * S + j] * Qs[i * ld + c];
        gv += PD[i * S + j] * Gs[i * ld + c];
      }
      GQKV[(row0 + j) * D3 + D + h * DH + c] = gk;
      GQKV[(row0 + j) * D3 + 2 * D + h * DH + c] = gv;
    }
  }
}
