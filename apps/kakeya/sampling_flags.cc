#include "sampling_flags.h"

#include <fstream>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "grammar/json_schema.h"

namespace kakeya::cli {
namespace {

// "\n", "\t", "\\", "\"" as llama.cpp's --dry-sequence-breaker takes them.
std::string Unescape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\' || i + 1 == s.size()) {
      out += s[i];
      continue;
    }
    const char c = s[++i];
    out += c == 'n' ? '\n' : c == 't' ? '\t' : c == 'r' ? '\r' : c;
  }
  return out;
}

std::string ReadText(const std::string& path, const char* flag) {
  std::ifstream in(path, std::ios::binary);
  if (!in) Fail(flag, ": cannot read ", path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

nlohmann::ordered_json ParseSchema(const std::string& text, const std::string& where) {
  try {
    return nlohmann::ordered_json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    Fail(where, ": not JSON: ", e.what());
  }
}

}  // namespace

std::shared_ptr<const GrammarMatcher> SamplingFlags::Grammar(const Tokenizer& tokenizer) const {
  const int given = !grammar_file.empty() + !json_schema.empty() + !json_schema_file.empty();
  if (given == 0) return nullptr;
  if (given > 1) Fail("--grammar-file, --json-schema and --json-schema-file exclude each other: give one");
  std::shared_ptr<const kakeya::Grammar> grammar;
  if (!grammar_file.empty()) {
    grammar = ParseGbnf(ReadText(grammar_file, "--grammar-file"), "--grammar-file " + grammar_file);
  } else {
    const std::string where = json_schema.empty() ? "--json-schema-file " + json_schema_file : "--json-schema";
    const std::string text = json_schema.empty() ? ReadText(json_schema_file, "--json-schema-file") : json_schema;
    grammar = ParseGbnf(JsonSchemaToGbnf(ParseSchema(text, where), where), where);
  }
  return std::make_shared<GrammarMatcher>(grammar, std::make_shared<TokenTrie>(tokenizer));
}

SamplingParams SamplingFlags::Resolve() const {
  SamplingParams p = params;
  p.seed = seed >= 0 ? static_cast<uint64_t>(seed) : std::random_device{}();
  if (!dry_breakers.empty()) {
    p.dry_sequence_breakers.clear();
    for (const std::string& b : dry_breakers) {
      if (b != "none") p.dry_sequence_breakers.push_back(Unescape(b));
    }
  }
  p.Validate();
  return p;
}

SampledVerify SamplingFlags::Verify() const {
  return verify == "rejection" ? SampledVerify::kRejection : SampledVerify::kMatch;
}

void AddSamplingFlags(CLI::App& app, SamplingFlags& f) {
  SamplingParams& p = f.params;
  app.add_option("--temp", p.temperature, "Temperature; 0 = greedy")->capture_default_str();
  app.add_option("--top-k", p.top_k, "Keep the K most likely tokens; 0 = off")->capture_default_str();
  app.add_option("--top-p", p.top_p, "Nucleus sampling mass; 1 = off")->capture_default_str();
  app.add_option("--min-p", p.min_p, "Drop tokens below min-p times the best; 0 = off")->capture_default_str();
  app.add_option("--seed", f.seed,
                 "Sampling seed; -1 = random. The token at each position depends only on the seed, the "
                 "position and what came before, so a seed gives the same output with and without speculation")
      ->capture_default_str();
  app.add_option("--repeat-penalty", p.repeat_penalty, "Penalize tokens seen in the last --repeat-last-n; 1 = off")
      ->capture_default_str();
  app.add_option("--repeat-last-n", p.repeat_last_n, "Tokens the penalties look back over; 0 = off, -1 = all")
      ->capture_default_str();
  app.add_option("--presence-penalty", p.presence_penalty, "Subtract from tokens seen there; 0 = off")
      ->capture_default_str();
  app.add_option("--frequency-penalty", p.frequency_penalty, "Subtract per occurrence there; 0 = off")
      ->capture_default_str();
  app.add_option("--dry-multiplier", p.dry_multiplier,
                 "DRY: penalize tokens that extend a repeat of earlier text; 0 = off (0.8 is usual)")
      ->capture_default_str();
  app.add_option("--dry-base", p.dry_base, "DRY: growth of the penalty per repeated token")->capture_default_str();
  app.add_option("--dry-allowed-length", p.dry_allowed_length, "DRY: repeats this long go unpenalized")
      ->capture_default_str();
  app.add_option("--dry-penalty-last-n", p.dry_penalty_last_n, "DRY: tokens it looks back over; 0 = off, -1 = all")
      ->capture_default_str();
  app.add_option("--dry-sequence-breaker", f.dry_breakers,
                 "DRY: a string no repeat may cross (repeatable; replaces the defaults \\n : \" *; 'none' = no "
                 "breakers)");
  app.add_option("--spec-verify", f.verify,
                 "How drafts are checked when sampling: match = a draft must equal the token the target samples "
                 "at its position (output identical to --spec none with the same seed); rejection = "
                 "speculative sampling (Leviathan et al.), the same distribution but other bytes")
      ->check(CLI::IsMember({"match", "rejection"}))
      ->capture_default_str();
  app.add_option("--grammar-file", f.grammar_file,
                 "Constrain the output to a GBNF grammar (llama.cpp's format; start symbol root). Drafts the grammar "
                 "forbids are rejected, so output stays identical to --spec none under the same grammar");
  app.add_option("--json-schema", f.json_schema,
                 "Constrain the output to JSON that validates against this JSON Schema (text; the supported subset: "
                 "docs/formats/json-schema.md)");
  app.add_option("--json-schema-file", f.json_schema_file, "The same, with the schema read from a file");
}

}  // namespace kakeya::cli
