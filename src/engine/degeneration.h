// Runaway repetition in generated text: the loops a small or greedy model
// falls into (the shipped model's greedy `def parse_args(` writes the same
// line ~150 times). `kakeya bench` fails a run whose output degenerates, so
// that a speedup is never measured on text nobody would keep.
//
// Three patterns, with thresholds chosen so that ordinary text and code do
// not trip them (tests/degeneration_test.cc holds examples of both kinds).
// A repetition counts only if it holds a word (a run of two letters or more
// that starts an identifier): repeated zeros, `\x00` or `\xff` escapes,
// `0xffffffff` literals, `0, 0, 0` tables and rules of `=` or `-` are
// legitimate data and layout.
//  * A wall of identical lines: one line of kMinWallLineChars+ characters
//    (surrounding whitespace aside) kMinWallLines times in a row; blank
//    lines between the copies do not break the wall.
//  * A short unit tiled: 2 .. kMaxTileUnitChars characters kMinTiles times
//    back to back ("type, type, type, ..."); or one character kMinCharRun
//    times: a letter (as a word), or a mark other than the layout marks
//    `=-#*_~.+/<>|`.
//  * A phrase cycle: the whitespace-separated words repeating with a period
//    of 1 .. kMaxCycleWords words kMinCycles+ times over kMinCycleWords+
//    words: loops of several lines or of a sentence, which the line and unit
//    checks miss. Enumerations (1. 2. 3.), argument lists and tables differ
//    word by word and never cycle.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace kakeya {

inline constexpr int kMinWallLines = 4;
inline constexpr size_t kMinWallLineChars = 4;
inline constexpr int kMinTiles = 8;
inline constexpr size_t kMaxTileUnitChars = 32;
inline constexpr int kMinCharRun = 24;
inline constexpr int kMinCycles = 4;
inline constexpr size_t kMaxCycleWords = 64;
inline constexpr size_t kMinCycleWords = 24;

enum class DegenerationKind { kNone, kWallOfLines, kTiledUnit, kPhraseCycle };

struct Degeneration {
  DegenerationKind kind = DegenerationKind::kNone;
  size_t offset = 0;  // byte offset in the text where the repetition starts
  std::string unit;   // the repeated line, unit or phrase
  int repeats = 0;    // copies in a row
  explicit operator bool() const { return kind != DegenerationKind::kNone; }
  // E.g. `wall of 12 identical lines at byte 40: "x = 1"`; "" when none.
  std::string Describe() const;
};

// The first pattern found (walls, then tiles, then cycles), or kind kNone.
Degeneration FindDegeneration(std::string_view text);

}  // namespace kakeya
