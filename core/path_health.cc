// The communicator's path watchdog: judges neutral path samples and carrier state.
#include "core/path_health.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <mutex>
#include <utility>

#include "health/cpu_pressure.h"
#include "health/link_monitor.h"

namespace ff {

bool IsRouteFailure(PathFault cause, int err) {
  switch (cause) {
    case PathFault::kStalled:
      return true;
    case PathFault::kSocketError:
    case PathFault::kNone:
      return err == ENETUNREACH || err == EHOSTUNREACH || err == ENETDOWN || err == EHOSTDOWN || err == ETIMEDOUT;
    default:
      return false;
  }
}

const char* PathFaultName(PathFault f) {
  switch (f) {
    case PathFault::kNone:
      return "none";
    case PathFault::kStalled:
      return "no acknowledgement";
    case PathFault::kCarrierLost:
      return "carrier lost";
    case PathFault::kSocketError:
      return "transport error";
    case PathFault::kPeerReported:
      return "the peer lost it";
    case PathFault::kRetransmits:
      return "retransmissions";
    case PathFault::kSilent:
      return "silent while another path is acknowledged";
    case PathFault::kRouteFate:
      return "silent since its route failed";
  }
  return "?";
}

PathWatchdog::State& PathWatchdog::StateOf(int path) {
  if (static_cast<size_t>(path) >= states_.size()) states_.resize(static_cast<size_t>(path) + 1);
  return states_[static_cast<size_t>(path)];
}

uint64_t PathWatchdog::SilentFor(int path, uint64_t now_ns) const {
  if (static_cast<size_t>(path) >= states_.size() || states_[static_cast<size_t>(path)].last_progress_ns == 0) return 0;
  return now_ns - states_[static_cast<size_t>(path)].last_progress_ns;
}

uint32_t PathWatchdog::LastRttUs(int path) const {
  if (path < 0 || static_cast<size_t>(path) >= states_.size()) return 0;
  return states_[static_cast<size_t>(path)].rtt_us;
}

bool PathWatchdog::Judge(int path, const PathSample& tp, uint64_t now_ns, PathFaultReport* out) {
  State& s = StateOf(path);
  if (!tp.valid) return false;
  s.alive = true;  // sampled this round
  // Progress is the later of: the last change of the cumulative acknowledgement seen by a sample,
  // and the kernel's own time of the last acknowledgement of any kind (duplicate/SACK included).
  // One segment in flight may wait for the peer's delayed ACK (40 ms and more): only two or more,
  // which a live receiver acknowledges at once, count as evidence.
  // A silence that ends in progress was a healthy delay (a busy host, a descheduled softirq): it
  // tells the relative rule how long this host's acknowledgements can lag without a fault.
  // Watched sample by sample, the gap ended by now (late by at most one spacing). After a pause of
  // this thread - a busy sender spends 3-10 ms in one sendmsg on loopback, which is when such gaps
  // happen - only a lower bound is known: the previous sample still saw no acknowledgement of any
  // kind since the silence began. Learning nothing there left the limit at its floor on exactly the
  // hosts that need more.
  if (s.unacked >= 2 && tp.bytes_acked != s.bytes_acked && s.last_progress_ns != 0 && now_ns > s.last_progress_ns &&
      s.last_sample_ns != 0) {
    if (now_ns - s.last_sample_ns <= kAckGapSampleSpacingNs)
      NoteHealthyAckGap(now_ns - s.last_progress_ns, now_ns);
    else if (s.last_sample_ns > s.last_progress_ns)
      NoteHealthyAckGap(s.last_sample_ns - s.last_progress_ns, now_ns);
  }
  s.last_sample_ns = now_ns;
  // A sample that finds data in flight after one that found the path idle starts the silence clock:
  // the data went out since, maybe just now. A sender samples only while it has something in flight,
  // so the idle sample may be long past - one sampling right after its first write in 80 ms (a sample
  // taken after the write, not before it) counted the whole idle time as silence and hedged healthy
  // paths on loopback.
  if (tp.unacked_segments < 2 || s.unacked < 2 || tp.bytes_acked != s.bytes_acked || s.last_progress_ns == 0) {
    s.last_progress_ns = now_ns;
  } else {
    const uint64_t ack_age_ns = uint64_t{tp.ms_since_ack} * 1'000'000;
    if (ack_age_ns < now_ns && now_ns - ack_age_ns > s.last_progress_ns) s.last_progress_ns = now_ns - ack_age_ns;
  }
  if (tp.bytes_acked != s.bytes_acked) {
    s.last_advance_ns = now_ns;
    if (s.unacked >= 2) s.last_busy_advance_ns = now_ns;  // data in flight was acknowledged
  }
  s.bytes_acked = tp.bytes_acked;
  s.unacked = tp.unacked_segments;
  s.ms_since_ack = tp.ms_since_ack;
  s.rtt_us = tp.rtt_us;
  s.recovering = tp.sacked > 0 || tp.ca_state == kCaRecovery;
  s.window_known = tp.window_known;
  s.peer_window = tp.peer_window;
  s.in_flight_bytes = tp.in_flight_bytes;
  s.mss = tp.mss;
  if (tp.window_known) {
    // The advertised window is rounded (TCP: to whole segments), so the edge jitters by up to one
    // segment as data arrives: only a move past that counts as the peer's application reading.
    // (A count that went backwards is a new connection: it starts over.)
    const uint64_t edge = tp.bytes_acked + tp.peer_window;
    if (s.edge_advance_ns == 0 || tp.bytes_acked < s.acked_at_edge_advance ||
        edge > s.right_edge + std::max<uint64_t>(tp.mss, 1)) {
      s.right_edge = edge;
      s.edge_advance_ns = now_ns;
      s.acked_at_edge_advance = tp.bytes_acked;
    }
  }
  if (stall_ns_ == 0) return false;
  // A peer that selectively acknowledged what is in flight is alive: the sender is recovering a
  // lost segment (a lost retransmission waits for the retransmission timeout while the window is
  // full, so no acknowledgement can come). Give TCP its timeout twice over before calling it dead.
  uint64_t limit = stall_ns_;
  if (tp.sacked > 0 || tp.ca_state == kCaRecovery) limit = std::max(limit, 2 * uint64_t{tp.rto_us} * 1000);
  if (now_ns - s.last_progress_ns < limit) return false;
  // An oversubscribed host delays acknowledgements for everyone: three times the relative rule's
  // allowance (300 ms when saturated; a healthy path was seen without an acknowledgement for 124 ms
  // at 97% CPU pressure - and once for 396 ms with two builds, a VM and the suite on 2 cores).
  if (now_ns - s.last_progress_ns < 3 * PressureAllowance(now_ns)) return false;
  out->path = path;
  out->cause = PathFault::kStalled;
  out->silent_ns = now_ns - s.last_progress_ns;
  out->detail = std::to_string(tp.unacked_segments) + " segment(s) unacknowledged (" + std::to_string(tp.sacked) +
                " selectively acknowledged), last ack " + std::to_string(tp.ms_since_ack) + " ms ago, rto " +
                std::to_string(tp.rto_us / 1000) + " ms";
  return true;
}

namespace {
// The longest healthy acknowledgement gap seen lately by any path of this process, and when: a busy
// host delays every connection's acknowledgements alike, so one estimate serves them all.
std::atomic<uint64_t> g_ack_gap_ns{0};
std::atomic<uint64_t> g_ack_gap_at_ns{0};
}  // namespace

uint64_t PathWatchdog::RecentAckGap(uint64_t now_ns) {
  const uint64_t gap = g_ack_gap_ns.load(std::memory_order_relaxed);
  const uint64_t at = g_ack_gap_at_ns.load(std::memory_order_relaxed);
  if (gap == 0 || now_ns < at) return gap;
  // Halves every kAckGapHalfLifeNs without a new maximum: a host that calmed down detects fast again.
  const uint64_t halvings = (now_ns - at) / kAckGapHalfLifeNs;
  return halvings >= 63 ? 0 : gap >> halvings;
}

void PathWatchdog::NoteHealthyAckGap(uint64_t gap_ns, uint64_t now_ns) {
  if (gap_ns < kAckGapFloorNs || gap_ns > kAckGapCeilingNs) return;
  if (gap_ns < RecentAckGap(now_ns)) return;
  g_ack_gap_ns.store(gap_ns, std::memory_order_relaxed);
  g_ack_gap_at_ns.store(now_ns, std::memory_order_relaxed);
}

void PathWatchdog::ResetAckGapHistory() {
  g_ack_gap_ns.store(0, std::memory_order_relaxed);
  g_ack_gap_at_ns.store(0, std::memory_order_relaxed);
}

uint64_t PathWatchdog::PressureAllowance(uint64_t now_ns) {
  const double p = health::CpuPressure::Now(now_ns);
  if (p < kPressureFloor) return 0;
  return static_cast<uint64_t>(p * static_cast<double>(kPressureScaleNs));
}

uint64_t PathWatchdog::RelativePressureAllowance(uint64_t now_ns) {
  const double p = health::CpuPressure::Now(now_ns);
  if (p < kPressureFloor) return 0;
  return static_cast<uint64_t>(p * static_cast<double>(kRelativePressureScaleNs));
}

namespace {
std::atomic<uint64_t> g_tick_override_ns{0};

uint64_t ReadKernelTickNs() {
  timespec res{};
  if (clock_getres(CLOCK_MONOTONIC_COARSE, &res) != 0) return 4'000'000;  // HZ=250, the common case
  const uint64_t ns = static_cast<uint64_t>(res.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(res.tv_nsec);
  return std::clamp<uint64_t>(ns, 1'000'000, 10'000'000);
}
}  // namespace

uint64_t PathWatchdog::KernelTickNs() {
  const uint64_t pinned = g_tick_override_ns.load(std::memory_order_relaxed);
  if (pinned != 0) return pinned;
  static const uint64_t tick = ReadKernelTickNs();
  return tick;
}

void PathWatchdog::OverrideKernelTickForTest(uint64_t ns) { g_tick_override_ns.store(ns, std::memory_order_relaxed); }

uint64_t PathWatchdog::TailProbeAllowance(uint32_t rtt_us) { return 4 * uint64_t{rtt_us} * 1000 + 5 * KernelTickNs(); }

uint64_t PathWatchdog::RelativeLimit(uint32_t rtt_us, uint64_t now_ns) const {
  return std::max({fast_stall_ns_, 8 * uint64_t{rtt_us} * 1000, kAckGapMargin * RecentAckGap(now_ns),
                   RelativePressureAllowance(now_ns), TailProbeAllowance(rtt_us)});
}

bool PathWatchdog::JudgeRelative(int path, uint64_t now_ns, PathFaultReport* out) {
  if (fast_stall_ns_ == 0 || static_cast<size_t>(path) >= states_.size()) return false;
  const State& s = states_[static_cast<size_t>(path)];
  if (!s.alive || s.unacked < 2 || s.recovering || s.last_progress_ns == 0) return false;
  const uint64_t silent = now_ns - s.last_progress_ns;
  const uint64_t limit = RelativeLimit(s.rtt_us, now_ns);
  if (silent < limit) return false;
  for (size_t j = 0; j < states_.size(); ++j) {
    const State& o = states_[j];
    // The other path must have been acknowledged well into this one's silence (a quarter of the
    // limit after it began): one that fell silent at the same moment, a late acknowledgement or two
    // apart, is no evidence (a busy host stalls them all).
    if (static_cast<int>(j) == path || !o.alive || o.last_advance_ns < s.last_progress_ns + limit / 4) continue;
    if (now_ns - o.last_advance_ns >= limit) continue;
    // An idle path's acknowledgement (of a control frame: the witness WitnessWanted asked for) counts
    // only after twice the limit: a busy path's acknowledgements can lag ~20 ms on a healthy host
    // while an idle one answers in 1 ms, and before the witness that lag was never judged at all
    // (measured on the emulator with idle-path evidence at 1x: one false hedge in 40 trials, on a
    // 22 ms silence). Bulk data acknowledged on the other path counts at the limit, as it always did.
    const bool busy_evidence = o.last_busy_advance_ns >= s.last_progress_ns + limit / 4 &&
                               now_ns - o.last_busy_advance_ns < limit;
    if (!busy_evidence && silent < 2 * limit) continue;
    // Nor is a path whose peer stopped reading: two segments or more delivered to the peer's transport
    // since its window's edge last moved. A receiving process that stalls - a vCPU the host holds
    // ~100 ms, a container throttled for the rest of its CPU period - while holding one path's socket
    // (mid-read) leaves that path's data unacknowledged, and the kernel acknowledges the other path's
    // segments on arrival without it: the other path looks alive, the receiver is not. A live
    // receiver reads what arrives within microseconds, and its acknowledgements show the edge moving.
    if (o.window_known && o.mss > 0 && o.edge_advance_ns < s.last_progress_ns + limit / 4 &&
        o.bytes_acked - o.acked_at_edge_advance >= 2 * uint64_t{o.mss})
      continue;
    out->path = path;
    out->cause = PathFault::kSilent;
    out->silent_ns = silent;
    out->detail = std::to_string(s.unacked) + " segment(s) unacknowledged for " + std::to_string(silent / 1'000'000) +
                  " ms while path " + std::to_string(j) + " was acknowledged " +
                  std::to_string((now_ns - o.last_advance_ns) / 1'000'000) + " ms ago; limit " +
                  std::to_string(limit / 1'000'000) + " ms, CPU pressure " +
                  std::to_string(static_cast<int>(health::CpuPressure::Now(now_ns) * 100)) + "%";
    if (s.window_known)
      out->detail += ", " + std::to_string(s.in_flight_bytes >> 10) + " KiB in flight, peer's window " +
                     std::to_string(s.peer_window >> 10) + " KiB";
    return true;
  }
  return false;
}

int PathWatchdog::WitnessWanted(uint64_t now_ns, uint64_t usable_mask) {
  if (fast_stall_ns_ == 0 || stall_ns_ == 0) return -1;
  const size_t n = std::min<size_t>(states_.size(), 64);
  for (size_t i = 0; i < n; ++i) {
    const State& s = states_[i];
    if (!s.alive || s.unacked < 2 || s.recovering || s.last_progress_ns == 0) continue;
    const uint64_t limit = RelativeLimit(s.rtt_us, now_ns);
    if (now_ns - s.last_progress_ns < limit / 4) continue;
    for (size_t j = 0; j < n; ++j) {
      State& o = states_[j];
      if (j == i || !o.alive || !(usable_mask & (uint64_t{1} << j))) continue;
      // A path with data in flight is acknowledged anyway (or is silent itself); one acknowledged
      // lately is already a witness.
      if (o.unacked >= 2 || now_ns - o.last_advance_ns < limit / 4) continue;
      if (o.witness_ns != 0 && now_ns - o.witness_ns < limit / 2) continue;
      o.witness_ns = now_ns;
      return static_cast<int>(j);
    }
  }
  return -1;
}

void PathWatchdog::SampleSoft(int path, const PathSample& tp) {
  State& s = StateOf(path);
  const SoftCounters c{tp.retransmits, tp.dsack_dups, tp.reord_seen, tp.segs_out};
  if (!s.soft_seen || c.retrans < s.cur.retrans || c.dsacks < s.cur.dsacks || c.reord < s.cur.reord ||
      c.segs < s.cur.segs) {
    s.soft_seen = true;
    s.prev = s.cur = s.now = c;
    s.have_prev = false;
    s.dsack_credit = 0;
  }
  s.now = c;
  s.soft_sampled = true;
}

bool PathWatchdog::CloseSoftWindow(uint64_t now_ns, uint64_t draining_mask, PathFaultReport* out) {
  if (soft_window_start_ns_ == 0) soft_window_start_ns_ = now_ns;
  if (now_ns - soft_window_start_ns_ < kSoftWindowNs) return false;
  soft_window_start_ns_ = now_ns;
  // Each path's loss over its span (the last kSoftSpanWindows windows), -1 where the span holds too
  // few segments to tell. Windows are judged one late, so the peer's duplicate reports (DSACK) for a
  // window's retransmissions have arrived: a retransmission the peer already had was spurious (a
  // late or reordered acknowledgement, as on a busy host), not a lost segment.
  double ratio[kMaxPaths];
  double other[kMaxPaths];  // the same, as evidence about the other paths: a quarter of the segments do
  const size_t n = std::min<size_t>(states_.size(), kMaxPaths);
  for (size_t i = 0; i < n; ++i) {
    State& s = states_[i];
    ratio[i] = other[i] = -1.0;
    if (!s.soft_sampled) {  // dead or not sampled: its history no longer describes the path
      s.have_prev = false;
      s.span_len = 0;
      s.soft_streak = 0;
      s.dsack_credit = 0;
      continue;
    }
    if (s.have_prev) {
      // The peer's duplicate reports (DSACK) since the last close, plus those left over from it, cancel
      // window k's retransmissions first. A report can only follow its retransmission, so what is left
      // belongs to retransmissions of window k+1 (often reported within the same window: tail-loss
      // probes are answered in one round trip) and is kept for its judgement, up to their number; the
      // rest answers earlier windows of the span, latest first (a report delayed on a busy host).
      const uint64_t retrans = s.cur.retrans - s.prev.retrans;
      uint64_t reports = s.dsack_credit + (s.now.dsacks - s.prev.dsacks);
      const uint64_t cancelled = std::min(reports, retrans);
      reports -= cancelled;
      const uint64_t next_retrans = s.now.retrans - s.cur.retrans;
      s.dsack_credit = std::min(reports, next_retrans);
      reports -= s.dsack_credit;
      for (int k = 1; k <= s.span_len && reports > 0; ++k) {
        SoftWindow& past = s.span[(s.span_next + kSoftSpanWindows - k) % kSoftSpanWindows];
        const uint64_t c = std::min(reports, past.lost);
        past.lost -= c;
        reports -= c;
      }
      SoftWindow& w = s.span[s.span_next];
      // Reordering is no excuse: a lossy link reorders too (the retransmissions fill holes late);
      // on the emulator a 1%-loss path saw reordering in every window of its span.
      w.lost = retrans - cancelled;
      w.segs = s.cur.segs - s.prev.segs;
      s.span_next = (s.span_next + 1) % kSoftSpanWindows;
      s.span_len = std::min(s.span_len + 1, kSoftSpanWindows);
      // The duplicates counted here are spent: the next window counts its own from now on.
      s.cur.dsacks = s.now.dsacks;
      uint64_t lost = 0, segs = 0;
      int lossy_windows = 0;
      for (int k = 0; k < s.span_len; ++k) {
        lost += s.span[k].lost;
        segs += s.span[k].segs;
        lossy_windows += s.span[k].lost > 0;
      }
      // A healthy path loses a whole offload packet now and then, sometimes a few at once; a lossy
      // link loses all along: the loss must be spread over several windows of the span.
      // Heavy loss (4x the threshold and more) needs fewer windows: it stalls TCP if left longer.
      // As evidence about the host and the fabric (what the other paths are compared with) a span's
      // loss counts whatever its spread: bursts on the other paths mean the loss is not this path's.
      const double r0 = segs == 0 ? 0.0 : static_cast<double>(lost) / static_cast<double>(segs);
      const double r =
          lossy_windows < (r0 >= 4 * loss_ratio_ ? kSoftHeavyLossyWindows : kSoftLossyWindows) ? 0.0 : r0;
      if (segs >= kSoftMinSegments) ratio[i] = r;
      if (segs >= kSoftMinSegments / 4) other[i] = r0;
    }
    s.prev = s.cur;
    s.cur = s.now;
    s.have_prev = true;
    s.soft_sampled = false;
  }
  int found = -1;
  for (size_t i = 0; i < n; ++i) {
    State& s = states_[i];
    double best_other = -1.0;
    for (size_t j = 0; j < n; ++j)
      if (j != i && other[j] >= 0 && (best_other < 0 || other[j] < best_other)) best_other = other[j];
    // Lossy: above the threshold, and clearly above the best other path. Congestion or a busy
    // receiving host hits every path alike and is no path fault; with no other path carrying
    // traffic to compare with there is no evidence either way, and nowhere to move the traffic.
    const bool lossy = ratio[i] > 0 && ratio[i] >= loss_ratio_ && best_other >= 0 &&
                       ratio[i] >= 2 * best_other + loss_ratio_ / 2;
    if (!lossy) {
      s.soft_streak = 0;
      continue;
    }
    s.last_retrans_ns = now_ns;  // a lossy span restarts a drained path's failback clock
    if (++s.soft_streak < kSoftDetections || (draining_mask & (uint64_t{1} << i)) || found >= 0) continue;
    s.soft_streak = 0;
    found = static_cast<int>(i);
    out->path = found;
    out->cause = PathFault::kRetransmits;
    out->silent_ns = 0;
    char buf[200];
    int len = std::snprintf(buf, sizeof(buf), "lost %.2f%% of its segments over the last %d ms (threshold %.2f%%",
                            100 * ratio[i], s.span_len * static_cast<int>(kSoftWindowNs / 1'000'000),
                            100 * loss_ratio_);
    if (len > 0 && static_cast<size_t>(len) < sizeof(buf))
      std::snprintf(buf + len, sizeof(buf) - static_cast<size_t>(len), "; best other path %.2f%%", 100 * best_other);
    out->detail = std::string(buf) + ")";
  }
  return found >= 0;
}

void PathWatchdog::NoteDrained(int path, uint64_t now_ns) {
  State& s = StateOf(path);
  s.drained_ns = now_ns;
  s.last_retrans_ns = now_ns;
  s.soft_streak = 0;
  if (s.drains < 5) ++s.drains;
}

void PathWatchdog::NoteReadmitted(int path) { StateOf(path).soft_streak = 0; }

void PathWatchdog::ResetPath(int path) {
  StateOf(path) = State{};
  link_generation_ = ~uint64_t{0};  // re-check the carrier of the new socket's interface
}

bool PathWatchdog::ReadyToReadmit(int path, uint64_t now_ns) const {
  if (static_cast<size_t>(path) >= states_.size()) return true;
  const State& s = states_[static_cast<size_t>(path)];
  const uint64_t hold = kFailbackNs << std::max(0, std::min(s.drains, 5) - 1);
  return now_ns - s.last_retrans_ns >= hold && now_ns - s.drained_ns >= hold;
}

bool PathWatchdog::Check(const std::vector<std::unique_ptr<Path>>& paths, uint64_t now_ns,
                         PathFaultReport* out) {
  if (!enabled() || now_ns - last_sample_ns_ < kSampleNs) return false;
  last_sample_ns_ = now_ns;
  bool recheck_carrier = false;
  if (carrier_events_) {
    uint64_t gen = LinkMonitor::Get().Poll(now_ns);
    recheck_carrier = gen != link_generation_;
    link_generation_ = gen;
  }
  for (auto& st : states_) st.alive = false;
  uint64_t draining = 0;
  for (const auto& p : paths) {
    if (!p->alive()) continue;
    State& s = StateOf(p->index());
    if (recheck_carrier) {
      if (s.ifindex < 0) {
        s.ifindex = p->LocalIfindex();
        if (s.ifindex > 0) LinkMonitor::Get().WatchCarrier(s.ifindex);
      }
      if (s.ifindex > 0 && LinkMonitor::Get().IsDown(s.ifindex)) {
        out->path = p->index();
        out->cause = PathFault::kCarrierLost;
        out->silent_ns = SilentFor(p->index(), now_ns);
        out->detail = "interface index " + std::to_string(s.ifindex) + " has no carrier";
        return true;
      }
    }
    // A transport's asynchronous error (TCP: an ICMP unreachable or a reset on the socket) comes long
    // before the transport itself gives up.
    if (const int err = p->PendingError(); err != 0) {
      out->path = p->index();
      out->cause = PathFault::kSocketError;
      out->silent_ns = SilentFor(p->index(), now_ns);
      out->err = err;
      out->detail = std::string(strerror(err));
      return true;
    }
    if (stall_ns_ == 0) continue;
    const PathSample tp = p->Sample();
    if (Judge(p->index(), tp, now_ns, out)) return true;
    if (s.last_advance_ns == now_ns) NoteRouteAlive(p->route(), AckReceivedNs(s));
    // Only senders run the stall watchdog, and only their retransmissions say the path loses data.
    // A draining path is still sampled, so its failback clock restarts while it keeps losing data.
    if (tp.valid) SampleSoft(p->index(), tp);
    if (p->draining()) draining |= uint64_t{1} << p->index();
  }
  if (stall_ns_ > 0 && CloseSoftWindow(now_ns, draining, out)) return true;
  for (const auto& p : paths)
    if (p->alive() && !p->draining() && JudgeRouteFate(p->index(), p->route(), now_ns, out)) return true;
  for (const auto& p : paths)
    if (p->alive() && !p->draining() && JudgeRelative(p->index(), now_ns, out)) return true;
  return false;
}

namespace {
// Fabric links of this process's routes that failed lately, one entry per link. Written rarely (a
// path failed), read by every sender's watchdog each sample: g_route_failed_ns (the newest failure)
// lets a healthy fabric skip the table with one load.
constexpr size_t kFailedLinkSlots = 64;
struct FailedLink {
  uint32_t link = 0;
  uint64_t at = 0;  // 0: free
};
std::mutex g_route_mu;
std::array<FailedLink, kFailedLinkSlots> g_failed_links{};
std::atomic<uint64_t> g_route_failed_ns{0};

bool RecentFailure(uint64_t at, uint64_t now_ns) {
  return at != 0 && (now_ns <= at || now_ns - at <= PathWatchdog::kRouteFailureWindowNs);
}
}  // namespace

void PathWatchdog::RecordRouteFailure(const RouteLinks& route, uint64_t now_ns) {
  if (route.empty() || now_ns == 0) return;
  std::lock_guard<std::mutex> lock(g_route_mu);
  for (int k = 0; k < route.n; ++k) {
    FailedLink* slot = nullptr;
    for (auto& f : g_failed_links)
      if (f.at != 0 && f.link == route.link[k]) slot = &f;
    if (slot == nullptr)  // a free entry, else the oldest
      for (auto& f : g_failed_links)
        if (slot == nullptr || f.at < slot->at) slot = &f;
    *slot = {route.link[k], std::max(slot->link == route.link[k] ? slot->at : 0, now_ns)};
  }
  if (now_ns > g_route_failed_ns.load(std::memory_order_relaxed)) g_route_failed_ns.store(now_ns, std::memory_order_relaxed);
}

uint64_t PathWatchdog::RouteFailedAt(const RouteLinks& route, uint64_t now_ns, bool every) {
  if (route.empty() || !RecentFailure(g_route_failed_ns.load(std::memory_order_relaxed), now_ns)) return 0;
  std::lock_guard<std::mutex> lock(g_route_mu);
  uint64_t latest = 0;
  for (int k = 0; k < route.n; ++k) {
    uint64_t at = 0;
    for (const auto& f : g_failed_links)
      if (f.link == route.link[k] && RecentFailure(f.at, now_ns)) at = f.at;
    if (at == 0 && every) return 0;
    latest = std::max(latest, at);
  }
  return latest;
}

void PathWatchdog::ClearRouteFailure(const RouteLinks& route) {
  if (route.empty() || g_route_failed_ns.load(std::memory_order_relaxed) == 0) return;
  std::lock_guard<std::mutex> lock(g_route_mu);
  for (auto& f : g_failed_links)
    if (f.at != 0 && route.Contains(f.link)) f = FailedLink{};
}

void PathWatchdog::NoteRouteAlive(const RouteLinks& route, uint64_t advance_ns) {
  if (route.empty() || !RecentFailure(g_route_failed_ns.load(std::memory_order_relaxed), advance_ns)) return;
  std::lock_guard<std::mutex> lock(g_route_mu);
  for (auto& f : g_failed_links)
    if (f.at != 0 && route.Contains(f.link) && advance_ns > f.at + kRouteAliveMarginNs) f = FailedLink{};
}

void PathWatchdog::ResetRouteFailures() {
  std::lock_guard<std::mutex> lock(g_route_mu);
  g_failed_links = {};
  g_route_failed_ns.store(0, std::memory_order_relaxed);
}

uint64_t PathWatchdog::AckReceivedNs(const State& s) {
  const uint64_t age = uint64_t{s.ms_since_ack} * 1'000'000;
  return s.last_sample_ns > age ? s.last_sample_ns - age : 0;
}

uint64_t PathWatchdog::LastAdvanceNs(int path) const {
  if (path < 0 || static_cast<size_t>(path) >= states_.size()) return 0;
  return states_[static_cast<size_t>(path)].last_advance_ns;
}

bool PathWatchdog::JudgeRouteFate(int path, const RouteLinks& route, uint64_t now_ns, PathFaultReport* out) {
  if (fast_stall_ns_ == 0 || route.empty() || static_cast<size_t>(path) >= states_.size()) return false;
  const State& s = states_[static_cast<size_t>(path)];
  if (!s.alive || s.recovering || s.last_progress_ns == 0) return false;
  const uint64_t failed_at = RouteFailedAt(route, now_ns);
  // An acknowledgement arrived after the failure was recorded: this path works, whatever happened to
  // the other. The kernel's time of the last acknowledgement is what counts, not when a sample saw
  // the cumulative acknowledgement move: a thread descheduled around the cut sees one that crossed
  // before it only later. Its age has jiffy granularity (4 ms at HZ=250), hence the slack.
  if (failed_at == 0 || AckReceivedNs(s) > failed_at + kAckAgeSlackNs) return false;
  const uint64_t ago_ms = now_ns > failed_at ? (now_ns - failed_at) / 1'000'000 : 0;
  if (s.unacked < 2) {
    // Idle: only a path whose every fabric link failed is kept from new chunks on this evidence.
    if (RouteFailedAt(route, now_ns, true) == 0) return false;
    out->path = path;
    out->cause = PathFault::kRouteFate;
    out->idle = true;
    out->silent_ns = 0;
    out->detail = "idle, and its route failed " + std::to_string(ago_ms) + " ms ago on another path of this process";
    return true;
  }
  const uint64_t silent = now_ns - s.last_progress_ns;
  if (silent < std::max(kRouteFateSilenceNs, 4 * uint64_t{s.rtt_us} * 1000)) return false;
  out->path = path;
  out->cause = PathFault::kRouteFate;
  out->silent_ns = silent;
  out->detail = std::to_string(s.unacked) + " segment(s) unacknowledged for " + std::to_string(silent / 1'000'000) +
                " ms, and its route failed " + std::to_string(ago_ms) + " ms ago on another path of this process";
  return true;
}

}  // namespace ff
