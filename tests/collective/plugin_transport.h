// Ring transport through the FlexiForce plugin's ncclNet v11 C ABI, called as NCCL's proxy calls it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tests/collective/profiler_driver.h"
#include "tests/collective/ring_transport.h"
#include "cli/plugin_loader.h"

namespace ff::collective {

// Whether to drive the plugin's ncclProfiler_v5 table too (kAuto: when the .so exports it).
enum class ProfilerMode { kAuto, kOn, kOff };

struct PluginTransportOptions {
  std::string plugin_path;
  int dev = 0;
  ProfilerMode profiler = ProfilerMode::kAuto;
  bool net_attr = true;  // call setNetAttr before each collective (false only to test attribution)
  int window = 8;        // steps in flight per direction
};

class PluginTransport : public RingTransport {
 public:
  // Loads the plugin; Connect() calls init/devices/getProperties and the profiler's init.
  PluginTransport(const PluginTransportOptions& opts, AbortContext& ctx);
  ~PluginTransport() override;

  std::string Describe() const override;
  void Connect(Rendezvous& rdv, int rank, int nranks) override;
  int RegisterBuffer(void* data, size_t bytes) override;
  void BeginCollective(const CollectiveCall& call) override;
  std::optional<RequestId> PostSend(int region, const void* data, size_t bytes) override;
  std::optional<RequestId> PostRecv(int region, void* data, size_t bytes) override;
  bool Test(RequestId request, size_t* bytes) override;
  void Close() override;

 private:
  // devices() and getProperties(): checks `dev_` and host-memory support, fills describe_.
  void SelectDevice();
  // Throws DriverError "plugin <call> returned <name> (<code>)" unless rc is ncclSuccess.
  void Require(ncclResult_t rc, const std::string& call) const;

  struct Region {
    void* send_mh = nullptr;  // registration on the send comm
    void* recv_mh = nullptr;  // registration on the receive comm
  };

  // A posted request and, with the profiler, the phandle it was posted with.
  struct InFlight {
    void* request;
    ProxyDir dir;
    void* phandle;
  };
  void Completed(void* request);

  AbortContext& ctx_;
  PluginTransportOptions opts_;
  std::unique_ptr<ff::testing::PluginLibrary> lib_;
  const ncclNet_v11_t* net_ = nullptr;
  int dev_ = 0;
  int rank_ = 0;
  int nranks_ = 0;
  std::unique_ptr<ProfilerDriver> profiler_;
  std::vector<InFlight> in_flight_;
  std::string describe_;
  void* net_ctx_ = nullptr;
  void* listen_comm_ = nullptr;
  void* send_comm_ = nullptr;
  void* recv_comm_ = nullptr;
  std::vector<Region> regions_;
  bool closed_ = false;
};

}  // namespace ff::collective
