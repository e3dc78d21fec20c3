// RunRank: drives a transport through the collectives and sizes, checks every element, reports from rank 0.
#include "tests/collective/rank_runner.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <thread>

#include "tests/collective/abort_context.h"
#include "tests/collective/plugin_transport.h"
#include "tests/collective/raw_socket_transport.h"
#include "tests/collective/rendezvous.h"
#include "tests/collective/report.h"
#include "tests/collective/ring_schedule.h"
#include "tests/collective/step_engine.h"
#include "tests/collective/tcp_socket.h"

namespace ff::collective {
namespace {

// Page-aligned host memory, as NCCL's host buffers are.
struct AlignedBuffer {
  explicit AlignedBuffer(size_t bytes) : size(std::max<size_t>(bytes, 4096)) {
    size = (size + 4095) / 4096 * 4096;
    data.reset(static_cast<std::byte*>(std::aligned_alloc(4096, size)));
    if (!data) throw DriverError("cannot allocate " + std::to_string(size) + " bytes");
    std::memset(data.get(), 0, size);
  }
  struct Free {
    void operator()(std::byte* p) const { std::free(p); }
  };
  std::unique_ptr<std::byte, Free> data;
  size_t size;
};

// Per-rank element count for a sweep size (nccl-tests: AllGather's size is the gathered output).
size_t CountFor(NcclFunc f, size_t bytes, int nranks, size_t esz) {
  size_t per = f == NcclFunc::kAllGather ? bytes / (esz * static_cast<size_t>(nranks)) : bytes / esz;
  return std::max<size_t>(per, 1);
}

uint64_t SaltFor(NcclFunc f, size_t bytes) {
  return (static_cast<uint64_t>(f) + 1) * 0x100000001B3ull ^ (bytes * 0x9E3779B97F4A7C15ull);
}

// A backstop for a call that never returns (e.g. blocked inside the plugin): the wait
// loops enforce the deadline themselves, this ends the process shortly after it.
void StartWatchdog(int rank, double timeout_s, const AbortContext* ctx) {
  std::thread([rank, timeout_s, ctx] {
    std::this_thread::sleep_for(std::chrono::duration<double>(timeout_s + 10.0));
    std::fprintf(stderr, "ff-collective: rank %d: watchdog: still running %.0f s after the --timeout-s of %.0f s "
                 "expired (stuck in %s); exiting\n", rank, 10.0, timeout_s, ctx->Phase().c_str());
    std::fflush(stderr);
    _exit(kExitWatchdog);
  }).detach();
}

std::unique_ptr<RingTransport> MakeTransport(const Options& o, AbortContext& ctx) {
  if (o.backend == Backend::kPlugin) {
    PluginTransportOptions p;
    p.plugin_path = o.plugin_path;
    p.dev = o.dev;
    p.profiler = o.profiler < 0 ? ProfilerMode::kAuto : o.profiler ? ProfilerMode::kOn : ProfilerMode::kOff;
    p.net_attr = o.net_attr;
    p.window = o.window;
    return std::make_unique<PluginTransport>(p, ctx);
  }
  return std::make_unique<RawSocketTransport>(o.raw_streams, o.bind_ip, ctx);
}

std::string DescribeMismatch(int rank, NcclFunc f, size_t bytes, DataType t, const std::string& when,
                             const Mismatch& m) {
  return "rank " + std::to_string(rank) + ": " + CollName(f) + " " + std::to_string(bytes) + " B (" +
         DataTypeName(t) + ", " + when + "): first bad element " + std::to_string(m.index) + ": expected " +
         std::to_string(m.expected) + ", got " + std::to_string(m.got);
}

}  // namespace

int RunRank(const Options& o) {
  AbortContext ctx(o.rank, o.timeout_s);
  StartWatchdog(o.rank, o.timeout_s, &ctx);
  const bool reporter = o.rank == 0;
  std::FILE* table = o.json ? nullptr : stdout;
  try {
    HostPort hp = ParseHostPort(o.rendezvous, "--rendezvous");
    RendezvousConfig rc{o.rank, o.nranks, hp.host, hp.port, o.bind_ip, o.rendezvous_fd};
    Rendezvous rdv(rc, ctx);
    ctx.SetLivenessProbe([&rdv] { rdv.CheckPeersAlive(); });

    std::unique_ptr<RingTransport> transport = MakeTransport(o, ctx);
    transport->Connect(rdv, o.rank, o.nranks);

    const size_t esz = ElementSize(o.dtype);
    size_t send_bytes = 0, recv_bytes = 0;
    for (auto f : o.colls) {
      for (size_t b = o.min_bytes; b <= o.max_bytes; b *= 2) {
        size_t count = CountFor(f, b, o.nranks, esz);
        send_bytes = std::max(send_bytes, SendBufferBytes(f, o.nranks, count, esz));
        recv_bytes = std::max(recv_bytes, RecvBufferBytes(f, o.nranks, count, esz));
      }
    }
    const size_t slot = std::max<size_t>(o.step_bytes / esz, 1) * esz;
    AlignedBuffer sendbuf(send_bytes), recvbuf(recv_bytes), staging(slot * static_cast<size_t>(o.window));
    EngineBuffers eb;
    eb.send = sendbuf.data.get();
    eb.recv = recvbuf.data.get();
    eb.staging = staging.data.get();
    eb.slot_bytes = slot;
    eb.send_region = transport->RegisterBuffer(eb.send, sendbuf.size);
    eb.recv_region = transport->RegisterBuffer(eb.recv, recvbuf.size);
    eb.staging_region = transport->RegisterBuffer(eb.staging, staging.size);
    // Rank 1 always receives in all three ring collectives (root 0 aside, it is downstream of someone).
    const bool corrupt_here = o.inject_corruption && o.rank == (o.root + 1) % o.nranks;
    StepEngine engine(*transport, ctx, eb, o.window, o.dtype, corrupt_here, o.test_all);

    RunInfo info{o.nranks, BackendName(o.backend), transport->Describe(), DataTypeName(o.dtype),
                 slot, o.window, o.iters, o.warmup};
    for (const auto& pid : rdv.AllGather("pid", std::to_string(getpid()))) info.pids.push_back(std::stoi(pid));
    if (reporter && table) PrintTableHeader(table, info);

    std::vector<SizeResult> results;
    bool all_ok = true;
    for (auto f : o.colls) {
      size_t last_count = 0;
      for (size_t b = o.min_bytes; b <= o.max_bytes; b *= 2) {
        const size_t count = CountFor(f, b, o.nranks, esz);
        // AllGather sizes below one element per rank all round to the same count; run it once.
        if (count == last_count) continue;
        last_count = count;
        const size_t reported = f == NcclFunc::kAllGather ? count * esz * static_cast<size_t>(o.nranks) : count * esz;
        const RingSchedule schedule = BuildSchedule(f, o.rank, o.nranks, o.root, count, esz, o.step_bytes);
        CollectiveCall call{f, count, o.dtype, o.root, static_cast<int>(schedule.sends.size()),
                            static_cast<int>(schedule.recvs.size()), slot};
        const uint64_t salt = SaltFor(f, reported);
        const std::string label = CollName(f) + " " + std::to_string(reported) + " B";
        FillInput(o.dtype, eb.send, count, o.rank, salt);
        const size_t out_bytes = RecvBufferBytes(f, o.nranks, count, esz);
        bool ok = true;
        auto check = [&](const std::string& when) {
          auto bad = CheckResult(f, o.dtype, eb.recv, count, o.nranks, o.root, salt);
          if (bad) {
            ok = false;
            std::fprintf(stderr, "ff-collective: %s\n", DescribeMismatch(o.rank, f, reported, o.dtype, when, *bad).c_str());
          }
        };
        ctx.SetPhase(label + " start barrier");
        rdv.Barrier("start " + label);
        engine.ResetTraffic();  // counts warmup and timed iterations of this size

        for (int w = 0; w < o.warmup; ++w) {
          Poison(eb.recv, out_bytes);
          ctx.SetPhase(label + " warmup iteration " + std::to_string(w));
          transport->BeginCollective(call);
          engine.Run(schedule);
          check("warmup iteration " + std::to_string(w));
        }
        Poison(eb.recv, out_bytes);
        rdv.Barrier("timed " + label);
        auto t0 = std::chrono::steady_clock::now();
        for (int it = 0; it < o.iters; ++it) {
          ctx.SetPhase(label + " iteration " + std::to_string(it));
          if (o.inject_exit_rank == o.rank && it == o.iters / 2) {
            // Simulates a crashed rank: no goodbye, sockets torn down by the kernel.
            std::fprintf(stderr, "ff-collective: rank %d: --inject-exit: exiting during %s\n", o.rank,
                         ctx.Phase().c_str());
            _exit(kExitError);
          }
          transport->BeginCollective(call);
          engine.Run(schedule);
        }
        const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() /
                          o.iters;
        check("after " + std::to_string(o.iters) + " timed iterations");

        ctx.SetPhase(label + " result exchange");
        // Per rank: time, verdict, and what it moved (sends, bytes sent, receives, bytes received).
        const Traffic& tr = engine.traffic();
        const uint64_t moved[4] = {tr.sends, tr.send_bytes, tr.recvs, tr.recv_bytes};
        char blob[16 + sizeof moved];
        const double ok_d = ok ? 1.0 : 0.0;
        std::memcpy(blob, &us, 8);
        std::memcpy(blob + 8, &ok_d, 8);
        std::memcpy(blob + 16, moved, sizeof moved);
        auto all = rdv.AllGather("result " + label, std::string(blob, sizeof blob));
        SizeResult r;
        r.coll = f;
        r.bytes = reported;
        r.count = count;
        for (const auto& a : all) {
          if (a.size() != sizeof blob) throw DriverError("malformed result exchange for " + label);
          double t, k;
          uint64_t m[4];
          std::memcpy(&t, a.data(), 8);
          std::memcpy(&k, a.data() + 8, 8);
          std::memcpy(m, a.data() + 16, sizeof m);
          r.time_us = std::max(r.time_us, t);
          r.ok = r.ok && k != 0.0;
          r.sends += m[0];
          r.send_bytes += m[1];
          r.recvs += m[2];
          r.recv_bytes += m[3];
        }
        all_ok = all_ok && r.ok;
        results.push_back(r);
        if (reporter && table) PrintTableRow(table, r, o.nranks);
      }
    }

    ctx.SetPhase("teardown");
    rdv.Barrier("done");
    transport->Close();
    // Ranks leave as soon as they have the last reply, so a closed connection no longer
    // means a crash; a rank dying inside this barrier still shows as EOF on its socket.
    ctx.SetLivenessProbe(nullptr);
    rdv.Barrier("closed");

    if (reporter) {
      auto j = ReportJson(info, results);
      if (o.json) std::printf("%s\n", j.dump(2).c_str());
      if (!o.result_file.empty()) {
        std::ofstream f(o.result_file);
        f << j.dump(2) << "\n";
        if (!f) throw DriverError("cannot write --result-file " + o.result_file);
      }
      if (table) std::fprintf(table, "# %s\n", all_ok ? "all checks passed" : "SOME CHECKS FAILED");
      std::fflush(stdout);
    }
    return all_ok ? kExitOk : kExitWrongResult;
  } catch (const DriverError& e) {
    const std::string what = e.what();
    const std::string prefix = what.rfind("rank ", 0) == 0 ? "" : ctx.Prefix();
    std::fprintf(stderr, "ff-collective: %s%s\n", prefix.c_str(), what.c_str());
    std::fflush(stderr);
    // Exit without unwinding the plugin: its threads may be wedged on the failed peer.
    _exit(kExitError);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ff-collective: %sunexpected error: %s\n", ctx.Prefix().c_str(), e.what());
    std::fflush(stderr);
    _exit(kExitError);
  }
}

}  // namespace ff::collective
