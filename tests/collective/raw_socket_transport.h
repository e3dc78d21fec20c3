// Ring transport over plain TCP sockets: the baseline the plugin is benchmarked against.
#pragma once

#include <deque>
#include <string>
#include <vector>

#include "tests/collective/ring_transport.h"
#include "tests/collective/unique_fd.h"

namespace ff::collective {

// `streams` sockets per neighbour per direction; each message is split evenly over them,
// every part preceded by an 8-byte length so a framing error is detected, not misread.
// Bytes move only when Progress() runs (no thread), like a proxy polling its sockets.
class RawSocketTransport : public RingTransport {
 public:
  RawSocketTransport(int streams, std::string listen_ip, AbortContext& ctx);

  std::string Describe() const override;
  void Connect(Rendezvous& rdv, int rank, int nranks) override;
  int RegisterBuffer(void*, size_t) override { return 0; }
  void BeginCollective(const CollectiveCall&) override {}
  std::optional<RequestId> PostSend(int region, const void* data, size_t bytes) override;
  std::optional<RequestId> PostRecv(int region, void* data, size_t bytes) override;
  bool Test(RequestId request, size_t* bytes) override;
  void Progress() override;
  void Close() override;

 private:
  struct Request {
    bool in_use = false;
    std::byte* data = nullptr;
    size_t bytes = 0;
    int parts_left = 0;
  };
  // One part of one request queued on one stream.
  struct Part {
    size_t request;
    size_t offset;
    size_t len;
    uint64_t header;  // length on the wire (send) or as received (recv)
    size_t done = 0;  // bytes of header + payload moved so far
  };
  struct Stream {
    UniqueFd fd;
    std::deque<Part> queue;
  };

  std::optional<RequestId> Post(bool send, void* data, size_t bytes);
  void PumpSend(Stream& s, size_t index);
  void PumpRecv(Stream& s, size_t index);

  int streams_;
  std::string listen_ip_;
  AbortContext& ctx_;
  int prev_rank_ = -1;
  int next_rank_ = -1;
  std::vector<Stream> send_streams_;
  std::vector<Stream> recv_streams_;
  std::vector<Request> requests_;
  std::vector<size_t> free_;
};

}  // namespace ff::collective
