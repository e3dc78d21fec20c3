// TCP segments on this process's connections, for `flexiforce bench`: how many segments a round trip
// costs (data, and the bare acknowledgements a connection that only receives sends on its own).
#pragma once

#include <cstdint>
#include <optional>

namespace ff::cli {

// Segments sent plus segments received over every TCP socket this process holds (TCP_INFO
// tcpi_segs_out + tcpi_segs_in, Linux 4.2+), the plugin's included: a connection's two ends are
// both counted by either process, so this is every segment between them. nullopt where
// /proc/self/fd cannot be read or the kernel's tcp_info has no segment counts.
std::optional<uint64_t> ProcessTcpSegments();

}  // namespace ff::cli
