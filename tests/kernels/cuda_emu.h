// A CPU stand-in for the CUDA device side, enough to run this project's kernels on the host
// (tests/kernels/cuda_emulator.py builds each source family against it): every thread of a
// block is a fiber (ucontext) on the launching host thread, run in turn until it reaches a
// barrier or returns; __syncthreads and __syncwarp are barriers; warp shuffles exchange
// through a per-warp buffer between two barriers; __shared__ variables are statics (blocks run
// one after another). A thread that returns drops out of its barriers, as an exited CUDA
// thread stops counting at __syncthreads; threads that wait on a barrier the others never
// reach abort the process with a message rather than hang. Fibers, not one OS thread per
// CUDA thread: creating and waking a std::thread per CUDA thread cost the emulated tests
// three quarters of their time in the kernel.
#pragma once
#include <algorithm>
#include <atomic>
#include <sys/mman.h>
#include <ucontext.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <tuple>
#include <utility>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static
#define __launch_bounds__(...)
#define __align__(n) alignas(n)

using std::erf;
using std::exp;
using std::fabs;
using std::fmax;
using std::fmin;
using std::max;
using std::min;
using std::log;
using std::nan;
using std::sqrt;
using std::tanh;

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
};
struct alignas(16) float4 {
  float x, y, z, w;
};

inline dim3 gridDim, blockDim;
inline thread_local dim3 blockIdx, threadIdx;

// A barrier among fibers: the last to arrive opens it (a new generation) and runs on; the
// others yield to the scheduler, which resumes them once the generation has moved.
struct EmuBarrier {
  int expected = 0, arrived = 0;
  unsigned long gen = 0;
  void open() { arrived = 0; ++gen; }
  void drop() {  // an exited thread: counted as arrived now, and not expected again
    if (--expected > 0 && arrived == expected) open();
  }
};

struct Warp {
  EmuBarrier bar;
  alignas(8) unsigned char slot[32][8];
};

struct EmuFiber {
  ucontext_t ctx;
  EmuBarrier* waiting = nullptr;
  unsigned long gen = 0;
  bool done = false;
};

inline thread_local EmuBarrier* emu_block_bar = nullptr;
inline thread_local Warp* emu_warp = nullptr;
inline thread_local int emu_lane = 0;
inline thread_local EmuFiber* emu_fiber = nullptr;
inline thread_local ucontext_t emu_scheduler;
alignas(16) inline unsigned char emu_dynamic_smem[256 * 1024];

inline void emu_arrive_and_wait(EmuBarrier& b) {
  if (++b.arrived == b.expected) {
    b.open();
    return;
  }
  emu_fiber->waiting = &b;
  emu_fiber->gen = b.gen;
  swapcontext(&emu_fiber->ctx, &emu_scheduler);
}

inline void __syncthreads() { emu_arrive_and_wait(*emu_block_bar); }
inline void __syncwarp(unsigned = 0xffffffffu) { emu_arrive_and_wait(emu_warp->bar); }
inline void __threadfence() {}

template <typename T>
T __shfl_xor_sync(unsigned, T v, int o) {
  static_assert(sizeof(T) <= 8, "a shuffle moves at most 8 bytes");
  std::memcpy(emu_warp->slot[emu_lane], &v, sizeof(T));
  __syncwarp();
  T r;
  std::memcpy(&r, emu_warp->slot[emu_lane ^ o], sizeof(T));
  __syncwarp();
  return r;
}

template <typename T>
T atomicAdd(T* a, T v) {  // fibers of one host thread: nothing runs between read and write
  const T old = *a;
  *a = old + v;
  return old;
}

inline unsigned long long __umul64hi(unsigned long long a, unsigned long long b) {
  return (unsigned long long)(((unsigned __int128)a * b) >> 64);
}
inline float __int_as_float(int v) { float f; std::memcpy(&f, &v, 4); return f; }
inline double __longlong_as_double(long long v) { double d; std::memcpy(&d, &v, 8); return d; }

// Each fiber's stack, with a guard page below it (an overflow faults rather than writes over
// a neighbour); mapped once per host thread for the largest block and reused.
constexpr std::size_t EMU_STACK = 256 * 1024, EMU_GUARD = 4096;

inline unsigned char* emu_stacks(int n) {
  static thread_local unsigned char* base = nullptr;
  static thread_local int have = 0;
  if (n > have) {
    if (base) munmap(base, have * (EMU_STACK + EMU_GUARD));
    void* m = mmap(nullptr, n * (EMU_STACK + EMU_GUARD), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) {
      std::fprintf(stderr, "cuda_emu: cannot map stacks for %d threads\n", n);
      std::abort();
    }
    base = static_cast<unsigned char*>(m);
    have = n;
    for (int t = 0; t < n; ++t)
      mprotect(base + t * (EMU_STACK + EMU_GUARD), EMU_GUARD, PROT_NONE);
  }
  return base;
}

// The body every fiber of the current block runs (the kernel with its arguments), then its
// drop out of the barriers; returning resumes the scheduler (uc_link).
inline thread_local void (*emu_body)(void*) = nullptr;
inline thread_local void* emu_body_arg = nullptr;

inline void emu_fiber_main() {
  emu_body(emu_body_arg);
  emu_fiber->done = true;
  emu_warp->bar.drop();
  emu_block_bar->drop();
}

// Run kernel k on grid x block, its arguments read from args[i] (pointers to each value, as
// cuLaunchKernel takes them); blocks one after another, a block's threads in turn, each until
// it waits at a barrier or returns, round after round until all have returned.
template <typename... A, std::size_t... I>
void emu_launch(void (*k)(A...), dim3 g, dim3 b, void** args, std::index_sequence<I...>) {
  using Vals = std::tuple<std::decay_t<A>...>;
  struct Call {
    void (*k)(A...);
    Vals vals;
  } call{k, Vals{*reinterpret_cast<std::decay_t<A>*>(args[I])...}};
  emu_body = [](void* c) {
    auto* call = static_cast<Call*>(c);
    std::apply(call->k, call->vals);
  };
  emu_body_arg = &call;
  gridDim = g;
  blockDim = b;
  const int n = int(b.x * b.y * b.z), n_warps = (n + 31) / 32;
  unsigned char* stacks = emu_stacks(n);
  std::unique_ptr<EmuFiber[]> fibers(new EmuFiber[n]);
  std::unique_ptr<Warp[]> warps(new Warp[n_warps]);
  EmuBarrier block_bar;
  for (unsigned bz = 0; bz < g.z; ++bz)
    for (unsigned by = 0; by < g.y; ++by)
      for (unsigned bx = 0; bx < g.x; ++bx) {
        blockIdx = dim3{bx, by, bz};
        block_bar = EmuBarrier{n};
        for (int w = 0; w < n_warps; ++w) warps[w].bar = EmuBarrier{std::min(32, n - 32 * w)};
        for (int t = 0; t < n; ++t) {
          EmuFiber& f = fibers[t];
          f = EmuFiber{};
          getcontext(&f.ctx);
          f.ctx.uc_stack.ss_sp = stacks + t * (EMU_STACK + EMU_GUARD) + EMU_GUARD;
          f.ctx.uc_stack.ss_size = EMU_STACK;
          f.ctx.uc_link = &emu_scheduler;
          makecontext(&f.ctx, emu_fiber_main, 0);
        }
        emu_block_bar = &block_bar;
        for (int live = n; live > 0;) {
          bool ran = false;
          for (int t = 0; t < n; ++t) {
            EmuFiber& f = fibers[t];
            if (f.done || (f.waiting && f.waiting->gen == f.gen)) continue;
            f.waiting = nullptr;
            threadIdx = dim3{unsigned(t % b.x), unsigned((t / b.x) % b.y),
                             unsigned(t / (b.x * b.y))};
            emu_warp = &warps[t / 32];
            emu_lane = t % 32;
            emu_fiber = &f;
            swapcontext(&emu_scheduler, &f.ctx);
            ran = true;
            live -= f.done;
          }
          if (!ran) {
            std::fprintf(stderr, "cuda_emu: block (%u,%u,%u): %d threads wait at a barrier "
                         "the others never reach\n", bx, by, bz, live);
            std::abort();
          }
        }
      }
}

template <typename... A>
void emu_run(void (*k)(A...), dim3 g, dim3 b, void** args) {
  emu_launch(k, g, b, args, std::index_sequence_for<A...>{});
}

// The size of each parameter of k (the host checks its arguments against them: CuPy packs an
// argument by its own dtype's size, so a mismatch would shift every later parameter).
template <typename... A>
int emu_sizes(void (*)(A...), int* out) {
  int i = 0;
  ((out[i++] = int(sizeof(std::decay_t<A>))), ...);
  return i;
}
