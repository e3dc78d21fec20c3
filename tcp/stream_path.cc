// Framing over a byte stream: vectored sends of header+payload, staged or direct receives.
#include "tcp/stream_path.h"

#include <linux/tcp.h>  // glibc's tcp_info lacks tcpi_bytes_acked
#include <net/if.h>
#include <cstddef>

#include <linux/sockios.h>
#include <sys/ioctl.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include <sys/socket.h>

#include "tcp/interfaces.h"

namespace ff {

std::string StreamPath::DebugState() const {
  char buf[256];
  std::snprintf(buf, sizeof(buf),
                "path %d %s%s queued=%d kernel_unacked=%lld staged=%zu parsing=%s hdr{type=%u seq=%llu off=%llu len=%u} "
                "got=%u",
                index(), alive() ? "alive" : "dead", draining() ? " draining" : "", tx_count_,
                static_cast<long long>(InFlightBytes()), wpos_ - rpos_, have_header_ ? "payload" : "header",
                rx_hdr_.type, static_cast<unsigned long long>(rx_hdr_.seq),
                static_cast<unsigned long long>(rx_hdr_.offset), rx_hdr_.length, rx_got_);
  return buf;
}

int64_t StreamPath::InFlightBytes() const {
  int n = 0;
  if (stream_->fd() < 0 || ioctl(stream_->fd(), SIOCOUTQ, &n) != 0) return -1;
  return n;
}

int64_t StreamPath::InFlightEstimate(uint64_t now_ns) const {
  if (est_read_ns_ != 0 && now_ns >= est_read_ns_ && now_ns - est_read_ns_ < kInFlightRefreshNs)
    return est_base_ + static_cast<int64_t>(bytes_sent_ - est_sent_at_read_);
  const int64_t n = InFlightBytes();
  est_read_ns_ = n < 0 ? 0 : now_ns;
  est_base_ = n;
  est_sent_at_read_ = bytes_sent_;
  return n;
}

StreamPath::StreamPath(int index, std::unique_ptr<ByteStream> stream, size_t staging_bytes)
    : Path(index),
      stream_(std::move(stream)),
      ctl_store_(new char[size_t{kTxRing} * kMaxControlPayload]),
      staging_bytes_(std::max(staging_bytes, kMinStagingBytes)),
      staging_(new char[staging_bytes_]) {
  // Faulted in now, at connect, rather than by the first reads of the data path (64 pages by default).
  std::memset(staging_.get(), 0, staging_bytes_);
}

void StreamPath::Queue(const FrameHeader& sealed, const char* payload) {
  int slot = (tx_head_ + tx_count_) % kTxRing;
  if (sealed.type != static_cast<uint8_t>(FrameType::kData) && sealed.length > 0) {
    char* copy = ctl_store_.get() + size_t(slot) * kMaxControlPayload;
    std::memcpy(copy, payload, std::min<size_t>(sealed.length, kMaxControlPayload));
    payload = copy;
  }
  tx_[slot] = TxFrame{sealed, payload, 0};
  ++tx_count_;
  if (sealed.type == static_cast<uint8_t>(FrameType::kData)) {
    ++tx_data_frames_;
    tx_payload_bytes_ += sealed.length;
  }
}

void StreamPath::DropQueued() {
  tx_count_ = 0;
  tx_data_frames_ = 0;
  tx_payload_bytes_ = 0;
}

void StreamPath::Fence() {
  DropQueued();
  peeked_ = 0;  // the reset drops them with everything else
  const int fd = stream_->fd();
  if (fd < 0) return;
  // connect(AF_UNSPEC) disconnects a TCP socket in place: the kernel purges its send queue and
  // sends a reset, and the descriptor stays owned (and later closed) by the stream.
  sockaddr unspec{};
  unspec.sa_family = AF_UNSPEC;
  (void)::connect(fd, &unspec, sizeof(unspec));
}

bool StreamPath::Flush() {
  constexpr int kMaxIov = 64;
  iovec iov[kMaxIov];
  while (tx_count_ > 0) {
    // At most kMaxWriteBytes per write (stream_path.h); what is left goes in the next one.
    int n = 0;
    size_t room = kMaxWriteBytes;
    for (int i = 0; i < tx_count_ && n + 2 <= kMaxIov && room > 0; ++i) {
      TxFrame& f = tx_[(tx_head_ + i) % kTxRing];
      const uint32_t hb = sizeof(FrameHeader);
      const uint32_t done = f.sent > hb ? f.sent - hb : 0;
      if (f.sent < hb) {
        const size_t h = std::min<size_t>(hb - f.sent, room);
        iov[n++] = {reinterpret_cast<char*>(&f.hdr) + f.sent, h};
        room -= h;
      }
      if (f.hdr.length > done && room > 0) {
        const size_t l = std::min<size_t>(f.hdr.length - done, room);
        iov[n++] = {const_cast<char*>(f.payload) + done, l};
        room -= l;
      }
    }
    ssize_t w = stream_->Send(iov, n);
    if (w < 0) {
      last_errno_ = errno;
      return false;
    }
    if (w == 0) return true;
    bytes_sent_ += static_cast<uint64_t>(w);
    size_t left = static_cast<size_t>(w);
    while (left > 0 && tx_count_ > 0) {
      TxFrame& f = tx_[tx_head_];
      uint32_t frame_bytes = static_cast<uint32_t>(sizeof(FrameHeader)) + f.hdr.length;
      uint32_t take = static_cast<uint32_t>(std::min<size_t>(left, frame_bytes - f.sent));
      f.sent += take;
      left -= take;
      if (f.sent == frame_bytes) {
        if (f.hdr.type == static_cast<uint8_t>(FrameType::kData)) {
          --tx_data_frames_;
          tx_payload_bytes_ -= f.hdr.length;
        }
        tx_head_ = (tx_head_ + 1) % kTxRing;
        --tx_count_;
      }
    }
  }
  return true;
}

bool StreamPath::ConsumePeeked(PumpResult* result) {
  while (peeked_ > 0) {
    const ssize_t r = stream_->Skip(peeked_);
    if (r > 0) {
      peeked_ -= std::min(peeked_, static_cast<size_t>(r));
      continue;
    }
    if (r == 0) {
      *result = PumpResult::kIdle;  // cannot be (the bytes were there); the next call tries again
    } else if (r == -2) {
      *result = PumpResult::kClosed;
    } else {
      last_errno_ = errno;
      *result = PumpResult::kIoError;
    }
    return false;
  }
  return true;
}

bool StreamPath::FillStaging(PumpResult* result, bool* drained) {
  const bool peek = lone_receive_ && stream_->CanPeek();
  if (peek && peek_offset_ == PeekOffset::kUnknown)
    peek_offset_ = stream_->EnablePeekOffset() ? PeekOffset::kOn : PeekOffset::kOff;
  // With peek offsets the bytes peeked stay in the socket across messages: the next peek starts
  // behind them, and one read drops them all once enough are there, once the path has found nothing
  // new for a while, or when it stops peeking. Without, the next read drops them first.
  if (!peek || peek_offset_ != PeekOffset::kOn || peeked_ >= kPeekKeepBytes ||
      idle_peeks_ >= kIdlePeeksBeforeConsume) {
    if (!ConsumePeeked(result)) return false;
    idle_peeks_ = 0;
  }
  if (rpos_ == wpos_) rpos_ = wpos_ = 0;
  if (wpos_ == staging_bytes_) {
    std::memmove(staging_.get(), staging_.get() + rpos_, wpos_ - rpos_);
    wpos_ -= rpos_;
    rpos_ = 0;
  }
  size_t room = staging_bytes_ - wpos_;
  if (header_only_read_ && !have_header_ && wpos_ - rpos_ < sizeof(FrameHeader))
    room = std::min(room, sizeof(FrameHeader) - (wpos_ - rpos_));
  if (peek) room = std::min(room, kPeekMaxBytes);
  ssize_t r = peek ? stream_->Peek(staging_.get() + wpos_, room) : stream_->Recv(staging_.get() + wpos_, room);
  if (r > 0) {
    *drained = static_cast<size_t>(r) < room;
    idle_peeks_ = 0;
    if (peek) {
      peeked_ += static_cast<size_t>(r);
      // A full peek is a stream, not one small message: consume it now.
      if (!*drained && !ConsumePeeked(result)) return false;
    }
    wpos_ += static_cast<size_t>(r);
    bytes_received_ += static_cast<uint64_t>(r);
    return true;
  }
  if (r == 0) {
    if (peeked_ > 0) ++idle_peeks_;
    *result = PumpResult::kIdle;
  } else if (r == -2) {
    *result = PumpResult::kClosed;
  } else {
    last_errno_ = errno;
    *result = PumpResult::kIoError;
  }
  return false;
}

PumpResult StreamPath::Poll(FrameSink& sink) {
  const uint64_t before = bytes_received_;
  int frames = 0;
  const PumpResult result = PollFrames(sink, &frames);
  last_poll_empty_ = result == PumpResult::kIdle && frames == 0 && bytes_received_ == before;
  return result;
}

PumpResult StreamPath::PollFrames(FrameSink& sink, int* frames_out) {
  PumpResult result = PumpResult::kIdle;
  int& frames = *frames_out;
  // A read that returned less than it asked for took everything the socket held: asking again in
  // this call would almost always come back empty (a system call on every message's critical path,
  // right after its last byte). What arrives meanwhile is read by the next call.
  bool drained = false;
  for (;;) {
    if (!have_header_) {
      if (wpos_ - rpos_ < sizeof(FrameHeader)) {
        if (drained || !FillStaging(&result, &drained)) return result;
        continue;
      }
      std::memcpy(&rx_hdr_, staging_.get() + rpos_, sizeof(FrameHeader));
      std::string bad = ValidateHeader(rx_hdr_);
      if (!bad.empty()) {
        rx_error_ = "corrupt frame header on path " + std::to_string(index()) + " (" + stream_->Describe() +
                    "): " + bad;
        return PumpResult::kBadFrame;
      }
      char* dest = nullptr;
      HeaderVerdict v = sink.OnHeader(*this, rx_hdr_, &dest);
      if (v == HeaderVerdict::kStall) return PumpResult::kStalled;
      if (v == HeaderVerdict::kReject) return PumpResult::kRejected;
      rpos_ += sizeof(FrameHeader);
      have_header_ = true;
      header_only_read_ = false;  // a small payload is read with what follows it
      rx_dest_ = dest;
      rx_got_ = 0;
    }
    uint32_t remaining = rx_hdr_.length - rx_got_;
    if (remaining == 0) {
      have_header_ = false;
      header_only_read_ = rx_hdr_.length >= kHeaderFirstMin;
      sink.OnFrameComplete(*this, rx_hdr_);
      if (++frames >= kMaxFramesPerPoll) return PumpResult::kIdle;
      continue;
    }
    size_t avail = wpos_ - rpos_;
    if (avail > 0) {
      size_t n = std::min<size_t>(avail, remaining);
      if (rx_dest_) std::memcpy(rx_dest_ + rx_got_, staging_.get() + rpos_, n);
      rpos_ += n;
      rx_got_ += static_cast<uint32_t>(n);
      continue;
    }
    if (drained) return PumpResult::kIdle;
    // The last few KiB of a large payload go straight in too: read into staging, they brought up to a
    // staging buffer's worth of the next chunk along, copied once more (7% of a 4 MiB stream's bytes
    // over one path, whose reads return a socket's worth and rarely end on a chunk's end).
    if (rx_dest_ != nullptr && (remaining >= kDirectReadMin || rx_hdr_.length >= kHeaderFirstMin)) {
      // Large payloads land straight in the posted buffer: no copy through staging. The same read
      // goes on into staging (empty here) for what follows - as much as the staging read after this
      // frame would ask for: one header after a large payload, else the whole buffer. A payload
      // that was all there used to cost a second read that came back empty (a ping-pong: one per
      // message) or that took the next header (a stream: one per frame).
      if (!ConsumePeeked(&result)) return result;
      rpos_ = wpos_ = 0;
      const size_t tail = rx_hdr_.length >= kHeaderFirstMin ? sizeof(FrameHeader) : staging_bytes_;
      const iovec iov[2] = {{rx_dest_ + rx_got_, remaining}, {staging_.get(), tail}};
      ssize_t r = stream_->RecvV(iov, 2);
      if (r > 0) {
        const size_t payload = std::min<size_t>(static_cast<size_t>(r), remaining);
        drained = static_cast<size_t>(r) < remaining + tail;
        rx_got_ += static_cast<uint32_t>(payload);
        wpos_ = static_cast<size_t>(r) - payload;
        bytes_received_ += static_cast<uint64_t>(r);
        continue;
      }
      if (r == 0) return PumpResult::kIdle;
      if (r == -2) return PumpResult::kClosed;
      last_errno_ = errno;
      return PumpResult::kIoError;
    }
    if (!FillStaging(&result, &drained)) return result;
  }
}

PathSample ProbeTcp(int fd) {
  PathSample tp;
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
  tp.mss = ti.tcpi_snd_mss;
  if (len >= offsetof(tcp_info, tcpi_dsack_dups) + sizeof(ti.tcpi_dsack_dups)) tp.dsack_dups = ti.tcpi_dsack_dups;
  if (len >= offsetof(tcp_info, tcpi_reord_seen) + sizeof(ti.tcpi_reord_seen)) tp.reord_seen = ti.tcpi_reord_seen;
  // Older kernels return a shorter tcp_info (tcpi_snd_wnd is in Linux 6.1, Debian 12's kernel).
  if (len >= offsetof(tcp_info, tcpi_snd_wnd) + sizeof(ti.tcpi_snd_wnd)) {
    const uint64_t originals = ti.tcpi_bytes_sent - std::min(ti.tcpi_bytes_sent, ti.tcpi_bytes_retrans);
    tp.window_known = true;
    tp.peer_window = ti.tcpi_snd_wnd;
    tp.in_flight_bytes = originals - std::min(originals, static_cast<uint64_t>(ti.tcpi_bytes_acked));
  }
  return tp;
}

PathSample StreamPath::Sample() const { return ProbeTcp(stream_->fd()); }

int StreamPath::PendingError() const {
  int err = 0;
  socklen_t elen = sizeof(err);
  const int fd = stream_->fd();
  if (fd < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) != 0) return 0;
  return err;
}

int StreamPath::LocalIfindex() const {
  if (ifindex_ >= 0) return ifindex_;
  sockaddr_storage local{};
  socklen_t len = sizeof(local);
  const int fd = stream_->fd();
  if (fd < 0) return 0;  // not resolved: the stream may be replaced, never cached as unknown
  ifindex_ = getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0 ? tcp::InterfaceIndexOfAddress(local) : 0;
  return ifindex_;
}

}  // namespace ff
