// Backup-table entries and most-disjoint backup selection.
#include "pathctl/backup_table.h"

#include <algorithm>
#include <bit>

namespace ff::pathctl {

int SizeClass(uint64_t size_bytes) { return static_cast<int>(std::bit_width(size_bytes)); }

uint64_t SizeOfClass(int size_class) {
  if (size_class <= 0) return 0;
  if (size_class >= 64) return ~uint64_t{0};
  return (uint64_t{1} << size_class) - 1;
}

std::shared_ptr<const TableEntry> ComputeEntry(PathRanker& ranker, const TableKey& key, uint64_t epoch) {
  auto e = std::make_shared<TableEntry>();
  e->key = key;
  e->computed_epoch = epoch;
  e->ranking = ranker.Rank(key.src, key.dst, SlaFromKey(key.sla_key), SizeOfClass(key.size_class));
  for (const RankedPath& r : e->ranking.paths) e->links.insert(e->links.end(), r.path.links.begin(), r.path.links.end());
  std::sort(e->links.begin(), e->links.end());
  e->links.erase(std::unique(e->links.begin(), e->links.end()), e->links.end());
  return e;
}

std::vector<size_t> SelectPrimaryAndBackups(const std::vector<const RankedPath*>& candidates, size_t backups) {
  std::vector<size_t> chosen;
  if (candidates.empty()) return chosen;
  auto better = [&](size_t a, size_t b) {
    const RankedPath& x = *candidates[a];
    const RankedPath& y = *candidates[b];
    if (x.feasible != y.feasible) return x.feasible;
    return x.score < y.score;
  };
  size_t primary = 0;
  for (size_t i = 1; i < candidates.size(); ++i)
    if (better(i, primary)) primary = i;
  chosen.push_back(primary);
  std::vector<uint32_t> used(candidates[primary]->path.links);
  std::sort(used.begin(), used.end());
  while (chosen.size() < backups + 1) {
    size_t best = candidates.size();
    size_t best_shared = 0;
    for (size_t i = 0; i < candidates.size(); ++i) {
      if (std::find(chosen.begin(), chosen.end(), i) != chosen.end()) continue;
      if (!candidates[i]->verdicts.steerable) continue;  // traffic could never be moved onto it
      size_t shared = 0;
      for (uint32_t l : candidates[i]->path.links) shared += std::binary_search(used.begin(), used.end(), l);
      if (best == candidates.size() || shared < best_shared || (shared == best_shared && better(i, best))) {
        best = i;
        best_shared = shared;
      }
    }
    if (best == candidates.size()) break;
    chosen.push_back(best);
    used.insert(used.end(), candidates[best]->path.links.begin(), candidates[best]->path.links.end());
    std::sort(used.begin(), used.end());
  }
  return chosen;
}

}  // namespace ff::pathctl
