// Backup-table entries: for one source/destination/SLA/size class, the ranked candidates, and
// the choice of a primary plus the most link-disjoint backups.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "pathctl/path_ranker.h"

namespace ff::pathctl {

struct TableKey {
  uint32_t src = 0;
  uint32_t dst = 0;
  int64_t sla_key = 0;  // SLA in tenths of a microsecond, 0 = none
  int size_class = 0;   // bit width of the message size; the class's largest size is ranked
  bool operator==(const TableKey&) const = default;
};
struct TableKeyHash {
  size_t operator()(const TableKey& k) const {
    uint64_t h = (uint64_t{k.src} << 32 | k.dst) * 0x9E3779B97F4A7C15ull;
    h ^= static_cast<uint64_t>(k.sla_key) * 0xC2B2AE3D27D4EB4Full + static_cast<uint64_t>(k.size_class);
    return static_cast<size_t>(h ^ (h >> 29));
  }
};

struct TableEntry {
  TableKey key;
  Ranking ranking;
  std::vector<uint32_t> links;  // every link of every candidate, sorted: what a health change can affect
  uint64_t computed_epoch = 0;
};

inline int64_t SlaKey(double sla_us) { return sla_us <= 0 ? 0 : static_cast<int64_t>(sla_us * 10.0 + 0.5); }
inline double SlaFromKey(int64_t key) { return static_cast<double>(key) / 10.0; }
int SizeClass(uint64_t size_bytes);
uint64_t SizeOfClass(int size_class);  // the largest size in the class (conservative for bandwidth)

std::shared_ptr<const TableEntry> ComputeEntry(PathRanker& ranker, const TableKey& key, uint64_t epoch);

// Picks indices into `candidates`: [0] the primary (first feasible, else best score), then up to
// `backups` more, each sharing the fewest links with those already chosen (feasible, then
// lower score, break ties).
std::vector<size_t> SelectPrimaryAndBackups(const std::vector<const RankedPath*>& candidates, size_t backups);

}  // namespace ff::pathctl
