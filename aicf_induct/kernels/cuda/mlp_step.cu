// The whole training step of an MLP chain (linear [+ act] ... linear, softmax cross-entropy,
// backward) in one persistent launch: phases separated by a grid-wide barrier, each phase's
// work items strided over the blocks. For small models a step is a few dozen latency-bound
// launches; here it is one. Every gradient is overwritten (no memset); sums are taken in a
// fixed order (split-K partials included), so results are deterministic.
//
// Two schedules. SCHED 0 (layers): one phase per layer forward, one for the loss, one per
// layer backward (weight and data gradient together). SCHED 1 (rows): rows are independent
// until the weight gradients, so each block runs the forward, the loss and every data
// gradient of its 32-row tiles alone; after one barrier, all weight gradients at once. A
// GEMM whose K is long is split over S blocks; the block that finishes a tile last (a
// ticket) adds the S partial tiles in order and runs the epilogue.
//
// The grid must be co-resident (the host sizes it from the occupancy). Buffers written in
// one phase are read only in later ones (or, within a block, after a __syncthreads), and
// every buffer starts on a 256-byte boundary, so no cache line is read before its writes.
//
// `feed` holds the addresses of the batch (x, then int64 labels). meta, per layer (16
// int64): in, out, weight and bias offsets (-1: no bias) in the flat parameter/gradient
// buffers; offsets in `work` of the layer's output a (logits for the last), pre-activation
// z (-1 unless the derivative needs it), and g (the loss gradient with respect to a);
// splits of the forward, weight-gradient and data-gradient GEMMs; their partial-tile
// offsets in `part` and ticket offsets in `tickets`.
#include "activations.cuh"
#include "reduce.cuh"
#include "ce_row.cuh"
#include "mlp_tile.cuh"

#define MAX_SMEM_LAYERS 32  // chains up to this deep keep their meta in shared memory

// All blocks wait here until every block has arrived; bar[0] counts arrivals, bar[1] is
// the generation (both self-resetting, so a replayed graph finds them ready).
__device__ __forceinline__ void grid_barrier(unsigned int* bar) {
  __syncthreads();
  if (threadIdx.x == 0) {
    volatile unsigned int* gen = bar + 1;
    const unsigned int g = *gen;
    __threadfence();
    if (atomicAdd(bar, 1u) == gridDim.x - 1) {
      atomicExch(bar, 0u);
      __threadfence();
      atomicAdd(bar + 1, 1u);
    } else {
      while (*gen == g) __nanosleep(20);
    }
    __threadfence();
  }
  __syncthreads();
}

// The blocks of one thread-block cluster (sm_90+) wait here for each other; release and
// acquire at cluster scope make each block's earlier global writes visible to the others.
__device__ __forceinline__ void cluster_barrier() {
#if __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.arrive.release.aligned;\n"
               "barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
#else
  __trap();  // mlp_step.py builds the cluster schedule only on sm_90 and newer
#endif
}

// Phase timestamps (benchmarks/step_bodies.py --phases; compiled in with -DMLP_PROFILE
// only): prof[slot * gridDim.x + block] in ns, slot 0 the kernel's start, then for each
// phase the time this block finished its work (odd) and left the barrier after it (even).
#ifdef MLP_PROFILE
#define MARK(slot)                                                               \
  do {                                                                           \
    if (threadIdx.x == 0 && prof != nullptr) {                                   \
      unsigned long long t_;                                                     \
      asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t_));                     \
      prof[(long long)(slot) * gridDim.x + blockIdx.x] = t_;                     \
    }                                                                            \
  } while (0)
#else
#define MARK(slot) do { (void)prof; } while (0)
#endif
#define PHASE_END(bar, nb) \
  do { MARK(1 + 2 * nb); grid_barrier(bar); MARK(2 + 2 * nb); ++nb; } while (0)

// The operands of layer l's three GEMMs, read from meta. g holds the gradient of the layer's
// pre-activation (its logits for the top layer), h_in the act' input of the layer below.
template <typename T, bool H_IS_Z>
struct Layer {
  int in, out, sf, sw, sd;
  const T *a_in, *w, *bias, *h_in;
  T *a, *z, *g, *gw, *gb, *g_in, *pf, *pw, *pd;
  unsigned int *tf, *tw, *td;
  __device__ Layer(const long long* meta, int l, const T* x, const T* P, T* G, T* work,
                   T* part, unsigned int* tickets) {
    const long long* m = meta + MF * l;
    const long long* below = meta + MF * (l > 0 ? l - 1 : 0);
    in = (int)m[0]; out = (int)m[1];
    a_in = l == 0 ? x : work + below[4];
    w = P + m[2];
    bias = m[3] >= 0 ? P + m[3] : nullptr;
    a = work + m[4];
    z = m[5] >= 0 ? work + m[5] : nullptr;
    g = work + m[6];
    h_in = l > 0 ? work + (H_IS_Z ? below[5] : below[4]) : nullptr;
    gw = G + m[2];
    gb = m[3] >= 0 ? G + m[3] : nullptr;
    g_in = l > 0 ? work + below[6] : nullptr;
    sf = (int)m[7]; sw = (int)m[8]; sd = (int)m[9];
    pf = part + m[10]; pw = part + m[11]; pd = part + m[12];
    tf = tickets + m[13]; tw = tickets + m[14]; td = tickets + m[15];
  }
};

template <typename T, int ACT, bool H_IS_Z, int NJ, int NS, int MMA>
__device__ bool fwd_tile(T* smem, const Layer<T, H_IS_Z>& y, bool hidden, int M, int bi, int bj,
                         int ks, int S) {
  const int tn = cdiv(y.out, T_BM * NJ);
  T* pf = y.pf + (long long)(bi * tn + bj) * S * T_PART;
  unsigned int* tf = y.tf + bi * tn + bj;
  if (hidden)
    return tile32<T, NJ, NS, true, false, 1, ACT, MMA>(
        smem, bi, bj, M, y.out, y.in, ks, S, y.a_in, y.in, y.w, y.in, y.a, y.out, y.bias, y.z,
        nullptr, nullptr, pf, tf);
  return tile32<T, NJ, NS, true, false, 1, 0, MMA>(
      smem, bi, bj, M, y.out, y.in, ks, S, y.a_in, y.in, y.w, y.in, y.a, y.out, y.bias, nullptr,
      nullptr, nullptr, pf, tf);
}

template <typename T, bool H_IS_Z, int NS, int MMA>
__device__ void wgrad_tile(T* smem, const Layer<T, H_IS_Z>& y, int M, int t, int S) {
  const int wn = cdiv(y.in, T_BM), tile = t / S, ks = t % S;
  T* pw = y.pw + (long long)tile * S * T_PART;
  tile32<T, 1, NS, false, true, 2, 0, MMA>(
      smem, tile / wn, tile % wn, y.out, y.in, M, ks, S, y.g, y.out, y.a_in, y.in, y.gw, y.in,
      nullptr, nullptr, nullptr, y.gb, pw, y.tw + tile);
}

// The data gradient of a layer above the first: the layer below's g, act' applied.
template <typename T, int ACT, bool H_IS_Z, int NJ, int NS, int MMA>
__device__ void dgrad_tile(T* smem, const Layer<T, H_IS_Z>& y, int M, int bi, int bj, int ks,
                           int S) {
  const int wn = cdiv(y.in, T_BM * NJ);
  T* pd = y.pd + (long long)(bi * wn + bj) * S * T_PART;
  unsigned int* td = y.td + bi * wn + bj;
  tile32<T, NJ, NS, true, true, 0, ACT, MMA>(
      smem, bi, bj, M, y.in, y.out, ks, S, y.g, y.out, y.w, y.in, y.g_in, y.in, nullptr,
      nullptr, y.h_in, nullptr, pd, td);
}

// Softmax cross-entropy of the 32 rows from r0 by this block's warps (rows share, share +
// shares, ... of them when blocks split the tile): their gradients into top.g; returns this
// thread's share of the loss sum (lane 0 of each warp).
template <typename T, bool H_IS_Z>
__device__ double ce_rows(const Layer<T, H_IS_Z>& top, int r0, int M, const long long* labels,
                          double eps, int share = 0, int shares = 1) {
  double acc = 0.0;
  const int C = top.out;
  for (int q = (threadIdx.x >> 5) * shares + share; q < T_BM && r0 + q < M;
       q += (T_NT / 32) * shares) {
    const int row = r0 + q;
    const T rl = ce_row<T>(C, top.a + (long long)row * C, labels[row], eps, T(1) / T(M), true,
                           top.g + (long long)row * C);
    if ((threadIdx.x & 31) == 0) acc += (double)rl;
  }
  return acc;
}

// The mean loss from the blocks' partial sums (one block, fixed order).
template <typename T>
__device__ void loss_total(const double* partials, int M, T* loss) {
  double s = 0.0;
  for (unsigned int b = threadIdx.x; b < gridDim.x; b += blockDim.x)
    s += ((volatile const double*)partials)[b];
  s = block_sum(s);
  if (threadIdx.x == 0) loss[0] = (T)(s / M);
}

// Every weight gradient at once (the items of all layers spread over the grid, split as
// meta says) and the mean loss: the last phase of "rows" and "clusters".
template <typename T, bool H_IS_Z, int N1, int MMA>
__device__ void weight_phase(T* smem, int L, int M, const long long* meta, const T* x,
                             const T* P, T* G, T* work, T* part, unsigned int* tickets,
                             const double* partials, T* loss) {
  typedef Layer<T, H_IS_Z> Ly;
  int items = 1;
  for (int l = 0; l < L; ++l) {
    const long long* m = meta + MF * l;
    items += cdiv((int)m[0], T_BM) * cdiv((int)m[1], T_BM) * (int)m[8];
  }
  for (int t = blockIdx.x; t < items; t += gridDim.x) {
    int u = t, l = 0;
    for (; l < L; ++l) {
      const long long* m = meta + MF * l;
      const int n = cdiv((int)m[0], T_BM) * cdiv((int)m[1], T_BM) * (int)m[8];
      if (u < n) break;
      u -= n;
    }
    if (l == L) {
      loss_total<T>(partials, M, loss);
    } else {
      const Ly y(meta, l, x, P, G, work, part, tickets);
      wgrad_tile<T, H_IS_Z, N1, MMA>(smem, y, M, u, y.sw);
    }
  }
}

#define MLP_STEP_PARAMS                                                                    \
  int L, int M, const long long *meta, const long long *feed, const T *P, T *G, T *work,   \
      double eps, T *loss, double *partials, unsigned int *bar, T *part,                   \
      unsigned int *tickets, unsigned long long *prof
#define MLP_STEP_ARGS \
  L, M, meta, feed, P, G, work, eps, loss, partials, bar, part, tickets, prof

template <typename T, int ACT, bool H_IS_Z, int SCHED, int N1, int N2, int MMA>
__device__ __forceinline__ void mlp_body(MLP_STEP_PARAMS) {
  int nb = 0;  // phases ended
  MARK(0);
  // the K-chunk stages (N1 of them for 32-wide tiles, N2 for 64-wide), then reused by the
  // tiles' reductions: sized by mlp_step.py
  extern __shared__ __align__(16) unsigned char dsmem[];
  T* smem = reinterpret_cast<T*>(dsmem);
  // the batch where the caller keeps it: its addresses arrive with the step's terms
  // the layers' meta, read once into shared memory (each phase reads it again)
  __shared__ long long smeta[MF * (MAX_SMEM_LAYERS > 0 ? MAX_SMEM_LAYERS : 1)];
  if (L <= MAX_SMEM_LAYERS) {
    for (int q = threadIdx.x; q < MF * L; q += blockDim.x) smeta[q] = meta[q];
    __syncthreads();
    meta = smeta;
  }
  const T* x = reinterpret_cast<const T*>(feed[0]);
  const long long* labels = reinterpret_cast<const long long*>(feed[1]);
  typedef Layer<T, H_IS_Z> Ly;
  const int lane = threadIdx.x & 31;
  const Ly top(meta, L - 1, x, P, G, work, part, tickets);
  const int C = top.out;
  double acc = 0.0;
  if (SCHED == 1) {
    // each block alone: forward, loss and data gradients of its row tiles
    for (int r = blockIdx.x; r < cdiv(M, T_BM); r += gridDim.x) {
      for (int l = 0; l < L; ++l) {
        const Ly y(meta, l, x, P, G, work, part, tickets);
        for (int j = 0; j < cdiv(y.out, 2 * T_BM); ++j)
          (void)fwd_tile<T, ACT, H_IS_Z, 2, N2, MMA>(smem, y, l < L - 1, M, r, j, 0, 1);
      }
      acc += ce_rows<T, H_IS_Z>(top, r * T_BM, M, labels, eps);
      __syncthreads();
      for (int l = L - 1; l > 0; --l) {
        const Ly y(meta, l, x, P, G, work, part, tickets);
        for (int j = 0; j < cdiv(y.in, 2 * T_BM); ++j)
          dgrad_tile<T, ACT, H_IS_Z, 2, N2, MMA>(smem, y, M, r, j, 0, 1);
      }
    }
  }
  if (SCHED == 2) {
    // a cluster of T_CLUSTER blocks a row tile: they split each layer's column tiles and
    // meet at the cluster's barrier between layers, the grid's only before the weights
    const int rank = blockIdx.x % T_CLUSTER, clusters = gridDim.x / T_CLUSTER;
    for (int r = blockIdx.x / T_CLUSTER; r < cdiv(M, T_BM); r += clusters) {
      for (int l = 0; l < L; ++l) {
        const Ly y(meta, l, x, P, G, work, part, tickets);
        for (int j = rank; j < cdiv(y.out, T_BM); j += T_CLUSTER)
          (void)fwd_tile<T, ACT, H_IS_Z, 1, N1, MMA>(smem, y, l < L - 1, M, r, j, 0, 1);
        // one tile of logits: its block runs the loss of its rows at once
        if (l < L - 1 || C > T_BM) cluster_barrier();
      }
      if (C <= T_BM) {
        if (rank == 0) acc += ce_rows<T, H_IS_Z>(top, r * T_BM, M, labels, eps);
      } else {
        acc += ce_rows<T, H_IS_Z>(top, r * T_BM, M, labels, eps, rank, T_CLUSTER);
      }
      cluster_barrier();
      for (int l = L - 1; l > 0; --l) {
        const Ly y(meta, l, x, P, G, work, part, tickets);
        for (int j = rank; j < cdiv(y.in, T_BM); j += T_CLUSTER)
          dgrad_tile<T, ACT, H_IS_Z, 1, N1, MMA>(smem, y, M, r, j, 0, 1);
        if (l > 1) cluster_barrier();  // the next row tile's rows are apart: none after
      }
    }
  }
  if (SCHED != 0) {
    const double total = block_sum(acc);
    if (threadIdx.x == 0) partials[blockIdx.x] = total;
    PHASE_END(bar, nb);
    weight_phase<T, H_IS_Z, N1, MMA>(smem, L, M, meta, x, P, G, work, part, tickets, partials,
                                     loss);
    MARK(1 + 2 * nb);
    return;
  }
  // SCHED 0: forward, one phase per layer. When one tile spans the logits' columns, the
  // block that writes a tile of logits runs the loss of its rows at once (no loss phase).
  const bool loss_in_fwd = C <= T_BM;
  for (int l = 0; l < L; ++l) {
    const Ly y(meta, l, x, P, G, work, part, tickets);
    const int tn = cdiv(y.out, T_BM), items = cdiv(M, T_BM) * tn * y.sf;
    for (int t = blockIdx.x; t < items; t += gridDim.x) {
      const int tile = t / y.sf;
      const bool wrote = fwd_tile<T, ACT, H_IS_Z, 1, N1, MMA>(smem, y, l < L - 1, M, tile / tn,
                                                     tile % tn, t % y.sf, y.sf);
      if (l == L - 1 && loss_in_fwd && wrote)
        acc += ce_rows<T, H_IS_Z>(top, (tile / tn) * T_BM, M, labels, eps);
    }
    if (l == L - 1 && loss_in_fwd) {
      const double total = block_sum(acc);
      if (threadIdx.x == 0) partials[blockIdx.x] = total;
    }
    PHASE_END(bar, nb);
  }
  if (!loss_in_fwd) {  // the loss: a warp per row
    for (int row = (blockIdx.x * blockDim.x + threadIdx.x) >> 5; row < M;
         row += (gridDim.x * blockDim.x) >> 5) {
      const T rl = ce_row<T>(C, top.a + (long long)row * C, labels[row], eps, T(1) / T(M),
                             true, top.g + (long long)row * C);
      if (lane == 0) acc += (double)rl;
    }
    const double total = block_sum(acc);
    if (threadIdx.x == 0) partials[blockIdx.x] = total;
    PHASE_END(bar, nb);
  }
  // backward, last layer first: weight and data gradients of a layer in one phase
  for (int l = L - 1; l >= 0; --l) {
    const Ly y(meta, l, x, P, G, work, part, tickets);
    const int wn = cdiv(y.in, T_BM);
    const int wi = cdiv(y.out, T_BM) * wn * y.sw;
    const int di = l > 0 ? cdiv(M, T_BM) * wn * y.sd : 0;
    const int items = wi + di + (l == L - 1 ? 1 : 0);
    for (int t = blockIdx.x; t < items; t += gridDim.x) {
      if (t < wi) {
        wgrad_tile<T, H_IS_Z, N1, MMA>(smem, y, M, t, y.sw);
      } else if (t < wi + di) {
        const int u = t - wi, tile = u / y.sd;
        dgrad_tile<T, ACT, H_IS_Z, 1, N1, MMA>(smem, y, M, tile / wn, tile % wn, u % y.sd, y.sd);
      } else {
        loss_total<T>(partials, M, loss);
      }
    }
    if (l > 0) PHASE_END(bar, nb);
  }
  MARK(1 + 2 * nb);
}

// "layers" fills the device with more, smaller items: two blocks a multiprocessor pay
// (fewer registers); "rows" runs long chains in few blocks: registers pay.
template <typename T, int ACT, bool H_IS_Z, int SCHED, int N1, int N2, int MMA>
__global__ void __launch_bounds__(T_NT, SCHED == 0 ? 2 : 1) mlp_step(MLP_STEP_PARAMS) {
  mlp_body<T, ACT, H_IS_Z, SCHED, N1, N2, MMA>(MLP_STEP_ARGS);
}

#if __CUDA_ARCH__ >= 900
// "clusters": its grid in clusters of T_CLUSTER blocks (sm_90+), two blocks a multiprocessor
template <typename T, int ACT, bool H_IS_Z, int N1, int MMA>
__global__ void __cluster_dims__(T_CLUSTER, 1, 1) __launch_bounds__(T_NT, 2)
mlp_step_clusters(MLP_STEP_PARAMS) {
  mlp_body<T, ACT, H_IS_Z, 2, N1, 1, MMA>(MLP_STEP_ARGS);
}
#endif
