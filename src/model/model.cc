#include "model/model.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <thread>

#include "base/error.h"
#include "model/arch/architecture.h"
#include "model/model_loader.h"

namespace kakeya {

std::vector<WeightMatrix*> Layer::Matrices() {
  std::vector<WeightMatrix*> out;
  auto add = [&](WeightMatrix& w) {
    if (w.data != nullptr) out.push_back(&w);
  };
  HybridAttention& h = hybrid;
  for (WeightMatrix* w : {&wq, &wk, &wv, &wo, &ffn.gate, &ffn.up, &ffn.down, &moe.router, &shared_expert.gate,
                          &shared_expert.up, &shared_expert.down, &per_layer_input.gate, &per_layer_input.proj,
                          &h.q_a, &h.q_b, &h.kv, &h.out_b, &h.blocks.kv, &h.blocks.gate, &h.index_blocks.kv,
                          &h.index_blocks.gate, &h.index_q_b, &h.index_weights, &hc_attn.fn, &hc_ffn.fn,
                          &deltanet.qkv, &deltanet.gate, &deltanet.beta, &deltanet.alpha, &deltanet.out}) {
    add(*w);
  }
  for (std::vector<WeightMatrix>* experts : {&moe.gate, &moe.up, &moe.down, &h.out_a}) {
    for (WeightMatrix& w : *experts) add(w);
  }
  return out;
}

std::vector<const WeightMatrix*> Layer::Matrices() const {
  std::vector<const WeightMatrix*> out;
  for (WeightMatrix* w : const_cast<Layer*>(this)->Matrices()) out.push_back(w);
  return out;
}

namespace {

size_t Bytes(const WeightMatrix& w) { return static_cast<size_t>(w.row_bytes * w.n_out); }

// What every architecture's layers must satisfy for the forward to run them;
// an architecture file that reads a file into something else is a bug there,
// a file that makes it so is bad input, so both get a message.
void CheckAttention(const ModelLoader& loader, const AttentionSpec& a, int il) {
  if (a.n_head < 1 || a.n_head_kv < 1 || a.n_head % a.n_head_kv != 0) {
    loader.Fail("layer ", il, ": ", a.n_head_kv, " KV heads must divide ", a.n_head, " query heads");
  }
  if (a.head_dim < 1 || a.value_dim < 1 || a.rope.dims < 0 || a.rope.dims > a.head_dim || a.rope.dims % 2 != 0) {
    loader.Fail("layer ", il, ": inconsistent head dimensions (key ", a.head_dim, ", value ", a.value_dim,
                ", rotated ", a.rope.dims, ")");
  }
  if (!(a.rope.base > 0.0f) || !std::isfinite(a.rope.base)) {
    loader.Fail("layer ", il, ": rope base ", a.rope.base, " is out of range");
  }
}

void CheckLayers(const ModelLoader& loader, const Model& m) {
  const HParams& hp = m.hparams();
  if (static_cast<int>(m.layers.size()) != hp.n_layer) {
    loader.Fail(m.layers.size(), " layers bound, block_count says ", hp.n_layer);
  }
  for (int il = 0; il < hp.n_layer; ++il) {
    if (m.layers[il].deltanet.present()) continue;  // no attention: the architecture checked it
    const AttentionSpec& a = m.layers[il].attn;
    CheckAttention(loader, a, il);
    if (a.kv_layer < 0 || a.kv_layer > il || !m.layers[a.kv_layer].writes_kv(a.kv_layer)) {
      loader.Fail("layer ", il, " reads the keys and values of layer ", a.kv_layer, ", which keeps none");
    }
    const AttentionSpec& source = m.layers[a.kv_layer].attn;
    if (source.window != a.window || source.n_head_kv != a.n_head_kv || source.head_dim != a.head_dim ||
        source.value_dim != a.value_dim) {
      loader.Fail("layer ", il, " shares the keys and values of layer ", a.kv_layer,
                  ", whose window or KV geometry differs");
    }
  }
  for (const NextnLayer& N : m.nextn) CheckAttention(loader, N.layer.attn, N.block);
}

// The architecture bound every block as an ordinary layer; the NextN blocks
// (docs/formats/drafters.md 5.1) leave the trunk for Model::nextn with their nextn.*
// tensors, each with a cache of its own (kv_layer 0 of NextnView's model).
// A sidecar's trunk layers were never bound: none stay.
void SplitNextnBlocks(const ModelLoader& loader, Model& m) {
  HParams& hp = m.mutable_hparams();
  const int n_trunk = loader.TrunkLayers();
  for (int il = n_trunk; il < hp.n_layer; ++il) {
    NextnLayer& N = m.nextn.emplace_back();
    N.block = il;
    N.layer = std::move(m.layers[il]);
    N.layer.attn.kv_layer = 0;
    N.eh_proj = loader.Matrix(BlockName(il, "nextn.eh_proj.weight"), 2 * hp.n_embd, hp.n_embd);
    N.enorm = loader.Vector(BlockName(il, "nextn.enorm.weight"), hp.n_embd);
    N.hnorm = loader.Vector(BlockName(il, "nextn.hnorm.weight"), hp.n_embd);
    N.shared_head_norm = loader.OptionalVector(BlockName(il, "nextn.shared_head_norm.weight"), hp.n_embd);
    N.embed_tokens = loader.OptionalMatrix(BlockName(il, "nextn.embed_tokens.weight"), hp.n_embd, hp.n_vocab);
    N.head = loader.OptionalMatrix(BlockName(il, "nextn.shared_head_head.weight"), hp.n_embd, hp.n_vocab);
  }
  m.layers.resize(loader.IsSidecar() ? 0 : n_trunk);
  hp.n_layer = static_cast<int>(m.layers.size());
}

// A tensor no loader asked for is a part of the model this one would leave
// out, computing another model than the file's (llama.cpp refuses such a
// file too: "wrong number of tensors").
void RefuseUnusedTensors(const ModelLoader& loader, std::string_view arch_name) {
  const std::vector<std::string> unused = loader.UnusedTensors();
  if (unused.empty()) return;
  std::string names;
  for (size_t i = 0; i < std::min<size_t>(unused.size(), 3); ++i) names += (i ? ", '" : "'") + unused[i] + "'";
  loader.Fail(unused.size(), " tensor", unused.size() > 1 ? "s" : "", " (", names, unused.size() > 3 ? ", ..." : "",
              ") that the ", arch_name, " architecture does not use: the file holds parts kakeya does not implement, "
              "or its metadata disagrees with its tensors");
}

}  // namespace

std::unique_ptr<Model> Model::Load(const std::string& path) { return Load(path, false); }

std::unique_ptr<Model> Model::LoadSidecar(const std::string& path) { return Load(path, true); }

std::unique_ptr<Model> Model::Load(const std::string& path, bool sidecar) {
  std::unique_ptr<Model> m(new Model());
  m->path_ = path;
  m->gguf_ = GgufFile::Open(path);
  const GgufFile& gguf = *m->gguf_;

  const std::string_view arch_name = gguf.GetString("general.architecture");
  m->arch_ = FindArchitecture(arch_name);
  if (m->arch_ == nullptr) {
    Fail(path, ": architecture '", arch_name, "' is not supported (supported: ", SupportedArchitectureNames(), ")");
  }
  m->tokenizer_ = Tokenizer::FromGguf(gguf);
  m->hp_.arch = std::string(arch_name);
  m->hp_.n_vocab = m->tokenizer_->n_vocab();

  const ModelLoader loader(gguf, m->arch_->name);
  if (loader.IsSidecar() != sidecar) {
    loader.Fail(sidecar ? "not an MTP sidecar (it has trunk layers, or no nextn_predict_layers)"
                        : "an MTP sidecar (NextN layers only): use it as a drafter, --spec mtp --draft FILE");
  }
  m->arch_->load(loader, *m);
  SplitNextnBlocks(loader, *m);
  CheckLayers(loader, *m);
  RefuseUnusedTensors(loader, arch_name);
  m->MoveMatricesToWeightBuffer();
  return m;
}

std::unique_ptr<Model> Model::LoadDrafterStack(const std::string& path, const Architecture& arch,
                                               const std::function<void(const ModelLoader&)>& bind_rest) {
  std::unique_ptr<Model> m(new Model());
  m->path_ = path;
  m->gguf_ = GgufFile::Open(path);
  m->arch_ = &arch;
  m->tokenizer_ = Tokenizer::FromGguf(*m->gguf_);
  m->hp_.arch = std::string(arch.name);
  m->hp_.n_vocab = m->tokenizer_->n_vocab();
  const ModelLoader loader(*m->gguf_, arch.name);
  arch.load(loader, *m);
  CheckLayers(loader, *m);
  bind_rest(loader);
  RefuseUnusedTensors(loader, arch.name);
  m->MoveMatricesToWeightBuffer();
  return m;
}

std::unique_ptr<Model> Model::NextnView(const Model& owner, const Model& target) {
  const NextnLayer& block = owner.nextn.at(0);
  std::unique_ptr<Model> m(new Model());
  m->path_ = owner.path_;
  m->arch_ = owner.arch_;
  m->hp_ = owner.hp_;
  m->hp_.n_layer = 1;
  m->token_embd = block.embed_tokens.data != nullptr ? block.embed_tokens : target.token_embd;
  m->output_norm = block.shared_head_norm != nullptr ? block.shared_head_norm : target.output_norm;
  m->output = block.head.data != nullptr ? block.head : target.output;
  m->hc_head = owner.hc_head;  // deepseek4: the sidecar's own, or the target file's
  m->layers = {block.layer};
  return m;
}

void Model::MoveMatricesToWeightBuffer() {
  std::vector<WeightMatrix*> matrices;
  if (output.data != nullptr) matrices.push_back(&output);  // a sidecar borrows its target's
  if (per_layer_model_proj.data != nullptr) matrices.push_back(&per_layer_model_proj);
  if (hc_head.present()) matrices.push_back(&hc_head.fn);
  for (Layer& L : layers) {
    for (WeightMatrix* w : L.Matrices()) matrices.push_back(w);
  }
  for (NextnLayer& L : nextn) {
    for (WeightMatrix* w : L.layer.Matrices()) matrices.push_back(w);
    for (WeightMatrix* w : {&L.eh_proj, &L.head}) {
      if (w->data != nullptr) matrices.push_back(w);
    }
  }
  // Every streamed matrix moves into one buffer of 2 MiB pages
  // (AllocateHugePages), repacked where it has a faster layout and copied as
  // it is otherwise, instead of being read from the file's 4 KiB pages.
  // Measured on Zen 4 (1.25B F16, 2 threads, bench verify, alternating):
  // 1 row 47.2-48.0 -> 44.1 ms (57.5-57.9 -> 56.2-56.5 while memory was
  // slower), 8 rows 91.5-94.0 -> 89.0-91.6 ms.
  auto aligned = [](size_t n) { return (n + 63) / 64 * 64; };
  auto bytes_in_buffer = [](const WeightMatrix& w) { return CanPack(w) ? PackedBytes(w) : Bytes(w); };
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
      if (source.data != token_embd.data) gguf_->ReleasePages(source.data, Bytes(source));
    }
  };
  std::vector<std::thread> threads(std::max(1u, std::thread::hardware_concurrency()) - 1);
  for (std::thread& t : threads) t = std::thread(work);
  work();
  for (std::thread& t : threads) t.join();
}

size_t Model::dense_weight_bytes() const {
  // One embedding row per token; the output head is read whole (tied or not).
  size_t total = static_cast<size_t>(token_embd.row_bytes) + Bytes(output);
  if (per_layer_model_proj.data != nullptr) total += Bytes(per_layer_model_proj) + per_layer_token_embd.row_bytes;
  for (const Layer& L : layers) {
    for (const WeightMatrix* w : L.Matrices()) total += Bytes(*w);
    for (const std::vector<WeightMatrix>* experts : {&L.moe.gate, &L.moe.up, &L.moe.down}) {
      for (const WeightMatrix& w : *experts) total -= Bytes(w);
    }
  }
  return total;
}

size_t Model::expert_bytes(int il) const {
  const MixtureOfExperts& m = layers[il].moe;
  if (!m.present()) return 0;
  return Bytes(m.gate[0]) + Bytes(m.up[0]) + Bytes(m.down[0]);
}

bool Model::has_experts() const {
  return std::any_of(layers.begin(), layers.end(), [](const Layer& L) { return L.moe.present(); });
}

size_t Model::weight_bytes() const {
  size_t total = dense_weight_bytes();
  for (int il = 0; il < static_cast<int>(layers.size()); ++il) {
    total += static_cast<size_t>(layers[il].moe.n_used) * expert_bytes(il);
  }
  return total;
}

void BindEmbeddingsAndHead(const ModelLoader& loader, Model& model, bool tied) {
  if (loader.IsSidecar()) return;
  const HParams& hp = model.hparams();
  model.token_embd = loader.Matrix("token_embd.weight", hp.n_embd, hp.n_vocab);
  model.output_norm = loader.Vector("output_norm.weight", hp.n_embd);
  model.output = tied || loader.Find("output.weight") == nullptr
                     ? model.token_embd
                     : loader.Matrix("output.weight", hp.n_embd, hp.n_vocab);
}

}  // namespace kakeya
