#include <fstream>
#include <sstream>

#include "base/error.h"
#include "commands.h"

namespace kakeya::cli {

std::string ReadPrompt(const std::string& text, const std::string& file) {
  if (!text.empty() && !file.empty()) Fail("give the prompt with -p or -f, not both");
  if (file.empty()) {
    if (text.empty()) Fail("no prompt: pass -p TEXT or -f FILE");
    return text;
  }
  std::ifstream in(file, std::ios::binary);
  if (!in) Fail("cannot read prompt file ", file);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

}  // namespace kakeya::cli
