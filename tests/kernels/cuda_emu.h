// A CPU stand-in for the CUDA device side, enough to run this project's kernels on the host
// (tests/kernels/cuda_emulator.py builds each source family against it): every thread of a
// block is a std::thread; __syncthreads and __syncwarp are barriers; warp shuffles exchange
// through a per-warp buffer between two barriers; __shared__ variables are statics (blocks run
// one after another); atomics take one lock. A thread that returns drops out of its barriers,
// as an exited CUDA thread stops counting at __syncthreads.
#pragma once
#include <algorithm>
#include <atomic>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
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

struct Warp {
  explicit Warp(int n) : bar(n) {}
  std::barrier<> bar;
  alignas(8) unsigned char slot[32][8];
};
inline thread_local std::barrier<>* emu_block_bar = nullptr;
inline thread_local Warp* emu_warp = nullptr;
inline thread_local int emu_lane = 0;
inline std::mutex emu_atomic_lock;
alignas(16) inline unsigned char emu_dynamic_smem[256 * 1024];

inline void __syncthreads() { emu_block_bar->arrive_and_wait(); }
inline void __syncwarp(unsigned = 0xffffffffu) { emu_warp->bar.arrive_and_wait(); }
inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }

template <typename T>
T __shfl_xor_sync(unsigned, T v, int o) {
  static_assert(sizeof(T) <= 8, "a shuffle moves at most 8 bytes");
  std::memcpy(emu_warp->slot[emu_lane], &v, sizeof(T));
  emu_warp->bar.arrive_and_wait();
  T r;
  std::memcpy(&r, emu_warp->slot[emu_lane ^ o], sizeof(T));
  emu_warp->bar.arrive_and_wait();
  return r;
}

template <typename T>
T atomicAdd(T* a, T v) {
  std::lock_guard<std::mutex> g(emu_atomic_lock);
  const T old = *a;
  *a = old + v;
  return old;
}

inline unsigned long long __umul64hi(unsigned long long a, unsigned long long b) {
  return (unsigned long long)(((unsigned __int128)a * b) >> 64);
}
inline float __int_as_float(int v) { float f; std::memcpy(&f, &v, 4); return f; }
inline double __longlong_as_double(long long v) { double d; std::memcpy(&d, &v, 8); return d; }

// Run kernel k on grid x block, its arguments read from args[i] (pointers to each value, as
// cuLaunchKernel takes them); blocks one after another, a block's threads at once.
template <typename... A, std::size_t... I>
void emu_launch(void (*k)(A...), dim3 g, dim3 b, void** args, std::index_sequence<I...>) {
  std::tuple<std::decay_t<A>...> vals{*reinterpret_cast<std::decay_t<A>*>(args[I])...};
  gridDim = g;
  blockDim = b;
  const int n = int(b.x * b.y * b.z);
  for (unsigned bz = 0; bz < g.z; ++bz)
    for (unsigned by = 0; by < g.y; ++by)
      for (unsigned bx = 0; bx < g.x; ++bx) {
        std::barrier<> block_bar(n);
        std::vector<std::unique_ptr<Warp>> warps;
        for (int w = 0; w < (n + 31) / 32; ++w)
          warps.emplace_back(new Warp(std::min(32, n - 32 * w)));
        std::vector<std::thread> threads;
        for (int t = 0; t < n; ++t)
          threads.emplace_back([&, t] {
            blockIdx = dim3{bx, by, bz};
            threadIdx = dim3{unsigned(t % b.x), unsigned((t / b.x) % b.y),
                             unsigned(t / (b.x * b.y))};
            emu_block_bar = &block_bar;
            emu_warp = warps[t / 32].get();
            emu_lane = t % 32;
            std::apply(k, vals);
            emu_warp->bar.arrive_and_drop();
            block_bar.arrive_and_drop();
          });
        for (auto& th : threads) th.join();
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
