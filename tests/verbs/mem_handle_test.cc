// NCCL's memory handle on the data path (core/mem_handle.h): what it covers, the keys it holds per
// registration domain, and an RdmaPath taking the payload's local key from it (no cache lookup, no
// reference) where it covers the payload and names this device's cache - and looking the payload
// up in the cache otherwise.
#include "core/mem_handle.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "tests/verbs/fake_verbs.h"
#include "verbs/rdma_path.h"

namespace ff::verbs {
namespace {

TEST(MemHandle, CoversExactlyTheRegisteredBytes) {
  std::vector<char> buf(4096);
  MemHandle m;
  m.data = buf.data() + 100;
  m.size = 1000;
  EXPECT_TRUE(m.Covers(buf.data() + 100, 1000));
  EXPECT_TRUE(m.Covers(buf.data() + 600, 500));
  EXPECT_TRUE(m.Covers(buf.data() + 1100, 0));
  EXPECT_FALSE(m.Covers(buf.data() + 99, 10)) << "starts before";
  EXPECT_FALSE(m.Covers(buf.data() + 600, 501)) << "ends after";
  EXPECT_FALSE(m.Covers(buf.data() + 100, ~uint64_t{0})) << "a length that would wrap";
  MemHandle none;
  EXPECT_FALSE(none.Covers(buf.data(), 1));
}

TEST(MemHandle, KeysAreFoundByDomain) {
  int a = 0, b = 0, c = 0;
  MemHandle m;
  m.keys[0] = MemKey{&a, 1, 2};
  m.keys[1] = MemKey{&b, 3, 4};
  ASSERT_NE(m.For(&b), nullptr);
  EXPECT_EQ(m.For(&b)->lkey, 3u);
  EXPECT_EQ(m.For(&c), nullptr);
  EXPECT_EQ(m.For(nullptr), nullptr);
}

class RdmaPathKeys : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(OpenRdmaDevice(fake_.loader(), "rxe0", 1, 0, &dev_).ok());
    ASSERT_TRUE(RdmaPath::Create(0, *dev_, RdmaPathOptions{}, &path_).ok());
    RdmaEndpoint remote;
    remote.qpn = 0x777;
    remote.mtu = IBV_MTU_1024;
    ASSERT_TRUE(path_->Connect(remote).ok());
    dest_.addr = 0x7f0000000000;
    dest_.keys[0] = 0x4242;
  }
  // Posts one 4 KiB chunk at buf_ + 512 and returns the local key its write carried.
  uint32_t PostChunk(const MemHandle* mem) {
    FrameHeader h{};
    h.type = static_cast<uint8_t>(FrameType::kData);
    h.length = 4096;
    h.seq = seq_;
    h.total = 4096;
    h.flags = kDataFlagAckNow;
    SealHeader(&h);
    path_->QueueData(h, buf_.data() + 512, dest_, mem);
    EXPECT_TRUE(path_->Flush());
    ++seq_;
    ibv_send_wr wr{};
    ibv_sge sge{};
    fake_.LastSendWr(&wr, &sge);
    EXPECT_EQ(wr.opcode, IBV_WR_RDMA_WRITE_WITH_IMM);
    EXPECT_EQ(wr.wr.rdma.rkey, 0x4242u);
    EXPECT_EQ(sge.addr, reinterpret_cast<uintptr_t>(buf_.data() + 512));
    return sge.lkey;
  }

  testing::FakeVerbs fake_{"rxe0=A"};
  std::unique_ptr<RdmaDevice> dev_;
  std::unique_ptr<RdmaPath> path_;
  RecvDescriptor dest_{};
  std::vector<char> buf_ = std::vector<char>(16384);
  uint64_t seq_ = 0;
};

TEST_F(RdmaPathKeys, TheHandlesLocalKeyIsUsedAndNothingIsLookedUp) {
  MemHandle m;
  m.data = buf_.data();
  m.size = buf_.size();
  m.keys[1] = MemKey{dev_->mrs.get(), 0xabc, 0xdef};
  EXPECT_EQ(PostChunk(&m), 0xabcu);
  EXPECT_EQ(dev_->mrs->entries(), 0u) << "no registration looked up or held for the write";
}

TEST_F(RdmaPathKeys, WithoutAUsableHandleThePayloadIsLookedUpAndHeldUntilItsCompletion) {
  EXPECT_NE(PostChunk(nullptr), 0xabcu);
  EXPECT_EQ(dev_->mrs->entries(), 1u) << "the payload's registration is held while the write is posted";

  int other_domain = 0;
  MemHandle elsewhere;  // another port's registration: its keys mean nothing on this device
  elsewhere.data = buf_.data();
  elsewhere.size = buf_.size();
  elsewhere.keys[0] = MemKey{&other_domain, 0xabc, 0xdef};
  EXPECT_NE(PostChunk(&elsewhere), 0xabcu);

  MemHandle short_one;  // does not cover the payload
  short_one.data = buf_.data();
  short_one.size = 1024;
  short_one.keys[0] = MemKey{dev_->mrs.get(), 0xabc, 0xdef};
  EXPECT_NE(PostChunk(&short_one), 0xabcu);
  EXPECT_EQ(dev_->mrs->entries(), 1u) << "the three lookups share one cached registration";
}

}  // namespace
}  // namespace ff::verbs
