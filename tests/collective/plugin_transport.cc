// PluginTransport: the ncclNet v11 call sequence (init, listen, connect/accept, regMr, isend/irecv/test, close).
#include "tests/collective/plugin_transport.h"

#include <sched.h>

#include <cstring>
#include <random>

namespace ff::collective {
namespace {

const char* ResultName(ncclResult_t rc) {
  switch (rc) {
    case ncclSuccess: return "ncclSuccess";
    case ncclUnhandledCudaError: return "ncclUnhandledCudaError";
    case ncclSystemError: return "ncclSystemError";
    case ncclInternalError: return "ncclInternalError";
    case ncclInvalidArgument: return "ncclInvalidArgument";
    case ncclInvalidUsage: return "ncclInvalidUsage";
    case ncclRemoteError: return "ncclRemoteError";
    case ncclInProgress: return "ncclInProgress";
  }
  return "unknown ncclResult_t";
}

// NCCL's algorithm and protocol ids (nccl_tuner.h): NCCL_ALGO_RING = 1, NCCL_PROTO_SIMPLE = 2.
constexpr uint32_t kAlgoRingBit = 1u << 1;
constexpr uint32_t kProtoSimpleBit = 1u << 2;

}  // namespace

PluginTransport::PluginTransport(const PluginTransportOptions& opts, AbortContext& ctx)
    : ctx_(ctx), opts_(opts), dev_(opts.dev) {
  const std::string& plugin_path = opts.plugin_path;
  // Only loads the library: NCCL calls init() before any other entry point, and init needs
  // the communicator id that the rendezvous provides.
  try {
    lib_ = std::make_unique<ff::testing::PluginLibrary>(plugin_path);
    net_ = lib_->V11();
  } catch (const std::exception& e) {
    throw DriverError(ctx_.Prefix() + "cannot load plugin '" + plugin_path + "': " + e.what() +
                      " (build target nccl-net-flexiforce or pass --plugin PATH)");
  }
}

PluginTransport::~PluginTransport() {
  // Reached without Close() only on an error path: the plugin's threads may still be
  // talking to a dead peer, so neither close its comms (may block) nor dlclose it under them.
  if (!closed_) (void)lib_.release();
}

void PluginTransport::Require(ncclResult_t rc, const std::string& call) const {
  if (rc != ncclSuccess) {
    throw DriverError("plugin " + call + "() returned " + ResultName(rc) + " (" + std::to_string(rc) + ")");
  }
}

void PluginTransport::SelectDevice() {
  int ndev = 0;
  Require(net_->devices(&ndev), "devices");
  if (ndev <= 0) throw DriverError("plugin reports no network device");
  if (dev_ < 0 || dev_ >= ndev) {
    throw DriverError("--dev " + std::to_string(dev_) + " out of range: plugin has " +
                      std::to_string(ndev) + " device(s), 0.." + std::to_string(ndev - 1));
  }
  ncclNetProperties_v11_t props{};
  Require(net_->getProperties(dev_, &props), "getProperties");
  if ((props.ptrSupport & NCCL_PTR_HOST) == 0) {
    throw DriverError("plugin device " + std::to_string(dev_) + " does not support host memory");
  }
  describe_ = std::string("plugin ") + (net_->name ? net_->name : "?") + " dev " + std::to_string(dev_) + " (" +
              (props.name ? props.name : "?") + ", " + std::to_string(props.speed) + " Mbps, of " +
              std::to_string(ndev) + ")";
}

std::string PluginTransport::Describe() const {
  return describe_ + (profiler_ ? ", " + profiler_->Describe() : std::string(", no profiler")) +
         (opts_.net_attr ? "" : ", no setNetAttr");
}

void PluginTransport::Connect(Rendezvous& rdv, int rank, int nranks) {
  ctx_.SetPhase("plugin connection setup");
  // NCCL gives every communicator one id shared by all ranks; rank 0's random draw is used.
  std::random_device rd;
  uint64_t my_id = (static_cast<uint64_t>(rd()) << 32) | rd();
  auto ids = rdv.AllGather("comm-id", std::string(reinterpret_cast<const char*>(&my_id), sizeof my_id));
  uint64_t comm_id;
  std::memcpy(&comm_id, ids[0].data(), sizeof comm_id);

  ncclNetCommConfig_t config{};
  config.trafficClass = FF_NCCL_NET_TRAFFIC_CLASS_UNDEF;
  try {
    Require(net_->init(&net_ctx_, comm_id, &config, ff::testing::StderrLogger, nullptr), "init");
    SelectDevice();
    rank_ = rank;
    nranks_ = nranks;
    // NCCL initialises the profiler plugin during communicator creation, after the net plugin.
    if (opts_.profiler != ProfilerMode::kOff) {
      const ncclProfiler_v5_t* table = nullptr;
      try {
        table = lib_->Table_<ncclProfiler_v5_t>("ncclProfiler_v5");
      } catch (const std::exception& e) {
        if (opts_.profiler == ProfilerMode::kOn)
          throw DriverError(std::string("--profiler: ") + e.what() + " in " + opts_.plugin_path + " (use --no-profiler)");
      }
      if (table != nullptr) profiler_ = std::make_unique<ProfilerDriver>(table, comm_id, nranks, rank, opts_.window);
    }
    char handle[FF_NCCL_NET_HANDLE_MAXSIZE] = {};
    Require(net_->listen(net_ctx_, dev_, handle, &listen_comm_), "listen");
    auto handles = rdv.AllGather("plugin-handles", std::string(handle, sizeof handle));
    std::string next = handles[static_cast<size_t>((rank + 1) % nranks)];
    if (next.size() != FF_NCCL_NET_HANDLE_MAXSIZE) throw DriverError("malformed listen handle from the next rank");

    // Connect to the next rank and accept the previous one in one loop: each call may
    // return a NULL comm ("call again"), and a rank that finished one side first must
    // keep driving the other or its neighbour would never complete.
    ncclNetDeviceHandle_t* send_dev = nullptr;
    ncclNetDeviceHandle_t* recv_dev = nullptr;
    while (send_comm_ == nullptr || recv_comm_ == nullptr) {
      bool progressed = false;
      if (send_comm_ == nullptr) {
        Require(net_->connect(net_ctx_, dev_, next.data(), &send_comm_, &send_dev), "connect");
        progressed |= send_comm_ != nullptr;
      }
      if (recv_comm_ == nullptr) {
        Require(net_->accept(listen_comm_, &recv_comm_, &recv_dev), "accept");
        progressed |= recv_comm_ != nullptr;
      }
      if (!progressed) {
        ctx_.Check(std::string("connect to rank ") + std::to_string((rank + 1) % nranks) +
                   (send_comm_ ? " done" : " pending") + ", accept from rank " +
                   std::to_string((rank + nranks - 1) % nranks) + (recv_comm_ ? " done" : " pending"));
        sched_yield();
      }
    }
  } catch (const DriverError& e) {
    throw DriverError(ctx_.Prefix() + e.what() + " during " + ctx_.Phase());
  }
}

int PluginTransport::RegisterBuffer(void* data, size_t bytes) {
  Region r;
  try {
    Require(net_->regMr(send_comm_, data, bytes, NCCL_PTR_HOST, &r.send_mh), "regMr(send comm)");
    Require(net_->regMr(recv_comm_, data, bytes, NCCL_PTR_HOST, &r.recv_mh), "regMr(recv comm)");
  } catch (const DriverError& e) {
    throw DriverError(ctx_.Prefix() + e.what() + " registering " + std::to_string(bytes) + " bytes");
  }
  regions_.push_back(r);
  return static_cast<int>(regions_.size() - 1);
}

void PluginTransport::BeginCollective(const CollectiveCall& call) {
  if (profiler_) {
    ProfiledCollective pc;
    pc.func = call.func;
    pc.count = call.count;
    pc.datatype = call.dtype == DataType::kInt32 ? "ncclInt32" : "ncclInt64";  // ncclDatatypeToString
    pc.root = call.root;
    pc.send_peer = (rank_ + 1) % nranks_;
    pc.recv_peer = (rank_ + nranks_ - 1) % nranks_;
    pc.send_steps = call.send_steps;
    pc.recv_steps = call.recv_steps;
    pc.chunk_bytes = call.step_bytes;
    try {
      profiler_->BeginCollective(pc);
    } catch (const DriverError& e) {
      throw DriverError(ctx_.Prefix() + e.what() + " before " + ctx_.Phase());
    }
  }
  if (net_->setNetAttr == nullptr || !opts_.net_attr) return;
  const NcclFunc func = call.func;
  // What NCCL's proxy passes before a ring/simple collective: the op bit, algo and
  // protocol bits; peer/flow hints left undefined (-1).
  ncclNetAttr_t attr;
  attr.sendCommAttr = {-1, -1, -1, -1};
  attr.recvCommAttr = {-1, -1, -1, -1};
  attr.op = 1u << static_cast<int>(func);
  attr.algo = kAlgoRingBit;
  attr.proto = kProtoSimpleBit;
  try {
    Require(net_->setNetAttr(net_ctx_, &attr), "setNetAttr");
  } catch (const DriverError& e) {
    throw DriverError(ctx_.Prefix() + e.what() + " before " + ctx_.Phase());
  }
}

std::optional<RequestId> PluginTransport::PostSend(int region, const void* data, size_t bytes) {
  void* req = nullptr;
  // NCCL passes &sub->pHandles[step % NCCL_STEPS] (a NULL step handle inside when no profiler
  // wants steps); without any profiler we pass NULL. Tag 0 as the ring proxy does.
  void* phandle = profiler_ ? profiler_->StartStep(ProxyDir::kSend) : nullptr;
  Require(net_->isend(send_comm_, const_cast<void*>(data), bytes, 0, regions_[static_cast<size_t>(region)].send_mh,
                      phandle, &req),
          "isend");
  if (req == nullptr) return std::nullopt;
  if (profiler_) {
    profiler_->Posted(ProxyDir::kSend, bytes);
    in_flight_.push_back({req, ProxyDir::kSend, phandle});
  }
  return reinterpret_cast<RequestId>(req);
}

std::optional<RequestId> PluginTransport::PostRecv(int region, void* data, size_t bytes) {
  void* req = nullptr;
  void* buffers[1] = {data};
  size_t sizes[1] = {bytes};
  int tags[1] = {0};
  void* mhandles[1] = {regions_[static_cast<size_t>(region)].recv_mh};
  void* phandles[1] = {profiler_ ? profiler_->StartStep(ProxyDir::kRecv) : nullptr};
  Require(net_->irecv(recv_comm_, 1, buffers, sizes, tags, mhandles, phandles, &req), "irecv");
  if (req == nullptr) return std::nullopt;
  if (profiler_) {
    profiler_->Posted(ProxyDir::kRecv, bytes);
    in_flight_.push_back({req, ProxyDir::kRecv, phandles[0]});
  }
  return reinterpret_cast<RequestId>(req);
}

bool PluginTransport::Test(RequestId request, size_t* bytes) {
  int done = 0;
  int sizes[1] = {0};
  Require(net_->test(reinterpret_cast<void*>(request), &done, sizes), "test");
  if (done) {
    *bytes = static_cast<size_t>(sizes[0]);
    if (profiler_) Completed(reinterpret_cast<void*>(request));
  }
  return done != 0;
}

void PluginTransport::Completed(void* request) {
  // At most 2 x window entries: a linear scan is cheaper than a map here.
  for (size_t i = 0; i < in_flight_.size(); ++i) {
    if (in_flight_[i].request != request) continue;
    InFlight f = in_flight_[i];
    in_flight_[i] = in_flight_.back();
    in_flight_.pop_back();
    try {
      profiler_->StopStep(f.dir, f.phandle);
    } catch (const DriverError& e) {
      throw DriverError(ctx_.Prefix() + e.what() + " during " + ctx_.Phase());
    }
    return;
  }
}

void PluginTransport::Close() {
  if (closed_ || net_ == nullptr) return;
  closed_ = true;
  std::string first_error;
  auto call = [&](ncclResult_t rc, const char* what) {
    if (rc != ncclSuccess && first_error.empty()) first_error = std::string(what) + "() returned " + ResultName(rc);
  };
  for (auto& r : regions_) {
    if (r.send_mh) call(net_->deregMr(send_comm_, r.send_mh), "deregMr");
    if (r.recv_mh) call(net_->deregMr(recv_comm_, r.recv_mh), "deregMr");
  }
  regions_.clear();
  if (send_comm_) call(net_->closeSend(send_comm_), "closeSend");
  if (recv_comm_) call(net_->closeRecv(recv_comm_), "closeRecv");
  if (listen_comm_) call(net_->closeListen(listen_comm_), "closeListen");
  send_comm_ = recv_comm_ = listen_comm_ = nullptr;
  if (net_ctx_ && net_->finalize) call(net_->finalize(net_ctx_), "finalize");
  net_ctx_ = nullptr;
  if (profiler_) {
    try {
      profiler_->Finalize();
    } catch (const DriverError& e) {
      if (first_error.empty()) first_error = e.what();
    }
  }
  if (!first_error.empty()) throw DriverError(ctx_.Prefix() + "plugin " + first_error + " while closing");
}

}  // namespace ff::collective
