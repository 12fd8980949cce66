#include "server/web_assets.h"

namespace kakeya {

const WebAsset* FindWebAsset(std::string_view path) {
  for (const WebAsset& asset : WebAssets()) {
    if (asset.path == path) return &asset;
  }
  return nullptr;
}

}  // namespace kakeya
