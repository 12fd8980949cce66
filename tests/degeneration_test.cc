// The degeneration gate of `kakeya bench` (src/engine/degeneration.h): loops
// trip it, ordinary prose and code -- enumerations, argument lists, tables,
// data literals, code that repeats a little -- do not.
#include "engine/degeneration.h"

#include <string>

#include <gtest/gtest.h>

namespace kakeya {
namespace {

std::string Repeat(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

// Ordinary text: no finding, and the finding named if there is one.
void ExpectClean(const std::string& text) { EXPECT_FALSE(FindDegeneration(text)) << FindDegeneration(text).Describe(); }

TEST(Degeneration, AWallOfIdenticalLinesTrips) {
  // The shipped model's greedy `def parse_args(` (scripts/demo.sh).
  const std::string text = "def parse_args(\n" + Repeat("        options=None,\n", 12);
  const Degeneration d = FindDegeneration(text);
  EXPECT_EQ(d.kind, DegenerationKind::kWallOfLines) << d.Describe();
  EXPECT_EQ(d.unit, "options=None,");
  EXPECT_EQ(d.repeats, 12);
  EXPECT_EQ(d.offset, text.find("options"));
  EXPECT_NE(d.Describe().find("wall of 12 identical lines"), std::string::npos) << d.Describe();
}

TEST(Degeneration, BlankLinesDoNotBreakAWall) {
  // models/README.md: `def parse150(resp):`, flagged there too.
  const std::string text = "def parse150(resp):\n" + Repeat("    enc = b' \\t\\n\\r\\n'\n\n", 5);
  EXPECT_EQ(FindDegeneration(text).kind, DegenerationKind::kWallOfLines);
}

TEST(Degeneration, AShortUnitTiledEightTimesTrips) {
  const std::string text = "return f(host, port, " + Repeat("type, ", 8) + "x)\n";
  const Degeneration d = FindDegeneration(text);
  EXPECT_EQ(d.kind, DegenerationKind::kTiledUnit) << d.Describe();
  EXPECT_EQ(d.repeats, 8);
  EXPECT_EQ(d.unit, ", type");  // the tiling starts at the comma after `port`
}

TEST(Degeneration, SevenTilesDoNot) {
  EXPECT_FALSE(FindDegeneration("return f(host, port, " + Repeat("type, ", 7) + "x)\n"));
  EXPECT_FALSE(FindDegeneration("a random brandom brandom brandom brandom\n"));
}

TEST(Degeneration, ALongRunOfOneCharacterTrips) {
  EXPECT_EQ(FindDegeneration("x = '" + std::string(30, 'a') + "'\n").kind, DegenerationKind::kTiledUnit);
  EXPECT_EQ(FindDegeneration("f(" + std::string(30, ')') + "\n").kind, DegenerationKind::kTiledUnit);
}

TEST(Degeneration, ACycleOfSeveralLinesTrips) {
  const std::string text = "def f(items):\n" +
                           Repeat("    result = compute_total(items)\n    print(result, file=sys.stderr)\n", 6);
  const Degeneration d = FindDegeneration(text);
  EXPECT_EQ(d.kind, DegenerationKind::kPhraseCycle) << d.Describe();
  EXPECT_EQ(d.repeats, 6);
}

TEST(Degeneration, ASentenceLoopTrips) {
  const std::string text = "Notes. " + Repeat("It is a good day to walk in the park with friends. ", 5);
  EXPECT_EQ(FindDegeneration(text).kind, DegenerationKind::kPhraseCycle) << FindDegeneration(text).Describe();
}

TEST(Degeneration, EnumerationsDoNotTrip) {
  std::string text;
  for (int i = 1; i <= 30; ++i) text += std::to_string(i) + ". Read the next item of the list.\n";
  ExpectClean(text);
  std::string options;
  for (int i = 0; i < 20; ++i) options += "    OPTION_" + std::to_string(i) + " = " + std::to_string(i) + "\n";
  ExpectClean(options);
}

TEST(Degeneration, ArgumentListsDoNotTrip) {
  const std::string text =
      "def parse_args(argv=None, prog=None, usage=None, description=None, epilog=None,\n"
      "               parents=None, formatter_class=None, prefix_chars='-', fromfile_prefix_chars=None,\n"
      "               argument_default=None, conflict_handler='error', add_help=True, allow_abbrev=True):\n"
      "    parser = argparse.ArgumentParser(prog=prog, usage=usage, description=description)\n"
      "    parser.add_argument('-v', '--verbose', action='store_true', default=False)\n"
      "    parser.add_argument('-q', '--quiet', action='store_true', default=False)\n"
      "    parser.add_argument('-o', '--output', action='store', default=None)\n"
      "    parser.add_argument('-i', '--input', action='store', default=None)\n"
      "    return parser.parse_args(argv)\n";
  ExpectClean(text);
}

TEST(Degeneration, TablesAndDataLiteralsDoNotTrip) {
  std::string table = "| method | block | tok/s |\n|---|---|---|\n";
  for (int i = 0; i < 12; ++i) table += "| ngram | " + std::to_string(i) + " | 100 |\n";
  ExpectClean(table);
  const std::string zeros = "TABLE = [\n" + Repeat("    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,\n", 8) + "]\n";
  ExpectClean(zeros);
  for (const std::string& data : {"PAD = b'" + Repeat("\\x00", 32) + "'\n", "MASK = b'" + Repeat("\\xff", 32) + "'\n",
                                  "MASK = 0x" + std::string(32, 'f') + "\n", "W = [" + Repeat("0xff, ", 16) + "]\n"}) {
    EXPECT_FALSE(FindDegeneration(data)) << data << ": " << FindDegeneration(data).Describe();
  }
  const std::string banner = "#" + std::string(70, '=') + "\n# Section\n#" + std::string(70, '=') + "\n" +
                             std::string(70, '-') + "\n" + std::string(70, '*') + "\n";
  ExpectClean(banner);
  // encodings/cp437.py, held out of the shipped model's corpus.
  const std::string codec =
      "decoding_table = (\n"
      "    '\\x00'     #  0x00 -> NULL\n"
      "    '\\x01'     #  0x01 -> START OF HEADING\n"
      "    '\\x02'     #  0x02 -> START OF TEXT\n"
      "    '\\x03'     #  0x03 -> END OF TEXT\n"
      "    '\\x04'     #  0x04 -> END OF TRANSMISSION\n"
      ")\n";
  ExpectClean(codec);
}

TEST(Degeneration, CodeThatRepeatsALittleDoesNotTrip) {
  const std::string text =
      "class Point:\n"
      "    def __init__(self, x, y):\n"
      "        self.x = x\n"
      "        self.y = y\n"
      "\n"
      "    def __eq__(self, other):\n"
      "        if not isinstance(other, Point):\n"
      "            return NotImplemented\n"
      "        return self.x == other.x and self.y == other.y\n"
      "\n"
      "    def __lt__(self, other):\n"
      "        if not isinstance(other, Point):\n"
      "            return NotImplemented\n"
      "        return (self.x, self.y) < (other.x, other.y)\n"
      "\n"
      "    def __le__(self, other):\n"
      "        if not isinstance(other, Point):\n"
      "            return NotImplemented\n"
      "        return (self.x, self.y) <= (other.x, other.y)\n"
      "\n"
      "def step(counter):\n"
      "    counter += 1\n"
      "    counter += 1\n"
      "    counter += 1\n"
      "    return counter\n"
      "        )\n        )\n        )\n        )\n        )\n";
  ExpectClean(text);
}

TEST(Degeneration, EmptyAndTinyTextsAreFine) {
  EXPECT_FALSE(FindDegeneration(""));
  EXPECT_FALSE(FindDegeneration("\n\n\n"));
  EXPECT_FALSE(FindDegeneration("x"));
  EXPECT_EQ(FindDegeneration("").Describe(), "");
}

}  // namespace
}  // namespace kakeya
