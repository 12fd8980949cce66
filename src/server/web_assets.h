// The chat page `kakeya serve` answers at GET / (web/ in the repository),
// compiled into the binary by cmake/embed_web.cmake (ADR 0020): the server
// reads no files to serve it.
#pragma once

#include <span>
#include <string_view>

namespace kakeya {

struct WebAsset {
  std::string_view path;          // the URL path: "/" for index.html, "/app.js", ...
  std::string_view content_type;
  std::string_view body;
};

// Every embedded file (defined in the generated web_assets_data.cc).
std::span<const WebAsset> WebAssets();

// The asset served at `path`, or nullptr.
const WebAsset* FindWebAsset(std::string_view path);

// Scripts, styles and fetches from the server itself only: no inline
// script (an injected <script> in a reply would not run even if the page's
// escaping failed), nothing from elsewhere, no framing.
inline constexpr std::string_view kWebContentSecurityPolicy =
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

}  // namespace kakeya
