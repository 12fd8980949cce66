#include "engine/degeneration.h"

#include <vector>

namespace kakeya {
namespace {

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

// Bytes of multi-byte UTF-8 characters count as letters, so that loops in
// other scripts are caught too.
bool IsLetter(char c) {
  const auto u = static_cast<unsigned char>(c);
  return (u >= 'a' && u <= 'z') || (u >= 'A' && u <= 'Z') || u >= 0x80;
}

bool IsIdentifierByte(char c) { return IsLetter(c) || (c >= '0' && c <= '9') || c == '_'; }

// Whether text[begin, end) holds a word: an identifier-like run that starts
// with a letter and has two letters or more. A run after a backslash (`\xff`)
// or inside a number (`0xffff`) is an escape or a literal, not a word.
bool HoldsWord(std::string_view text, size_t begin, size_t end) {
  for (size_t i = begin; i < end; ++i) {
    if (!IsLetter(text[i])) continue;
    if (i > 0 && (IsIdentifierByte(text[i - 1]) || text[i - 1] == '\\')) continue;  // not a run's start
    int letters = 0;
    for (size_t j = i; j < text.size() && IsIdentifierByte(text[j]); ++j) letters += IsLetter(text[j]) ? 1 : 0;
    if (letters >= 2) return true;
  }
  return false;
}

struct Piece {
  std::string_view text;
  size_t offset;
};

// Non-blank lines, without their surrounding whitespace.
std::vector<Piece> Lines(std::string_view text) {
  std::vector<Piece> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    size_t a = start, b = end;
    while (a < b && IsSpace(text[a])) ++a;
    while (b > a && IsSpace(text[b - 1])) --b;
    if (b > a) out.push_back({text.substr(a, b - a), a});
    start = end + 1;
  }
  return out;
}

std::vector<Piece> Words(std::string_view text) {
  std::vector<Piece> out;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && IsSpace(text[i])) ++i;
    const size_t start = i;
    while (i < text.size() && !IsSpace(text[i])) ++i;
    if (i > start) out.push_back({text.substr(start, i - start), start});
  }
  return out;
}

Degeneration FindWall(std::string_view text) {
  const std::vector<Piece> lines = Lines(text);
  size_t run_start = 0;
  for (size_t i = 1; i <= lines.size(); ++i) {
    if (i < lines.size() && lines[i].text == lines[run_start].text) continue;
    const int copies = static_cast<int>(i - run_start);
    const std::string_view line = lines[run_start].text;
    const size_t offset = lines[run_start].offset;
    if (copies >= kMinWallLines && line.size() >= kMinWallLineChars && HoldsWord(text, offset, offset + line.size())) {
      return {DegenerationKind::kWallOfLines, offset, std::string(line), copies};
    }
    run_start = i;
  }
  return {};
}

bool IsLayoutMark(char c) {
  for (char m : std::string_view("=-#*_~.+/<>|")) {
    if (c == m) return true;
  }
  return false;
}

Degeneration FindTile(std::string_view text) {
  // One character.
  for (size_t i = 0, run = 1; i < text.size(); ++i) {
    run = i > 0 && text[i] == text[i - 1] ? run + 1 : 1;
    const char c = text[i];
    if (run != kMinCharRun) continue;
    const size_t start = i + 1 - run;
    const bool counts = IsLetter(c) ? HoldsWord(text, start, i + 1) : !IsSpace(c) && !(c >= '0' && c <= '9') && !IsLayoutMark(c);
    if (counts) return {DegenerationKind::kTiledUnit, start, std::string(1, c), kMinCharRun};
  }
  // Units of u characters: text[i] == text[i + u] along (kMinTiles - 1) * u
  // positions in a row means kMinTiles copies of the unit.
  for (size_t u = 2; u <= kMaxTileUnitChars; ++u) {
    size_t run = 0;
    for (size_t i = 0; i + u < text.size(); ++i) {
      run = text[i] == text[i + u] ? run + 1 : 0;
      if (run < (kMinTiles - 1) * u) continue;
      const size_t start = i + 1 - run;
      size_t end = i + u + 1;  // extend over the rest of the tiling
      while (end < text.size() && text[end] == text[end - u]) ++end;
      if (HoldsWord(text, start, end)) {
        return {DegenerationKind::kTiledUnit, start, std::string(text.substr(start, u)), static_cast<int>((end - start) / u)};
      }
      run = 0;  // a tiling of data or layout: look past it
      i = end - u - 1;
    }
  }
  return {};
}

Degeneration FindCycle(std::string_view text) {
  const std::vector<Piece> words = Words(text);
  for (size_t p = 1; p <= kMaxCycleWords; ++p) {
    size_t run = 0;
    for (size_t i = 0; i + p < words.size(); ++i) {
      run = words[i].text == words[i + p].text ? run + 1 : 0;
      if (run < (kMinCycles - 1) * p || run + p < kMinCycleWords) continue;
      const size_t start = i + 1 - run;
      size_t end = i + p + 1;
      while (end < words.size() && words[end].text == words[end - p].text) ++end;
      const size_t first = words[start].offset;
      const size_t last = words[start + p - 1].offset + words[start + p - 1].text.size();
      if (HoldsWord(text, first, last)) {
        return {DegenerationKind::kPhraseCycle, first, std::string(text.substr(first, last - first)),
                static_cast<int>((end - start) / p)};
      }
      run = 0;
      i = end - p - 1;
    }
  }
  return {};
}

}  // namespace

std::string Degeneration::Describe() const {
  std::string what;
  switch (kind) {
    case DegenerationKind::kNone: return "";
    case DegenerationKind::kWallOfLines: what = "wall of " + std::to_string(repeats) + " identical lines"; break;
    case DegenerationKind::kTiledUnit: what = "unit tiled " + std::to_string(repeats) + " times"; break;
    case DegenerationKind::kPhraseCycle: what = "phrase cycled " + std::to_string(repeats) + " times"; break;
  }
  std::string shown;
  for (char c : unit.substr(0, 60)) shown += c == '\n' ? std::string("\\n") : std::string(1, c);
  return what + " at byte " + std::to_string(offset) + ": \"" + shown + (unit.size() > 60 ? "...\"" : "\"");
}

Degeneration FindDegeneration(std::string_view text) {
  if (Degeneration d = FindWall(text)) return d;
  if (Degeneration d = FindTile(text)) return d;
  return FindCycle(text);
}

}  // namespace kakeya
