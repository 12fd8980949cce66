// One file per architecture family in this folder: how its hyper-parameters
// and tensors are read into Layer descriptions (model/layer.h), and how its
// decoder layer composes the blocks of a forward pass
// (model/forward_pass.h). Adding an architecture is one new file plus one
// line in registry.cc.
#pragma once

#include <string>
#include <string_view>

namespace kakeya {

class ForwardPass;
class Model;
class ModelLoader;
struct Layer;

struct Architecture {
  std::string_view name;  // general.architecture
  // Reads the hyper-parameters and binds every tensor into `model`: its
  // hparams, embeddings, output head and one Layer per decoder layer.
  void (*load)(const ModelLoader& loader, Model& model);
  // Layer `il` over the rows of `pass`: the residual stream in, the residual
  // stream out.
  void (*run_layer)(ForwardPass& pass, const Layer& layer, int il);
};

// A DSpark drafter's stack of deepseek4 stages in a dflash file
// (speculative/dspark_drafter.h). Not in the registry: a dflash file is a
// drafter, not a model of its own (Model::LoadDrafterStack).
extern const Architecture kDSparkStages;

// The architecture named `name`, or nullptr.
const Architecture* FindArchitecture(std::string_view name);
// "llama, qwen2, ..." for messages.
std::string SupportedArchitectureNames();

}  // namespace kakeya
