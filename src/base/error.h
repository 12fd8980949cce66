// Errors from outside input (files, flags, requests) are reported by throwing
// kakeya::Error with a message that names the problem and where it is; see
// docs/adr/0002-errors.md. The hot decode loop never throws.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace kakeya {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// StrCat("tensor ", name, " has ", n, " dims") -> one string.
template <typename... Args>
std::string StrCat(Args&&... args) {
  std::ostringstream out;
  (out << ... << std::forward<Args>(args));
  return out.str();
}

template <typename... Args>
[[noreturn]] void Fail(Args&&... args) {
  throw Error(StrCat(std::forward<Args>(args)...));
}

}  // namespace kakeya
