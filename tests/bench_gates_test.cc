// The gates of `kakeya bench spec` (apps/kakeya/bench_gates.h): a planted
// difference from plain decoding and a planted loop each fail, naming the
// run and, for a difference, the first differing position and both ids.
#include "bench_gates.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace kakeya::cli {
namespace {

const std::vector<TokenId> kPlain = {10, 11, 12, 13, 14, 15};

TEST(BenchGates, IdenticalOutputsPass) {
  EXPECT_FALSE(FirstMismatch(kPlain, kPlain));
  EXPECT_EQ(IdentityFailure(RunName("ngram", 4, "ast.py"), kPlain, kPlain), "");
}

TEST(BenchGates, APlantedDifferenceFailsAtItsFirstPosition) {
  std::vector<TokenId> other = kPlain;
  other[3] = 99;
  other[5] = 98;
  const std::optional<TokenMismatch> m = FirstMismatch(kPlain, other);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->position, 3u);
  EXPECT_EQ(m->plain, 13);
  EXPECT_EQ(m->other, 99);
  const std::string message = IdentityFailure(RunName("draft", 0, "colorsys.py"), kPlain, other);
  EXPECT_EQ(message,
            "method draft, block adaptive, prompt colorsys.py: output differs from plain decoding at generated "
            "token 3 (plain 13, speculative 99)");
}

TEST(BenchGates, AShorterOutputDiffersWhereItEnds) {
  const std::vector<TokenId> shorter(kPlain.begin(), kPlain.begin() + 4);
  const std::optional<TokenMismatch> m = FirstMismatch(kPlain, shorter);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->position, 4u);
  EXPECT_EQ(m->plain, 14);
  EXPECT_EQ(m->other, -1);
}

TEST(BenchGates, APlantedLoopFailsAndOrdinaryCodePasses) {
  const std::string run = RunName("dflash", 8, "ftplib.py");
  std::string loop = "def parse_args(\n";
  for (int i = 0; i < 10; ++i) loop += "        options=None,\n";
  const std::string message = DegenerationFailure(run, loop);
  EXPECT_NE(message.find("method dflash, block 8, prompt ftplib.py: output degenerates (wall of 10 identical lines"),
            std::string::npos)
      << message;
  EXPECT_EQ(DegenerationFailure(run, "def parse_args(argv=None):\n    parser = argparse.ArgumentParser()\n"
                                     "    parser.add_argument('-v', action='store_true')\n    return parser.parse_args(argv)\n"),
            "");
}

}  // namespace
}  // namespace kakeya::cli
