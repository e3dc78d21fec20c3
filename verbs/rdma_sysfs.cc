// sysfs readers for the RDMA class tree (see rdma_sysfs.h).
#include "verbs/rdma_sysfs.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>

namespace ff::verbs {

namespace fs = std::filesystem;

std::string SysfsDir(const std::string& root) {
  std::string r = root;
  while (!r.empty() && r.back() == '/') r.pop_back();
  return r + "/sys";
}

std::string IbDeviceDir(const std::string& root, const std::string& device) {
  return SysfsDir(root) + "/class/infiniband/" + device;
}

std::string IbPortDir(const std::string& root, const std::string& device, int port) {
  return IbDeviceDir(root, device) + "/ports/" + std::to_string(port);
}

std::optional<std::string> ReadSysfsLine(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::string line;
  if (!std::getline(in, line) && in.bad()) return std::nullopt;
  if (in.bad()) return std::nullopt;
  while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
  return line;
}

std::vector<int> NumericEntries(const std::string& dir) {
  std::vector<int> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string n = e.path().filename().string();
    if (n.empty() || n.size() > 6 ||
        !std::all_of(n.begin(), n.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      continue;
    }
    out.push_back(std::stoi(n));
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> DirectoryEntries(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace ff::verbs
