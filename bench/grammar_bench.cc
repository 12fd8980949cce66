// What constrained decoding costs per generated token (grammar.h): the mask
// of allowed tokens over a whole vocabulary (AllowedTokens, one trie walk),
// Accept, the copy the verifier makes per row, and a sampled choice with
// and without the sampler's reuse of the last mask. The states: inside a JSON
// string (nearly every token allowed: the walk visits most of the trie),
// just after "{" (few allowed: the walk prunes early) and inside a schema's
// integer field. Run from the repository root; the vocabulary defaults to
// qwen2's (151,936 tokens):
//
//   build/bin/grammar_bench [--benchmark_filter=...]
//   KAKEYA_BENCH_VOCAB=path/to/vocab.gguf build/bin/grammar_bench
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gguf/gguf.h"
#include "grammar/grammar.h"
#include "grammar/json_schema.h"
#include "sampling/sampler.h"
#include "tokenizer/tokenizer.h"

namespace kakeya {
namespace {

struct Vocabulary {
  std::unique_ptr<GgufFile> gguf;
  std::unique_ptr<Tokenizer> tokenizer;
  std::shared_ptr<const TokenTrie> trie;
};

const Vocabulary& BenchVocabulary() {
  static const Vocabulary v = [] {
    const char* path = std::getenv("KAKEYA_BENCH_VOCAB");
    Vocabulary out;
    out.gguf = GgufFile::Open(path ? path : "tests/fixtures/tokenizer/ggml-vocab-qwen2.gguf");
    out.tokenizer = Tokenizer::FromGguf(*out.gguf);
    out.trie = std::make_shared<const TokenTrie>(*out.tokenizer);
    return out;
  }();
  return v;
}

const char kSchema[] = R"({"type": "object", "properties": {"name": {"type": "string"},
  "age": {"type": "integer", "minimum": 0, "maximum": 150}}, "required": ["name", "age"]})";

// The matcher after `prefix`, tokenized by the vocabulary itself.
GrammarMatcher MatcherAfter(const std::string& gbnf, const std::string& prefix) {
  const Vocabulary& v = BenchVocabulary();
  GrammarMatcher matcher(ParseGbnf(gbnf, "bench"), v.trie);
  for (TokenId id : v.tokenizer->Encode(prefix, false, false)) matcher.Accept(id);
  return matcher;
}

void Run(benchmark::State& state, const GrammarMatcher& matcher) {
  std::vector<uint8_t> allowed(size_t(BenchVocabulary().trie->n_vocab()));
  for (auto _ : state) {
    matcher.AllowedTokens(allowed);
    benchmark::DoNotOptimize(allowed.data());
  }
  size_t n = 0;
  for (uint8_t a : allowed) n += a;
  state.counters["allowed"] = double(n);
  state.counters["vocab"] = double(allowed.size());
}

void BM_AllowedTokensInJsonString(benchmark::State& state) {
  Run(state, MatcherAfter(JsonObjectGbnf(), "{\"text\": \"The quick"));
}
BENCHMARK(BM_AllowedTokensInJsonString)->Unit(benchmark::kMillisecond);

void BM_AllowedTokensAfterBrace(benchmark::State& state) { Run(state, MatcherAfter(JsonObjectGbnf(), "{")); }
BENCHMARK(BM_AllowedTokensAfterBrace)->Unit(benchmark::kMillisecond);

void BM_AllowedTokensSchemaInteger(benchmark::State& state) {
  Run(state, MatcherAfter(JsonSchemaToGbnf(nlohmann::ordered_json::parse(kSchema), "schema"), "{\"name\": \"Ann\", \"age\": 1"));
}
BENCHMARK(BM_AllowedTokensSchemaInteger)->Unit(benchmark::kMillisecond);

void BM_AcceptAndCopy(benchmark::State& state) {
  const Vocabulary& v = BenchVocabulary();
  const GrammarMatcher start = MatcherAfter(JsonObjectGbnf(), "{\"text\": \"");
  const std::vector<TokenId> tokens = v.tokenizer->Encode("The quick brown fox jumps over the lazy dog", false, false);
  for (auto _ : state) {
    GrammarMatcher m = start;
    for (TokenId id : tokens) m.Accept(id);
    benchmark::DoNotOptimize(m.CanEnd());
  }
  state.counters["tokens"] = double(tokens.size());
}
BENCHMARK(BM_AcceptAndCopy)->Unit(benchmark::kMicrosecond);

// A sampled choice (temperature 0.8, the llama.cpp filters) inside a JSON
// string, where each token leaves the grammar's state as it was: the
// sampler masks the vocabulary once and reuses the mask while the state
// stays (Sampler::Constrain). `alternating` gives it two states in turn, so
// that every choice masks anew: the cost without the reuse.
void SampleInJsonString(benchmark::State& state, bool alternating) {
  const Vocabulary& v = BenchVocabulary();
  const int n_vocab = v.trie->n_vocab();
  const GrammarMatcher states[2] = {MatcherAfter(JsonObjectGbnf(), "{\"text\": \"The quick"),
                                    MatcherAfter(JsonObjectGbnf(), "{\"text\": [\"The quick")};
  std::vector<float> logits(static_cast<size_t>(n_vocab));
  for (int i = 0; i < n_vocab; ++i) logits[size_t(i)] = float((i * 7919) % 1000) / 100.0f;
  SamplingParams params;
  params.seed = 1;
  Sampler sampler(params, n_vocab);
  const std::vector<TokenId> history(8, 0);
  int i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(sampler.Sample(logits, history, &states[alternating ? (i++ & 1) : 0]));
  }
}
void BM_SampleInJsonStringSameState(benchmark::State& state) { SampleInJsonString(state, false); }
BENCHMARK(BM_SampleInJsonStringSameState)->Unit(benchmark::kMillisecond);
void BM_SampleInJsonStringNewState(benchmark::State& state) { SampleInJsonString(state, true); }
BENCHMARK(BM_SampleInJsonStringNewState)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace kakeya
