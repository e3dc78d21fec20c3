// One path of a communicator over a byte stream: a ring of outgoing frames and an incoming frame parser.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>

#include "plugin/byte_stream.h"
#include "plugin/wire_format.h"

namespace ff {

class StreamPath;

enum class HeaderVerdict { kAccept, kStall, kReject };

// Receives parsed frames; implemented by the send and receive communicators.
class FrameSink {
 public:
  virtual ~FrameSink() = default;
  // `h` is validated. Set *dest to where the payload goes (nullptr discards it). kStall leaves the
  // frame in the stream until the sink can place it; kReject is a protocol error (sink keeps the reason).
  virtual HeaderVerdict OnHeader(StreamPath& path, const FrameHeader& h, char** dest) = 0;
  virtual void OnFrameComplete(StreamPath& path, const FrameHeader& h) = 0;
};

enum class PumpResult { kIdle, kStalled, kClosed, kIoError, kBadFrame, kRejected };

class StreamPath {
 public:
  static constexpr int kTxRing = 128;
  static constexpr size_t kStagingBytes = 256 * 1024;
  static constexpr size_t kDirectReadMin = 16 * 1024;

  StreamPath(int index, std::unique_ptr<ByteStream> stream);

  int index() const { return index_; }
  bool alive() const { return alive_; }
  void MarkDead() { alive_ = false; }
  // A draining path is alive (it finishes what it holds, carries acks) but takes no new chunks.
  bool draining() const { return draining_; }
  void SetDraining(bool d) { draining_ = d; }
  const ByteStream& stream() const { return *stream_; }

  // Outgoing. Frames reference their payload until fully sent; the caller keeps it alive.
  bool CanQueue() const { return tx_count_ < kTxRing; }
  void Queue(const FrameHeader& sealed, const char* payload);
  int queued_frames() const { return tx_count_; }
  uint64_t queued_payload_bytes() const { return tx_payload_bytes_; }
  int queued_data_frames() const { return tx_data_frames_; }
  // Writes as much as the socket takes; false on an I/O error (errno set).
  bool Flush();
  void DropQueued();  // a dead path's frames are re-sent elsewhere by the communicator
  // Resets the TCP connection and drops what the kernel still holds for it, so a path declared dead
  // can never deliver a stale half-frame later (when its link comes back) into a reused buffer.
  void Abort();
  // The rest of the frame now being received is dropped: its chunk already arrived on another path.
  void DiscardCurrentPayload() { rx_dest_ = nullptr; }
  // Offset of the data frame now being received (valid while its payload is incomplete).
  bool receiving_payload() const { return have_header_; }

  // Incoming: parses frames and hands them to `sink` until the stream would block or the sink stalls.
  PumpResult PumpRx(FrameSink& sink);
  const std::string& rx_error() const { return rx_error_; }
  uint64_t bytes_sent() const { return bytes_sent_; }
  uint64_t bytes_received() const { return bytes_received_; }
  int last_errno() const { return last_errno_; }
  // Bytes the kernel still holds for this stream, unsent or unacknowledged by the peer (-1: unknown).
  int64_t KernelUnackedBytes() const;
  // One line of state for "stuck communicator" diagnostics.
  std::string DebugState() const;

 private:
  struct TxFrame {
    FrameHeader hdr;
    const char* payload;
    uint32_t sent;  // bytes of header+payload already written
  };

  bool FillStaging(PumpResult* result);

  int index_;
  bool alive_ = true;
  bool draining_ = false;
  std::unique_ptr<ByteStream> stream_;

  std::array<TxFrame, kTxRing> tx_{};
  int tx_head_ = 0;
  int tx_count_ = 0;
  int tx_data_frames_ = 0;
  uint64_t tx_payload_bytes_ = 0;

  std::unique_ptr<char[]> staging_;
  size_t rpos_ = 0;
  size_t wpos_ = 0;
  bool have_header_ = false;
  FrameHeader rx_hdr_{};
  char* rx_dest_ = nullptr;
  uint32_t rx_got_ = 0;
  std::string rx_error_;
  int last_errno_ = 0;
  uint64_t bytes_sent_ = 0;
  uint64_t bytes_received_ = 0;
};

}  // namespace ff
