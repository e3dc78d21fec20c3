// RawSocketTransport: non-blocking sockets, one FIFO of message parts per stream.
#include "tests/collective/raw_socket_transport.h"

#include <sys/socket.h>
#include <sys/uio.h>

#include <cerrno>
#include <cstring>

#include "tests/collective/tcp_socket.h"

namespace ff::collective {
namespace {

constexpr size_t kMaxRequests = 64;  // two directions x window 8, with room to spare
constexpr uint32_t kHelloMagic = 0x46465257;  // "FFRW"

struct Hello {
  uint32_t magic;
  uint32_t rank;
  uint32_t stream;
};

}  // namespace

RawSocketTransport::RawSocketTransport(int streams, std::string listen_ip, AbortContext& ctx)
    : streams_(streams), listen_ip_(std::move(listen_ip)), ctx_(ctx), requests_(kMaxRequests) {
  for (size_t i = kMaxRequests; i-- > 0;) free_.push_back(i);
}

std::string RawSocketTransport::Describe() const {
  return "raw TCP sockets, " + std::to_string(streams_) + " stream(s) per neighbour per direction";
}

void RawSocketTransport::Connect(Rendezvous& rdv, int rank, int nranks) {
  ctx_.SetPhase("raw socket connection setup");
  next_rank_ = (rank + 1) % nranks;
  prev_rank_ = (rank + nranks - 1) % nranks;
  const std::string ip = listen_ip_.empty() ? rdv.LocalAddress() : listen_ip_;
  UniqueFd listener = ListenTcp(ip, 0, streams_ + 4);
  std::string handle = ip + ":" + std::to_string(LocalPort(listener.Get()));
  auto handles = rdv.AllGather("raw-handles", handle);
  HostPort next = ParseHostPort(handles[static_cast<size_t>(next_rank_)], "raw handle of the next rank");

  // Connects complete in the peer's backlog, so connecting all before accepting cannot deadlock.
  for (int s = 0; s < streams_; ++s) {
    Stream st;
    st.fd = ConnectTcpWithRetry(next.host, next.port, listen_ip_, ctx_, "rank " + std::to_string(next_rank_));
    Hello h{kHelloMagic, static_cast<uint32_t>(rank), static_cast<uint32_t>(s)};
    SendAll(st.fd.Get(), &h, sizeof h, ctx_, "rank " + std::to_string(next_rank_));
    send_streams_.push_back(std::move(st));
  }
  recv_streams_.resize(static_cast<size_t>(streams_));
  for (int s = 0; s < streams_; ++s) {
    UniqueFd fd = AcceptTcp(listener.Get(), ctx_, "accepting raw stream from rank " + std::to_string(prev_rank_));
    Hello h{};
    RecvAll(fd.Get(), &h, sizeof h, ctx_, "rank " + std::to_string(prev_rank_));
    if (h.magic != kHelloMagic || static_cast<int>(h.rank) != prev_rank_ || h.stream >= static_cast<uint32_t>(streams_) ||
        recv_streams_[h.stream].fd.Valid()) {
      throw DriverError(ctx_.Prefix() + "unexpected raw stream hello (rank " + std::to_string(h.rank) + ", stream " +
                        std::to_string(h.stream) + "); expected rank " + std::to_string(prev_rank_) +
                        " with the same --raw-streams");
    }
    recv_streams_[h.stream].fd = std::move(fd);
  }
  for (auto* group : {&send_streams_, &recv_streams_}) {
    for (auto& st : *group) SetNonBlocking(st.fd.Get());
  }
}

std::optional<RequestId> RawSocketTransport::Post(bool send, void* data, size_t bytes) {
  if (free_.empty()) return std::nullopt;
  size_t id = free_.back();
  free_.pop_back();
  Request& r = requests_[id];
  r = Request{true, static_cast<std::byte*>(data), bytes, streams_};
  auto& group = send ? send_streams_ : recv_streams_;
  const size_t n = group.size();
  for (size_t s = 0; s < n; ++s) {
    size_t begin = bytes * s / n;
    size_t end = bytes * (s + 1) / n;
    group[s].queue.push_back(Part{id, begin, end - begin, send ? end - begin : 0, 0});
  }
  return static_cast<RequestId>(id);
}

std::optional<RequestId> RawSocketTransport::PostSend(int, const void* data, size_t bytes) {
  return Post(true, const_cast<void*>(data), bytes);
}

std::optional<RequestId> RawSocketTransport::PostRecv(int, void* data, size_t bytes) { return Post(false, data, bytes); }

void RawSocketTransport::PumpSend(Stream& s, size_t index) {
  while (!s.queue.empty()) {
    Part& p = s.queue.front();
    Request& r = requests_[p.request];
    const size_t total = sizeof p.header + p.len;
    iovec iov[2];
    int iovcnt = 0;
    if (p.done < sizeof p.header) {
      iov[iovcnt++] = {reinterpret_cast<char*>(&p.header) + p.done, sizeof p.header - p.done};
      iov[iovcnt++] = {r.data + p.offset, p.len};
    } else {
      iov[iovcnt++] = {r.data + p.offset + (p.done - sizeof p.header), total - p.done};
    }
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<size_t>(iovcnt);
    ssize_t n = ::sendmsg(s.fd.Get(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return;
      throw DriverError("raw send on stream " + std::to_string(index) + " to rank " + std::to_string(next_rank_) +
                        " failed: " + std::strerror(errno));
    }
    p.done += static_cast<size_t>(n);
    if (p.done < total) return;
    --r.parts_left;
    s.queue.pop_front();
  }
}

void RawSocketTransport::PumpRecv(Stream& s, size_t index) {
  while (!s.queue.empty()) {
    Part& p = s.queue.front();
    Request& r = requests_[p.request];
    const size_t total = sizeof p.header + p.len;
    iovec iov[2];
    int iovcnt = 0;
    if (p.done < sizeof p.header) {
      iov[iovcnt++] = {reinterpret_cast<char*>(&p.header) + p.done, sizeof p.header - p.done};
      if (p.len > 0) iov[iovcnt++] = {r.data + p.offset, p.len};
    } else {
      iov[iovcnt++] = {r.data + p.offset + (p.done - sizeof p.header), total - p.done};
    }
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<size_t>(iovcnt);
    ssize_t n = ::recvmsg(s.fd.Get(), &msg, MSG_DONTWAIT);
    if (n == 0) {
      throw DriverError("rank " + std::to_string(prev_rank_) + " closed raw stream " + std::to_string(index));
    }
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return;
      throw DriverError("raw receive on stream " + std::to_string(index) + " from rank " + std::to_string(prev_rank_) +
                        " failed: " + std::strerror(errno));
    }
    const bool had_header = p.done >= sizeof p.header;
    p.done += static_cast<size_t>(n);
    if (!had_header && p.done >= sizeof p.header && p.header != p.len) {
      throw DriverError("raw stream " + std::to_string(index) + " from rank " + std::to_string(prev_rank_) +
                        " carries a part of " + std::to_string(p.header) + " bytes where " + std::to_string(p.len) +
                        " were expected (sizes out of step)");
    }
    if (p.done < total) return;
    --r.parts_left;
    s.queue.pop_front();
  }
}

void RawSocketTransport::Progress() {
  for (size_t i = 0; i < send_streams_.size(); ++i) PumpSend(send_streams_[i], i);
  for (size_t i = 0; i < recv_streams_.size(); ++i) PumpRecv(recv_streams_[i], i);
}

bool RawSocketTransport::Test(RequestId request, size_t* bytes) {
  Request& r = requests_[static_cast<size_t>(request)];
  if (r.parts_left > 0) return false;
  *bytes = r.bytes;
  r.in_use = false;
  free_.push_back(static_cast<size_t>(request));
  return true;
}

void RawSocketTransport::Close() {
  send_streams_.clear();
  recv_streams_.clear();
}

}  // namespace ff::collective
