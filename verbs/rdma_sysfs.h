// Reading /sys/class/infiniband under a root prefix ("/" on a host, a fixture tree in tests).
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace ff::verbs {

// "<root>/sys" without a doubled slash: "/" -> "/sys", "/tmp/x/" -> "/tmp/x/sys".
std::string SysfsDir(const std::string& root);
// "<root>/sys/class/infiniband/<device>".
std::string IbDeviceDir(const std::string& root, const std::string& device);
// "<root>/sys/class/infiniband/<device>/ports/<port>".
std::string IbPortDir(const std::string& root, const std::string& device, int port);

// The first line of a sysfs file, trailing whitespace trimmed; nullopt when it is missing or the
// kernel refuses the read (an unpopulated GID's type file gives EINVAL).
std::optional<std::string> ReadSysfsLine(const std::string& path);

// Entries of `dir` whose names are decimal numbers (ports/, gids/), ascending; empty when absent.
std::vector<int> NumericEntries(const std::string& dir);
// Entries of `dir` (device names), ascending; empty when absent.
std::vector<std::string> DirectoryEntries(const std::string& dir);

}  // namespace ff::verbs
