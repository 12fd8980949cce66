// `kakeya bench spec --plot FILE.svg`: decode tok/s and speedup against block
// size, one line per method, one row of two panels per workload. Written by
// hand (no plotting dependency); opens in any browser.
#pragma once

#include <string>
#include <vector>

#include "bench_report.h"

namespace kakeya::cli {

void WritePlotSvg(const std::string& path, const BenchSetup& setup, const std::vector<BenchRow>& rows);

}  // namespace kakeya::cli
