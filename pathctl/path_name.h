// Names a path for people ("eth0 10.0.0.1 -> 10.0.0.2 via spine1"): `flexiforce stats` and the log
// show these instead of the oracle's numeric id, which is a hash of the hops.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "pathctl/path_oracle.h"
#include "pathctl/topology.h"

namespace ff::pathctl {

// The spine- and core-tier switches a path crosses, in order: what the oracle steers by source
// port. Leaves are left out (a host's leaf is fixed by its cabling, not chosen).
std::vector<std::string> SteeredSwitches(const Topology& topo, const std::vector<std::string>& hops);

// A path the oracle chose: "<ifname> <local ip> -> <remote ip>[ via s1[,s2]]". An empty `ifname`
// falls back to the topology's name for the local NIC, then to none ("10.0.0.1 -> 10.0.0.2 ...").
std::string SteeredPathName(const Topology& topo, const PathOption& option, std::string_view ifname);

// A path not steered by the oracle: "<ifname> -> <remote ip>", or "<local ip> -> <remote ip>"
// when the interface has no name.
std::string UnsteeredPathName(std::string_view ifname, std::string_view local_ip, std::string_view remote_ip);

// The receiving end of a connection, which sees its own interface and the sender's address but
// not the sender's choice of spine: "<ifname> <- <remote ip>".
std::string ReceivedPathName(std::string_view ifname, std::string_view local_ip, std::string_view remote_ip);

}  // namespace ff::pathctl
