// TCP_INFO progress sampling and carrier checks for the communicator's path watchdog.
#include "plugin/path_health.h"

#include <netinet/in.h>
#include <linux/tcp.h>  // glibc's tcp_info lacks tcpi_bytes_acked
#include <sys/socket.h>

#include <algorithm>
#include <cstring>

#include "plugin/link_monitor.h"

namespace ff {

const char* PathFaultName(PathFault f) {
  switch (f) {
    case PathFault::kNone:
      return "none";
    case PathFault::kStalled:
      return "no acknowledgement";
    case PathFault::kCarrierLost:
      return "carrier lost";
    case PathFault::kSocketError:
      return "socket error";
    case PathFault::kPeerReported:
      return "the peer lost it";
    case PathFault::kRetransmits:
      return "retransmissions";
    case PathFault::kSilent:
      return "silent while another path is acknowledged";
  }
  return "?";
}

TcpProgress ProbeTcp(int fd) {
  TcpProgress tp;
  tcp_info ti{};
  socklen_t len = sizeof(ti);
  if (fd < 0 || getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0) return tp;
  tp.valid = true;
  tp.unacked_segments = ti.tcpi_unacked;
  tp.bytes_acked = ti.tcpi_bytes_acked;
  tp.ms_since_ack = ti.tcpi_last_ack_recv;
  tp.retransmits = ti.tcpi_total_retrans;
  tp.rto_us = ti.tcpi_rto;
  tp.segs_out = ti.tcpi_segs_out;
  tp.rtt_us = ti.tcpi_rtt;
  tp.sacked = ti.tcpi_sacked;
  tp.ca_state = ti.tcpi_ca_state;
  return tp;
}

PathWatchdog::State& PathWatchdog::StateOf(int path) {
  if (static_cast<size_t>(path) >= states_.size()) states_.resize(static_cast<size_t>(path) + 1);
  return states_[static_cast<size_t>(path)];
}

uint64_t PathWatchdog::SilentFor(int path, uint64_t now_ns) const {
  if (static_cast<size_t>(path) >= states_.size() || states_[static_cast<size_t>(path)].last_progress_ns == 0) return 0;
  return now_ns - states_[static_cast<size_t>(path)].last_progress_ns;
}

bool PathWatchdog::Judge(int path, const TcpProgress& tp, uint64_t now_ns, PathFaultReport* out) {
  State& s = StateOf(path);
  if (!tp.valid) return false;
  s.alive = true;  // sampled this round
  // Progress is the later of: the last change of the cumulative acknowledgement seen by a sample,
  // and the kernel's own time of the last acknowledgement of any kind (duplicate/SACK included).
  // One segment in flight may wait for the peer's delayed ACK (40 ms and more): only two or more,
  // which a live receiver acknowledges at once, count as evidence.
  if (tp.unacked_segments < 2 || tp.bytes_acked != s.bytes_acked || s.last_progress_ns == 0) {
    s.last_progress_ns = now_ns;
  } else {
    const uint64_t ack_age_ns = uint64_t{tp.ms_since_ack} * 1'000'000;
    if (ack_age_ns < now_ns && now_ns - ack_age_ns > s.last_progress_ns) s.last_progress_ns = now_ns - ack_age_ns;
  }
  if (tp.bytes_acked != s.bytes_acked) s.last_advance_ns = now_ns;
  s.bytes_acked = tp.bytes_acked;
  s.unacked = tp.unacked_segments;
  s.ms_since_ack = tp.ms_since_ack;
  s.rtt_us = tp.rtt_us;
  s.recovering = tp.sacked > 0 || tp.ca_state == kCaRecovery;
  if (stall_ns_ == 0) return false;
  // A peer that selectively acknowledged what is in flight is alive: the sender is recovering a
  // lost segment (a lost retransmission waits for the retransmission timeout while the window is
  // full, so no acknowledgement can come). Give TCP its timeout twice over before calling it dead.
  uint64_t limit = stall_ns_;
  if (tp.sacked > 0 || tp.ca_state == kCaRecovery) limit = std::max(limit, 2 * uint64_t{tp.rto_us} * 1000);
  if (now_ns - s.last_progress_ns < limit) return false;
  out->path = path;
  out->cause = PathFault::kStalled;
  out->silent_ns = now_ns - s.last_progress_ns;
  out->detail = std::to_string(tp.unacked_segments) + " segment(s) unacknowledged (" + std::to_string(tp.sacked) +
                " selectively acknowledged), last ack " + std::to_string(tp.ms_since_ack) + " ms ago, rto " +
                std::to_string(tp.rto_us / 1000) + " ms";
  return true;
}

bool PathWatchdog::JudgeRelative(int path, uint64_t now_ns, PathFaultReport* out) {
  if (fast_stall_ns_ == 0 || static_cast<size_t>(path) >= states_.size()) return false;
  const State& s = states_[static_cast<size_t>(path)];
  if (!s.alive || s.unacked < 2 || s.recovering || s.last_progress_ns == 0) return false;
  const uint64_t silent = now_ns - s.last_progress_ns;
  const uint64_t limit = std::max(fast_stall_ns_, 8 * uint64_t{s.rtt_us} * 1000);
  if (silent < limit) return false;
  for (size_t j = 0; j < states_.size(); ++j) {
    const State& o = states_[j];
    if (static_cast<int>(j) == path || !o.alive || o.last_advance_ns <= s.last_progress_ns) continue;
    if (now_ns - o.last_advance_ns >= limit) continue;
    out->path = path;
    out->cause = PathFault::kSilent;
    out->silent_ns = silent;
    out->detail = std::to_string(s.unacked) + " segment(s) unacknowledged for " + std::to_string(silent / 1'000'000) +
                  " ms while path " + std::to_string(j) + " was acknowledged " +
                  std::to_string((now_ns - o.last_advance_ns) / 1'000'000) + " ms ago";
    return true;
  }
  return false;
}

bool PathWatchdog::JudgeSoft(int path, uint32_t retransmits, uint64_t now_ns, PathFaultReport* out) {
  State& s = StateOf(path);
  if (!s.retrans_seen) {
    s.retrans_seen = true;
    s.retrans = retransmits;
    s.window_start_ns = now_ns;
    return false;
  }
  if (retransmits != s.retrans) {
    s.window_dirty = true;
    s.last_retrans_ns = now_ns;
  }
  s.retrans = retransmits;
  if (now_ns - s.window_start_ns < kSoftWindowNs) return false;
  // One window with any retransmission is one detection, however many segments it lost.
  const bool detected = s.window_dirty;
  s.window_start_ns = now_ns;
  s.window_dirty = false;
  if (!detected) return false;
  // Keep only detections inside the span, then add this one.
  int kept = 0;
  for (int i = 0; i < s.ndetections; ++i)
    if (now_ns - s.detections[i] < kSoftSpanNs) s.detections[kept++] = s.detections[i];
  if (kept == kSoftDetections) {
    std::copy(s.detections + 1, s.detections + kept, s.detections);
    --kept;
  }
  s.detections[kept++] = now_ns;
  s.ndetections = kept;
  if (kept < kSoftDetections) return false;
  s.ndetections = 0;
  out->path = path;
  out->cause = PathFault::kRetransmits;
  out->silent_ns = 0;
  out->detail = std::to_string(kSoftDetections) + " windows of " + std::to_string(kSoftWindowNs / 1'000'000) +
                " ms with retransmissions within " + std::to_string(kSoftSpanNs / 1'000'000) + " ms (" +
                std::to_string(retransmits) + " in total)";
  return true;
}

void PathWatchdog::NoteDrained(int path, uint64_t now_ns) {
  State& s = StateOf(path);
  s.drained_ns = now_ns;
  s.last_retrans_ns = now_ns;
  s.ndetections = 0;
  if (s.drains < 5) ++s.drains;
}

void PathWatchdog::NoteReadmitted(int path) { StateOf(path).ndetections = 0; }

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

bool PathWatchdog::Check(const std::vector<std::unique_ptr<StreamPath>>& paths, uint64_t now_ns,
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
  for (const auto& p : paths) {
    if (!p->alive()) continue;
    const int fd = p->stream().fd();
    State& s = StateOf(p->index());
    if (recheck_carrier && fd >= 0) {
      if (s.ifindex < 0) {
        sockaddr_storage local{};
        socklen_t len = sizeof(local);
        s.ifindex = getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0
                        ? LinkMonitor::InterfaceOfAddress(local)
                        : 0;
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
    // An ICMP unreachable or a reset leaves an error on the socket (SO_ERROR also returns the soft
    // error TCP keeps for ICMP on an established connection), long before TCP itself gives up.
    int err = 0;
    socklen_t elen = sizeof(err);
    if (fd >= 0 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) == 0 && err != 0) {
      out->path = p->index();
      out->cause = PathFault::kSocketError;
      out->silent_ns = SilentFor(p->index(), now_ns);
      out->detail = std::string(strerror(err));
      return true;
    }
    if (stall_ns_ == 0) continue;
    const TcpProgress tp = ProbeTcp(fd);
    if (Judge(p->index(), tp, now_ns, out)) return true;
    // Only senders run the stall watchdog, and only their retransmissions say the path loses data.
    // A draining path is still sampled, so its failback clock restarts while it keeps losing data.
    if (tp.valid && JudgeSoft(p->index(), tp.retransmits, now_ns, out) && !p->draining()) return true;
  }
  for (const auto& p : paths)
    if (p->alive() && !p->draining() && JudgeRelative(p->index(), now_ns, out)) return true;
  return false;
}

}  // namespace ff
