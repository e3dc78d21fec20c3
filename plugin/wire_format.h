// On-the-wire frame header shared by every stream path: validated before any byte is trusted.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace ff {

constexpr uint32_t kFrameMagic = 0x46464658;  // "XFFF" little-endian
constexpr uint8_t kWireVersion = 1;
constexpr uint64_t kMaxMessageBytes = 1ull << 40;
constexpr uint32_t kMaxFramePayload = 64u << 20;

enum class FrameType : uint8_t {
  kData = 1,   // payload of one chunk of message `seq`
  kAck = 2,    // cumulative: every message with sequence < `seq` arrived whole
  kHello = 3,  // first frame on a new path: seq=connection id, offset=secret, total=path count, tag=path index
  kAbort = 4,  // the receiver gives up on the communicator; tag holds an AbortReason
  // Receiver -> sender, once per connection: where a failed path may reconnect (failback).
  // offset = TCP port of the receiving process's rejoin listener for IPv4 (0: none), total = IPv6.
  kRejoinInfo = 5,
  // Sender -> receiver after a failover: send the cumulative acknowledgement again, on every path.
  // Acknowledgements travel on the path that last delivered data; if that path is the one that just
  // died, the sender would otherwise wait for the acknowledgement-timeout re-send.
  kAckRequest = 6,
};

// Hello flag: this path replaces path `tag` of the existing connection `seq` (failback).
constexpr uint16_t kHelloFlagRejoin = 1;

enum class AbortReason : int32_t { kMessageTooLarge = 1, kProtocolError = 2 };

// 64 bytes, host byte order (both ends are the same architecture, as NCCL itself assumes).
struct FrameHeader {
  uint32_t magic;
  uint8_t version;
  uint8_t type;
  uint16_t path;  // index of the path the sender used
  int32_t tag;
  uint32_t length;  // payload bytes that follow
  uint64_t seq;
  uint64_t offset;
  uint64_t total;
  uint64_t task_hash;  // task identity (sla/)
  uint32_t sla_us;     // declared latency SLA, 0 = none
  uint16_t collective; // collective id (sla/), 0xffff = unknown
  uint16_t flags;
  uint32_t reserved;
  uint32_t checksum;  // FNV-1a over the 60 bytes before it
};
static_assert(sizeof(FrameHeader) == 64, "FrameHeader is a wire format");

uint32_t HeaderChecksum(const FrameHeader& h);
void SealHeader(FrameHeader* h);  // fills magic, version and checksum

// Returns an empty string when the header is well-formed, else what is wrong with it.
std::string ValidateHeader(const FrameHeader& h);

}  // namespace ff
