// Builds throwaway sysfs-like trees in a temp dir, so readers run against known content.
#pragma once

#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace ff::testing {

class FixtureTree {
 public:
  FixtureTree() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "ff-fixture-XXXXXX").string();
    root_ = ::mkdtemp(tmpl.data());
  }
  ~FixtureTree() {
    std::error_code ec;
    std::filesystem::remove_all(root_, ec);
  }
  FixtureTree(const FixtureTree&) = delete;
  FixtureTree& operator=(const FixtureTree&) = delete;

  const std::string& root() const { return root_; }
  std::string Path(const std::string& rel) const { return root_ + "/" + rel; }

  // Writes in place (truncating the same inode), as sysfs content changes under an open fd.
  void Write(const std::string& rel, const std::string& content) const {
    std::filesystem::create_directories(std::filesystem::path(Path(rel)).parent_path());
    std::ofstream(Path(rel), std::ios::trunc) << content;
  }
  void Mkdir(const std::string& rel) const { std::filesystem::create_directories(Path(rel)); }
  // Creates rel as a symlink whose (usually relative) target is taken verbatim.
  void Symlink(const std::string& target, const std::string& rel) const {
    std::filesystem::create_directories(std::filesystem::path(Path(rel)).parent_path());
    std::filesystem::create_directory_symlink(target, Path(rel));
  }
  void Remove(const std::string& rel) const { std::filesystem::remove_all(Path(rel)); }

  // A PCI function below a root port, laid out as the kernel does: the real directory under
  // sys/devices and a relative link under sys/bus/pci/devices.
  void AddPciDevice(const std::string& port, const std::string& bdf) const {
    const std::string dev = "sys/devices/pci0000:00/" + port + "/" + bdf;
    Mkdir(dev);
    Symlink("../../../devices/pci0000:00/" + port + "/" + bdf, "sys/bus/pci/devices/" + bdf);
  }
  std::string PciDir(const std::string& port, const std::string& bdf) const {
    return "sys/devices/pci0000:00/" + port + "/" + bdf;
  }
  // A net interface whose `device` link points (relatively) at that PCI function.
  void AddNetInterface(const std::string& ifname, const std::string& port, const std::string& bdf) const {
    Mkdir("sys/class/net/" + ifname + "/statistics");
    Symlink("../../../devices/pci0000:00/" + port + "/" + bdf, "sys/class/net/" + ifname + "/device");
  }

 private:
  std::string root_;
};

}  // namespace ff::testing
