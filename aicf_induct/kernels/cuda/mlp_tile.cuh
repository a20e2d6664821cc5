// The tiles of the one-kernel MLP step (mlp_step.cu): one split of a 32 x (32*NJ) output
// tile of C = op(A) op(B) by a block, its K chunks streamed through shared-memory stages by
// cp.async, SIMT or TF32 mma.sync products, and the fused epilogue.
#ifndef AICF_MLP_TILE_CUH
#define AICF_MLP_TILE_CUH
#include "activations.cuh"

// The launcher (mlp_step.py) defines these and passes them as -D: T_NT threads a block,
// T_BM = T_BK the tile side and K chunk, T_PAD the row stride of the operand tiles, T_PART
// the elements of a partial tile, MF the meta fields a layer, T_CLUSTER the blocks a cluster
// under "clusters", T_REDUCE the elements of dynamic shared memory the tiles' reductions may
// use. What this code assumes of them (tests/kernels/test_cuda_registry.py checks these on
// the CPU with the launcher's values):
static_assert(T_NT == 256 && T_BM == 32 && T_BK == T_BM,
              "tile32 maps 256 threads onto a 32x32 tile: four groups of 64, a thread a 4x4 "
              "block; eight warps of 16x8 mma.sync fragments");
static_assert(T_PAD >= T_BM && T_PAD % 32 == 8,
              "operand rows float4-aligned; the MMA fragment reads (rows k..k+3, 8 columns "
              "each) hit 32 distinct banks");
static_assert(T_PART == T_BM * T_BM + T_BM, "a partial 32x32 tile and its partial bias sums");
static_assert(MF >= 16, "Layer reads meta fields 0..15");
static_assert(T_CLUSTER >= 1 && T_CLUSTER <= 8, "a portable cluster size (at most 8)");
static_assert(T_REDUCE >= 3 * T_BM * (T_BM + 1) + 4 * T_BM,
              "tile32's `red` and `rsum` fit in the stages they reuse");

// v = p[0..3]; p 16-byte aligned (one vector load for float)
template <typename T>
__device__ __forceinline__ void load4(const T* p, T (&v)[4]) {
  v[0] = p[0]; v[1] = p[1]; v[2] = p[2]; v[3] = p[3];
}
template <>
__device__ __forceinline__ void load4<float>(const float* p, float (&v)[4]) {
  const float4 q = *reinterpret_cast<const float4*>(p);
  v[0] = q.x; v[1] = q.y; v[2] = q.z; v[3] = q.w;
}

__device__ __forceinline__ int cdiv(int a, int b) { return (a + b - 1) / b; }

// EPI 1 (forward): z = v + bias, Z = z if given, C = act<ACT>(z). EPI 0 and 2: C = v, times
// act'(Hc) at the same place when ACT != ACT_NONE (a data gradient becomes the gradient of the layer
// below's pre-activation, so neither of that layer's GEMMs applies act' on load). The one
// operand the epilogue reads (bias[j] or Hc[i, j]) is fetched apart, early when it can be.
template <typename T, int EPI, int ACT>
__device__ __forceinline__ T epilogue_operand(int i, int j, int M, int N, long long ldc,
                                              const T* bias, const T* Hc) {
  if (i >= M || j >= N) return T(0);
  if (EPI == 1) return bias != nullptr ? bias[j] : T(0);
  if (EPI == 0 && ACT != ACT_NONE) return Hc[(long long)i * ldc + j];
  return T(0);
}
template <typename T, int EPI, int ACT>
__device__ __forceinline__ void epilogue(int i, int j, int M, int N, T v, T* C, long long ldc,
                                         T* Z, T operand) {
  if (i >= M || j >= N) return;
  const long long o = (long long)i * ldc + j;
  if (EPI == 1) {
    v += operand;
    if (Z != nullptr) Z[o] = v;
    v = act_fwd<ACT, T>(v);
  } else if (EPI == 0 && ACT != ACT_NONE) {
    v = act_grad<ACT, T>(operand, v);
  }
  C[o] = v;
}

// Asynchronous global -> shared copies of one element (sm_80+: cp.async, zero-filled when
// !ok; before: a plain load and store), committed in groups and waited for by count.
template <typename T>
__device__ __forceinline__ void copy_async(T* dst, const T* src, bool ok) {
#if __CUDA_ARCH__ >= 800
  const unsigned int d = (unsigned int)__cvta_generic_to_shared(dst);
  asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(d), "l"(src),
               "n"((int)sizeof(T)), "r"(ok ? (int)sizeof(T) : 0));
#else
  *dst = ok ? *src : T(0);
#endif
}
__device__ __forceinline__ void copy_commit() {
#if __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::);
#endif
}
template <int N>
__device__ __forceinline__ void copy_wait() {
#if __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
#endif
}
// 16 bytes (sm_80+: one cp.async.cg), of which the first `bytes` come from src and the rest
// are zeros; dst and src 16-byte aligned
__device__ __forceinline__ void copy_async16(void* dst, const void* src, int bytes) {
#if __CUDA_ARCH__ >= 800
  const unsigned int d = (unsigned int)__cvta_generic_to_shared(dst);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src),
               "r"(bytes));
#else
  for (int b = 0; b < 16; ++b)
    ((char*)dst)[b] = b < bytes ? ((const char*)src)[b] : 0;
#endif
}
// Rows r < R of CW contiguous elements, src[r * ld + c] -> dst[r * stride + c], 16 bytes a
// copy, zeros where r >= r_lim or c >= c_lim. Vectors must not straddle c_lim's
// alignment: src, ld and stride are multiples of 16 bytes (aligned16).
template <typename T, int R, int CW>
__device__ __forceinline__ void copy_rows16(T* dst, int stride, const T* src, long long ld,
                                            int r_lim, int c_lim) {
  constexpr int V = 16 / (int)sizeof(T), PER_ROW = CW / V, COPIES = R * PER_ROW;
  #pragma unroll
  for (int p = 0; p < (COPIES + T_NT - 1) / T_NT; ++p) {
    const int v = threadIdx.x + p * T_NT;
    if (COPIES % T_NT != 0 && v >= COPIES) break;
    const int r = v / PER_ROW, c = (v % PER_ROW) * V;
    const int n = r < r_lim ? max(0, min(V, c_lim - c)) : 0;
    copy_async16(dst + r * stride + c, n > 0 ? src + r * ld + c : src, n * (int)sizeof(T));
  }
}
template <typename T>
__device__ __forceinline__ bool aligned16(const T* p, long long ld) {
  return ((reinterpret_cast<unsigned long long>(p) | (unsigned long long)(ld * sizeof(T)))
          & 15ull) == 0;
}

// TF32 tensor-core products (sm_80+; mlp_step.py asks for them only there, for the tf32
// policy): inputs rounded to TF32, sums in fp32.
__device__ __forceinline__ unsigned int to_tf32(float x) {
  unsigned int r = 0;
#if __CUDA_ARCH__ >= 800
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
#endif
  return r;
}
template <int N>
__device__ __forceinline__ void to_tf32(const float (&v)[N], unsigned int (&r)[N]) {
  #pragma unroll
  for (int q = 0; q < N; ++q) r[q] = to_tf32(v[q]);
}
// d += a b for a 16x8 fragment of A, 8x8 of B (PTX mma.m16n8k8 layouts)
__device__ __forceinline__ void mma_tf32(float (&d)[4], const unsigned int (&a)[4],
                                         const unsigned int (&b)[2]) {
#if __CUDA_ARCH__ >= 800
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}

// The K-chunk pipeline of a 32 x (32*NJ) tile: a stage holds one chunk's operands; NS
// stages (chosen by mlp_step.py to fit the shared memory it gives the kernel).
template <typename T, int NJ, int NS>
struct Stages {
  static constexpr int BN = T_BM * NJ, BPAD = BN + T_PAD - T_BM;
  static constexpr int SIZE = T_BK * T_PAD + T_BK * BPAD;  // elements a stage
  static constexpr int N = NS;
};

// Split ks of S of the 32 x (32*NJ) tile (bi, bj) of C = op(A) op(B), by 256 threads. The
// split's K chunks stream through NS shared-memory stages by cp.async (all at once when they
// fit). SIMT (MMA 0): four groups of 64 threads; group g computes 32x32 sub-tile g % NJ over
// a quarter (NJ 1) or half (NJ 2) of each chunk, a thread a 4x4 block, and the groups of the
// first K share add the others' sums. TF32 (MMA 1): each warp a column of 16x8 mma.sync
// fragments over whole chunks. A(i, k) is A[i*lda + k] (A_KC) or A[k*lda + i]; B(k, j) is
// B[k*ldb + j] (B_NC) or B[j*ldb + k]. The values go through epilogue<EPI, ACT> (Hc: act'
// input for EPI 0); EPI 2 also has the tiles of column 0 write dbias[i] = sum_k A(i, k). With
// S > 1, `part` holds this tile's S partials and `ticket` counts the splits done. Returns
// whether this block wrote the final values.
template <typename T, int NJ, int NS, bool A_KC, bool B_NC, int EPI, int ACT, int MMA>
__device__ bool tile32(T* smem, int bi, int bj, int M, int N, int K, int ks, int S,
                       const T* A, long long lda, const T* B, long long ldb,
                       T* C, long long ldc, const T* bias, T* Z, const T* Hc, T* dbias,
                       T* part, unsigned int* ticket) {
  typedef Stages<T, NJ, NS> St;
  constexpr int BN = St::BN, BPAD = St::BPAD, G = 4 / NJ, KG = T_BK / G;
  constexpr int PART = T_BM * BN + T_BM;  // one partial tile and its partial bias sums
  // stage s: As (k, i) then Bs (k, j); `red` reuses the stages once the K loop is done.
  // TF32 products keep an operand whose K is contiguous in memory K-contiguous in the stage
  // too, (i, k) or (j, k) (AT, BT: same sizes for 32-wide tiles), so that every operand
  // copies 16 bytes at a time (float, aligned). SIMT reads float4 along i and j and copies
  // an element at a time: its 16-byte copies, where the order allowed them, cost registers
  // and time (size 1 of step_gpu.py on an H100: 106 against 101.5 µs).
  constexpr bool AT = MMA != 0 && A_KC, BT = MMA != 0 && !B_NC && NJ == 1;
  auto As = [&](int s) { return reinterpret_cast<T (*)[T_PAD]>(smem + s * St::SIZE); };
  auto Bs = [&](int s) {
    return reinterpret_cast<T (*)[BPAD]>(smem + s * St::SIZE + T_BK * T_PAD);
  };
  auto a_at = [&](int s, int k, int i) -> T* {  // A(i, k)'s place in stage s
    return smem + s * St::SIZE + (AT ? i * T_PAD + k : k * T_PAD + i);
  };
  auto b_at = [&](int s, int k, int j) -> T* {
    return smem + s * St::SIZE + T_BK * T_PAD + (BT ? j * T_PAD + k : k * BPAD + j);
  };
  T (*red)[T_BM][T_BM + 1] = reinterpret_cast<T (*)[T_BM][T_BM + 1]>(smem);
  __shared__ int last;
  const int tid = threadIdx.x, grp = tid >> 6, lt = tid & 63;
  const int nj = grp % NJ, kg = grp / NJ;
  const int ti = (lt & 7) * 4, tj = (lt >> 3) * 4 + nj * T_BM;
  const int i0 = bi * T_BM, j0 = bj * BN;
  const bool do_bias = EPI == 2 && dbias != nullptr && bj == 0;
  const int per = cdiv(cdiv(K, T_BK), S) * T_BK;
  const int kb = ks * per, ke = min(K, kb + per), chunks = max(0, cdiv(ke - kb, T_BK));
  T acc[4][4];
  #pragma unroll
  for (int r = 0; r < 4; ++r)
    #pragma unroll
    for (int c = 0; c < 4; ++c) acc[r][c] = T(0);
  // Chunk q's operands into stage q % N, straight from global memory (zeros outside). A
  // thread copies the same places of every chunk: a column c of each operand's run of W
  // elements contiguous in memory, on rows s0, s0 + T_NT / W, ... (P passes).
  constexpr int AW = A_KC ? T_BK : T_BM, AP = T_BM * T_BK / T_NT;
  constexpr int BW = B_NC ? BN : T_BK, BP = T_BK * BN / T_NT;
  const int ac = tid % AW, as0 = tid / AW, bc = tid % BW, bs0 = tid / BW;
  const T* a0 = A + (A_KC ? (long long)(i0 + as0) * lda + kb + ac
                          : (long long)(kb + as0) * lda + i0 + ac);
  const T* b0 = B + (B_NC ? (long long)(kb + bs0) * ldb + j0 + bc
                          : (long long)(j0 + bs0) * ldb + kb + bc);
  const long long a_chunk = A_KC ? T_BK : T_BK * lda, b_chunk = B_NC ? T_BK * ldb : T_BK;
  // 16-byte copies where the stage keeps the operand's memory order and it is aligned
  constexpr bool VEC = sizeof(T) == 4 && MMA != 0;
  const bool va = VEC && A_KC == AT && aligned16(A, lda);
  const bool vb = VEC && B_NC != BT && aligned16(B, ldb);
  auto issue = [&](int q) {
    const int k0 = kb + q * T_BK, s = q % St::N;
    if (va && A_KC) {
      copy_rows16<T, T_BM, T_BK>(a_at(s, 0, 0), T_PAD, A + (long long)i0 * lda + k0, lda,
                                 M - i0, ke - k0);
    } else if (va) {
      copy_rows16<T, T_BK, T_BM>(a_at(s, 0, 0), T_PAD, A + (long long)k0 * lda + i0, lda,
                                 ke - k0, M - i0);
    } else {
      #pragma unroll
      for (int p = 0; p < AP; ++p) {
        const int sp = as0 + p * (T_NT / AW);
        const int i = A_KC ? sp : ac, k = A_KC ? ac : sp;
        const bool ok = i0 + i < M && k0 + k < ke;
        copy_async(a_at(s, k, i), ok ? a0 + q * a_chunk + p * (T_NT / AW) * lda : A, ok);
      }
    }
    if (vb && B_NC) {
      copy_rows16<T, T_BK, BN>(b_at(s, 0, 0), BPAD, B + (long long)k0 * ldb + j0, ldb,
                               ke - k0, N - j0);
    } else if (vb) {
      copy_rows16<T, BN, T_BK>(b_at(s, 0, 0), T_PAD, B + (long long)j0 * ldb + k0, ldb,
                               N - j0, ke - k0);
    } else {
      #pragma unroll
      for (int p = 0; p < BP; ++p) {
        const int sp = bs0 + p * (T_NT / BW);
        const int j = B_NC ? bc : sp, k = B_NC ? sp : bc;
        const bool ok = j0 + j < N && k0 + k < ke;
        copy_async(b_at(s, k, j), ok ? b0 + q * b_chunk + p * (T_NT / BW) * ldb : B, ok);
      }
    }
  };
  // One chunk from stage s. SIMT (MMA 0): a thread a 4x4 block over its group's share of
  // the chunk. TF32 (MMA 1): warp w the 16x8 fragments at rows m0 + (0..15), columns n0 + 32 t +
  // (0..7), t < NJ, over the whole chunk. The threads holding column 0's A values also sum
  // their rows of A (dbias).
  const int lane = tid & 31, warp = tid >> 5, fg = lane >> 2, ft = lane & 3;
  const int m0 = (warp & 1) * 16, n0 = (warp >> 1) * 8;
  const bool sums_rows = do_bias && (MMA == 0 ? tj == 0 : n0 == 0);
  T rows[4] = {T(0), T(0), T(0), T(0)};
  float d[NJ][4];
  #pragma unroll
  for (int t = 0; t < NJ; ++t)
    #pragma unroll
    for (int q = 0; q < 4; ++q) d[t][q] = 0.f;
  auto compute = [&](int s) {
    if constexpr (MMA == 0) {
      T (*as)[T_PAD] = As(s);
      T (*bs)[BPAD] = Bs(s);
      #pragma unroll
      for (int kk = 0; kk < KG; ++kk) {
        const int k = kg * KG + kk;
        T a[4], b[4];
        load4<T>(&as[k][ti], a);
        load4<T>(&bs[k][tj], b);
        #pragma unroll
        for (int r = 0; r < 4; ++r)
          #pragma unroll
          for (int c = 0; c < 4; ++c) acc[r][c] += a[r] * b[c];
        if (sums_rows) {
          #pragma unroll
          for (int r = 0; r < 4; ++r) rows[r] += a[r];
        }
      }
    } else {
      #pragma unroll
      for (int k = 0; k < T_BK; k += 8) {
        const float a[4] = {(float)*a_at(s, k + ft, m0 + fg), (float)*a_at(s, k + ft, m0 + fg + 8),
                            (float)*a_at(s, k + ft + 4, m0 + fg),
                            (float)*a_at(s, k + ft + 4, m0 + fg + 8)};
        if (sums_rows) {
          rows[0] += a[0] + a[2];
          rows[1] += a[1] + a[3];
        }
        unsigned int fa[4];
        to_tf32<4>(a, fa);
        #pragma unroll
        for (int t = 0; t < NJ; ++t) {
          const float b[2] = {(float)*b_at(s, k + ft, n0 + 32 * t + fg),
                              (float)*b_at(s, k + ft + 4, n0 + 32 * t + fg)};
          unsigned int fb[2];
          to_tf32<2>(b, fb);
          mma_tf32(d[t], fa, fb);
        }
      }
    }
  };
  // the epilogue's operands at this thread's outputs, fetched now so that their latency
  // hides behind the K loop (unsplit tiles; a split tile's last block fetches its own)
  constexpr bool PRE = EPI == 1 || (EPI == 0 && ACT != ACT_NONE);
  T pre[MMA == 0 ? 16 : 4 * NJ];
  if (PRE && S == 1) {
    if constexpr (MMA == 0) {
      #pragma unroll
      for (int r = 0; r < 4; ++r)
        #pragma unroll
        for (int c = 0; c < 4; ++c)
          pre[4 * r + c] = kg == 0 ? epilogue_operand<T, EPI, ACT>(i0 + ti + r, j0 + tj + c, M,
                                                                   N, ldc, bias, Hc) : T(0);
    } else {
      #pragma unroll
      for (int t = 0; t < NJ; ++t)
        #pragma unroll
        for (int q = 0; q < 4; ++q)
          pre[4 * t + q] = epilogue_operand<T, EPI, ACT>(
              i0 + m0 + fg + (q >> 1) * 8, j0 + n0 + 32 * t + 2 * ft + (q & 1), M, N, ldc,
              bias, Hc);
    }
  }
  if (chunks <= St::N) {  // every chunk fits: one wait and one block barrier for them all
    for (int q = 0; q < chunks; ++q) issue(q);
    copy_commit();
    copy_wait<0>();
    __syncthreads();
    for (int q = 0; q < chunks; ++q) compute(q);
  } else {  // a ring of N stages, N - 1 chunks in flight
    #pragma unroll
    for (int q = 0; q < St::N - 1; ++q) {
      issue(q);
      copy_commit();
    }
    for (int q = 0; q < chunks; ++q) {
      // the stage chunk q + N - 1 goes to was last read by chunk q - 1: free since its end
      if (q + St::N - 1 < chunks) issue(q + St::N - 1);
      copy_commit();
      copy_wait<St::N - 1>();  // chunk q's group has landed (this thread's copies)
      __syncthreads();         // ... and every thread's
      compute(q % St::N);
      if (q + 1 < chunks) __syncthreads();
    }
  }
  __syncthreads();  // the stages are free: `red` and `rsum` reuse them
  T* rsum = smem + 3 * T_BM * (T_BM + 1);  // [RG][T_BM] row sums of A, after `red`
  constexpr int RG = MMA == 0 ? G : 1;
  if (MMA != 0 && sums_rows) {  // add the four lanes of a fragment row
    #pragma unroll
    for (int r = 0; r < 2; ++r) {
      rows[r] += __shfl_xor_sync(0xffffffffu, rows[r], 1);
      rows[r] += __shfl_xor_sync(0xffffffffu, rows[r], 2);
    }
    if (ft == 0) {
      rsum[m0 + fg] = rows[0];
      rsum[m0 + fg + 8] = rows[1];
    }
  } else if (sums_rows) {
    #pragma unroll
    for (int r = 0; r < 4; ++r) rsum[kg * T_BM + ti + r] = rows[r];
  }
  const int tl = tj - nj * T_BM;  // column within the sub-tile
  if (MMA == 0 && kg > 0) {
    #pragma unroll
    for (int r = 0; r < 4; ++r)
      #pragma unroll
      for (int c = 0; c < 4; ++c) red[(kg - 1) * NJ + nj][ti + r][tl + c] = acc[r][c];
  }
  __syncthreads();
  T* mine = part + (long long)ks * PART;
  if (MMA != 0) {
    #pragma unroll
    for (int t = 0; t < NJ; ++t)
      #pragma unroll
      for (int q = 0; q < 4; ++q) {
        const int r = m0 + fg + (q >> 1) * 8, c = n0 + 32 * t + 2 * ft + (q & 1);
        if (S == 1)
          epilogue<T, EPI, ACT>(i0 + r, j0 + c, M, N, T(d[t][q]), C, ldc, Z, pre[4 * t + q]);
        else
          mine[r * BN + c] = T(d[t][q]);
      }
  } else if (kg == 0) {
    #pragma unroll
    for (int r = 0; r < 4; ++r)
      #pragma unroll
      for (int c = 0; c < 4; ++c) {
        T v = acc[r][c];
        #pragma unroll
        for (int q = 1; q < G; ++q) v += red[(q - 1) * NJ + nj][ti + r][tl + c];
        if (S == 1)
          epilogue<T, EPI, ACT>(i0 + ti + r, j0 + tj + c, M, N, v, C, ldc, Z, pre[4 * r + c]);
        else
          mine[(ti + r) * BN + tj + c] = v;
      }
  }
  if (do_bias && tid < T_BM) {
    T rowsum = T(0);
    #pragma unroll
    for (int g = 0; g < RG; ++g) rowsum += rsum[g * T_BM + tid];
    if (S == 1) {
      if (i0 + tid < M) dbias[i0 + tid] = rowsum;
    } else {
      mine[T_BM * BN + tid] = rowsum;
    }
  }
  if (S > 1) {  // the last split to finish adds the partials, in split order
    __threadfence();
    __syncthreads();
    if (tid == 0) last = atomicAdd(ticket, 1u) == (unsigned int)(S - 1);
    __syncthreads();
    if (last) {
      __threadfence();
      #pragma unroll
      for (int q = 0; q < 4 * NJ; ++q) {
        const int o = tid + q * T_NT;
        T v = T(0);
        for (int s = 0; s < S; ++s) v += __ldcg(part + (long long)s * PART + o);
        const int i = i0 + o / BN, j = j0 + o % BN;
        epilogue<T, EPI, ACT>(i, j, M, N, v, C, ldc, Z,
                              epilogue_operand<T, EPI, ACT>(i, j, M, N, ldc, bias, Hc));
      }
      if (do_bias && tid < T_BM) {
        T v = T(0);
        for (int s = 0; s < S; ++s) v += __ldcg(part + (long long)s * PART + T_BM * BN + tid);
        if (i0 + tid < M) dbias[i0 + tid] = v;
      }
      if (tid == 0) *ticket = 0u;
    }
  }
  const bool wrote = S == 1 || last;
  __syncthreads();  // the operand tiles and `red` are reused by the next tile
  return wrote;
}

#endif  // AICF_MLP_TILE_CUH
