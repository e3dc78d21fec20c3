// Ring algorithms as step lists: reduce-scatter + all-gather AllReduce, ring AllGather, pipelined Broadcast.
#include "tests/collective/ring_schedule.h"

#include <algorithm>
#include <stdexcept>

namespace ff::collective {
namespace {

int Mod(int a, int n) { return ((a % n) + n) % n; }

// Element range of block b when `count` elements are split over n blocks as evenly as possible.
struct Range {
  size_t begin;
  size_t end;
};
Range Block(size_t count, int n, int b) {
  return {count * static_cast<size_t>(b) / static_cast<size_t>(n),
          count * static_cast<size_t>(b + 1) / static_cast<size_t>(n)};
}

// Slices of [begin, end) of `step` elements each; always `slices` entries, trailing ones may be empty,
// so every block has the same number of steps and dependencies are a fixed index distance.
void Slice(Range r, size_t step, size_t slices, size_t esz, std::vector<Range>& out) {
  out.clear();
  for (size_t j = 0; j < slices; ++j) {
    size_t b = std::min(r.end, r.begin + j * step);
    size_t e = std::min(r.end, b + step);
    out.push_back({b * esz, e * esz});
  }
}

}  // namespace

size_t SendBufferBytes(NcclFunc, int, size_t count, size_t elem_size) { return count * elem_size; }

size_t RecvBufferBytes(NcclFunc func, int nranks, size_t count, size_t elem_size) {
  return func == NcclFunc::kAllGather ? count * elem_size * static_cast<size_t>(nranks) : count * elem_size;
}

RingSchedule BuildSchedule(NcclFunc func, int rank, int nranks, int root, size_t count, size_t elem_size,
                           size_t step_bytes) {
  if (nranks < 2) throw std::invalid_argument("ring needs at least 2 ranks");
  const size_t step = std::max<size_t>(1, step_bytes / elem_size);
  RingSchedule s;
  std::vector<Range> slices;
  const int n = nranks;

  switch (func) {
    case NcclFunc::kAllReduce: {
      size_t max_block = 0;
      for (int b = 0; b < n; ++b) max_block = std::max(max_block, Block(count, n, b).end - Block(count, n, b).begin);
      const size_t k = std::max<size_t>(1, (max_block + step - 1) / step);
      // Reduce-scatter: round r sends block rank-r (own data in round 0, partial sums after)
      // and receives block rank-r-1, which it adds to its own contribution.
      for (int r = 0; r < n - 1; ++r) {
        Slice(Block(count, n, Mod(rank - r, n)), step, k, elem_size, slices);
        for (const auto& sl : slices) {
          int idx = static_cast<int>(s.sends.size());
          s.sends.push_back({r == 0 ? Buffer::kSend : Buffer::kRecv, sl.begin, sl.end - sl.begin,
                             idx >= static_cast<int>(k) ? idx - static_cast<int>(k) : -1});
        }
        Slice(Block(count, n, Mod(rank - r - 1, n)), step, k, elem_size, slices);
        for (const auto& sl : slices) s.recvs.push_back({sl.begin, sl.end - sl.begin, true});
      }
      // All-gather: round r forwards the fully reduced block rank+1-r and receives block rank-r.
      for (int r = 0; r < n - 1; ++r) {
        Slice(Block(count, n, Mod(rank + 1 - r, n)), step, k, elem_size, slices);
        for (const auto& sl : slices) {
          int idx = static_cast<int>(s.sends.size());
          s.sends.push_back({Buffer::kRecv, sl.begin, sl.end - sl.begin, idx - static_cast<int>(k)});
        }
        Slice(Block(count, n, Mod(rank - r, n)), step, k, elem_size, slices);
        for (const auto& sl : slices) s.recvs.push_back({sl.begin, sl.end - sl.begin, false});
      }
      break;
    }
    case NcclFunc::kAllGather: {
      const size_t k = std::max<size_t>(1, (count + step - 1) / step);
      s.local_copy_src = 0;
      s.local_copy_dst = static_cast<size_t>(rank) * count * elem_size;
      s.local_copy_bytes = count * elem_size;
      // Round r forwards block rank-r (own block first) and receives block rank-r-1 in place.
      for (int r = 0; r < n - 1; ++r) {
        int sb = Mod(rank - r, n);
        Slice({static_cast<size_t>(sb) * count, static_cast<size_t>(sb + 1) * count}, step, k, elem_size, slices);
        for (const auto& sl : slices) {
          int idx = static_cast<int>(s.sends.size());
          s.sends.push_back({Buffer::kRecv, sl.begin, sl.end - sl.begin,
                             idx >= static_cast<int>(k) ? idx - static_cast<int>(k) : -1});
        }
        int rb = Mod(rank - r - 1, n);
        Slice({static_cast<size_t>(rb) * count, static_cast<size_t>(rb + 1) * count}, step, k, elem_size, slices);
        for (const auto& sl : slices) s.recvs.push_back({sl.begin, sl.end - sl.begin, false});
      }
      break;
    }
    case NcclFunc::kBroadcast: {
      const size_t k = std::max<size_t>(1, (count + step - 1) / step);
      Slice({0, count}, step, k, elem_size, slices);
      const bool is_root = rank == root;
      const bool is_last = Mod(rank + 1, n) == root;
      if (is_root) {
        s.local_copy_bytes = count * elem_size;
        for (const auto& sl : slices) s.sends.push_back({Buffer::kSend, sl.begin, sl.end - sl.begin, -1});
      } else {
        for (size_t j = 0; j < slices.size(); ++j) {
          s.recvs.push_back({slices[j].begin, slices[j].end - slices[j].begin, false});
          if (!is_last) {
            s.sends.push_back(
                {Buffer::kRecv, slices[j].begin, slices[j].end - slices[j].begin, static_cast<int>(j)});
          }
        }
      }
      break;
    }
    default:
      throw std::invalid_argument("collective not supported by the ring driver");
  }
  return s;
}

}  // namespace ff::collective
