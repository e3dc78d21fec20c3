// The verbs fixture host (make_verbs_fixture.py) built in a temp dir and removed afterwards.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <string>

namespace ff::testing {

class VerbsFixture {
 public:
  VerbsFixture() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "ff-verbs-XXXXXX").string();
    dir_ = ::mkdtemp(tmpl.data());
    root_ = dir_ + "/root";
    const std::string cmd = std::string("python3 '") + FF_VERBS_FIXTURE_SCRIPT + "' '" + root_ + "'";
    ok_ = std::system(cmd.c_str()) == 0;
  }
  ~VerbsFixture() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  VerbsFixture(const VerbsFixture&) = delete;
  VerbsFixture& operator=(const VerbsFixture&) = delete;

  bool ok() const { return ok_; }
  const std::string& root() const { return root_; }
  std::string Real(const std::string& rel) const {
    return std::filesystem::canonical(std::filesystem::path(root_)).string() + "/" + rel;
  }

 private:
  std::string dir_, root_;
  bool ok_ = false;
};

}  // namespace ff::testing
