// A quiet Poll() (counters read, nothing changed) must not allocate: it runs on NCCL's proxy thread.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <new>

#include "health/nic_health_monitor.h"
#include "tests/pcie/fixture_tree.h"

namespace {
std::atomic<bool> g_counting{false};
std::atomic<uint64_t> g_allocations{0};
}  // namespace

// The replacement pair below is malloc/free-based throughout; GCC cannot see that they match.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void* operator new(size_t n) {
  if (g_counting.load(std::memory_order_relaxed)) g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
#pragma GCC diagnostic pop

namespace ff::health {
namespace {

using namespace std::chrono_literals;

class FakeClock final : public Clock {
 public:
  std::chrono::nanoseconds Now() const override { return now; }
  std::chrono::nanoseconds now{1s};
};

TEST(NicHealthMonitorAllocation, QuietPollAllocatesNothing) {
  ff::testing::FixtureTree t;
  t.AddPciDevice("0000:00:01.0", "0000:3b:00.0");
  t.AddNetInterface("eth0", "0000:00:01.0", "0000:3b:00.0");
  const std::string dev = t.PciDir("0000:00:01.0", "0000:3b:00.0");
  t.Write(dev + "/current_link_width", "16\n");
  t.Write(dev + "/max_link_width", "16\n");
  t.Write(dev + "/current_link_speed", "16.0 GT/s PCIe\n");
  t.Write(dev + "/max_link_speed", "16.0 GT/s PCIe\n");
  t.Write(dev + "/aer_dev_correctable", "RxErr 0\nTOTAL_ERR_COR 0\n");
  t.Write("sys/class/net/eth0/statistics/rx_packets", "100\n");
  t.Write("sys/class/net/eth0/statistics/rx_crc_errors", "0\n");
  t.Mkdir("sys/class/net/eth0/device/infiniband/mlx5_0");
  t.Write("sys/class/infiniband/mlx5_0/ports/1/counters/symbol_error", "0\n");

  FakeClock clock;
  NicHealthConfig c;
  c.root = t.root();
  NicHealthMonitor m(c, clock);
  m.Watch("eth0");
  m.Watch("lo");  // not in the fixture: present as "no such interface"
  m.Poll();
  clock.now += 100ms;
  m.Poll();  // warm-up

  g_allocations = 0;
  g_counting = true;
  for (int i = 0; i < 20; ++i) {
    clock.now += 100ms;
    auto changes = m.Poll();
    EXPECT_TRUE(changes.empty());
    (void)m.IsDegraded("eth0");
  }
  g_counting = false;
  EXPECT_EQ(m.samples(), 22u);
  EXPECT_EQ(g_allocations.load(), 0u);

  // Control: the counter does see a Poll that has something to say (a detection's reason).
  t.Write("sys/class/infiniband/mlx5_0/ports/1/counters/symbol_error", "5\n");
  clock.now += 100ms;
  g_counting = true;
  m.Poll();
  g_counting = false;
  EXPECT_GT(g_allocations.load(), 0u);
}

}  // namespace
}  // namespace ff::health
