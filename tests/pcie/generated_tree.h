// A fixture sysfs tree built by make_sysfs_fixture.py from a description in fixtures/, in a
// temp dir removed afterwards; real directories and relative symlinks, as the kernel lays out.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <string>

namespace ff::testing {

class GeneratedTree {
 public:
  // `description` names a file in tests/pcie/fixtures ("dgx_h100.topo").
  explicit GeneratedTree(const std::string& description) {
    std::string tmpl = (std::filesystem::temp_directory_path() / "ff-topo-XXXXXX").string();
    dir_ = ::mkdtemp(tmpl.data());
    root_ = dir_ + "/root";
    const std::string cmd = std::string("python3 '") + FF_PCIE_FIXTURE_SCRIPT + "' '" + FF_PCIE_FIXTURE_DIR +
                            "/" + description + "' '" + root_ + "'";
    ok_ = std::system(cmd.c_str()) == 0;
  }
  ~GeneratedTree() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  GeneratedTree(const GeneratedTree&) = delete;
  GeneratedTree& operator=(const GeneratedTree&) = delete;

  bool ok() const { return ok_; }
  const std::string& root() const { return root_; }
  // The resolved (symlink-free) form of a path inside the tree, as realpath reports it.
  std::string Real(const std::string& rel) const {
    return std::filesystem::canonical(std::filesystem::path(root_)).string() + "/" + rel;
  }

 private:
  std::string dir_, root_;
  bool ok_ = false;
};

}  // namespace ff::testing
