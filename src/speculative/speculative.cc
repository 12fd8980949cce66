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

// Chooses how many tokens to draft for the next step. Fixed blocks draft
// block - 1. Adaptive: estimate the per-token acceptance rate a from recent
// steps (a geometric model: k accepted of m means k successes in k + [k < m]
// trials, decayed so the estimate follows the text), and the costs in ms of a
// verify step, base + per_row * drafts (a decayed least-squares line through
// recent steps, which draft different numbers of tokens), and of one draft
// token; then draft the n that maximizes the expected tokens per ms,
// (1 + a + ... + a^n) / (base + n * (per_row + draft)). The row cost is
// measured because it differs by an order of magnitude between models: ~5%
// of a step for a memory-bound 1B model, ~25% for the compute-bound shipped
// 20M one, where the fixed 10% this used to assume drafted long blocks that
// lost to plain decoding. When no draft pays, take plain steps and probe with
// one draft now and then.
class DraftLength {
 public:
  explicit DraftLength(const SpecOptions& o) : fixed_(o.block), max_drafts_((o.block > 0 ? o.block : o.max_block) - 1) {}

  int Next() {
    if (fixed_ > 0) return fixed_ - 1;
    const double a = (accepted_ + 1.0) / (trials_ + 2.0);
    const double per_draft = RowMs() + draft_ms_;
    int best = 0;
    double best_rate = 0, tokens = 0, survive = 1;
    for (int n = 0; n <= max_drafts_; ++n, survive *= a) {
      tokens += survive;
      const double rate = tokens / (BaseMs() + n * per_draft);
      if (rate > best_rate) best = n, best_rate = rate;
    }
    if (best == 0 && ++plain_steps_ % kProbeEvery == 0) best = 1;
    return best;
  }

  void Observe(int drafted, int accepted, double draft_ms, double verify_ms) {
    if (fit_w_ == 0) {
      // Before any timing: a prior line at kPriorRowCost of a step through
      // the first step's cost, worth two steps, so the first fits are sane.
      const double base = verify_ms / (1 + kPriorRowCost * drafted);
      AddPoint(0, base);
      AddPoint(kPriorSpread, base * (1 + kPriorRowCost * kPriorSpread));
    }
    AddPoint(drafted, verify_ms);
    if (drafted == 0) return;
    accepted_ = kDecay * accepted_ + accepted;
    trials_ = kDecay * trials_ + accepted + (accepted < drafted ? 1 : 0);
    draft_ms_ = draft_seen_ ? kDecay * draft_ms_ + (1 - kDecay) * (draft_ms / drafted) : draft_ms / drafted;
    draft_seen_ = true;
  }

 private:
  void AddPoint(double x, double y) {
    fit_w_ = kDecay * fit_w_ + 1;
    fit_x_ = kDecay * fit_x_ + x;
    fit_y_ = kDecay * fit_y_ + y;
    fit_xx_ = kDecay * fit_xx_ + x * x;
    fit_xy_ = kDecay * fit_xy_ + x * y;
  }
  // The fitted line, its slope kept within [1%, 100%] of its intercept
  // (timing noise on a busy machine can tilt a fit anywhere).
  double BaseMs() const {
    if (fit_w_ == 0) return 1;
    return std::max(1e-6, (fit_y_ - SlopeMs() * fit_x_) / fit_w_);
  }
  double SlopeMs() const {
    const double spread = fit_w_ * fit_xx_ - fit_x_ * fit_x_;
    return spread > 1e-9 ? (fit_w_ * fit_xy_ - fit_x_ * fit_y_) / spread : 0;
  }
  double RowMs() const {
    if (fit_w_ == 0) return kPriorRowCost;
    const double mean = fit_y_ / fit_w_;
    return std::clamp(SlopeMs(), 0.01 * mean, mean);
  }

  static constexpr double kDecay = 0.9;
  static constexpr double kPriorRowCost = 0.1;  // one more verify row, relative to a step (DESIGN.md target)
  static constexpr double kPriorSpread = 8;     // drafts at the prior's second point
  static constexpr int kProbeEvery = 8;
  int fixed_;
  int max_drafts_;
  double accepted_ = 0;
  double trials_ = 0;
  double draft_ms_ = 0;  // per draft token
  bool draft_seen_ = false;
  double fit_w_ = 0, fit_x_ = 0, fit_y_ = 0, fit_xx_ = 0, fit_xy_ = 0;  // decayed sums of (drafts, verify ms)
  int plain_steps_ = 0;
};

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

}  // namespace

GenerateResult GenerateSpeculative(Context& target, Drafter& drafter, std::span<const TokenId> prompt,
                                   const GenerateOptions& options, const SpecOptions& spec,
                                   const TokenCallback& on_token, SpecStats* stats_out) {
  if (prompt.empty()) Fail("the prompt is empty: nothing to generate from");
  const int n_ctx = target.options().n_ctx;
  if (static_cast<int>(prompt.size()) >= n_ctx) {
    Fail("the prompt has ", prompt.size(), " tokens but the context holds ", n_ctx,
         " (pass a larger -c, up to the model's training context)");
  }
  const int max_block = spec.block > 0 ? spec.block : spec.max_block;
  if (spec.block < 0 || max_block < 1 || max_block > target.options().max_logit_rows) {
    Fail("block size ", max_block, " is out of range (1 .. ", target.options().max_logit_rows, ")");
  }
  options.sampling.Validate();
  const Tokenizer& tokenizer = target.model().tokenizer();
  const int n_vocab = target.model().hparams().n_vocab;
  const bool greedy = options.sampling.temperature <= 0;
  const bool draft_has_probs = !greedy && drafter.samples();

  // Everything the loop touches is allocated here, once.
  Sampler sampler(options.sampling, n_vocab);
  // One length policy per drafter: auto switches between drafters whose
  // acceptance and draft costs differ by an order of magnitude.
  std::vector<std::pair<const Drafter*, DraftLength>> policies;
  policies.reserve(kDrafterStatsSlots);
  auto policy_of = [&](const Drafter& d) -> DraftLength& {
    for (auto& [who, policy] : policies) {
      if (who == &d) return policy;
    }
    if (policies.size() == kDrafterStatsSlots) return policies.back().second;
    return policies.emplace_back(&d, DraftLength(spec)).second;
  };
  std::vector<TokenId> history(prompt.begin(), prompt.end());
  history.reserve(prompt.size() + options.n_predict + max_block);
  std::vector<TokenId> block(max_block);
  std::vector<float> draft_probs(draft_has_probs ? size_t(max_block - 1) * n_vocab : 0);
  std::vector<float> p(greedy ? 0 : n_vocab);
  std::vector<float> residual(greedy ? 0 : n_vocab);
  SpecStats stats;
  stats.method = drafter.name();
  stats.block = spec.block;
  stats.drafted_by_pos.assign(max_block - 1, 0);
  stats.accepted_by_pos.assign(max_block - 1, 0);
  std::vector<DrafterStats> by_drafter(kDrafterStatsSlots);
  for (DrafterStats& d : by_drafter) {
    d.name.reserve(32);
    d.drafted_by_pos.assign(max_block - 1, 0);
    d.accepted_by_pos.assign(max_block - 1, 0);
  }
  int n_drafters_seen = 0;
  GenerateResult result;
  result.prompt_tokens = history;
  result.tokens.reserve(options.n_predict);

  // Emits one committed token; false when generation must stop.
  auto emit = [&](TokenId t, std::span<const float> logits) {
    if (options.n_top > 0) result.top.push_back(TopLogits(logits, options.n_top));
    result.tokens.push_back(t);
    history.push_back(t);
    const bool keep_going = on_token ? on_token(t) : true;
    if (!options.ignore_eos && tokenizer.IsEndOfGeneration(t)) {
      result.stop = StopReason::kEndOfGeneration;
      return false;
    }
    return keep_going && static_cast<int>(result.tokens.size()) < options.n_predict;
  };

  // Prefill: the prompt's last row gives the first token, the first bonus.
  const auto t_prefill = Clock::now();
  target.SetHiddenTaps(drafter.target_taps());
  drafter.Begin(prompt);
  Prefill(target, prompt, [&](int rows) { drafter.Observe(target, rows); });
  result.prefill_ms = MsBetween(t_prefill, Clock::now());

  const auto t_decode = Clock::now();
  bool go = options.n_predict > 0 && emit(sampler.Sample(target.logits(0)), target.logits(0));
  while (go) {
    // The bonus is not in the target's cache yet: the block is [bonus, drafts...].
    const int room = n_ctx - target.n_past();
    if (room < 1) {
      result.stop = StopReason::kContextFull;
      break;
    }
    const int remaining = options.n_predict - static_cast<int>(result.tokens.size());
    const int want = std::min({policy_of(drafter.next_drafter()).Next(), room - 1, remaining - 1});

    const auto t0 = Clock::now();
    int m = 0;
    if (want > 0) {
      const DraftRequest request{history, want,
                                 std::span<float>(draft_probs).first(draft_has_probs ? size_t(want) * n_vocab : 0)};
      m = std::clamp(drafter.Draft(request, std::span<TokenId>(block).subspan(1, want)), 0, want);
    }
    const auto t1 = Clock::now();
    block[0] = history.back();
    target.Forward(std::span<const TokenId>(block).first(m + 1), true);
    const BlockLogits rows{std::span<const float>(target.logits(0).data(), size_t(m + 1) * n_vocab), n_vocab};
    const std::span<const TokenId> drafts = std::span<const TokenId>(block).subspan(1, m);
    const std::span<const float> q = std::span<const float>(draft_probs).first(draft_has_probs ? size_t(m) * n_vocab : 0);
    const Verdict v = greedy ? VerifyGreedy(rows, drafts) : VerifySampled(rows, drafts, q, sampler, p, residual);
    const auto t2 = Clock::now();

    if (spec.trace) stats.trace.push_back({target.n_past() - (m + 1), std::vector<TokenId>(drafts.begin(), drafts.end()), v.accepted});
    target.Trim(m - v.accepted);
    target.Commit();
    drafter.Observe(target, v.accepted + 1);
    for (int i = 0; i < v.accepted && go; ++i) go = emit(drafts[i], rows.row(i));
    if (go) go = emit(v.next, rows.row(v.accepted));
    if (go) drafter.Accept(history, m, v.accepted);
    const auto t3 = Clock::now();

    CountStep(stats, m, v.accepted, MsBetween(t0, t1), MsBetween(t1, t2));
    if (m > 0) {
      CountStep(StatsOf(by_drafter, n_drafters_seen, drafter.last_drafter().name()), m, v.accepted, MsBetween(t0, t1),
                MsBetween(t1, t2));
    }
    stats.commit_ms += MsBetween(t2, t3);
    policy_of(m > 0 ? drafter.last_drafter() : drafter.next_drafter())
        .Observe(m, v.accepted, MsBetween(t0, t1), MsBetween(t1, t2));
  }
  result.decode_ms = MsBetween(t_decode, Clock::now());
  by_drafter.resize(n_drafters_seen);
  stats.by_drafter = std::move(by_drafter);
  if (stats_out != nullptr) *stats_out = std::move(stats);
  return result;
}

}  // namespace kakeya
