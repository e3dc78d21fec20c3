// Hot spots on the fabric's links: the bytes each task sent, routed through the topology file by the
// path sockets' ends (path_up: local address, source port, remote address), and the links where one
// task carries more than a threshold of the bytes.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "bpf/probe_snapshot.h"
#include "pathctl/topology.h"

namespace ff::probe {

struct LinkLoad {
  nlohmann::json hot_spots = nlohmann::json::array();  // {where, link, task, bytes, link_bytes, share}
  nlohmann::json links = nlohmann::json::array();      // every loaded link: {link, bytes, tasks: {task: bytes}}
  uint64_t unrouted_bytes = 0;  // sent bytes with no path_up socket, or whose ends the topology does not know
};

// Send-side flows only (a loopback job would count each message twice otherwise). A flow on one path
// takes that path's socket (path_up of the same task, peer and index, connecting side); a striped flow
// is split evenly over its connection's path sockets. A socket's route is the oracle's path between its
// addresses whose source-port range holds its port.
LinkLoad LinkHotSpots(const Snapshot& total, const pathctl::Topology& topology, double threshold = 0.8);

}  // namespace ff::probe
