// The prompts `kakeya bench spec` decodes (--workload). The shipped ones are
// data in models/prompts/ (scripts/make-bench-prompts.py wrote them):
//  * code: function starts cut from the files held out of the shipped model's
//    training corpus (the Python standard library), so no drafter has seen them;
//  * code-edit: a function from the same files, a comment naming a small edit
//    (a parameter renamed, a keyword argument added) and the edited signature:
//    the continuation is the function again, so prompt lookup has whole lines
//    to propose, as when a coding agent asks for a file back with a change;
//  * prose: paragraphs of English, where drafters trained on code should not help;
//  * long: one 2,048-token generation after the first code prompt, longer than
//    the shipped model's sliding windows (128) and training context (512), so
//    ring caches wrap and the global layers' caches grow;
//  * file:PATH: a text file (one prompt), or JSONL with a "prompt" field per line.
#pragma once

#include <string>
#include <vector>

namespace kakeya::cli {

struct BenchPrompt {
  std::string name;  // where it comes from: "loop.txt", "prompts.jsonl:3", "ast.py (code.jsonl:1)"
  std::string text;
};

struct Workload {
  std::string name;  // the --workload value
  std::vector<BenchPrompt> prompts;
  int n_predict = 0;  // tokens to generate per prompt
};

// Tokens the long workload generates at least.
inline constexpr int kLongWorkloadTokens = 2048;

// The workload a --workload value names, generating n_predict tokens per
// prompt (long: at least kLongWorkloadTokens). Throws Error for an unknown
// name, a missing or empty file, or a JSONL line without a "prompt" string.
Workload LoadWorkload(const std::string& spec, int n_predict);

}  // namespace kakeya::cli
