// One rank of examples/gpu-e2e.sh: AllReduce, AllGather, Broadcast through NCCL on a GPU, exact checks, busbw.
//
// Built by gpu-e2e.sh with g++ against nccl.h, libnccl and libcudart (no device code, so no nvcc needed):
//   g++ -O2 -std=c++17 gpu_e2e.cc -I$CUDA/include -L$CUDA/lib64 -lnccl -lcudart -o ff-gpu-e2e
// Usage: ff-gpu-e2e --rank R --nranks N --id-file PATH [--device D] [--max-bytes B] [--iters I] [--label L]
// Prints one line per collective and size:
//   RESULT <label> <collective> <bytes> <time_us> <algbw_GBps> <busbw_GBps> exact
// and exits non-zero on the first wrong element (naming collective, size, index, got and want).
#include <cuda_runtime.h>
#include <nccl.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

#define CUDA_OK(call)                                                                                    \
  do {                                                                                                   \
    cudaError_t e_ = (call);                                                                             \
    if (e_ != cudaSuccess) {                                                                             \
      std::fprintf(stderr, "ff-gpu-e2e rank %d: %s failed: %s\n", g_rank, #call, cudaGetErrorString(e_)); \
      std::exit(1);                                                                                      \
    }                                                                                                    \
  } while (0)
#define NCCL_OK(call)                                                                                    \
  do {                                                                                                   \
    ncclResult_t r_ = (call);                                                                            \
    if (r_ != ncclSuccess) {                                                                             \
      std::fprintf(stderr, "ff-gpu-e2e rank %d: %s failed: %s\n", g_rank, #call, ncclGetErrorString(r_)); \
      std::exit(1);                                                                                      \
    }                                                                                                    \
  } while (0)

int g_rank = -1;

struct Options {
  int rank = -1, nranks = 2, device = 0, iters = 5;
  int64_t max_bytes = 256ll << 20;
  std::string id_file, label = "run";
};

int64_t ParseBytes(const char* s) {
  char* end = nullptr;
  long long v = std::strtoll(s, &end, 10);
  int64_t mult = 1;
  if (*end == 'K') mult = 1 << 10;
  if (*end == 'M') mult = 1 << 20;
  if (*end == 'G') mult = 1 << 30;
  if (end == s || v <= 0 || (*end && mult == 1) || (mult > 1 && end[1])) {
    std::fprintf(stderr, "ff-gpu-e2e: --max-bytes '%s' is not valid; accepted: a positive integer with an "
                         "optional K, M or G suffix (e.g. 256M)\n", s);
    std::exit(2);
  }
  return v * mult;
}

Options Parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "ff-gpu-e2e: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--rank") o.rank = std::atoi(next());
    else if (a == "--nranks") o.nranks = std::atoi(next());
    else if (a == "--device") o.device = std::atoi(next());
    else if (a == "--iters") o.iters = std::atoi(next());
    else if (a == "--max-bytes") o.max_bytes = ParseBytes(next());
    else if (a == "--id-file") o.id_file = next();
    else if (a == "--label") o.label = next();
    else {
      std::fprintf(stderr, "ff-gpu-e2e: unknown option '%s' (accepted: --rank --nranks --id-file --device "
                           "--max-bytes --iters --label)\n", a.c_str());
      std::exit(2);
    }
  }
  if (o.rank < 0 || o.nranks < 2 || o.rank >= o.nranks || o.id_file.empty() || o.iters < 1) {
    std::fprintf(stderr, "ff-gpu-e2e: need --rank R (0..N-1), --nranks N (>= 2), --id-file PATH, --iters >= 1\n");
    std::exit(2);
  }
  return o;
}

// Rank 0 publishes NCCL's unique id through a file (written whole, then renamed); the others wait for it.
ncclUniqueId ExchangeId(const Options& o) {
  ncclUniqueId id;
  if (o.rank == 0) {
    NCCL_OK(ncclGetUniqueId(&id));
    const std::string tmp = o.id_file + ".tmp";
    FILE* f = std::fopen(tmp.c_str(), "wb");
    if (!f || std::fwrite(&id, sizeof(id), 1, f) != 1 || std::fclose(f) != 0 ||
        std::rename(tmp.c_str(), o.id_file.c_str()) != 0) {
      std::fprintf(stderr, "ff-gpu-e2e: cannot write %s\n", o.id_file.c_str());
      std::exit(1);
    }
    return id;
  }
  for (int waited_ms = 0; waited_ms < 120000; waited_ms += 50) {
    if (FILE* f = std::fopen(o.id_file.c_str(), "rb")) {
      const size_t n = std::fread(&id, sizeof(id), 1, f);
      std::fclose(f);
      if (n == 1) return id;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::fprintf(stderr, "ff-gpu-e2e rank %d: no id in %s after 120 s (did rank 0 start?)\n", o.rank, o.id_file.c_str());
  std::exit(1);
}

// Each rank's input element i: small integers, so sums over ranks are exact in int32.
int32_t Value(int rank, size_t i) { return static_cast<int32_t>((i * 2654435761u + rank * 40503u) % 100003u); }

enum class Coll { kAllReduce, kAllGather, kBroadcast };
const char* Name(Coll c) { return c == Coll::kAllReduce ? "AllReduce" : c == Coll::kAllGather ? "AllGather" : "Broadcast"; }

// nccl-tests' conventions: size is the per-rank buffer (AllGather: the gathered output), busbw factor per collective.
double BusFactor(Coll c, int n) {
  if (c == Coll::kAllReduce) return 2.0 * (n - 1) / n;
  if (c == Coll::kAllGather) return static_cast<double>(n - 1) / n;
  return 1.0;
}

void Launch(Coll c, const int32_t* send, int32_t* recv, size_t count, ncclComm_t comm, cudaStream_t s) {
  switch (c) {
    case Coll::kAllReduce:
      NCCL_OK(ncclAllReduce(send, recv, count, ncclInt32, ncclSum, comm, s));
      break;
    case Coll::kAllGather:
      NCCL_OK(ncclAllGather(send, recv, count, ncclInt32, comm, s));
      break;
    case Coll::kBroadcast:
      NCCL_OK(ncclBroadcast(send, recv, count, ncclInt32, 0, comm, s));
      break;
  }
}

// Compares the device result with what every rank's inputs must give; exits on the first mismatch.
void Check(Coll c, const Options& o, const int32_t* dev_recv, size_t count, size_t out_count, int64_t bytes,
           std::vector<int32_t>& host) {
  CUDA_OK(cudaMemcpy(host.data(), dev_recv, out_count * sizeof(int32_t), cudaMemcpyDeviceToHost));
  for (size_t i = 0; i < out_count; ++i) {
    int64_t want = 0;
    if (c == Coll::kAllReduce) {
      for (int r = 0; r < o.nranks; ++r) want += Value(r, i);
    } else if (c == Coll::kAllGather) {
      want = Value(static_cast<int>(i / count), i % count);
    } else {
      want = Value(0, i);
    }
    if (host[i] != static_cast<int32_t>(want)) {
      std::fprintf(stderr, "ff-gpu-e2e rank %d: %s %lld bytes: element %zu is %d, want %lld\n", o.rank, Name(c),
                   static_cast<long long>(bytes), i, host[i], static_cast<long long>(want));
      std::exit(1);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = Parse(argc, argv);
  g_rank = o.rank;
  CUDA_OK(cudaSetDevice(o.device));
  const ncclUniqueId id = ExchangeId(o);
  ncclComm_t comm;
  NCCL_OK(ncclCommInitRank(&comm, o.nranks, id, o.rank));
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreate(&stream));

  const size_t max_count = static_cast<size_t>(o.max_bytes) / sizeof(int32_t);
  int32_t *send = nullptr, *recv = nullptr;
  CUDA_OK(cudaMalloc(&send, max_count * sizeof(int32_t)));
  CUDA_OK(cudaMalloc(&recv, max_count * sizeof(int32_t)));
  std::vector<int32_t> host(max_count);

  for (Coll c : {Coll::kAllReduce, Coll::kAllGather, Coll::kBroadcast}) {
    for (int64_t bytes = 1024; bytes <= o.max_bytes; bytes *= 4) {
      const size_t out_count = static_cast<size_t>(bytes) / sizeof(int32_t);
      // AllGather: `bytes` is the gathered output, each rank contributes 1/n of it.
      const size_t count = c == Coll::kAllGather ? out_count / o.nranks : out_count;
      if (count == 0) continue;
      for (size_t i = 0; i < count; ++i) host[i] = Value(o.rank, i);
      CUDA_OK(cudaMemcpy(send, host.data(), count * sizeof(int32_t), cudaMemcpyHostToDevice));
      CUDA_OK(cudaMemset(recv, 0xff, out_count * sizeof(int32_t)));
      Launch(c, send, recv, count, comm, stream);  // warm-up, checked
      CUDA_OK(cudaStreamSynchronize(stream));
      Check(c, o, recv, count, count * (c == Coll::kAllGather ? o.nranks : 1), bytes, host);
      CUDA_OK(cudaMemset(recv, 0xff, out_count * sizeof(int32_t)));
      const auto t0 = std::chrono::steady_clock::now();
      for (int it = 0; it < o.iters; ++it) Launch(c, send, recv, count, comm, stream);
      CUDA_OK(cudaStreamSynchronize(stream));
      const double us =
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / o.iters;
      Check(c, o, recv, count, count * (c == Coll::kAllGather ? o.nranks : 1), bytes, host);
      const double algbw = static_cast<double>(bytes) / us / 1e3;  // GB/s
      if (o.rank == 0)
        std::printf("RESULT %s %s %lld %.1f %.3f %.3f exact\n", o.label.c_str(), Name(c),
                    static_cast<long long>(bytes), us, algbw, algbw * BusFactor(c, o.nranks));
      std::fflush(stdout);
    }
  }
  CUDA_OK(cudaFree(send));
  CUDA_OK(cudaFree(recv));
  NCCL_OK(ncclCommDestroy(comm));
  return 0;
}
