// `kakeya chat`: a conversation on the terminal. Each line read from stdin is
// a user message; the model's chat template (ChatML when it has none) renders
// the conversation, and the reply streams to stdout with speculative decoding
// as in `kakeya run`. Each turn prefills the whole conversation again (a fresh
// cache, so the drafters see it whole too); when it no longer fits the
// context, the oldest exchanges are left out.
#include <unistd.h>

#include <cstdio>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "cache_flags.h"
#include "commands.h"
#include "drafter_choice.h"
#include "engine/generate.h"
#include "engine/limits.h"
#include "sampling_flags.h"
#include "server/chat_prompt.h"
#include "speculative/speculative.h"

namespace kakeya::cli {
namespace {

struct ChatFlags : ModelFlags {
  CacheTypeFlags cache;
  std::string system;
  int n_predict = 0;  // 0: until end of generation or a full context
  SamplingFlags sampling;
  int threads = 0;
  int n_ctx = 0;
};

// Room kept for the reply when older exchanges must go.
constexpr int kMinReplyTokens = 64;

int Chat(const ChatFlags& f) {
  if (f.n_predict < 0) Fail("-n ", f.n_predict, " is negative");
  const std::unique_ptr<Model> model = Model::Load(f.model);
  ContextOptions copts;
  copts.n_ctx = ContextSizeOrDefault(f.n_ctx, model->hparams().n_ctx_train);
  copts.n_threads = ThreadsOrDefault(f.threads);
  copts.max_batch = std::max(std::min(kPrefillChunk, copts.n_ctx), kAdaptiveMaxBlock);
  copts.max_logit_rows = kAdaptiveMaxBlock;
  copts.cache_type_k = f.cache.k;
  copts.cache_type_v = f.cache.v;
  Context ctx(*model, copts);
  const ChatPrompt chat_prompt(*model);
  const Tokenizer& tok = model->tokenizer();

  GenerateOptions gopts;
  gopts.sampling = f.sampling.Resolve();
  gopts.grammar = f.sampling.Grammar(model->tokenizer());
  const std::unique_ptr<Drafter> drafter =
      MakeDrafter(f.spec, SourcesOf(f), SetupOf(f, *model, ctx, gopts.sampling, kAdaptiveMaxBlock));
  std::fprintf(stderr, "kakeya: chat with %s (%s, context %d tokens, spec %s); one message per line, end with Ctrl-D\n",
               f.model.c_str(), chat_prompt.description().c_str(), copts.n_ctx, drafter ? f.spec.c_str() : "none");

  nlohmann::json messages = nlohmann::json::array();
  if (!f.system.empty()) messages.push_back({{"role", "system"}, {"content", f.system}});
  const size_t first_exchange = messages.size();
  const bool interactive = isatty(STDIN_FILENO);
  std::string line;
  for (;;) {
    if (interactive) std::fputs("> ", stderr);
    if (!std::getline(std::cin, line)) break;
    if (line.empty()) continue;
    messages.push_back({{"role", "user"}, {"content", line}});
    std::vector<TokenId> prompt;
    try {
      prompt = chat_prompt.Tokens(messages);
      // Leave out the oldest exchanges (a user message and its reply) until
      // the conversation leaves room for a reply.
      while (static_cast<int>(prompt.size()) + kMinReplyTokens > copts.n_ctx && messages.size() > first_exchange + 1) {
        messages.erase(messages.begin() + first_exchange, messages.begin() + std::min(first_exchange + 2, messages.size() - 1));
        prompt = chat_prompt.Tokens(messages);
        std::fprintf(stderr, "kakeya: the conversation outgrew the context (-c %d): its oldest exchange is left out\n",
                     copts.n_ctx);
      }
      if (static_cast<int>(prompt.size()) >= copts.n_ctx) {
        Fail("the message is ", prompt.size(), " tokens with the template; the context holds ", copts.n_ctx, " (-c)");
      }
    } catch (const std::exception& e) {  // the template refused the conversation, or the message is too long
      std::fprintf(stderr, "kakeya: %s\n", e.what());
      messages.erase(messages.end() - 1);
      continue;
    }
    gopts.n_predict = f.n_predict > 0 ? f.n_predict : copts.n_ctx - static_cast<int>(prompt.size());
    std::string reply;
    const TokenCallback stream = [&](TokenId id) {
      if (tok.IsEndOfGeneration(id)) return true;
      const std::string piece = tok.TokenToPiece(id, false);
      reply += piece;
      std::fwrite(piece.data(), 1, piece.size(), stdout);
      std::fflush(stdout);
      return true;
    };
    SpecStats stats;
    const GenerateResult r = Generate(ctx, drafter.get(), prompt, gopts,
                                      SpecOptions{.max_block = kAdaptiveMaxBlock, .verify = f.sampling.Verify()},
                                      stream, &stats);
    std::printf("\n");
    std::fflush(stdout);
    const double decode_tok_s = r.decode_ms > 0 ? (r.tokens.size() - 1) * 1000.0 / r.decode_ms : 0;
    std::fprintf(stderr, "kakeya: %zu prompt tokens, %zu generated at %.1f tok/s", prompt.size(), r.tokens.size(),
                 decode_tok_s);
    if (drafter) std::fprintf(stderr, ", %.2f tokens/step", stats.mean_accept_len());
    std::fprintf(stderr, " | stop: %s\n", StopReasonName(r.stop));
    messages.push_back({{"role", "assistant"}, {"content", reply}});
  }
  if (interactive) std::fputs("\n", stderr);
  return 0;
}

}  // namespace

Runner AddChatCommand(CLI::App& app) {
  auto f = std::make_shared<ChatFlags>();
  AddModelFlags(app, *f);
  app.add_option("--system", f->system, "System message at the start of the conversation");
  app.add_option("-n,--n-predict", f->n_predict, "Tokens per reply at most (default: until end of generation)");
  AddSamplingFlags(app, f->sampling);
  AddCacheTypeFlags(app, f->cache);
  app.add_option("-t,--threads", f->threads, "Threads (default: all hardware threads)");
  app.add_option("-c,--ctx-size", f->n_ctx,
                 "Context size in tokens, the whole conversation (default: min(training context, " +
                     std::to_string(kDefaultContextSize) + "))");
  return [f] {
    ChatFlags flags = *f;
    UseShippedDefaults(flags);
    return Chat(flags);
  };
}

}  // namespace kakeya::cli
