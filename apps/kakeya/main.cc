#include <algorithm>
#include <cstdio>
#include <exception>
#include <map>

#include "cache_flags.h"
#include "commands.h"
#include "base/error.h"
#include "model/arch/architecture.h"

int main(int argc, char** argv) {
  CLI::App app{"kakeya: local LLM inference with lossless speculative decoding.\nRuns GGUF models (" +
               kakeya::SupportedArchitectureNames() +
               ") on the CPU,\nfrom the command line or as an OpenAI-compatible server."};
  app.require_subcommand(1);
  app.set_version_flag("--version", "kakeya 0.1.0");
  std::map<CLI::App*, kakeya::cli::Runner> runners;
  auto add = [&](const char* name, const char* help, auto add_command) {
    CLI::App* sub = app.add_subcommand(name, help);
    runners[sub] = add_command(*sub);
  };
  add("run", "Generate text from a prompt", kakeya::cli::AddRunCommand);
  add("chat", "Chat on the terminal: each line is a message, rendered with the model's chat template", kakeya::cli::AddChatCommand);
  add("serve", "Serve the model over an OpenAI-compatible HTTP API", kakeya::cli::AddServeCommand);
  add("tokenize", "Print the token ids of a text", kakeya::cli::AddTokenizeCommand);
  add("perplexity", "Held-out cross-entropy of a model on text files", kakeya::cli::AddPerplexityCommand);
  add("bench",
      "Measure speed: `kakeya bench verify` (one forward over N rows against the memory roofline), "
      "`kakeya bench spec` (speculation against plain decoding on a workload, with identity and degeneration "
      "gates) or `kakeya bench depth` (decode and verify at depth, KV cache types side by side); and recall: "
      "`kakeya bench recall` (needles in haystacks, KV cache types side by side, gated)",
      kakeya::cli::AddBenchCommand);

  try {
    std::vector<std::string> args = kakeya::cli::WithLongCacheFlags(argc, argv);
    args.erase(args.begin());               // CLI11 takes the arguments without the program name,
    std::reverse(args.begin(), args.end());  // last first
    app.parse(args);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  }
  for (const auto& [sub, run] : runners) {
    if (!sub->parsed()) continue;
    try {
      return run();
    } catch (const kakeya::Error& e) {
      std::fprintf(stderr, "kakeya: error: %s\n", e.what());
      return 2;
    } catch (const std::bad_alloc&) {
      std::fprintf(stderr, "kakeya: error: out of memory\n");
      return 2;
    }
  }
  return 2;
}
