// Star-shaped TCP rendezvous: hello, tagged all-gather, barrier, liveness.
#include "tests/collective/rendezvous.h"

#include <cstdint>
#include <cstring>

#include "tests/collective/tcp_socket.h"

namespace ff::collective {
namespace {

constexpr uint32_t kMagic = 0x46464352;  // "FFCR"
constexpr uint32_t kMaxPayload = 64u << 20;

std::string RankName(int r) { return "rank " + std::to_string(r); }

void AppendU32(std::string& s, uint32_t v) { s.append(reinterpret_cast<const char*>(&v), sizeof v); }

uint32_t ReadU32(const std::string& s, size_t& pos) {
  if (pos + 4 > s.size()) throw DriverError("malformed rendezvous message (truncated)");
  uint32_t v;
  std::memcpy(&v, s.data() + pos, 4);
  pos += 4;
  return v;
}

}  // namespace

Rendezvous::Rendezvous(const RendezvousConfig& config, AbortContext& ctx) : config_(config), ctx_(ctx) {
  if (config.nranks < 2) throw DriverError("the driver needs at least 2 ranks (got " + std::to_string(config.nranks) + ")");
  ctx_.SetPhase("rendezvous");
  const std::string hello_tag = "hello";
  if (config.rank == 0) {
    UniqueFd listener;
    if (config.listen_fd >= 0) {
      listener = UniqueFd(config.listen_fd);
    } else {
      std::string ip = config.bind_ip.empty() ? ResolveIpv4(config.host, "--rendezvous") : config.bind_ip;
      listener = ListenTcp(ip, config.port, config.nranks + 8);
    }
    peers_.resize(config.nranks);
    for (int i = 1; i < config.nranks; ++i) {
      UniqueFd fd = AcceptTcp(listener.Get(), ctx_, "waiting for " + std::to_string(config.nranks - i) +
                                                        " more rank(s) to join the rendezvous");
      std::string hello = RecvMessage(fd.Get(), hello_tag, "a joining rank");
      size_t pos = 0;
      int r = static_cast<int>(ReadU32(hello, pos));
      int n = static_cast<int>(ReadU32(hello, pos));
      if (n != config.nranks) {
        throw DriverError(ctx_.Prefix() + "rank " + std::to_string(r) + " was started with --nranks " +
                          std::to_string(n) + " but rank 0 has --nranks " + std::to_string(config.nranks));
      }
      if (r <= 0 || r >= config.nranks || peers_[r].Valid()) {
        throw DriverError(ctx_.Prefix() + "a rank joined with invalid or duplicate --rank " + std::to_string(r));
      }
      if (local_ip_.empty()) local_ip_ = LocalIp(fd.Get());
      peers_[r] = std::move(fd);
    }
  } else {
    std::string ip = ResolveIpv4(config.host, "--rendezvous");
    peers_.resize(1);
    peers_[0] = ConnectTcpWithRetry(ip, config.port, config.bind_ip, ctx_, "rendezvous (rank 0)");
    local_ip_ = LocalIp(peers_[0].Get());
    std::string hello;
    AppendU32(hello, static_cast<uint32_t>(config.rank));
    AppendU32(hello, static_cast<uint32_t>(config.nranks));
    SendMessage(peers_[0].Get(), hello_tag, hello, RankName(0));
  }
  // Everyone knows everyone is present once this returns.
  Barrier("joined");
}

void Rendezvous::SendMessage(int fd, const std::string& tag, const std::string& payload, const std::string& peer) {
  std::string msg;
  AppendU32(msg, kMagic);
  AppendU32(msg, static_cast<uint32_t>(tag.size()));
  AppendU32(msg, static_cast<uint32_t>(payload.size()));
  msg += tag;
  msg += payload;
  SendAll(fd, msg.data(), msg.size(), ctx_, peer);
}

std::string Rendezvous::RecvMessage(int fd, const std::string& tag, const std::string& peer) {
  uint32_t hdr[3];
  RecvAll(fd, hdr, sizeof hdr, ctx_, peer);
  if (hdr[0] != kMagic || hdr[1] > 4096 || hdr[2] > kMaxPayload) {
    throw DriverError(ctx_.Prefix() + "garbage on the rendezvous connection from " + peer +
                      " (is something else listening on the rendezvous port?)");
  }
  std::string got_tag(hdr[1], '\0');
  RecvAll(fd, got_tag.data(), got_tag.size(), ctx_, peer);
  std::string payload(hdr[2], '\0');
  RecvAll(fd, payload.data(), payload.size(), ctx_, peer);
  if (got_tag != tag) {
    throw DriverError(ctx_.Prefix() + "ranks out of step: expected rendezvous step '" + tag + "' but " + peer +
                      " sent '" + got_tag + "'");
  }
  return payload;
}

std::vector<std::string> Rendezvous::AllGather(const std::string& tag, const std::string& blob) {
  std::vector<std::string> all(config_.nranks);
  if (config_.rank == 0) {
    all[0] = blob;
    for (int r = 1; r < config_.nranks; ++r) all[r] = RecvMessage(peers_[r].Get(), tag, RankName(r));
    std::string packed;
    for (const auto& b : all) {
      AppendU32(packed, static_cast<uint32_t>(b.size()));
      packed += b;
    }
    for (int r = 1; r < config_.nranks; ++r) SendMessage(peers_[r].Get(), tag, packed, RankName(r));
  } else {
    SendMessage(peers_[0].Get(), tag, blob, RankName(0));
    std::string packed = RecvMessage(peers_[0].Get(), tag, RankName(0));
    size_t pos = 0;
    for (int r = 0; r < config_.nranks; ++r) {
      uint32_t len = ReadU32(packed, pos);
      if (pos + len > packed.size()) throw DriverError(ctx_.Prefix() + "malformed rendezvous reply for '" + tag + "'");
      all[r] = packed.substr(pos, len);
      pos += len;
    }
  }
  return all;
}

void Rendezvous::CheckPeersAlive() {
  for (size_t i = 0; i < peers_.size(); ++i) {
    if (!peers_[i].Valid()) continue;
    if (PeerClosed(peers_[i].Get())) {
      int peer_rank = config_.rank == 0 ? static_cast<int>(i) : 0;
      throw DriverError(ctx_.Prefix() + RankName(peer_rank) + " went away (rendezvous connection closed) during " +
                        ctx_.Phase());
    }
  }
}

}  // namespace ff::collective
