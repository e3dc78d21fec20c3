// The wire protocol between a send and a receive communicator, for every transport.
//
// Version 2. What changed from version 1, and why:
//   - Control messages are typed: each has its own payload struct after the header, instead of
//     reusing the data header's seq/offset/total/tag fields with a different meaning per type.
//   - The receiver publishes one descriptor per posted receive (sequence, tag, capacity, and room for
//     a remote address and per-device keys) in kAck messages. The sender matches its message to the
//     descriptor by tag and checks the size before sending, so the same protocol serves a byte stream
//     (the receiver places the chunk) and RDMA WRITE (the sender places it).
//   - Acknowledgements are batched: one kAck carries the cumulative acknowledgement and any number of
//     new descriptors; data frames say whether their sender waits on the acknowledgement.
// Version 3. What changed from version 2, and why:
//   - A hello is followed by a HelloAuth payload (nonce, counter, HMAC-SHA256) and no longer carries
//     the listen handle's secret in plaintext: in v2 anyone who saw one hello knew the secret and the
//     connection id, and could take over a live path through the rejoin listener at any time (the
//     checksum is unkeyed). Now each hello proves knowledge of a per-connection key derived from the
//     secret and the connection's nonce (plugin/hello_auth.h), and rejoins carry a counter the
//     receiver checks against a replay window. The header layout is unchanged; the hello's length
//     and meaning are not, so a v2 peer must be refused by version rather than misread.
// Version 4. What changed from version 3, and why:
//   - Unsolicited eager messages: on a byte stream a sender may send a single-chunk eager message
//     before the receiver has published the buffer for it (at most kMaxUnsolicitedMsgs messages and
//     kMaxUnsolicitedBytes beyond its credit), and the receiver stages what arrives before its buffer
//     is posted. A small message no longer waits for a descriptor's round trip, and the receiver no
//     longer answers every completed receive with an acknowledgement of its own: acknowledgements
//     of eager messages ride the next descriptor frame (or go per FLEXIFORCE_ACK_BATCH / _DELAY_US).
//     A v3 receiver would leave such frames unread in its socket, where re-sent chunks after a
//     failover could queue behind them: the versions must not mix.
// Version 5. What changed from version 4, and why:
//   - The header checksum covers the same 60 bytes, 8 at a time (a multiply-xorshift over 64-bit
//     words) instead of FNV-1a byte by byte: 60 dependent multiplies per frame were about 5% of a
//     1 KiB message's CPU at each end. It detects what FNV did (a corrupt or truncated header: any
//     change goes unnoticed with a chance of about 2^-32); it was never a defence against a forger
//     (the hello's HMAC is). A v4 peer's checksums do not match, so it is refused by version first.
// Both ends must run the same version: a mismatch is refused at the first header.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace ff {

constexpr uint32_t kFrameMagic = 0x46464658;  // "XFFF" little-endian
constexpr uint8_t kWireVersion = 5;
constexpr uint64_t kMaxMessageBytes = 1ull << 40;
constexpr uint32_t kMaxFramePayload = 64u << 20;

enum class FrameType : uint8_t {
  kData = 1,   // one chunk of message `seq`: [offset, offset+length) of `total` bytes; payload follows
  kAck = 2,    // payload AckMsg + AckMsg::descriptors RecvDescriptor
  kHello = 3,  // first frame on a new path; payload HelloAuth; fields: see HelloFrame
  kAbort = 4,  // payload AbortMsg: the receiver gives up on the communicator
  // Receiver -> sender, once per connection: where a failed path may reconnect. Payload ReconnectInfo.
  kReconnectInfo = 5,
  // Sender -> receiver after a failover: send the cumulative acknowledgement again, on every path.
  // Acknowledgements travel on the path that last delivered data; if that path just died, the sender
  // would otherwise wait for the acknowledgement-timeout re-send. No payload.
  kAckRequest = 6,
  // Receiver -> sender: the state of one path as the receiver sees it. Payload PathEventMsg.
  kPathEvent = 7,
};

// Data frame flag: the sender completes this message only on its acknowledgement (not eager), so the
// receiver acknowledges it at once instead of batching.
constexpr uint16_t kDataFlagAckNow = 1;
// Unsolicited eager messages (stream transports only: RDMA writes need the posted buffer's address):
// what a sender may have sent beyond the receiver's published descriptors, and so what the
// receiver's staging area must hold for its paths never to stall behind an unposted message.
constexpr uint64_t kMaxUnsolicitedMsgs = 32;
constexpr uint64_t kMaxUnsolicitedBytes = 256u << 10;
// Hello flag: this path replaces path `path_index` of the existing connection (failback).
constexpr uint16_t kHelloFlagRejoin = 1;
// Hello flag: the sender carries this connection over RDMA verbs; its 32-byte queue-pair endpoint
// follows the hello on the bootstrap stream (plugin/verbs_setup.h). A listener of the other transport refuses it.
constexpr uint16_t kHelloFlagVerbs = 2;

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
  uint32_t checksum;  // over the 60 bytes before it (HeaderChecksum)
};
static_assert(sizeof(FrameHeader) == 64, "FrameHeader is a wire format");

// The hello's own view of the 64 bytes: same magic/version/type prefix and checksum as FrameHeader.
struct HelloFrame {
  uint32_t magic;
  uint8_t version;
  uint8_t type;
  uint16_t path_unused;
  int32_t path_index;  // which path of the connection this stream is
  uint32_t length;     // 0
  uint64_t conn_id;
  uint64_t reserved_zero;  // v2 carried the listen handle's secret here in plaintext; v3 sends 0
  uint64_t path_count;
  uint64_t chunk_bytes;  // the sender's configured chunk size (both ends chunk alike)
  uint32_t sla_us;
  uint16_t reserved16;
  uint16_t flags;  // kHelloFlagRejoin
  // The sender's eager threshold (FLEXIFORCE_EAGER_BYTES) when it keeps an eager ring, so that it may
  // send small messages before their buffer's descriptor; 0: it sends nothing unsolicited. The
  // receiver times its descriptors by it (RecvComm::UnsolicitedPossible): assuming its own setting,
  // a receiver whose sender ran with FLEXIFORCE_EAGER_BYTES=0 held the descriptor of every small
  // buffer up to FLEXIFORCE_ACK_DELAY_US (1 ms) while that sender waited for it.
  uint32_t eager_bytes;
  uint32_t checksum;
};
static_assert(sizeof(HelloFrame) == sizeof(FrameHeader), "HelloFrame is a view of the header");
static_assert(offsetof(HelloFrame, checksum) == offsetof(FrameHeader, checksum), "same checksum position");
static_assert(offsetof(HelloFrame, flags) == offsetof(FrameHeader, flags), "same flags position");

// Follows every hello. The MAC is HMAC-SHA256 under the connection key (plugin/hello_auth.h) over
// the 64 header bytes and the 32 bytes of this struct before `mac`.
struct HelloAuth {
  uint64_t nonce;    // first paths: the connection's nonce (the same on each); rejoins: fresh per attempt
  uint64_t counter;  // first paths: 0; rejoins: the sender's rejoin counter for the connection, from 1
  uint8_t reserved[16];
  uint8_t mac[32];
};
static_assert(sizeof(HelloAuth) == 64, "HelloAuth is a wire format");
static_assert(offsetof(HelloAuth, mac) == 32, "the MAC covers what precedes it");

// One posted receive buffer, published by the receiver.
struct RecvDescriptor {
  uint64_t seq;        // the message sequence this buffer takes
  uint64_t capacity;   // bytes
  int32_t tag;
  uint16_t group_n;    // buffers in this grouped receive (1..8)
  uint16_t group_idx;  // this buffer's place in it
  uint64_t addr;       // remote address for RDMA WRITE (0 on a stream)
  uint32_t keys[4];    // per-device remote keys (RDMA); 0 on a stream
};
static_assert(sizeof(RecvDescriptor) == 48, "RecvDescriptor is a wire format");

struct AckMsg {
  uint64_t cum_done;     // every message with sequence < cum_done arrived whole
  uint32_t descriptors;  // RecvDescriptor entries that follow
  uint32_t reserved;
};
static_assert(sizeof(AckMsg) == 16, "AckMsg is a wire format");
constexpr uint32_t kMaxDescriptorsPerAck = 16;
constexpr uint32_t kMaxControlPayload = sizeof(AckMsg) + kMaxDescriptorsPerAck * sizeof(RecvDescriptor);

// kRouteDown: kDown, and the path was lost to a failure of its route (IsRouteFailure: unreachable,
// no acknowledgement), which the other end records for its own paths on that route. It
// also goes sender -> receiver, for a stream path as well (there it only ends the receiver's end). A
// peer that predates it ignores the event (both ends of a path check event values they act on).
enum class PathEvent : uint16_t { kDown = 1, kNicDegraded = 2, kNicRecovered = 3, kRouteDown = 4 };
struct PathEventMsg {
  uint16_t path;
  uint16_t event;       // PathEvent
  uint32_t generation;  // the path's incarnation: a report that crosses a reconnect is stale
};
static_assert(sizeof(PathEventMsg) == 8, "PathEventMsg is a wire format");

struct AbortMsg {
  int32_t reason;  // AbortReason
  uint32_t reserved;
  uint64_t seq;  // the message that caused it
};
static_assert(sizeof(AbortMsg) == 16, "AbortMsg is a wire format");

uint32_t HeaderChecksum(const FrameHeader& h);
void SealHeader(FrameHeader* h);  // fills magic, version and checksum

// A sealed hello header (length = sizeof(HelloAuth)); its payload is made by plugin/hello_auth.h.
FrameHeader MakeHello(uint64_t conn_id, int path_count, int path_index, uint64_t chunk_bytes, uint32_t sla_us,
                      uint16_t flags, uint32_t eager_bytes = 0);
HelloFrame AsHello(const FrameHeader& h);

// Returns an empty string when the header is well-formed, else what is wrong with it. Control
// payload sizes are checked here too (exact per type), so a peer cannot make us buffer more.
std::string ValidateHeader(const FrameHeader& h);

}  // namespace ff
