// Dual-path comparison: TCP counter deltas over a window, judged subject vs. best other path.
#include "core/dual_path.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace ff {

DualPathVerdict JudgeDualPath(const PathWindow& subject, const PathWindow& best_other, bool assume_worse) {
  DualPathVerdict v;
  char buf[256];
  if (!subject.valid || subject.segs_out < DualPathCompare::kMinSegments) {
    v.subject_worse = assume_worse;
    v.conclusive = false;
    std::snprintf(buf, sizeof(buf), "path sent %llu segments, too few to compare",
                  static_cast<unsigned long long>(subject.segs_out));
    v.why = buf;
    return v;
  }
  if (!best_other.valid || best_other.segs_out < DualPathCompare::kMinSegments) {
    // Nothing to compare against: the other paths idled. Keep what the detection said.
    v.subject_worse = assume_worse;
    v.conclusive = false;
    v.why = "no other path carried enough traffic to compare";
    return v;
  }
  const double ls = subject.loss(), lo = best_other.loss();
  // Significance in loss events: the pooled ratio's spread over the two windows' event counts.
  const double ns = static_cast<double>(subject.segs_out) / kSegmentsPerLossEvent;
  const double no = static_cast<double>(best_other.segs_out) / kSegmentsPerLossEvent;
  const double pooled = static_cast<double>(subject.retrans + best_other.retrans) /
                        static_cast<double>(subject.segs_out + best_other.segs_out);
  const double sd = std::sqrt(pooled * (1.0 - pooled) * (1.0 / ns + 1.0 / no));
  const double z = sd > 0 ? (ls - lo) / sd : (ls > lo ? kLossZ : 0.0);
  const bool lossier = ls > 2.0 * lo + 0.01 && z >= kLossZ;
  const bool slower = subject.rtt_us > 3ull * best_other.rtt_us && subject.rtt_us > best_other.rtt_us + 5000;
  v.subject_worse = lossier || slower;
  std::snprintf(buf, sizeof(buf),
                "retransmitted %.2f%% of %llu segments vs %.2f%% of %llu (z %.1f), rtt %.2f vs %.2f ms", 100 * ls,
                static_cast<unsigned long long>(subject.segs_out), 100 * lo,
                static_cast<unsigned long long>(best_other.segs_out), z, subject.rtt_us / 1e3, best_other.rtt_us / 1e3);
  v.why = buf;
  return v;
}

void DualPathCompare::Start(int subject, Kind kind, uint64_t now_ns, uint64_t window_ns,
                            const std::vector<std::unique_ptr<Path>>& paths) {
  active_ = true;
  subject_ = subject;
  kind_ = kind;
  extensions_ = 0;
  until_ns_ = now_ns + window_ns;
  start_.assign(paths.size(), PathSample{});
  min_rtt_.assign(paths.size(), 0);
  for (const auto& p : paths)
    if (p->alive()) start_[static_cast<size_t>(p->index())] = p->Sample();
}

void DualPathCompare::Extend(uint64_t now_ns, uint64_t window_ns,
                             const std::vector<std::unique_ptr<Path>>& paths) {
  const int n = extensions_ + 1;
  Start(subject_, kind_, now_ns, window_ns, paths);
  extensions_ = n;
}

DualPathVerdict DualPathCompare::Finish(const std::vector<std::unique_ptr<Path>>& paths) {
  active_ = false;
  auto window = [&](const Path& p) {
    PathWindow w;
    const PathSample& a = start_[static_cast<size_t>(p.index())];
    const PathSample b = p.Sample();
    if (!a.valid || !b.valid || b.segs_out < a.segs_out) return w;
    w.valid = true;
    w.segs_out = b.segs_out - a.segs_out;
    w.retrans = b.retransmits >= a.retransmits ? b.retransmits - a.retransmits : 0;
    // Retransmissions the peer reported it already had (DSACK) were spurious - a late
    // acknowledgement on a busy host, not a loss - as the soft rule counts them too.
    const uint64_t spurious = b.dsack_dups >= a.dsack_dups ? b.dsack_dups - a.dsack_dups : 0;
    w.retrans -= std::min(w.retrans, spurious);
    const uint32_t seen = min_rtt_[static_cast<size_t>(p.index())];
    w.rtt_us = seen != 0 && seen < b.rtt_us ? seen : b.rtt_us;
    return w;
  };
  PathWindow subject, best;
  for (const auto& p : paths) {
    if (!p->alive() || static_cast<size_t>(p->index()) >= start_.size()) continue;
    if (p->index() == subject_) {
      subject = window(*p);
      continue;
    }
    // Draining paths count too: what they carried in the window says how good they are.
    PathWindow w = window(*p);
    if (!w.valid || w.segs_out < kMinSegments) continue;
    if (!best.valid || w.loss() < best.loss()) best = w;
  }
  // Leaving: the detection already showed the subject losing data, so without evidence it moves.
  // Returning: a reconnected path that carried little is given the benefit of the doubt.
  return JudgeDualPath(subject, best, kind_ == Kind::kLeave);
}

}  // namespace ff
