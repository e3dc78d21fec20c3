// Frame header validation: every field a peer controls is checked before use.
#include "core/wire_format.h"

#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>

namespace ff {
namespace {

FrameHeader Data(uint64_t offset, uint32_t length, uint64_t total) {
  FrameHeader h{};
  h.type = static_cast<uint8_t>(FrameType::kData);
  h.offset = offset;
  h.length = length;
  h.total = total;
  SealHeader(&h);
  return h;
}

TEST(WireFormat, SealedDataHeaderValidates) { EXPECT_EQ(ValidateHeader(Data(0, 100, 100)), ""); }

TEST(WireFormat, AnyFlippedByteIsDetected) {
  for (size_t i = 0; i < sizeof(FrameHeader); ++i) {
    FrameHeader h = Data(4096, 4096, 1 << 20);
    reinterpret_cast<unsigned char*>(&h)[i] ^= 0x40;
    EXPECT_NE(ValidateHeader(h), "") << "byte " << i;
  }
}

// The checksum's own job (v5: 8 bytes at a time): any one or two flipped bits among the 60 covered
// bytes change it, wherever they are - the top bit of two different words included, which a plain
// multiply chain would let cancel - and so does a header cut short (zeros where the tail was).
TEST(WireFormat, AnyOneOrTwoFlippedBitsChangeTheChecksum) {
  FrameHeader base = Data(4096, 4096, 1 << 20);
  base.path = 1;  // every field non-zero, so a header cut short anywhere differs from the whole one
  base.tag = 7;
  base.seq = 12345;
  base.task_hash = 0x0123456789abcdefull;
  base.sla_us = 50;
  base.collective = 2;
  base.flags = 1;
  base.reserved = 0x5a5a5a5a;
  SealHeader(&base);
  ASSERT_EQ(ValidateHeader(base), "");
  const uint32_t sealed = base.checksum;
  constexpr size_t kBits = offsetof(FrameHeader, checksum) * 8;
  auto flip = [](FrameHeader* h, size_t bit) { reinterpret_cast<unsigned char*>(h)[bit / 8] ^= 1u << (bit % 8); };
  int undetected = 0;
  for (size_t i = 0; i < kBits; ++i) {
    FrameHeader one = base;
    flip(&one, i);
    if (HeaderChecksum(one) == sealed) ++undetected;
    for (size_t j = i + 1; j < kBits; ++j) {
      FrameHeader two = one;
      flip(&two, j);
      if (HeaderChecksum(two) == sealed) ++undetected;
    }
  }
  EXPECT_EQ(undetected, 0);
  for (size_t keep = 0; keep < offsetof(FrameHeader, checksum); ++keep) {
    FrameHeader cut{};
    std::memcpy(&cut, &base, keep);
    cut.checksum = sealed;
    EXPECT_NE(ValidateHeader(cut), "") << keep << " bytes kept";
  }
}

TEST(WireFormat, FrameOutsideItsMessageIsRejected) {
  EXPECT_NE(ValidateHeader(Data(90, 20, 100)), "");
  EXPECT_NE(ValidateHeader(Data(~uint64_t{0} - 5, 10, 100)), "");
  EXPECT_NE(ValidateHeader(Data(0, 10, kMaxMessageBytes + 1)), "");
}

TEST(WireFormat, ControlFrameWithPayloadAndUnknownTypeAreRejected) {
  FrameHeader h{};
  h.type = static_cast<uint8_t>(FrameType::kAck);
  h.length = 5;
  SealHeader(&h);
  EXPECT_NE(ValidateHeader(h), "");
  FrameHeader u{};
  u.type = 99;
  SealHeader(&u);
  EXPECT_NE(ValidateHeader(u).find("unknown frame type"), std::string::npos);
}

TEST(WireFormat, OtherVersionIsRejectedByName) {
  FrameHeader h = Data(0, 1, 1);
  h.version = 7;
  h.checksum = HeaderChecksum(h);
  EXPECT_NE(ValidateHeader(h).find("version"), std::string::npos);
}

}  // namespace
}  // namespace ff
