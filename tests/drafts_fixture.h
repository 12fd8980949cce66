// The reference's per-step drafter proposals, `<drafter>/<prompt>.drafts.json`
// in tests/fixtures/models2 (its README, "drafts.json"), parsed into plain
// structs for the drafter parity tests.
#pragma once

#include <fstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "tokenizer/tokenizer.h"

namespace kakeya::fixture {

// One verification step of the reference's loop.
struct RefDraftStep {
  int pos = 0;          // tokens in the target's cache: the position of id_last
  TokenId id_last = 0;  // the last committed token, not yet in the target's cache
  std::vector<TokenId> draft;
  std::vector<std::vector<std::pair<TokenId, double>>> top;  // per slot: top-5 (id, raw logit)
  int accepted = 0;
  std::vector<TokenId> target_ids;  // the accepted drafts, then the target's own token
};

struct RefDrafts {
  std::vector<TokenId> prompt_ids, generated_ids;
  int n_max = 0;
  std::vector<RefDraftStep> steps;
};

// tests/fixtures/models2/<drafter>/<prompt>.drafts.json
inline RefDrafts LoadRefDrafts(const std::string& drafter, const std::string& prompt,
                               const std::string& folder = "models2") {
  const std::string path = std::string(KAKEYA_FIXTURES) + "/" + folder + "/" + drafter + "/" + prompt + ".drafts.json";
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open " + path);
  const nlohmann::json j = nlohmann::json::parse(in);
  RefDrafts r;
  r.prompt_ids = j.at("prompt_ids").get<std::vector<TokenId>>();
  r.generated_ids = j.at("generated_ids").get<std::vector<TokenId>>();
  r.n_max = j.at("n_max").get<int>();
  for (const auto& s : j.at("steps")) {
    RefDraftStep& step = r.steps.emplace_back();
    step.pos = s.at("pos").get<int>();
    step.id_last = s.at("id_last").get<TokenId>();
    step.draft = s.at("draft").get<std::vector<TokenId>>();
    for (const auto& slot : s.at("draft_top")) {
      auto& top = step.top.emplace_back();
      for (const auto& t : slot) top.emplace_back(t.at(0).get<TokenId>(), t.at(1).get<double>());
    }
    step.accepted = s.at("accepted").get<int>();
    step.target_ids = s.at("target_ids").get<std::vector<TokenId>>();
  }
  return r;
}

}  // namespace kakeya::fixture
