// Closed-form expected values: sums of the per-rank pattern are computed without other ranks' data.
#include "tests/collective/collective_data.h"

#include <cstring>

namespace ff::collective {
namespace {

// Odd multipliers so consecutive elements and ranks differ in many bits.
constexpr uint64_t kElemMul = 0x9E3779B97F4A7C15ull;
constexpr uint64_t kRankMul = 0xC2B2AE3D27D4EB4Full;

template <typename U>
U Value(size_t i, int rank, uint64_t salt) {
  return static_cast<U>(static_cast<U>(i) * static_cast<U>(kElemMul) +
                        static_cast<U>(rank + 1) * static_cast<U>(kRankMul) + static_cast<U>(salt));
}

template <typename U>
U SumOverRanks(size_t i, int nranks, uint64_t salt) {
  // sum_{r<n} (i*A + (r+1)*B + s) = n*(i*A + s) + B*n(n+1)/2, exact modulo 2^bits.
  const U n = static_cast<U>(nranks);
  const U base = static_cast<U>(static_cast<U>(i) * static_cast<U>(kElemMul) + static_cast<U>(salt));
  const U tri = static_cast<U>(static_cast<uint64_t>(nranks) * static_cast<uint64_t>(nranks + 1) / 2);
  return static_cast<U>(n * base + tri * static_cast<U>(kRankMul));
}

template <typename U>
void Fill(void* buf, size_t count, int rank, uint64_t salt) {
  U* p = static_cast<U*>(buf);
  for (size_t i = 0; i < count; ++i) p[i] = Value<U>(i, rank, salt);
}

template <typename U>
void Sum(void* dst, const void* own, const void* incoming, size_t n) {
  U* d = static_cast<U*>(dst);
  const U* a = static_cast<const U*>(own);
  const U* b = static_cast<const U*>(incoming);
  for (size_t i = 0; i < n; ++i) d[i] = static_cast<U>(a[i] + b[i]);
}

template <typename U, typename S>
std::optional<Mismatch> Check(NcclFunc func, const void* result, size_t count, int nranks, int root,
                              uint64_t salt) {
  const U* p = static_cast<const U*>(result);
  auto report = [](size_t idx, U want, U got) {
    return Mismatch{idx, static_cast<int64_t>(static_cast<S>(want)), static_cast<int64_t>(static_cast<S>(got))};
  };
  switch (func) {
    case NcclFunc::kAllReduce:
      for (size_t i = 0; i < count; ++i) {
        U want = SumOverRanks<U>(i, nranks, salt);
        if (p[i] != want) return report(i, want, p[i]);
      }
      break;
    case NcclFunc::kAllGather:
      for (int r = 0; r < nranks; ++r) {
        const U* block = p + static_cast<size_t>(r) * count;
        for (size_t i = 0; i < count; ++i) {
          U want = Value<U>(i, r, salt);
          if (block[i] != want) return report(static_cast<size_t>(r) * count + i, want, block[i]);
        }
      }
      break;
    case NcclFunc::kBroadcast:
      for (size_t i = 0; i < count; ++i) {
        U want = Value<U>(i, root, salt);
        if (p[i] != want) return report(i, want, p[i]);
      }
      break;
    default:
      break;
  }
  return std::nullopt;
}

}  // namespace

size_t ElementSize(DataType t) { return t == DataType::kInt32 ? 4 : 8; }
std::string DataTypeName(DataType t) { return t == DataType::kInt32 ? "int32" : "int64"; }

void FillInput(DataType t, void* buf, size_t count, int rank, uint64_t salt) {
  if (t == DataType::kInt32) {
    Fill<uint32_t>(buf, count, rank, salt);
  } else {
    Fill<uint64_t>(buf, count, rank, salt);
  }
}

void Poison(void* buf, size_t bytes) { std::memset(buf, 0xA5, bytes); }

void ReduceSum(DataType t, void* dst, const void* own, const void* incoming, size_t bytes) {
  if (t == DataType::kInt32) {
    Sum<uint32_t>(dst, own, incoming, bytes / 4);
  } else {
    Sum<uint64_t>(dst, own, incoming, bytes / 8);
  }
}

std::optional<Mismatch> CheckResult(NcclFunc func, DataType t, const void* result, size_t count, int nranks,
                                    int root, uint64_t salt) {
  if (t == DataType::kInt32) return Check<uint32_t, int32_t>(func, result, count, nranks, root, salt);
  return Check<uint64_t, int64_t>(func, result, count, nranks, root, salt);
}

}  // namespace ff::collective
