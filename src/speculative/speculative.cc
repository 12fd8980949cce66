#include "speculative/speculative.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "base/error.h"
#include "speculative/verifier.h"

namespace kakeya {
namespace {

using Clock = std::chrono::steady_clock;

double MsBetween(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

constexpr double kDecay = 0.9;         // of the acceptance, draft cost and upkeep estimates
constexpr int kProbeEvery = 8;         // plain steps between probes, at least
constexpr double kMinGain = 0.03;      // expected rate gain below which a draft is not worth its risk
constexpr double kProbeShare = 0.015;  // of a step's time that the other sequences' probes may take
constexpr int kParkAfter = 32;         // steps in a row where plain decoding beats every draft length
constexpr size_t kMaxForcedBytes = 256;  // of a grammar's forced text tokenized per step (a block holds <= 16 drafts)
constexpr double kFreeUpkeep = 0.02;   // upkeep below this share of a step is not worth parking for

// One verify step that drafted m tokens and kept `accepted` of them, into
// the run's totals (SpecStats) or a drafter's (DrafterStats).
template <typename Stats>
void CountStep(Stats& s, int m, int accepted, double draft_ms, double verify_ms) {
  ++s.steps;
  s.drafted += m;
  s.accepted += accepted;
  for (int i = 0; i < m; ++i) {
    ++s.drafted_by_pos[i];
    if (i < accepted) ++s.accepted_by_pos[i];
  }
  s.draft_ms += draft_ms;
  s.verify_ms += verify_ms;
}

// Per-drafter statistics in slots allocated before the loop, so that a
// drafter's first step allocates nothing; auto runs at most a handful of
// drafters, and any beyond the slots would share the last one.
constexpr int kDrafterStatsSlots = 8;

DrafterStats& StatsOf(std::vector<DrafterStats>& slots, int& used, const std::string& name) {
  for (int i = 0; i < used; ++i) {
    if (slots[i].name == name) return slots[i];
  }
  if (used == kDrafterStatsSlots) return slots.back();
  slots[used].name = name;
  return slots[used++];
}

// The per-draft acceptance a for which a step of m drafts, each kept with
// probability a while the previous ones were, commits `tau` tokens on
// average: 1 + a + ... + a^m = tau (bisection; the sum grows with a).
double SyntheticRate(double tau, int m) {
  double lo = 0, hi = 1;
  for (int i = 0; i < 60; ++i) {
    const double a = 0.5 * (lo + hi);
    double sum = 0, term = 1;
    for (int k = 0; k <= m; ++k, term *= a) sum += term;
    (sum < tau ? lo : hi) = a;
  }
  return 0.5 * (lo + hi);
}

}  // namespace

SpeculativeDecoder::SpeculativeDecoder(Context& target, Drafter* drafter, const SpecOptions& spec, StepCost& cost)
    : target_(target), drafter_(drafter), spec_(spec), cost_(cost) {
  max_block_ = drafter_ == nullptr ? 1 : spec.block > 0 ? spec.block : spec.max_block;
  if (spec.block < 0 || max_block_ < 1 || max_block_ > target.options().max_logit_rows) {
    Fail("block size ", max_block_, " is out of range (1 .. ", target.options().max_logit_rows, ")");
  }
  policies_.reserve(kDrafterStatsSlots);
  block_.resize(max_block_);
  if (spec.synthetic_accept != 0) {
    if (spec.block < 2 || !(spec.synthetic_accept > 1 && spec.synthetic_accept <= spec.block)) {
      Fail("synthetic acceptance ", spec.synthetic_accept, " needs a fixed block of at least 2 and a mean in (1, block ",
           spec.block, "]");
    }
    synthetic_rate_ = SyntheticRate(spec.synthetic_accept, spec.block - 1);
  }
}

SpeculativeDecoder::~SpeculativeDecoder() = default;

void SpeculativeDecoder::Start(std::span<const TokenId> prompt, const GenerateOptions& options, TokenSink on_token) {
  if (prompt.empty()) Fail("the prompt is empty: nothing to generate from");
  const int n_ctx = target_.options().n_ctx;
  if (static_cast<int>(prompt.size()) >= n_ctx) {
    Fail("the prompt has ", prompt.size(), " tokens but the context holds ", n_ctx,
         " (pass a larger -c, up to the model's training context)");
  }
  options.sampling.Validate();
  if (options.grammar != nullptr && synthetic_rate_ > 0) {
    Fail("synthetic acceptance keeps drafts the target did not pick, which a grammar may forbid: use one or the other");
  }
  options_ = options;
  on_token_ = std::move(on_token);
  const int n_vocab = target_.model().hparams().n_vocab;
  rejection_ = options.sampling.temperature > 0 && spec_.verify == SampledVerify::kRejection;
  draft_has_probs_ = rejection_ && drafter_ != nullptr && drafter_->samples();

  // Everything the steps touch is allocated here, once per request.
  sampler_ = std::make_unique<Sampler>(options.sampling, n_vocab, &target_.model().tokenizer(), n_ctx);
  if (options.grammar != nullptr) {
    grammar_.emplace(*options.grammar);
  } else {
    grammar_.reset();
  }
  row_grammar_.reset();
  policies_.clear();
  history_.assign(prompt.begin(), prompt.end());
  history_.reserve(prompt.size() + options.n_predict + max_block_);
  draft_probs_.assign(draft_has_probs_ ? size_t(max_block_ - 1) * n_vocab : 0, 0.0f);
  p_.assign(rejection_ ? n_vocab : 0, 0.0f);
  residual_.assign(rejection_ ? n_vocab : 0, 0.0f);
  stats_ = SpecStats{};
  stats_.method = drafter_ != nullptr ? drafter_->name() : "none";
  stats_.block = spec_.block;
  stats_.drafted_by_pos.assign(max_block_ - 1, 0);
  stats_.accepted_by_pos.assign(max_block_ - 1, 0);
  by_drafter_.assign(kDrafterStatsSlots, DrafterStats{});
  for (DrafterStats& d : by_drafter_) {
    d.name.reserve(32);
    d.drafted_by_pos.assign(max_block_ - 1, 0);
    d.accepted_by_pos.assign(max_block_ - 1, 0);
  }
  n_drafters_seen_ = 0;
  if (synthetic_rate_ > 0) synthetic_rng_ = std::make_unique<Rng>(spec_.synthetic_seed);
  result_ = GenerateResult{};
  result_.prompt_tokens = history_;
  result_.tokens.reserve(options.n_predict);
  if (options.n_top > 0) result_.top.reserve(options.n_predict);

  target_.Clear();
  if (drafter_ != nullptr) {
    target_.SetHiddenTaps(drafter_->target_taps());
    drafter_->Begin(prompt);
  }
  prompt_done_ = 0;
  upkeep_ms_ = 0;
  losing_steps_ = 0;
  parked_ = false;
  finished_ = false;
}

void SpeculativeDecoder::Stop() {
  if (finished_) return;
  finished_ = true;
  result_.decode_ms = prefilling() ? 0 : MsBetween(decode_start_, Clock::now());
  by_drafter_.resize(n_drafters_seen_);
  stats_.by_drafter = by_drafter_;
}

SpeculativeDecoder::Policy& SpeculativeDecoder::PolicyOf(const Drafter& d) {
  for (auto& [who, policy] : policies_) {
    if (who == &d) return policy;
  }
  if (policies_.size() == kDrafterStatsSlots) return policies_.back().second;
  return policies_.emplace_back(&d, Policy{}).second;
}

// How many tokens to draft. Fixed blocks draft block - 1. Adaptive: the
// drafter's per-token acceptance rate a (a geometric model: k accepted of m
// means k successes in k + [k < m] trials, decayed so the estimate follows
// the text; or the drafter's own expected_acceptance()), the step's cost
// line and the drafter's cost per draft token; then draft the n that
// maximizes the step's expected tokens per ms,
//   (others' tokens + 1 + a + ... + a^n) / (base + row * (others' rows + n) + n * draft).
// Alone, that is the sequence's own rate. In a step shared with other
// sequences the rows already there make the step slower, so a draft must
// beat the whole step's rate, not only a lone step's: drafting shortens, and
// stops, as the batch grows and the forward turns compute-bound. When no
// draft pays, take plain steps and probe with one draft now and then.
//
// A drafter that reads the target also costs upkeep on every step, drafting
// or not (a DFlash injection, an MTP catch-up row, a draft model's forward).
// While it is kept, that cost is in every step; when plain decoding without
// it, (others' tokens + 1) / base, beats every draft length with it for
// kParkAfter steps in a row, the drafter is parked: no more drafts, no more
// upkeep, for the rest of the request (on prose; beside enough other
// requests that drafting no longer pays). Auto drops an idle costly drafter
// within a few steps (its kIdleUpkeep), well before kParkAfter, so that it
// first sheds those and keeps prompt lookup, which costs nothing to keep.
int SpeculativeDecoder::DraftsFor(const Drafter& d, const StepLoad& others) {
  if (spec_.block > 0) return spec_.block - 1;
  Policy& policy = PolicyOf(d);
  const double hint = drafter_->expected_acceptance();
  const double a = hint >= 0 ? hint : (policy.accepted + 1.0) / (policy.trials + 2.0);
  const double per_draft = cost_.RowMs() + policy.draft_ms;
  const double base = cost_.PlainMs(others.rows);
  const double plain_rate = (others.tokens + 1) / (base + upkeep_ms_);  // n = 0
  int best = 0;
  double best_rate = plain_rate, tokens = others.tokens + 1, survive = a;
  for (int n = 1; n <= max_block_ - 1; ++n, survive *= a) {
    tokens += survive;
    const double rate = tokens / (base + upkeep_ms_ + n * per_draft);
    if (rate > best_rate) best = n, best_rate = rate;
  }
  const bool upkeep_loses = upkeep_ms_ > kFreeUpkeep * base && best_rate < (others.tokens + 1) / base;
  losing_steps_ = upkeep_loses ? losing_steps_ + 1 : 0;
  if (losing_steps_ >= kParkAfter) {
    parked_ = true;
    return 0;
  }
  // Both sides of the rate are estimates (a decayed acceptance, picked when
  // it looks high; a straight cost line through a forward whose rows come in
  // tiles of 8, where a ninth row costs ~15% of a step, not the line's ~8%):
  // a draft expected to gain less than kMinGain is as likely to lose, and
  // beside 7 other sequences every draft is such a one.
  if (best > 0 && best_rate < (1 + kMinGain) * plain_rate) best = 0;
  // A probe (one draft) keeps the acceptance estimate current, so that
  // drafting resumes when it pays again: alone, one every kProbeEvery plain
  // steps. Beside other sequences each probe row also costs all of them its
  // time, and they all probe: space them so that the other sequences' probes
  // take at most kProbeShare of the step (at 8 sequences on a compute-bound
  // forward, a probe every 8 steps each was 1 row in 9). Alone, longer gaps
  // left a costly drafter one probe before it was parked.
  const double interval = std::max<double>(kProbeEvery, others.rows * per_draft / (kProbeShare * base));
  if (best == 0 && ++policy.plain_steps >= interval) best = 1;
  if (best > 0) policy.plain_steps = 0;
  return best;
}

bool SpeculativeDecoder::Emit(TokenId t, std::span<const float> logits) {
  const Tokenizer& tokenizer = target_.model().tokenizer();
  if (t == kNoTokenAllowed) {
    result_.stop = StopReason::kEndOfGeneration;
    return false;
  }
  if (grammar_ && !tokenizer.IsEndOfGeneration(t)) grammar_->Accept(t);
  if (options_.n_top > 0) result_.top.push_back(TopLogits(logits, options_.n_top));
  result_.tokens.push_back(t);
  history_.push_back(t);
  const bool keep_going = on_token_ ? on_token_(t, logits) : true;
  if (!options_.ignore_eos && tokenizer.IsEndOfGeneration(t)) {
    result_.stop = StopReason::kEndOfGeneration;
    return false;
  }
  return keep_going && static_cast<int>(result_.tokens.size()) < options_.n_predict;
}

// The text the grammar forces next, as up to `most` drafts in block_[1..]
// (the tokenizer's own spelling of it, which the target picks as a rule):
// proposed without asking the drafter, they cost nothing to make and are
// verified like any other, so a target that spells the text otherwise only
// rejects them.
int SpeculativeDecoder::ForcedDrafts(int most) {
  const std::string text = grammar_->ForcedText(kMaxForcedBytes);
  if (text.empty()) return 0;
  const std::vector<TokenId> tokens = target_.model().tokenizer().Encode(text, false, false);
  const int n = std::min(most, static_cast<int>(tokens.size()));
  std::copy_n(tokens.begin(), n, block_.begin() + 1);
  return n;
}

SequenceRows SpeculativeDecoder::Plan(int max_rows, const StepLoad& others) {
  planned_rows_ = drafted_ = forced_ = 0;
  draft_ms_ = expected_tokens_ = 0;
  if (finished_ || max_rows < 1) return {&target_, {}};
  if (prefilling()) {
    const int n = std::min({max_rows, target_.options().max_batch, static_cast<int>(history_.size()) - prompt_done_});
    planned_rows_ = n;
    expected_tokens_ = prompt_done_ + n == static_cast<int>(history_.size()) ? 1 : 0;
    return {&target_, std::span<const TokenId>(history_).subspan(prompt_done_, n), false};
  }
  // The bonus is not in the target's cache yet: the block is [bonus, drafts...].
  const int room = target_.options().n_ctx - target_.n_past();
  if (room < 1) {
    result_.stop = StopReason::kContextFull;
    Stop();
    return {&target_, {}};
  }
  const int remaining = options_.n_predict - static_cast<int>(result_.tokens.size());
  const int most = std::min({max_block_ - 1, room - 1, remaining - 1, max_rows - 1});
  forced_ = drafter_ != nullptr && grammar_ && most > 0 ? ForcedDrafts(most) : 0;
  int want = 0;
  if (drafter_ != nullptr && !parked_ && forced_ == 0) {
    if (cost_.measured()) {
      const double plain_ms = cost_.PlainMs(others.rows);
      drafter_->PlainCost(plain_ms, plain_ms / (1 + others.tokens));
    }
    want = std::min({DraftsFor(drafter_->next_drafter(), others), room - 1, remaining - 1, max_rows - 1});
  }
  const auto t0 = Clock::now();
  if (want > 0) {
    const int n_vocab = target_.model().hparams().n_vocab;
    const DraftRequest request{history_, want,
                               std::span<float>(draft_probs_).first(draft_has_probs_ ? size_t(want) * n_vocab : 0),
                               sampler_.get()};
    drafted_ = std::clamp(drafter_->Draft(request, std::span<TokenId>(block_).subspan(1, want)), 0, want);
  }
  draft_ms_ = MsBetween(t0, Clock::now());
  block_[0] = history_.back();
  if (forced_ > 0) drafted_ = forced_;
  planned_rows_ = drafted_ + 1;
  if (forced_ > 0) {
    expected_tokens_ = planned_rows_;
  } else if (drafted_ > 0) {
    const Policy& policy = PolicyOf(drafter_->last_drafter());
    const double a = (policy.accepted + 1.0) / (policy.trials + 2.0);
    double survive = 1;
    for (int i = 0; i < planned_rows_; ++i, survive *= a) expected_tokens_ += survive;
  } else {
    expected_tokens_ = 1;
  }
  return {&target_, std::span<const TokenId>(block_).first(planned_rows_), true};
}

void SpeculativeDecoder::Apply(double forward_ms) {
  if (planned_rows_ == 0) return;
  if (prefilling()) {
    target_.Commit();
    prompt_done_ += planned_rows_;
    if (drafter_ != nullptr) drafter_->Observe(target_, planned_rows_);
    if (!prefilling()) {
      // The prompt's last row gives the first token, the first bonus.
      decode_start_ = Clock::now();
      if (options_.n_predict <= 0 ||
          !Emit(sampler_->Sample(target_.logits(0), history_, grammar_ ? &*grammar_ : nullptr), target_.logits(0))) {
        Stop();
      }
    }
    return;
  }
  const int m = drafted_;
  const int n_vocab = target_.model().hparams().n_vocab;
  const auto t1 = Clock::now();
  const BlockLogits rows{std::span<const float>(target_.logits(0).data(), size_t(m + 1) * n_vocab), n_vocab};
  const std::span<const TokenId> drafts = std::span<const TokenId>(block_).subspan(1, m);
  // Forced drafts are deterministic: q one-hot, as for drafters that do not sample.
  const bool drafter_probs = draft_has_probs_ && forced_ == 0;
  const std::span<const float> q = std::span<const float>(draft_probs_).first(drafter_probs ? size_t(m) * n_vocab : 0);
  // Each row is judged with its own history: the committed tokens and the
  // drafts before it (reserved room: no allocation).
  const size_t committed = history_.size();
  history_.insert(history_.end(), drafts.begin(), drafts.end());
  GrammarMatcher* row_grammar = nullptr;
  if (grammar_) row_grammar = &row_grammar_.emplace(*grammar_);
  Verdict v = rejection_ ? VerifyRejection(rows, drafts, q, *sampler_, history_, p_, residual_, row_grammar)
                         : VerifyMatch(rows, drafts, *sampler_, history_, row_grammar);
  if (synthetic_rate_ > 0) {
    v.accepted = 0;
    while (v.accepted < m && synthetic_rng_->Uniform() < synthetic_rate_) ++v.accepted;
    v.next = sampler_->Sample(rows.row(v.accepted), std::span<const TokenId>(history_).first(committed + v.accepted));
  }
  history_.resize(committed);
  const auto t2 = Clock::now();
  const double verify_ms = forward_ms + MsBetween(t1, t2);

  if (spec_.trace) {
    stats_.trace.push_back({target_.n_past() - (m + 1), std::vector<TokenId>(drafts.begin(), drafts.end()), v.accepted});
  }
  target_.Trim(m - v.accepted);
  target_.Commit();
  const bool keep_drafter = drafter_ != nullptr && !parked_;
  double upkeep_ms = 0;
  auto upkeep = [&](auto&& call) {
    const auto t = Clock::now();
    call();
    upkeep_ms += MsBetween(t, Clock::now());
  };
  if (keep_drafter) upkeep([&] { drafter_->Observe(target_, v.accepted + 1); });
  bool go = true;
  for (int i = 0; i < v.accepted && go; ++i) go = Emit(drafts[i], rows.row(i));
  if (go) go = Emit(v.next, rows.row(v.accepted));
  // When the grammar drafted, the drafter drafted (and so kept) nothing.
  const bool drafter_drafted = forced_ == 0;
  if (go && keep_drafter) {
    upkeep([&] { drafter_->Accept(history_, drafter_drafted ? m : 0, drafter_drafted ? v.accepted : 0); });
  }
  upkeep_ms_ = kDecay * upkeep_ms_ + (1 - kDecay) * upkeep_ms;
  const auto t3 = Clock::now();

  CountStep(stats_, m, v.accepted, draft_ms_, verify_ms);
  if (forced_ > 0) {
    CountStep(StatsOf(by_drafter_, n_drafters_seen_, "grammar"), m, v.accepted, draft_ms_, verify_ms);
  } else if (m > 0) {
    CountStep(StatsOf(by_drafter_, n_drafters_seen_, drafter_->last_drafter().name()), m, v.accepted, draft_ms_,
              verify_ms);
    Policy& policy = PolicyOf(drafter_->last_drafter());
    policy.accepted = kDecay * policy.accepted + v.accepted;
    policy.trials = kDecay * policy.trials + v.accepted + (v.accepted < m ? 1 : 0);
    policy.draft_ms = policy.draft_seen ? kDecay * policy.draft_ms + (1 - kDecay) * (draft_ms_ / m) : draft_ms_ / m;
    policy.draft_seen = true;
  }
  stats_.commit_ms += MsBetween(t2, t3);
  if (!go) Stop();
}

GenerateResult Generate(Context& target, Drafter* drafter, std::span<const TokenId> prompt,
                        const GenerateOptions& options, const SpecOptions& spec, const TokenCallback& on_token,
                        SpecStats* stats_out) {
  StepCost cost;
  SpeculativeDecoder decoder(target, drafter, spec, cost);
  decoder.Start(prompt, options, [&](TokenId t, std::span<const float>) { return on_token ? on_token(t) : true; });
  const auto t_prefill = Clock::now();
  while (decoder.prefilling()) {
    const SequenceRows rows = decoder.Plan(target.options().max_batch, {});
    target.Forward(rows.tokens, rows.all_logits);
    decoder.Apply(0);
  }
  decoder.result().prefill_ms = MsBetween(t_prefill, Clock::now());
  while (!decoder.finished()) {
    const SequenceRows rows = decoder.Plan(target.options().max_batch, {});
    if (rows.tokens.empty()) break;
    const auto t0 = Clock::now();
    target.Forward(rows.tokens, rows.all_logits);
    const double ms = MsBetween(t0, Clock::now());
    cost.Observe(static_cast<int>(rows.tokens.size()) - 1, ms);
    decoder.Apply(ms);
  }
  if (stats_out != nullptr) *stats_out = std::move(decoder.stats());
  return std::move(decoder.result());
}

}  // namespace kakeya
