// The chat page's files as compiled into the server (cmake/embed_web.cmake),
// against the files in web/ read here from the source tree.
#include "server/web_assets.h"
#include "test_files.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace kakeya {
namespace {

const std::filesystem::path kWebDir = std::filesystem::path(KAKEYA_FIXTURES) / ".." / ".." / "web";

TEST(WebAssets, EveryFileOfWebIsEmbeddedByteForByte) {
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(kWebDir)) {
    const std::string name = entry.path().filename().string();
    const std::string path = name == "index.html" ? "/" : "/" + name;
    const WebAsset* asset = FindWebAsset(path);
    ASSERT_NE(asset, nullptr) << name;
    EXPECT_EQ(asset->body, ReadFile(entry.path())) << name;
    ++files;
  }
  EXPECT_EQ(static_cast<size_t>(files), WebAssets().size());
  EXPECT_GE(files, 3);  // index.html, app.js, style.css at least
}

TEST(WebAssets, ContentTypesFollowTheExtension) {
  EXPECT_EQ(FindWebAsset("/")->content_type, "text/html; charset=utf-8");
  EXPECT_EQ(FindWebAsset("/app.js")->content_type, "text/javascript; charset=utf-8");
  EXPECT_EQ(FindWebAsset("/style.css")->content_type, "text/css; charset=utf-8");
}

TEST(WebAssets, OtherPathsAreNotAssets) {
  EXPECT_EQ(FindWebAsset("/index.html"), nullptr);  // the page is served at / only
  EXPECT_EQ(FindWebAsset("/app.js/"), nullptr);
  EXPECT_EQ(FindWebAsset("/v1/models"), nullptr);
  EXPECT_EQ(FindWebAsset(""), nullptr);
}

}  // namespace
}  // namespace kakeya
