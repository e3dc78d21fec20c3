// The receiver's descriptors and acknowledgements travel on whichever path is alive, so the sender
// can read an acknowledgement before the descriptor frame it followed. Nothing the receiver says in
// an order the network allows may leave the sender waiting: here the test plays the receiver with
// raw frames on socketpairs and delivers them in the awkward order.
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/send_comm.h"
#include "core/wire_format.h"
#include "tcp/byte_stream.h"
#include "tcp/socket.h"
#include "tcp/stream_path.h"
#include "tests/failover/socketpair_stream.h"

namespace ff {
namespace {


struct RawReceiver {
  std::unique_ptr<SendComm> send;
  std::vector<int> fds;  // the receiver's ends, one per path
  ~RawReceiver() {
    send.reset();
    for (int fd : fds) close(fd);
  }
};

void MakeSender(int npaths, RawReceiver* r) {
  const CommOptions o = testing::EagerOptions();
  std::vector<std::unique_ptr<Path>> paths;
  for (int i = 0; i < npaths; ++i) {
    int fds[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
    ASSERT_TRUE(tcp::SetNonBlocking(fds[0]).ok());
    paths.push_back(std::make_unique<StreamPath>(i, std::make_unique<testing::FdStream>(fds[0])));
    r->fds.push_back(fds[1]);
  }
  r->send = std::make_unique<SendComm>(std::move(paths), o, "raw receiver");
}

void WriteAck(int fd, int path, uint64_t cum_done, const std::vector<RecvDescriptor>& d) {
  FrameHeader h{};
  h.type = static_cast<uint8_t>(FrameType::kAck);
  h.path = static_cast<uint16_t>(path);
  h.length = static_cast<uint32_t>(sizeof(AckMsg) + d.size() * sizeof(RecvDescriptor));
  SealHeader(&h);
  AckMsg a{};
  a.cum_done = cum_done;
  a.descriptors = static_cast<uint32_t>(d.size());
  std::vector<char> frame(sizeof(h) + h.length);
  std::memcpy(frame.data(), &h, sizeof(h));
  std::memcpy(frame.data() + sizeof(h), &a, sizeof(a));
  if (!d.empty()) std::memcpy(frame.data() + sizeof(h) + sizeof(a), d.data(), d.size() * sizeof(RecvDescriptor));
  ASSERT_EQ(write(fd, frame.data(), frame.size()), static_cast<ssize_t>(frame.size()));
}

RecvDescriptor Desc(uint64_t seq, int tag, uint64_t capacity, int n, int idx) {
  RecvDescriptor d{};
  d.seq = seq;
  d.tag = tag;
  d.capacity = capacity;
  d.group_n = static_cast<uint16_t>(n);
  d.group_idx = static_cast<uint16_t>(idx);
  return d;
}

// Reads whatever the sender wrote on `fd` and reports whether a data frame of message `seq` was in it.
bool SawDataOf(int fd, uint64_t seq, std::vector<char>* pending) {
  char buf[65536];
  for (;;) {
    ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
    if (n <= 0) break;
    pending->insert(pending->end(), buf, buf + n);
  }
  size_t at = 0;
  bool seen = false;
  while (pending->size() - at >= sizeof(FrameHeader)) {
    FrameHeader h;
    std::memcpy(&h, pending->data() + at, sizeof(h));
    if (!ValidateHeader(h).empty()) return false;
    if (pending->size() - at - sizeof(h) < h.length) break;
    seen |= h.type == static_cast<uint8_t>(FrameType::kData) && h.seq == seq;
    at += sizeof(h) + h.length;
  }
  pending->erase(pending->begin(), pending->begin() + static_cast<std::ptrdiff_t>(at));
  return seen;
}

// A grouped receive of two (tags 6 and 5). The first message (tag 6, small) goes unsolicited; the
// receiver publishes the group's descriptors on path 0, then acknowledges message 0 on path 1 -
// and the sender reads path 1 first. The group's first descriptor now names an acknowledged
// message; the second message must still find its buffer.
TEST(DescriptorOrder, AcknowledgementReadBeforeTheGroupsDescriptorsStillMatchesTheRest) {
  RawReceiver r;
  MakeSender(2, &r);
  ASSERT_NE(r.send, nullptr);
  std::vector<char> small(100, 's'), large(1 << 20, 'L');
  SendRequest* a = nullptr;
  ASSERT_TRUE(r.send->Isend(small.data(), small.size(), 6, nullptr, &a).ok());
  ASSERT_NE(a, nullptr);
  SendRequest* b = nullptr;
  for (int i = 0; b == nullptr && i < 100; ++i) ASSERT_TRUE(r.send->Isend(large.data(), large.size(), 5, nullptr, &b).ok());
  ASSERT_NE(b, nullptr);
  std::vector<char> pending0, pending1;
  // The unsolicited message reaches the receiver on some path.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  bool got0 = false;
  while (!got0 && std::chrono::steady_clock::now() < deadline) {
    ASSERT_TRUE(r.send->Progress().ok()) << r.send->error().message();
    got0 = SawDataOf(r.fds[0], 0, &pending0) || SawDataOf(r.fds[1], 0, &pending1);
  }
  ASSERT_TRUE(got0) << "the small message did not go unsolicited";
  // Path 1's acknowledgement is read in the same pump round, before path 0's descriptor frame.
  WriteAck(r.fds[1], 1, 1, {});
  ASSERT_TRUE(r.send->Progress().ok()) << r.send->error().message();
  EXPECT_EQ(r.send->unacked_messages(), 1u);
  WriteAck(r.fds[0], 0, 0, {Desc(0, 6, 4096, 2, 0), Desc(1, 5, 2 << 20, 2, 1)});
  bool got1 = false;
  deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!got1 && std::chrono::steady_clock::now() < deadline) {
    ASSERT_TRUE(r.send->Progress().ok()) << r.send->error().message();
    got1 = SawDataOf(r.fds[0], 1, &pending0) || SawDataOf(r.fds[1], 1, &pending1);
  }
  EXPECT_TRUE(got1) << "message 1 never left: its group's descriptor for the acknowledged message 0 was dropped";
}

// A descriptor far behind the acknowledged point belongs to no group still owed: it is ignored, and
// does not overwrite a slot a later message needs.
TEST(DescriptorOrder, DescriptorsOfLongAcknowledgedMessagesAreIgnored) {
  RawReceiver r;
  MakeSender(1, &r);
  ASSERT_NE(r.send, nullptr);
  std::vector<char> msg(100, 'm');
  std::vector<char> pending;
  for (uint64_t i = 0; i < 20; ++i) {
    SendRequest* q = nullptr;
    ASSERT_TRUE(r.send->Isend(msg.data(), msg.size(), 1, nullptr, &q).ok());
    ASSERT_NE(q, nullptr);
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    bool got = false;
    while (!got && std::chrono::steady_clock::now() < deadline) {
      ASSERT_TRUE(r.send->Progress().ok());
      got = SawDataOf(r.fds[0], i, &pending);
    }
    ASSERT_TRUE(got);
    WriteAck(r.fds[0], 0, i + 1, {});
  }
  // A stale descriptor (seq 2, 18 behind) with a tag that matches nothing later: no failure.
  WriteAck(r.fds[0], 0, 20, {Desc(2, 99, 10, 1, 0)});
  SendRequest* q = nullptr;
  for (int i = 0; q == nullptr && i < 100; ++i) ASSERT_TRUE(r.send->Isend(msg.data(), msg.size(), 1, nullptr, &q).ok());
  ASSERT_TRUE(r.send->Progress().ok()) << r.send->error().message();
  EXPECT_EQ(r.send->unacked_messages(), 1u);
}

}  // namespace
}  // namespace ff
