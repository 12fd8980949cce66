// Every metadata value and every tensor of one model per architecture, and of
// each drafter file kind, changed one at a time: the file must load and run
// (a forward; a drafter, speculative steps), or be refused with an Error; no crash, no other exception, no sanitizer report under ASan
// (docs/design.md, invariant 5). model_load_test.cc checks chosen edits' messages;
// this sweeps the edits nobody thought of: zeros, negatives, huge values,
// NaN and infinity in each numeric key, emptied and shortened arrays, each
// tensor dropped and each matrix transposed.

#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "base/error.h"
#include "fixture_util.h"
#include "gguf_copy.h"
#include "engine/generate.h"
#include "model/context.h"
#include "model/model.h"
#include "speculative/drafter_registry.h"
#include "speculative/speculative.h"
#include "test_files.h"

namespace kakeya {
namespace {

struct Edit {
  std::string what;
  MetadataEdit metadata;
  TensorEdit tensors;
};

bool IsInteger(GgufType t) {
  switch (t) {
    case GgufType::kUint8: case GgufType::kInt8: case GgufType::kUint16: case GgufType::kInt16:
    case GgufType::kUint32: case GgufType::kInt32: case GgufType::kUint64: case GgufType::kInt64:
      return true;
    default:
      return false;
  }
}

size_t ElementBytes(GgufType t) {
  switch (t) {
    case GgufType::kUint8: case GgufType::kInt8: case GgufType::kBool: return 1;
    case GgufType::kUint16: case GgufType::kInt16: return 2;
    case GgufType::kUint64: case GgufType::kInt64: case GgufType::kFloat64: return 8;
    default: return 4;
  }
}

// Writes `key` as a value of its own type: integers through int64 (each
// setter takes its type's range), floats as given.
void SetNumber(GgufWriter& w, const std::string& key, GgufType type, double value) {
  switch (type) {
    case GgufType::kUint8: w.SetU8(key, static_cast<uint8_t>(value)); break;
    case GgufType::kInt8: w.SetI8(key, static_cast<int8_t>(value)); break;
    case GgufType::kUint16: w.SetU16(key, static_cast<uint16_t>(value)); break;
    case GgufType::kInt16: w.SetI16(key, static_cast<int16_t>(value)); break;
    case GgufType::kUint32: w.SetU32(key, static_cast<uint32_t>(static_cast<int64_t>(value))); break;
    case GgufType::kInt32: w.SetI32(key, static_cast<int32_t>(value)); break;
    case GgufType::kUint64: w.SetU64(key, static_cast<uint64_t>(static_cast<int64_t>(value))); break;
    case GgufType::kInt64: w.SetI64(key, static_cast<int64_t>(value)); break;
    case GgufType::kFloat32: w.SetF32(key, static_cast<float>(value)); break;
    case GgufType::kFloat64: w.SetF64(key, value); break;
    default: break;
  }
}

std::vector<Edit> EditsOf(const GgufFile& file) {
  std::vector<Edit> edits;
  const double inf = std::numeric_limits<double>::infinity();
  for (const GgufKv& kv : file.metadata()) {
    const std::string key = kv.key;
    const GgufValue& v = kv.value;
    auto with = [&](std::string what, std::function<void(GgufWriter&)> write) {
      edits.push_back({key + " " + what, [key, write](GgufWriter& w, const GgufKv& k) {
                         if (k.key != key) return false;
                         write(w);
                         return true;
                       }, nullptr});
    };
    with("removed", [](GgufWriter&) {});
    if (IsInteger(v.type)) {
      // -1 wraps to the type's largest value in the unsigned ones.
      const bool is_signed = v.type == GgufType::kInt8 || v.type == GgufType::kInt16 || v.type == GgufType::kInt32 ||
                             v.type == GgufType::kInt64;
      const double next = (is_signed ? static_cast<double>(v.i) : static_cast<double>(v.u)) + 1;
      for (const double x : {0.0, -1.0, 2147483647.0, next}) {
        with("= " + std::to_string(x), [=](GgufWriter& w) { SetNumber(w, key, v.type, x); });
      }
    } else if (v.type == GgufType::kFloat32 || v.type == GgufType::kFloat64) {
      for (const double x : {0.0, -1.0, 1e30, inf, std::nan("")}) {
        with("= " + std::to_string(x), [=](GgufWriter& w) { SetNumber(w, key, v.type, x); });
      }
    } else if (v.type == GgufType::kBool) {
      with("flipped", [=](GgufWriter& w) { w.SetBool(key, v.u == 0); });
    } else if (v.type == GgufType::kArray && v.count > 0) {
      if (v.elem_type == GgufType::kString) {
        const std::string first(v.strings[0]);
        with("cut to one string", [=](GgufWriter& w) { w.SetStringArray(key, {first}); });
      } else {
        const GgufType elem = v.elem_type;
        const size_t bytes = ElementBytes(elem);
        std::vector<uint8_t> data(static_cast<const uint8_t*>(v.array_data),
                                  static_cast<const uint8_t*>(v.array_data) + v.count * bytes);
        with("emptied", [=](GgufWriter& w) { w.SetArray(key, elem, nullptr, 0); });
        with("cut to one element", [=](GgufWriter& w) { w.SetArray(key, elem, data.data(), 1); });
        if (IsInteger(elem)) {
          std::vector<uint8_t> negative = data;
          std::memset(negative.data(), 0xFF, bytes);  // -1, or the unsigned type's largest value
          with("first element all ones", [=](GgufWriter& w) { w.SetArray(key, elem, negative.data(), v.count); });
        }
      }
    }
  }
  for (const GgufTensor& t : file.tensors()) {
    const std::string name = t.name;
    edits.push_back({name + " dropped", nullptr, [name](GgufWriter&, const GgufTensor& x) { return x.name == name; }});
    if (t.n_dims == 2 && t.type == DType::kF32 && t.ne[0] != t.ne[1]) {
      edits.push_back({name + " transposed", nullptr, [name](GgufWriter& w, const GgufTensor& x) {
                         if (x.name != name) return false;
                         w.AddTensor(x.name, x.type, {x.ne[1], x.ne[0]}, x.data, x.nbytes);
                         return true;
                       }});
    }
  }
  return edits;
}

// Loads `path` and, when it loads, runs a forward of three tokens.
void LoadAndRun(const std::string& path) {
  const std::unique_ptr<Model> m = Model::Load(path);
  Context ctx(*m, ContextOptions{.n_ctx = 16, .max_batch = 4, .n_threads = 1});
  const TokenId tokens[] = {1, 2, 3};
  ctx.Forward(tokens, true);
}

class ModelLoadEdits : public ::testing::TestWithParam<std::pair<const char*, const char*>> {};

TEST_P(ModelLoadEdits, EveryEditLoadsAndRunsOrIsRefused) {
  const auto [model, folder] = GetParam();
  const std::string src = fixture::ModelPath(model, folder);
  TempDir dir("model_load_edits");
  const std::string path = dir.File("edited.gguf");
  const std::unique_ptr<GgufFile> file = GgufFile::Open(src);
  int loaded = 0, refused = 0;
  for (const Edit& e : EditsOf(*file)) {
    SCOPED_TRACE(e.what);
    std::fprintf(stderr, "edit: %s\n", e.what.c_str());  // the last one names a crash's edit
    WriteEditedCopy(src, path, e.metadata, e.tensors);
    try {
      LoadAndRun(path);
      ++loaded;
    } catch (const Error&) {
      ++refused;
    }
  }
  // The sweep reached both outcomes: edits that matter are refused, and
  // unread keys (general.name, say) leave a model that runs.
  EXPECT_GT(loaded, 0);
  EXPECT_GT(refused, 0);
}

INSTANTIATE_TEST_SUITE_P(OnePerArchitecture, ModelLoadEdits,
                         ::testing::Values(std::pair{"tiny-llama-q4_k_m", "models"},
                                           std::pair{"tiny-qwen3-f32", "models"},
                                           std::pair{"tiny-gemma2-f32", "models"},
                                           std::pair{"tiny-gemma3-f32", "models"},
                                           std::pair{"q3moe-q8_0", "models2"}, std::pair{"g4moe-q8_0", "models2"},
                                           std::pair{"g4dense-f32", "models2"},
                                           std::pair{"glm4moe-mtp-f32", "models2"},
                                           std::pair{"ds4-q8_0", "models3"}, std::pair{"qwen35moe-q8_0", "models4"}),
                         [](const auto& info) {
                           std::string name = info.param.first;
                           for (char& c : name) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
                           return name;
                         });

// A drafter file (`kind` as --spec names it) for `target`, edited like the
// models above: made and run for a few speculative steps, or refused.
struct DrafterFile {
  const char* kind;
  std::string path;
  std::string target;
};

class DrafterLoadEdits : public ::testing::TestWithParam<DrafterFile> {};

TEST_P(DrafterLoadEdits, EveryEditLoadsAndRunsOrIsRefused) {
  const DrafterFile& d = GetParam();
  const std::unique_ptr<Model> target = Model::Load(d.target);
  const std::vector<TokenId> prompt = {1, 300, 301, 302, 303};
  constexpr int kTokens = 12, kMaxBlock = 8;
  GenerateOptions greedy;
  greedy.n_predict = kTokens;
  greedy.ignore_eos = true;
  greedy.sampling.temperature = 0;
  TempDir dir("drafter_load_edits");
  const std::string path = dir.File("edited.gguf");
  const std::unique_ptr<GgufFile> file = GgufFile::Open(d.path);
  int loaded = 0, refused = 0;
  for (const Edit& e : EditsOf(*file)) {
    SCOPED_TRACE(e.what);
    std::fprintf(stderr, "edit: %s\n", e.what.c_str());  // the last one names a crash's edit
    WriteEditedCopy(d.path, path, e.metadata, e.tensors);
    Context ctx(*target, ContextOptions{.n_ctx = 64, .max_batch = 16, .n_threads = 1, .max_logit_rows = kMaxBlock});
    try {
      const std::unique_ptr<Drafter> drafter =
          FindDrafterKind(d.kind)->make(DrafterSetup{*target, ctx, path, greedy.sampling, kMaxBlock});
      Generate(ctx, drafter.get(), prompt, greedy, SpecOptions{.block = 4, .max_block = kMaxBlock}, nullptr,
                          nullptr);
      ++loaded;
    } catch (const Error&) {
      ++refused;
    }
  }
  EXPECT_GT(loaded, 0);
  EXPECT_GT(refused, 0);
}

const std::string kShipped = std::string(KAKEYA_FIXTURES) + "/../../models/";

INSTANTIATE_TEST_SUITE_P(
    EachKind, DrafterLoadEdits,
    ::testing::Values(
        DrafterFile{"dflash", fixture::ModelPath("g4moe-dflash-f32", "models2"), fixture::ModelPath("g4moe-f32", "models2")},
        DrafterFile{"dspark", fixture::ModelPath("ds4-dspark-f32", "models3"), fixture::ModelPath("ds4-f32", "models3")},
        DrafterFile{"assistant", fixture::ModelPath("g4moe-assistant-f32", "models2"),
                    fixture::ModelPath("g4moe-f32", "models2")},
        DrafterFile{"dflash", kShipped + "kakeya-pystdlib-dflash.gguf", kShipped + "kakeya-pystdlib.gguf"},
        DrafterFile{"mtp", kShipped + "kakeya-pystdlib-mtp.gguf", kShipped + "kakeya-pystdlib.gguf"},
        DrafterFile{"draft", fixture::ModelPath("tiny-draft-f32"), fixture::ModelPath("tiny-llama-f32")}),
    [](const auto& info) {
      return std::string(info.param.kind) + "_" + std::to_string(info.index);
    });

}  // namespace
}  // namespace kakeya
