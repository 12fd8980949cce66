// The `kakeya` subcommands. Each registers its options on the CLI11 app and
// returns a runner; main() handles errors uniformly (exit code 2 for bad
// input, with the message on stderr).
#pragma once

#include <functional>
#include <string>

#include <CLI/CLI.hpp>

namespace kakeya::cli {

using Runner = std::function<int()>;

Runner AddRunCommand(CLI::App& app);
Runner AddChatCommand(CLI::App& app);
Runner AddServeCommand(CLI::App& app);
Runner AddTokenizeCommand(CLI::App& app);
Runner AddBenchCommand(CLI::App& app);
Runner AddPerplexityCommand(CLI::App& app);
// Adds `bench spec` under `bench` and sets *runner to run it.
CLI::App* AddBenchSpecCommand(CLI::App& bench, Runner* runner);
// Adds `bench depth` under `bench` and sets *runner to run it.
CLI::App* AddBenchDepthCommand(CLI::App& bench, Runner* runner);
// Adds `bench recall` under `bench` and sets *runner to run it.
CLI::App* AddBenchRecallCommand(CLI::App& bench, Runner* runner);

// Reads the prompt from -p TEXT or -f FILE (exactly one must be given).
std::string ReadPrompt(const std::string& text, const std::string& file);
// The whole file as bytes; throws Error naming the path.
std::string ReadTextFile(const std::string& path);
// -t: the flag's value, or all hardware threads when it is 0 (not given).
int ThreadsOrDefault(int threads);
// -c: the flag's value, or DefaultContextSize (engine/limits.h) when it is
// 0 (not given); a negative one is refused.
int ContextSizeOrDefault(int n_ctx, int n_ctx_train);

// The shipped default model (models/README.md), in $KAKEYA_MODELS_DIR or
// else the source tree's models/ folder; its drafters lie beside it
// (DrafterKind::shipped_suffix).
std::string ShippedTargetPath();

}  // namespace kakeya::cli
