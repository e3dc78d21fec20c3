// Deterministic per-rank input data, the reduction, and exact checking of every result element.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "nccl/net_abi.h"

namespace ff::collective {

enum class DataType { kInt32, kInt64 };

size_t ElementSize(DataType t);
std::string DataTypeName(DataType t);

// Input of `rank` for one test: element i depends on rank, i and salt, so a block
// delivered to the wrong place or from the wrong iteration is caught.
void FillInput(DataType t, void* buf, size_t count, int rank, uint64_t salt);

// Fills the output with a pattern no check accepts by accident for long.
void Poison(void* buf, size_t bytes);

// dst[i] = own[i] + incoming[i] with two's complement wrap-around (the integer sum NCCL does).
void ReduceSum(DataType t, void* dst, const void* own, const void* incoming, size_t bytes);

struct Mismatch {
  size_t index;
  int64_t expected;
  int64_t got;
};

// First element of the result that differs from what the collective must produce, if any.
std::optional<Mismatch> CheckResult(NcclFunc func, DataType t, const void* result, size_t count, int nranks,
                                    int root, uint64_t salt);

}  // namespace ff::collective
