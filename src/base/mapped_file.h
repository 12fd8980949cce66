// A read-only memory-mapped file. Model weights are used in place from the
// mapping (docs/design.md, invariant 4); the ones repacked at load are released.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace kakeya {

class MappedFile {
 public:
  // Throws Error naming the path and the OS reason when the file cannot be opened.
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // Tells the OS the whole pages inside [p, p + n) will not be read again
  // (they leave this process's resident set; reading them would fault them
  // back in from the file).
  void ReleasePages(const void* p, size_t n) const;

 private:
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace kakeya
