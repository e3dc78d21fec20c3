// GPU memory over verbs, on the fake libibverbs and fixture trees: which memory a device reports
// (peermem module, DMA-BUF probe), GPU registrations in the cache (exact ranges, remote read, DMA-BUF
// arguments, address lookups sharing them), and the loopback flush queue pair's RDMA READ.
#include "verbs/gpu_memory.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "tests/verbs/fake_verbs.h"
#include "verbs/mr_cache.h"
#include "verbs/rdma_path.h"

namespace ff::verbs {
namespace {

std::unique_ptr<RdmaDevice> Open(const testing::FakeVerbs& fake, const char* name) {
  std::unique_ptr<RdmaDevice> dev;
  Status s = OpenRdmaDevice(fake.loader(), name, 1, 0, &dev);
  EXPECT_TRUE(s.ok()) << s.message();
  return dev;
}

class TempRoot {
 public:
  TempRoot() {
    char tmpl[] = "/tmp/ff-gpu-XXXXXX";
    dir_ = mkdtemp(tmpl);
  }
  ~TempRoot() { (void)system(("rm -rf '" + dir_ + "'").c_str()); }
  void AddFile(const std::string& rel) {
    (void)system(("mkdir -p \"$(dirname '" + dir_ + "/" + rel + "')\"").c_str());
    std::ofstream(dir_ + "/" + rel) << "1.0\n";
  }
  const std::string& path() const { return dir_; }

 private:
  std::string dir_;
};

TEST(GpuMemory, PeerMemIsSeenThroughAnyOfItsModuleNames) {
  for (const char* f : {"sys/kernel/mm/memory_peers/nv_mem/version", "sys/module/nvidia_peermem/version",
                        "sys/module/nv_peer_mem/version"}) {
    TempRoot root;
    EXPECT_FALSE(PeerMemLoaded(root.path())) << "an empty tree has no peermem";
    root.AddFile(f);
    EXPECT_TRUE(PeerMemLoaded(root.path())) << f;
  }
  TempRoot other;
  other.AddFile("sys/module/nvidia/version");  // the GPU driver alone does not let a NIC pin GPU memory
  EXPECT_FALSE(PeerMemLoaded(other.path()));
}

TEST(GpuMemory, DmabufSupportFollowsTheLibraryAndTheProvidersAnswer) {
  {
    testing::FakeVerbs fake("rxe0=A");  // predates ibv_reg_dmabuf_mr
    auto dev = Open(fake, "rxe0");
    ASSERT_TRUE(dev);
    EXPECT_FALSE(DmabufSupported(fake.loader(), dev->pd.get()));
  }
  testing::FakeVerbs fake("mlx5_0=A", FF_FAKE_IBVERBS_DMABUF_PATH);
  auto dev = Open(fake, "mlx5_0");
  ASSERT_TRUE(dev);
  EXPECT_TRUE(DmabufSupported(fake.loader(), dev->pd.get())) << "EBADF for fd -1: implemented";
  for (int err : {EOPNOTSUPP, EPROTONOSUPPORT}) {
    fake.SetDmabufProbeErrno(err);
    EXPECT_FALSE(DmabufSupported(fake.loader(), dev->pd.get())) << "errno " << err << ": not implemented";
  }
  EXPECT_FALSE(DmabufSupported(fake.loader(), nullptr));
}

TEST(GpuMemory, DmabufRegistrationIsExactWithRemoteReadAndServesAddressLookups) {
  testing::FakeVerbs fake("mlx5_0=A", FF_FAKE_IBVERBS_DMABUF_PATH);
  auto dev = Open(fake, "mlx5_0");
  ASSERT_TRUE(dev);
  const uintptr_t gpu = 0x7f0000001234;  // not page-aligned: a DMA-BUF range is registered as given
  MrRef r;
  Status s = dev->mrs->AcquireDevice(reinterpret_cast<void*>(gpu), 1 << 20, 42, 0x3000, &r);
  ASSERT_TRUE(s.ok()) << s.message();
  testing::FakeVerbs::DmabufReg reg;
  ASSERT_TRUE(fake.LastDmabuf(&reg));
  EXPECT_EQ(reg.fd, 42);
  EXPECT_EQ(reg.offset, 0x3000u);
  EXPECT_EQ(reg.length, size_t{1} << 20);
  EXPECT_EQ(reg.iova, gpu) << "mapped at the buffer's own address: the peer writes to it by that address";
  EXPECT_EQ(reg.access, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
  EXPECT_EQ(r.start, gpu);
  EXPECT_EQ(r.length, size_t{1} << 20);

  // The data path looks buffers up by address (a receive inside the region, a send's payload): the
  // DMA-BUF registration serves them, nothing is registered by address (which would need peermem).
  fake.ResetLog();
  MrRef inner;
  ASSERT_TRUE(dev->mrs->Acquire(reinterpret_cast<void*>(gpu + 4096), 65536, &inner).ok());
  EXPECT_EQ(inner.id, r.id);
  EXPECT_EQ(inner.handle.rkey, r.handle.rkey);
  EXPECT_EQ(fake.log().find("reg_mr"), std::string::npos) << fake.log();
  ASSERT_TRUE(dev->mrs->Release(inner).ok());
  ASSERT_TRUE(dev->mrs->Release(r).ok());
  EXPECT_EQ(dev->mrs->entries(), 0u);
  EXPECT_NE(fake.log().find("dereg_mr"), std::string::npos);

  // A failed registration names the range, the fd and the offset.
  fake.FailNext("ibv_reg_dmabuf_mr", EINVAL);
  s = dev->mrs->AcquireDevice(reinterpret_cast<void*>(gpu), 4096, 7, 0, &r);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("DMA-BUF fd 7"), std::string::npos) << s.message();
  EXPECT_EQ(dev->mrs->entries(), 0u);
}

TEST(GpuMemory, CudaRegistrationByAddressAddsRemoteReadAndOldLibrariesRefuseDmabuf) {
  testing::FakeVerbs fake("rxe0=A");
  auto dev = Open(fake, "rxe0");
  ASSERT_TRUE(dev);
  std::vector<char> buf(8192);
  MrRef r;
  Status s = dev->mrs->AcquireDevice(buf.data() + 100, 5000, -1, 0, &r);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(fake.LastRegAccess(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
  EXPECT_EQ(r.start, reinterpret_cast<uintptr_t>(buf.data() + 100)) << "exact, not page-rounded";
  EXPECT_EQ(r.length, 5000u);
  ASSERT_TRUE(dev->mrs->Release(r).ok());

  // Host buffers keep local + remote write only: no peer may read them.
  ASSERT_TRUE(dev->mrs->Acquire(buf.data(), 100, &r).ok());
  EXPECT_EQ(fake.LastRegAccess(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  ASSERT_TRUE(dev->mrs->Release(r).ok());

  s = dev->mrs->AcquireDevice(buf.data(), 4096, 9, 0, &r);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("predates it"), std::string::npos) << s.message();
  s = dev->mrs->AcquireDevice(nullptr, 4096, -1, 0, &r);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("non-NULL"), std::string::npos) << s.message();
}

TEST(GpuMemory, FlushQpIsALoopbackQueuePairThatReadsOneByte) {
  testing::FakeVerbs fake("rxe0=A");
  auto dev = Open(fake, "rxe0");
  ASSERT_TRUE(dev);
  std::unique_ptr<FlushQp> f;
  Status s = FlushQp::Create(*dev, &f);
  ASSERT_TRUE(s.ok()) << s.message();
  ibv_qp_attr attr{};
  int mask = 0;
  ASSERT_TRUE(fake.LastModify(IBV_QPS_RTR, &attr, &mask));
  EXPECT_EQ(attr.dest_qp_num, f->qpn()) << "connected to itself";
  EXPECT_GE(attr.max_dest_rd_atomic, 1);
  const uint32_t rq_psn = attr.rq_psn;
  ASSERT_TRUE(fake.LastModify(IBV_QPS_RTS, &attr, &mask));
  EXPECT_EQ(attr.sq_psn, rq_psn) << "its own send PSN is what it expects to receive";
  EXPECT_GE(attr.max_rd_atomic, 1);

  int slot = -1;
  Status err;
  ASSERT_TRUE(f->Post(0x7f00deadb000, 0x1234, &slot, &err)) << err.message();
  ibv_send_wr wr{};
  ibv_sge sge{};
  fake.LastSendWr(&wr, &sge);
  EXPECT_EQ(wr.opcode, IBV_WR_RDMA_READ);
  EXPECT_EQ(wr.wr.rdma.remote_addr, 0x7f00deadb000u);
  EXPECT_EQ(wr.wr.rdma.rkey, 0x1234u);
  EXPECT_EQ(sge.length, 1u);
  EXPECT_TRUE(wr.send_flags & IBV_SEND_SIGNALED);

  // Not complete until its completion is polled.
  bool done = true;
  ASSERT_TRUE(f->Test(slot, &done).ok());
  EXPECT_FALSE(done);
  EXPECT_EQ(f->busy(), 1);

  // With completions on: done once, then the slot is free; testing it again is misuse.
  fake.CompleteSends(IBV_WC_SUCCESS);
  int slot2 = -1;
  ASSERT_TRUE(f->Post(0x7f00deadc000, 0x1234, &slot2, &err));
  EXPECT_NE(slot2, slot);
  ASSERT_TRUE(f->Test(slot2, &done).ok());
  EXPECT_TRUE(done);
  EXPECT_FALSE(f->Test(slot2, &done).ok());
  EXPECT_EQ(f->busy(), 1) << "the first read is still outstanding";

  // Every slot busy: a retry-later answer, no error.
  fake.CompleteSends(-1);
  int n = 0;
  while (f->Post(0x1000, 1, &slot2, &err)) ++n;
  EXPECT_EQ(n, FlushQp::kSlots - 1);
  EXPECT_EQ(slot2, -1);
  EXPECT_TRUE(err.ok()) << err.message();
}

TEST(GpuMemory, AFailedFlushReadIsAnErrorNamingTheDevice) {
  testing::FakeVerbs fake("rxe0=A");
  auto dev = Open(fake, "rxe0");
  ASSERT_TRUE(dev);
  std::unique_ptr<FlushQp> f;
  ASSERT_TRUE(FlushQp::Create(*dev, &f).ok());
  fake.CompleteSends(IBV_WC_REM_ACCESS_ERR);
  int slot = -1;
  Status err;
  ASSERT_TRUE(f->Post(0x1000, 99, &slot, &err));
  bool done = false;
  Status s = f->Test(slot, &done);
  EXPECT_TRUE(done);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("rxe0"), std::string::npos) << s.message();
  EXPECT_EQ(f->busy(), 0);
}

}  // namespace
}  // namespace ff::verbs
