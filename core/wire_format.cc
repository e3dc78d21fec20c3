// Frame header sealing and validation.
#include "core/wire_format.h"

#include <cstring>

namespace ff {

uint32_t HeaderChecksum(const FrameHeader& h) {
  static_assert(offsetof(FrameHeader, checksum) == 60 && sizeof(FrameHeader) == 64, "the checksum is the last word");
  uint64_t words[8];
  std::memcpy(words, &h, sizeof(h));
  words[7] &= 0xffffffffull;  // bytes 56-59 (reserved) are covered; 60-63 are the checksum itself
  // Per 8-byte word: xor in, multiply by an odd constant (a bijection that carries each bit upward),
  // then fold the high half down, so a change anywhere in the word reaches every later bit and two
  // changes in different words cannot cancel through the top bit alone.
  uint64_t x = 0x243f6a8885a308d3ull;
  for (uint64_t w : words) {
    x = (x ^ w) * 0x9e3779b97f4a7c15ull;
    x ^= x >> 32;
  }
  return static_cast<uint32_t>(x ^ (x >> 29));
}

void SealHeader(FrameHeader* h) {
  h->magic = kFrameMagic;
  h->version = kWireVersion;
  h->checksum = HeaderChecksum(*h);
}

FrameHeader MakeHello(uint64_t conn_id, int path_count, int path_index, uint64_t chunk_bytes, uint32_t sla_us,
                      uint16_t flags, uint32_t eager_bytes) {
  HelloFrame hf{};
  hf.type = static_cast<uint8_t>(FrameType::kHello);
  hf.path_unused = static_cast<uint16_t>(path_index);
  hf.path_index = path_index;
  hf.length = sizeof(HelloAuth);
  hf.conn_id = conn_id;
  hf.path_count = static_cast<uint64_t>(path_count);
  hf.chunk_bytes = chunk_bytes;
  hf.sla_us = sla_us;
  hf.flags = flags;
  hf.eager_bytes = eager_bytes;
  FrameHeader h;
  std::memcpy(&h, &hf, sizeof(h));
  SealHeader(&h);
  return h;
}

HelloFrame AsHello(const FrameHeader& h) {
  HelloFrame hf;
  std::memcpy(&hf, &h, sizeof(hf));
  return hf;
}

std::string ValidateHeader(const FrameHeader& h) {
  if (h.magic != kFrameMagic) return "bad magic";
  if (h.version != kWireVersion)
    return "unsupported wire version " + std::to_string(h.version) + " (this plugin speaks " +
           std::to_string(kWireVersion) + "; both ends must run the same FlexiForce release)";
  if (h.checksum != HeaderChecksum(h)) return "header checksum mismatch";
  auto exact = [&](uint32_t want) -> std::string {
    if (h.length == want) return {};
    return "control frame type " + std::to_string(h.type) + " with " + std::to_string(h.length) +
           " payload bytes; expected " + std::to_string(want);
  };
  switch (static_cast<FrameType>(h.type)) {
    case FrameType::kData:
      if (h.total > kMaxMessageBytes) return "message size " + std::to_string(h.total) + " beyond the limit";
      if (h.length > kMaxFramePayload) return "frame payload " + std::to_string(h.length) + " beyond the limit";
      if (h.offset > h.total || h.length > h.total - h.offset)
        return "frame [" + std::to_string(h.offset) + ", +" + std::to_string(h.length) + ") outside message of " +
               std::to_string(h.total) + " bytes";
      return {};
    case FrameType::kAck:
      if (h.length < sizeof(AckMsg) || h.length > kMaxControlPayload ||
          (h.length - sizeof(AckMsg)) % sizeof(RecvDescriptor) != 0)
        return "acknowledgement with " + std::to_string(h.length) + " payload bytes; expected 16 + 48 x (0.." +
               std::to_string(kMaxDescriptorsPerAck) + ")";
      return {};
    case FrameType::kHello:
      return exact(sizeof(HelloAuth));
    case FrameType::kAckRequest:
      return exact(0);
    case FrameType::kAbort:
      return exact(sizeof(AbortMsg));
    case FrameType::kReconnectInfo:
      return exact(32);
    case FrameType::kPathEvent:
      return exact(sizeof(PathEventMsg));
  }
  return "unknown frame type " + std::to_string(h.type);
}

}  // namespace ff
