// A loaded model: hyper-parameters, tokenizer and weights bound in place from
// the memory-mapped GGUF, one Layer description per decoder layer
// (model/layer.h). Immutable after Load(); per-sequence state (KV cache,
// scratch) lives in a Context (model/context.h). What differs between
// architectures lives in one file per family (model/arch/).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/huge_pages.h"
#include "gguf/gguf.h"
#include "kernels/cpu/matmul.h"
#include "model/hparams.h"
#include "model/layer.h"
#include "tokenizer/tokenizer.h"

namespace kakeya {

struct Architecture;
class ModelLoader;

// A multi-token-prediction (NextN) block stored after the trunk, or in an
// MTP sidecar file (docs/formats/drafters.md 5.1): a decoder layer whose input joins the
// next token's embedding with the trunk's hidden state. Loaded for the MTP
// drafter; the target's forward does not run it.
struct NextnLayer {
  int block = 0;  // its blk index in the file (the first one's: the trunk's layer count)
  Layer layer;    // attn.kv_layer 0: its own cache, as the one layer of NextnView
  WeightMatrix eh_proj;                 // [2 * n_embd, n_embd]
  const float* enorm = nullptr;         // F32 [n_embd], the embedding's norm
  const float* hnorm = nullptr;         // F32 [n_embd], the hidden state's norm
  const float* shared_head_norm = nullptr;  // F32 [n_embd], optional
  WeightMatrix embed_tokens;            // optional: else the trunk's token_embd
  WeightMatrix head;                    // optional: else the trunk's output
};

class Model {
 public:
  // Maps the file, reads hyper-parameters and the tokenizer, binds every
  // tensor (checking names, shapes and types). Throws Error naming the file
  // and the key or tensor at fault.
  // Refuses an MTP sidecar (it is not a model on its own).
  static std::unique_ptr<Model> Load(const std::string& path);
  // An MTP sidecar (ModelLoader::IsSidecar): its NextN blocks in `nextn`, no
  // trunk layers, embeddings or head (n_layer 0). Refuses any other file.
  static std::unique_ptr<Model> LoadSidecar(const std::string& path);
  // The first NextN block of `owner` (the target itself, or a sidecar loaded
  // for it) as a one-layer model for a Context: the owner's hyper-parameters
  // and architecture, the block as layer 0, and the block's own embedding,
  // head norm and head where it has them, else the target's. It shares every
  // weight (owner and target must outlive it) and has no file or tokenizer.
  static std::unique_ptr<Model> NextnView(const Model& owner, const Model& target);
  // A drafter's own stack of layers in a drafter file, read by `arch` (one
  // outside the registry, e.g. kDSparkStages); `bind_rest` then binds the
  // drafter's other tensors from the same loader, and a tensor neither bound
  // is refused, as Load refuses it. Embeddings or head the file lacks stay
  // null for the drafter to lend the target's.
  static std::unique_ptr<Model> LoadDrafterStack(const std::string& path, const Architecture& arch,
                                                 const std::function<void(const ModelLoader&)>& bind_rest);

  const HParams& hparams() const { return hp_; }
  const Architecture& architecture() const { return *arch_; }
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  const GgufFile& gguf() const { return *gguf_; }
  const std::string& path() const { return path_; }

  WeightMatrix token_embd;           // [n_embd, n_vocab]
  const float* output_norm = nullptr;  // F32 [n_embd]
  WeightMatrix output;               // [n_embd, n_vocab] (== token_embd when tied)
  std::vector<Layer> layers;         // [n_layer]
  // Gemma 4 per-layer embeddings (n_embd_per_layer = E > 0).
  WeightMatrix per_layer_token_embd;  // [E * n_layer, n_vocab]
  WeightMatrix per_layer_model_proj;  // [n_embd, E * n_layer]
  const float* per_layer_proj_norm = nullptr;  // F32 [E]
  std::vector<NextnLayer> nextn;
  HyperMixer hc_head;  // deepseek4: the streams' mix into the output head's input

  // Bytes of weights one token's forward step reads: every dense matrix, the
  // output head, one embedding row, and n_used experts per mixture (for
  // bandwidth figures).
  size_t weight_bytes() const;
  // Logits a row gets: the head's outputs, n_vocab, unless a drafter's model
  // keeps only the head's first rows (FirstOutputs, DraftVocabSize).
  int n_logits() const { return static_cast<int>(output.n_out); }
  // Bytes of the matrices every row reads whatever its experts (all but the
  // experts), and of one expert of layer il (0 for layers without experts).
  size_t dense_weight_bytes() const;
  size_t expert_bytes(int il) const;
  bool has_experts() const;

  // For the architecture files' loaders (model/arch/).
  HParams& mutable_hparams() { return hp_; }

 private:
  Model() = default;
  static std::unique_ptr<Model> Load(const std::string& path, bool sidecar);
  // Moves every matrix the forward streams into one buffer of 2 MiB pages,
  // repacked where it has a faster layout (matmul.h, PackWeights), once, and
  // drops the file pages it no longer reads.
  void MoveMatricesToWeightBuffer();
  std::string path_;
  std::unique_ptr<GgufFile> gguf_;
  std::unique_ptr<Tokenizer> tokenizer_;
  const Architecture* arch_ = nullptr;
  HParams hp_;
  HugePageBuffer weight_buffer_;  // MoveMatricesToWeightBuffer
};

// For the architecture files: token_embd, output_norm and output (absent or
// `tied`: token_embd) into `model`; none in an MTP sidecar.
void BindEmbeddingsAndHead(const ModelLoader& loader, Model& model, bool tied);

}  // namespace kakeya
