#include "model/model.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <thread>

#include "base/error.h"

namespace kakeya {
namespace {

// Architectures this build can run, and how they differ (STYLE.md item 2:
// differences between families are flags, not copied files). FORMATS.md 3.4.
enum class Family { kLlama, kGemma2, kGemma3 };
struct ArchTraits {
  std::string_view name;
  Family family;
  RopeStyle rope_style;
  bool qk_norm;
};
constexpr ArchTraits kArchitectures[] = {
    {"llama", Family::kLlama, RopeStyle::kNormal, false},
    {"qwen2", Family::kLlama, RopeStyle::kNeox, false},
    {"qwen3", Family::kLlama, RopeStyle::kNeox, true},
    {"gemma2", Family::kGemma2, RopeStyle::kNeox, false},
    {"gemma3", Family::kGemma3, RopeStyle::kNeox, true},
};

std::string SupportedArchitectures() {
  std::string out;
  for (const ArchTraits& a : kArchitectures) {
    if (!out.empty()) out += ", ";
    out += a.name;
  }
  return out;
}

// Binds GGUF tensors by name, checking shape and type.
class TensorBinder {
 public:
  TensorBinder(const GgufFile& gguf, std::string_view arch) : gguf_(gguf), arch_(arch) {}

  const GgufTensor* Find(const std::string& name) const { return gguf_.FindTensor(name); }

  const GgufTensor& Require(const std::string& name) const {
    const GgufTensor* t = gguf_.FindTensor(name);
    if (t == nullptr) {
      Fail(gguf_.name(), ": missing tensor '", name, "' (required by architecture ", arch_, ")");
    }
    return *t;
  }

  // A 1-D F32 vector of n elements (norm weights, biases).
  const float* Vector(const GgufTensor& t, int64_t n) const {
    if (t.type != DType::kF32) {
      Fail(gguf_.name(), ": tensor '", t.name, "' has type ", NameOf(t.type),
           "; kakeya expects F32 for 1-D tensors");
    }
    if (t.elements() != n || t.ne[0] != n) {
      Fail(gguf_.name(), ": tensor '", t.name, "' has ", t.elements(), " elements, expected ", n);
    }
    return reinterpret_cast<const float*>(t.data);
  }
  const float* Vector(const std::string& name, int64_t n) const { return Vector(Require(name), n); }
  const float* OptionalVector(const std::string& name, int64_t n) const {
    const GgufTensor* t = Find(name);
    return t == nullptr ? nullptr : Vector(*t, n);
  }

  WeightMatrix Matrix(const GgufTensor& t, int64_t n_in, int64_t n_out) const {
    if (t.n_dims != 2 || t.ne[0] != n_in || t.ne[1] != n_out) {
      Fail(gguf_.name(), ": tensor '", t.name, "' has shape [", t.ne[0], ", ", t.ne[1], ", ",
           t.ne[2], ", ", t.ne[3], "], expected [", n_in, ", ", n_out, "]");
    }
    if (!IsSupportedWeightType(t.type)) {
      const std::string_view type_name = NameOf(t.type);
      Fail(gguf_.name(), ": tensor '", t.name, "' has type ",
           type_name.empty() ? std::string_view("unknown") : type_name,
           ", which kakeya cannot compute with yet (supported: F32, F16, BF16, Q8_0, Q4_0, "
           "Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K)");
    }
    return WeightMatrix{t.type, n_in, n_out, t.data, RowBytes(t.type, n_in)};
  }
  WeightMatrix Matrix(const std::string& name, int64_t n_in, int64_t n_out) const {
    return Matrix(Require(name), n_in, n_out);
  }

 private:
  const GgufFile& gguf_;
  std::string_view arch_;
};

int PositiveKey(const GgufFile& gguf, const std::string& key) {
  const uint32_t v = gguf.GetU32(key);
  if (v == 0 || v > (1u << 24)) Fail(gguf.name(), ": ", key, " = ", v, " is out of range");
  return static_cast<int>(v);
}

// Gemma 2/3 (FORMATS.md 3.4): scaled embeddings, post-norms, GeGLU, soft-caps
// and sliding-window layers.
void ReadGemmaHParams(const GgufFile& gguf, const ArchTraits& arch, HParams& hp) {
  const std::string p = std::string(arch.name) + ".";
  const bool gemma2 = arch.family == Family::kGemma2;
  hp.ffn_act = FfnActivation::kGelu;
  hp.post_norms = true;
  hp.embd_scale = std::sqrt(static_cast<float>(hp.n_embd));
  // The 27B models scale queries by 1/sqrt(n_embd / n_head) (HF query_pre_attn_scalar).
  if ((gemma2 && hp.n_layer == 46) || (!gemma2 && hp.n_layer == 62)) {
    hp.attn_scale = 1.0f / std::sqrt(static_cast<float>(hp.n_embd / hp.n_head));
  }
  if (gemma2) {
    hp.attn_softcap = gguf.FindF32(p + "attn_logit_softcapping").value_or(50.0f);
    hp.final_softcap = gguf.FindF32(p + "final_logit_softcapping").value_or(30.0f);
    hp.n_swa = gguf.FindU32(p + "attention.sliding_window").value_or(4096);
    hp.rope_base_swa = gguf.FindF32(p + "rope.freq_base_swa").value_or(hp.rope_base);
  } else {
    hp.final_softcap = gguf.FindF32(p + "final_logit_softcapping").value_or(0.0f);
    hp.n_swa = gguf.FindU32(p + "attention.sliding_window").value_or(0);
    hp.rope_base_swa = gguf.FindF32(p + "rope.freq_base_swa").value_or(10000.0f);
  }
  if (hp.attn_softcap < 0 || hp.final_softcap < 0 || !(hp.rope_base_swa > 0)) {
    Fail(gguf.name(), ": negative soft-cap or non-positive rope.freq_base_swa");
  }

  // Which layers slide: an explicit bool array, or a period n where the last
  // layer of every period is global (llama.cpp set_swa_pattern).
  hp.swa_layers.assign(hp.n_layer, 0);
  if (hp.n_swa == 0) return;
  const std::string key = p + "attention.sliding_window_pattern";
  const GgufValue* pattern = gguf.Find(key);
  if (pattern != nullptr && pattern->type == GgufType::kArray) {
    if (pattern->elem_type != GgufType::kBool || pattern->count != static_cast<uint64_t>(hp.n_layer)) {
      Fail(gguf.name(), ": ", key, " must be a bool array of block_count (", hp.n_layer, ") entries");
    }
    for (int il = 0; il < hp.n_layer; ++il) hp.swa_layers[il] = pattern->array_data[il] != 0;
    return;
  }
  const uint32_t period = pattern != nullptr ? gguf.GetU32(key) : (gemma2 ? 2 : 6);
  for (int il = 0; il < hp.n_layer; ++il) {
    hp.swa_layers[il] = period == 0 || (period > 1 && static_cast<uint32_t>(il) % period < period - 1);
  }
}

HParams ReadHParams(const GgufFile& gguf, const ArchTraits& arch, int n_vocab) {
  const std::string p = std::string(arch.name) + ".";
  HParams hp;
  hp.arch = std::string(arch.name);
  hp.n_vocab = n_vocab;
  hp.n_embd = PositiveKey(gguf, p + "embedding_length");
  hp.n_layer = PositiveKey(gguf, p + "block_count");
  hp.n_ff = PositiveKey(gguf, p + "feed_forward_length");
  hp.n_head = PositiveKey(gguf, p + "attention.head_count");
  hp.n_head_kv = gguf.FindU32(p + "attention.head_count_kv").value_or(hp.n_head);
  hp.n_ctx_train = PositiveKey(gguf, p + "context_length");
  if (hp.n_head_kv <= 0 || hp.n_head % hp.n_head_kv != 0) {
    Fail(gguf.name(), ": ", p, "attention.head_count_kv = ", hp.n_head_kv,
         " must divide head_count = ", hp.n_head);
  }
  hp.head_dim = gguf.FindU32(p + "attention.key_length").value_or(hp.n_embd / hp.n_head);
  hp.value_dim = gguf.FindU32(p + "attention.value_length").value_or(hp.head_dim);
  hp.rope_dims = gguf.FindU32(p + "rope.dimension_count").value_or(hp.head_dim);
  if (hp.head_dim <= 0 || hp.value_dim <= 0 || hp.rope_dims <= 0 || hp.rope_dims > hp.head_dim ||
      hp.rope_dims % 2 != 0) {
    Fail(gguf.name(), ": inconsistent head dimensions (key_length ", hp.head_dim,
         ", value_length ", hp.value_dim, ", rope.dimension_count ", hp.rope_dims, ")");
  }
  hp.norm_eps = gguf.GetF32(p + "attention.layer_norm_rms_epsilon");
  hp.rope_base = gguf.FindF32(p + "rope.freq_base").value_or(10000.0f);
  if (!(hp.norm_eps >= 0.0f) || !(hp.rope_base > 0.0f) || !std::isfinite(hp.rope_base)) {
    Fail(gguf.name(), ": layer_norm_rms_epsilon ", hp.norm_eps, " or rope.freq_base ",
         hp.rope_base, " is out of range");
  }
  if (const auto scaling = gguf.FindString(p + "rope.scaling.type");
      scaling && *scaling != "none" && *scaling != "linear") {
    Fail(gguf.name(), ": ", p, "rope.scaling.type = '", *scaling,
         "' is not supported yet (supported: none, linear with factor 1)");
  }
  if (const auto factor = gguf.FindF32(p + "rope.scaling.factor");
      factor && *factor != 0.0f && *factor != 1.0f) {
    Fail(gguf.name(), ": ", p, "rope.scaling.factor = ", *factor, " is not supported yet");
  }
  hp.rope_style = arch.rope_style;
  hp.qk_norm = arch.qk_norm;
  hp.attn_scale = 1.0f / std::sqrt(static_cast<float>(hp.head_dim));
  if (arch.family != Family::kLlama) ReadGemmaHParams(gguf, arch, hp);
  return hp;
}

}  // namespace

std::unique_ptr<Model> Model::Load(const std::string& path) {
  std::unique_ptr<Model> m(new Model());
  m->path_ = path;
  m->gguf_ = GgufFile::Open(path);
  const GgufFile& gguf = *m->gguf_;

  const std::string_view arch_name = gguf.GetString("general.architecture");
  const ArchTraits* arch = nullptr;
  for (const ArchTraits& a : kArchitectures) {
    if (a.name == arch_name) arch = &a;
  }
  if (arch == nullptr) {
    Fail(path, ": architecture '", arch_name, "' is not supported (supported: ",
         SupportedArchitectures(), ")");
  }

  m->tokenizer_ = Tokenizer::FromGguf(gguf);
  HParams& hp = m->hp_;
  hp = ReadHParams(gguf, *arch, m->tokenizer_->n_vocab());

  const TensorBinder bind(gguf, arch->name);
  const int64_t n_embd = hp.n_embd;
  const int64_t q_width = int64_t{hp.n_head} * hp.head_dim;
  const int64_t k_width = int64_t{hp.n_head_kv} * hp.head_dim;
  const int64_t v_width = int64_t{hp.n_head_kv} * hp.value_dim;
  const int64_t o_width = int64_t{hp.n_head} * hp.value_dim;

  m->token_embd = bind.Matrix("token_embd.weight", n_embd, hp.n_vocab);
  m->output_norm = bind.Vector("output_norm.weight", n_embd);
  // gemma2 always uses token_embd as the output head (llama.cpp ignores output.weight).
  if (bind.Find("output.weight") != nullptr && arch->family != Family::kGemma2) {
    m->output = bind.Matrix("output.weight", n_embd, hp.n_vocab);
  } else {
    m->output = m->token_embd;  // tied
  }
  if (bind.Find("rope_freqs.weight") != nullptr) {
    m->rope_freqs = bind.Vector("rope_freqs.weight", hp.rope_dims / 2);
  }

  m->layers.resize(hp.n_layer);
  for (int il = 0; il < hp.n_layer; ++il) {
    const std::string b = "blk." + std::to_string(il) + ".";
    LayerWeights& L = m->layers[il];
    L.attn_norm = bind.Vector(b + "attn_norm.weight", n_embd);
    L.wq = bind.Matrix(b + "attn_q.weight", n_embd, q_width);
    L.wk = bind.Matrix(b + "attn_k.weight", n_embd, k_width);
    L.wv = bind.Matrix(b + "attn_v.weight", n_embd, v_width);
    L.wo = bind.Matrix(b + "attn_output.weight", o_width, n_embd);
    L.bq = bind.OptionalVector(b + "attn_q.bias", q_width);
    L.bk = bind.OptionalVector(b + "attn_k.bias", k_width);
    L.bv = bind.OptionalVector(b + "attn_v.bias", v_width);
    if (hp.qk_norm) {
      L.q_norm = bind.Vector(b + "attn_q_norm.weight", hp.head_dim);
      L.k_norm = bind.Vector(b + "attn_k_norm.weight", hp.head_dim);
    }
    L.ffn_norm = bind.Vector(b + "ffn_norm.weight", n_embd);
    if (hp.post_norms) {
      L.post_attn_norm = bind.Vector(b + "post_attention_norm.weight", n_embd);
      L.post_ffn_norm = bind.Vector(b + "post_ffw_norm.weight", n_embd);
    }
    L.w_gate = bind.Matrix(b + "ffn_gate.weight", n_embd, hp.n_ff);
    L.w_up = bind.Matrix(b + "ffn_up.weight", n_embd, hp.n_ff);
    L.w_down = bind.Matrix(b + "ffn_down.weight", hp.n_ff, n_embd);
  }
  m->MoveMatricesToWeightBuffer();
  return m;
}

void Model::MoveMatricesToWeightBuffer() {
  std::vector<WeightMatrix*> matrices = {&output};
  for (LayerWeights& L : layers) {
    for (WeightMatrix* w : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down}) {
      matrices.push_back(w);
    }
  }
  // Every streamed matrix moves into one buffer of 2 MiB pages
  // (AllocateHugePages), repacked where it has a faster layout and copied as
  // it is otherwise, instead of being read from the file's 4 KiB pages.
  // Measured on Zen 4 (1.25B F16, 2 threads, bench verify, alternating):
  // 1 row 47.2-48.0 -> 44.1 ms (57.5-57.9 -> 56.2-56.5 while memory was
  // slower), 8 rows 91.5-94.0 -> 89.0-91.6 ms.
  auto aligned = [](size_t n) { return (n + 63) / 64 * 64; };
  auto bytes_in_buffer = [](const WeightMatrix& w) {
    return CanPack(w) ? PackedBytes(w) : static_cast<size_t>(w.row_bytes * w.n_out);
  };
  size_t total = 0;
  for (const WeightMatrix* w : matrices) total += aligned(bytes_in_buffer(*w));
  if (total == 0) return;
  weight_buffer_ = AllocateHugePages(total);
  if (!weight_buffer_) Fail(path_, ": cannot allocate ", RoundUpToHugePages(total), " bytes for the weights");
  std::vector<std::pair<WeightMatrix*, uint8_t*>> jobs;
  size_t offset = 0;
  for (WeightMatrix* w : matrices) {
    jobs.emplace_back(w, weight_buffer_.get() + offset);
    offset += aligned(bytes_in_buffer(*w));
  }
  // Matrices are independent: move them on every core (load time of a 1B
  // Q8_0 model is about one pass over its bytes per core otherwise).
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i; (i = next.fetch_add(1)) < jobs.size();) {
      const WeightMatrix source = *jobs[i].first;
      WeightMatrix& w = *jobs[i].first;
      if (CanPack(source)) {
        w = PackWeights(source, jobs[i].second);
      } else {
        std::memcpy(jobs[i].second, source.data, bytes_in_buffer(source));
        w.data = jobs[i].second;
      }
      // The token embedding rows stay in use (one row per token) when tied.
      if (source.data != token_embd.data) {
        gguf_->ReleasePages(source.data, static_cast<size_t>(source.row_bytes * source.n_out));
      }
    }
  };
  std::vector<std::thread> threads(std::max(1u, std::thread::hardware_concurrency()) - 1);
  for (std::thread& t : threads) t = std::thread(work);
  work();
  for (std::thread& t : threads) t.join();
}

size_t Model::weight_bytes() const {
  auto bytes = [](const WeightMatrix& w) { return static_cast<size_t>(w.row_bytes * w.n_out); };
  // One embedding row per token; the output head is read whole (tied or not).
  size_t total = static_cast<size_t>(token_embd.row_bytes) + bytes(output);
  for (const LayerWeights& L : layers) {
    total += bytes(L.wq) + bytes(L.wk) + bytes(L.wv) + bytes(L.wo);
    total += bytes(L.w_gate) + bytes(L.w_up) + bytes(L.w_down);
  }
  return total;
}

}  // namespace kakeya
