// TCP's implementation of the communicator's Path: a framed byte stream (a ring of outgoing frames and an
// incoming frame parser) over one connected socket.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>

#include "core/path.h"
#include "tcp/byte_stream.h"

namespace ff {

class StreamPath final : public Path {
 public:
  static constexpr int kTxRing = 128;
  // The most one write hands the kernel. Linux's tcp_sendmsg stops after every 16 new socket buffers
  // of one write (64 KiB each under segmentation offload and on loopback: 1 MiB) to process the
  // acknowledgements that arrived meanwhile, and on loopback that processing runs the receiver's
  // stack for the data it lets out, inside the write. Two queued 512 KiB chunks made 1 MiB writes
  // that paid it on every write: a 4 MiB stream over two paths ran at 5.8-6.0 GB/s, writes capped at
  // 15 buffers' worth at 7.8-7.9 (capped at 512 KiB: 5.3, twice the system calls). Over a wire the
  // acknowledgements are processed at the end of each write instead, about as often.
  static constexpr size_t kMaxWriteBytes = 15 * 64 * 1024;
  static constexpr size_t kStagingBytes = 256 * 1024;
  static constexpr size_t kDirectReadMin = 16 * 1024;
  // After a payload this large the next staging read takes one header only (header_only_read_). At
  // 16-32 KiB the extra read per frame cost more than the copy it saves (streaming 16 KiB messages
  // fell from 4.0 to 2.5 GB/s; 16-32 KiB round trips +3 us); striped 512 KiB chunks gained 20-40%.
  // At 64 KiB streams were even and round trips 6-13% faster (the payload was read into staging and
  // copied from there: 64 KiB a message); it was 128 KiB before.
  static constexpr size_t kHeaderFirstMin = 64 * 1024;
  // Frames one Poll call delivers at most: a peer that floods small control frames cannot pin the
  // caller's test() (NCCL's proxy thread serves every communicator); the rest waits for the next call.
  static constexpr int kMaxFramesPerPoll = 256;
  // Lone receives (HintLoneReceive): a staging read peeks at most this much and leaves it in the
  // socket until the next read drops it (Skip). A receiving kernel acknowledges every second small
  // segment inside the read that empties its socket - on a connection that carries data one way
  // (NCCL's send and receive connections), a bare ACK on the critical path of every other
  // message. Peeked, the bytes are consumed by the next read, after the caller's reply has left.
  // More than this in one peek is a stream, not a ping-pong: it is consumed at once.
  static constexpr size_t kPeekMaxBytes = 4096;
  // Where peeks continue behind the last one (ByteStream::EnablePeekOffset), peeked bytes are dropped
  // once this many wait in the socket, or after this many reads in a row found nothing new.
  static constexpr size_t kPeekKeepBytes = 2048;
  static constexpr int kIdlePeeksBeforeConsume = 16;

  // staging_bytes: the read-ahead buffer for headers and small payloads (kStagingBytes for every real
  // connection; at least one header, kMinStagingBytes). Smaller only where a caller builds many short-lived
  // paths and wants the buffer's boundaries exercised: the stream fuzzer.
  static constexpr size_t kMinStagingBytes = sizeof(FrameHeader);
  StreamPath(int index, std::unique_ptr<ByteStream> stream, size_t staging_bytes = kStagingBytes);

  const ByteStream& stream() const { return *stream_; }

  bool CanQueue() const override { return tx_count_ < kTxRing; }
  // A data frame's payload is referenced until sent; a control frame's (at most kMaxControlPayload
  // bytes) is copied here, so the caller may build it on the stack.
  void Queue(const FrameHeader& sealed, const char* payload) override;
  int queued_frames() const override { return tx_count_; }
  uint64_t queued_payload_bytes() const override { return tx_payload_bytes_; }
  int queued_data_frames() const override { return tx_data_frames_; }
  bool PayloadFreeAfterFlush() const override { return true; }
  // Writes as much as the socket takes; false on an I/O error (errno set).
  bool Flush() override;
  void DropQueued() override;
  // Resets the TCP connection and drops what the kernel still holds for it, so a path declared dead
  // can never deliver a stale half-frame later (when its link comes back) into a reused buffer.
  void Fence() override;
  void DiscardCurrentPayload() override { rx_dest_ = nullptr; }
  bool receiving_payload() const { return have_header_; }
  // Delivers at most kMaxFramesPerPoll frames; kIdle then, even if more are staged.
  PumpResult Poll(FrameSink& sink) override;
  bool LastPollEmpty() const override { return last_poll_empty_; }
  void HintLoneReceive(bool lone) override { lone_receive_ = lone; }
  // Bytes a staging read peeked at and the socket still holds (the next read drops them first).
  size_t peeked_bytes() const { return peeked_; }
  const std::string& rx_error() const override { return rx_error_; }
  int last_errno() const override { return last_errno_; }
  uint64_t bytes_sent() const { return bytes_sent_; }
  uint64_t bytes_received() const { return bytes_received_; }
  // Bytes the kernel still holds for this stream, unsent or unacknowledged by the peer (SIOCOUTQ).
  int64_t InFlightBytes() const override;
  // SIOCOUTQ at most once per kInFlightRefreshNs; in between, that reading plus the bytes written since.
  int64_t InFlightEstimate(uint64_t now_ns) const override;
  // Two reads per 1 MiB message (one per path) cost a striped stream 5-9% of its throughput on
  // loopback; a chunk's choice of path does not need a fresher figure than this.
  static constexpr uint64_t kInFlightRefreshNs = 200'000;
  PathSample Sample() const override;  // TCP_INFO
  int PendingError() const override;   // SO_ERROR: ICMP errors and resets, long before TCP gives up
  int LocalIfindex() const override;
  std::string Describe() const override { return stream_->Describe(); }
  std::string DebugState() const override;

 private:
  struct TxFrame {
    FrameHeader hdr;
    const char* payload;
    uint32_t sent;  // bytes of header+payload already written
  };

  // One read into staging (a header's worth only after a large payload); *drained: it returned less
  // than it asked for.
  bool FillStaging(PumpResult* result, bool* drained);
  // Drops what the last staging read only peeked at; false (with *result) when the stream failed.
  bool ConsumePeeked(PumpResult* result);
  PumpResult PollFrames(FrameSink& sink, int* frames);

  std::unique_ptr<ByteStream> stream_;
  mutable int ifindex_ = -1;  // resolved on first use

  std::array<TxFrame, kTxRing> tx_{};
  std::unique_ptr<char[]> ctl_store_;  // kTxRing slots of kMaxControlPayload: control payload copies
  int tx_head_ = 0;
  int tx_count_ = 0;
  int tx_data_frames_ = 0;
  uint64_t tx_payload_bytes_ = 0;

  size_t staging_bytes_;
  std::unique_ptr<char[]> staging_;
  size_t rpos_ = 0;
  size_t wpos_ = 0;
  bool lone_receive_ = false;
  size_t peeked_ = 0;
  enum class PeekOffset : uint8_t { kUnknown, kOn, kOff };
  PeekOffset peek_offset_ = PeekOffset::kUnknown;
  int idle_peeks_ = 0;  // reads in a row that found nothing behind the peeked bytes
  bool have_header_ = false;
  // The last frame's payload was large (kHeaderFirstMin or more): the next staging read asks for one
  // header only. A stream of large chunks mostly continues with another, and whatever of its payload
  // a full staging read took in would be copied once more.
  bool header_only_read_ = false;
  FrameHeader rx_hdr_{};
  char* rx_dest_ = nullptr;
  uint32_t rx_got_ = 0;
  std::string rx_error_;
  int last_errno_ = 0;
  uint64_t bytes_sent_ = 0;
  uint64_t bytes_received_ = 0;
  // The last SIOCOUTQ reading InFlightEstimate took: its value, bytes_sent_ then, and when (0: none).
  mutable int64_t est_base_ = 0;
  mutable uint64_t est_sent_at_read_ = 0;
  mutable uint64_t est_read_ns_ = 0;
  bool last_poll_empty_ = false;
};

// TCP_INFO of one socket as a neutral path sample (invalid when fd < 0 or the call fails).
PathSample ProbeTcp(int fd);

}  // namespace ff
