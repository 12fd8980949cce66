#include "bench_plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <sstream>

#include "base/error.h"

namespace kakeya::cli {
namespace {

// Okabe-Ito colours: told apart with every common colour-vision deficiency.
constexpr const char* kColors[] = {"#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000"};

constexpr double kPanelW = 420, kPanelH = 250;  // plotting area of one panel
constexpr double kLeft = 80, kGap = 110, kTop = 70, kRowH = 370;

std::string Escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '&') out += "&amp;";
    else if (c == '"') out += "&quot;";
    else out += c;
  }
  return out;
}

// A tick step of 1, 2 or 5 times a power of ten giving about five ticks up to `top`.
double NiceStep(double top) {
  const double raw = top / 5;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0}) {
    if (m * mag >= raw) return m * mag;
  }
  return 10 * mag;
}

std::string Num(double v, int digits) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

struct Panel {
  double x0, y0;  // top-left of the plotting area
  double y_max;
  int n_x;  // categories on the x axis
  double X(int i) const { return x0 + kPanelW * (i + 0.5) / n_x; }
  double Y(double v) const { return y0 + kPanelH * (1 - v / y_max); }
};

void DrawAxes(std::ostringstream& svg, const Panel& p, const std::vector<std::string>& x_labels,
              const std::string& title, const std::string& y_label, int digits) {
  const double step = NiceStep(p.y_max);
  for (double v = 0; v <= p.y_max + 1e-9; v += step) {
    svg << "<line x1='" << p.x0 << "' x2='" << p.x0 + kPanelW << "' y1='" << p.Y(v) << "' y2='" << p.Y(v)
        << "' stroke='#e4e4e4'/>\n";
    svg << "<text x='" << p.x0 - 8 << "' y='" << p.Y(v) + 4 << "' text-anchor='end' class='tick'>"
        << Num(v, digits) << "</text>\n";
  }
  svg << "<rect x='" << p.x0 << "' y='" << p.y0 << "' width='" << kPanelW << "' height='" << kPanelH
      << "' fill='none' stroke='#888'/>\n";
  if (p.n_x > 1 && x_labels[0] == "adaptive") {
    const double x = p.x0 + kPanelW / p.n_x;
    svg << "<line x1='" << x << "' x2='" << x << "' y1='" << p.y0 << "' y2='" << p.y0 + kPanelH
        << "' stroke='#bbb' stroke-dasharray='2 3'/>\n";
  }
  for (int i = 0; i < p.n_x; ++i) {
    svg << "<text x='" << p.X(i) << "' y='" << p.y0 + kPanelH + 18 << "' text-anchor='middle' class='tick'>"
        << Escape(x_labels[i]) << "</text>\n";
  }
  svg << "<text x='" << p.x0 + kPanelW / 2 << "' y='" << p.y0 + kPanelH + 40
      << "' text-anchor='middle' class='label'>block (rows per verify step)</text>\n";
  svg << "<text x='" << p.x0 - 55 << "' y='" << p.y0 + kPanelH / 2 << "' text-anchor='middle' class='label' "
      << "transform='rotate(-90 " << p.x0 - 55 << ' ' << p.y0 + kPanelH / 2 << ")'>" << Escape(y_label) << "</text>\n";
  svg << "<text x='" << p.x0 << "' y='" << p.y0 - 10 << "' class='panel'>" << Escape(title) << "</text>\n";
}

// A dashed horizontal reference line with its label at the right end.
void DrawReference(std::ostringstream& svg, const Panel& p, double v, const std::string& label) {
  svg << "<line x1='" << p.x0 << "' x2='" << p.x0 + kPanelW << "' y1='" << p.Y(v) << "' y2='" << p.Y(v)
      << "' stroke='#555' stroke-dasharray='6 4'/>\n";
  svg << "<text x='" << p.x0 + kPanelW - 4 << "' y='" << p.Y(v) - 5 << "' text-anchor='end' class='tick'>"
      << Escape(label) << "</text>\n";
}

// adaptive_dx: the adaptive point's sideways offset, so that the methods'
// adaptive points, which share one column and often one height, stay apart.
void DrawSeries(std::ostringstream& svg, const Panel& p, const std::vector<std::pair<int, double>>& points,
                bool adaptive_first, double adaptive_dx, const char* color) {
  // The fixed blocks are joined; the adaptive block (first, when present) stands apart.
  std::vector<std::pair<int, double>> fixed(points.begin() + (adaptive_first ? 1 : 0), points.end());
  if (fixed.size() > 1) {
    svg << "<polyline fill='none' stroke='" << color << "' stroke-width='2.5' points='";
    for (const auto& [i, v] : fixed) svg << p.X(i) << ',' << p.Y(v) << ' ';
    svg << "'/>\n";
  }
  for (size_t k = 0; k < points.size(); ++k) {
    const auto& [i, v] = points[k];
    const double x = p.X(i) + (k == 0 && adaptive_first ? adaptive_dx : 0);
    svg << "<circle cx='" << x << "' cy='" << p.Y(v) << "' r='4.5' fill='" << color << "'/>\n";
  }
}

}  // namespace

void WritePlotSvg(const std::string& path, const BenchSetup& setup, const std::vector<BenchRow>& rows) {
  std::vector<std::string> workloads, methods;
  std::vector<int> blocks;
  for (const BenchRow& r : rows) {
    if (std::find(workloads.begin(), workloads.end(), r.workload) == workloads.end()) workloads.push_back(r.workload);
    if (r.method == "none") continue;
    if (std::find(methods.begin(), methods.end(), r.method) == methods.end()) methods.push_back(r.method);
    if (std::find(blocks.begin(), blocks.end(), r.block) == blocks.end()) blocks.push_back(r.block);
  }
  std::sort(blocks.begin(), blocks.end());  // adaptive (0) first
  std::vector<std::string> x_labels;
  for (int b : blocks) x_labels.push_back(BlockName(b));
  const int n_x = std::max<int>(1, blocks.size());

  const double width = kLeft + 2 * kPanelW + kGap + 170;
  const double height = kTop + kRowH * workloads.size() + 10;
  std::ostringstream svg;
  svg << "<svg xmlns='http://www.w3.org/2000/svg' width='" << width << "' height='" << height << "' viewBox='0 0 "
      << width << ' ' << height << "' font-family='DejaVu Sans, Helvetica, Arial, sans-serif'>\n"
      << "<style>.tick{font-size:12px;fill:#333}.label{font-size:13px;fill:#111}.panel{font-size:14px;"
         "font-weight:bold;fill:#111}.title{font-size:16px;font-weight:bold}.sub{font-size:12px;fill:#444}</style>\n"
      << "<rect width='100%' height='100%' fill='white'/>\n"
      << "<text x='" << kLeft - 60 << "' y='24' class='title'>kakeya bench spec: " << Escape(setup.model) << " ("
      << Escape(setup.dtype) << ")</text>\n"
      << "<text x='" << kLeft - 60 << "' y='44' class='sub'>" << Escape(setup.machine) << " | threads: "
      << setup.threads << " | " << Escape(setup.cpu_target) << " | " << Escape(setup.sampling) << " | medians of "
      << setup.reps << " repetitions"
      << (setup.synthetic_accept > 0 ? " | SYNTHETIC acceptance " + Num(setup.synthetic_accept, 2) : "")
      << "</text>\n";

  for (size_t w = 0; w < workloads.size(); ++w) {
    const double y0 = kTop + 60 + kRowH * w;
    double plain = 0, max_tok_s = 0, max_speedup = 0;
    for (const BenchRow& r : rows) {
      if (r.workload != workloads[w]) continue;
      if (r.method == "none") plain = r.decode_tok_s;
      max_tok_s = std::max(max_tok_s, r.decode_tok_s);
      max_speedup = std::max(max_speedup, r.speedup);
    }
    const Panel tok_s{kLeft, y0, std::max(1.0, max_tok_s * 1.15), n_x};
    const Panel speedup{kLeft + kPanelW + kGap, y0, std::max(1.25, max_speedup * 1.15), n_x};
    svg << "<text x='" << kLeft - 60 << "' y='" << y0 - 36 << "' class='title'>workload " << Escape(workloads[w])
        << "</text>\n";
    DrawAxes(svg, tok_s, x_labels, "decode speed", "decode tok/s", 0);
    DrawAxes(svg, speedup, x_labels, "speedup over plain decoding", "speedup (x plain, same repetition)", 2);
    DrawReference(svg, tok_s, plain, "plain " + Num(plain, 0) + " tok/s");
    DrawReference(svg, speedup, 1.0, "plain = 1.00x");
    for (size_t m = 0; m < methods.size(); ++m) {
      std::vector<std::pair<int, double>> rate, gain;
      for (const BenchRow& r : rows) {
        if (r.workload != workloads[w] || r.method != methods[m]) continue;
        const int i = static_cast<int>(std::find(blocks.begin(), blocks.end(), r.block) - blocks.begin());
        rate.push_back({i, r.decode_tok_s});
        gain.push_back({i, r.speedup});
      }
      const char* color = kColors[m % std::size(kColors)];
      const bool adaptive_first = !blocks.empty() && blocks[0] == 0 && !rate.empty() && rate[0].first == 0;
      const double dx = 9.0 * (m - (methods.size() - 1) / 2.0);
      DrawSeries(svg, tok_s, rate, adaptive_first, dx, color);
      DrawSeries(svg, speedup, gain, adaptive_first, dx, color);
    }
  }
  // Legend, right of the panels.
  const double lx = kLeft + 2 * kPanelW + kGap + 30;
  svg << "<text x='" << lx << "' y='" << kTop + 60 << "' class='panel'>method</text>\n";
  for (size_t m = 0; m < methods.size(); ++m) {
    const double ly = kTop + 82 + 22 * m;
    svg << "<line x1='" << lx << "' x2='" << lx + 24 << "' y1='" << ly << "' y2='" << ly << "' stroke='"
        << kColors[m % std::size(kColors)] << "' stroke-width='2.5'/>\n"
        << "<circle cx='" << lx + 12 << "' cy='" << ly << "' r='4.5' fill='" << kColors[m % std::size(kColors)]
        << "'/>\n<text x='" << lx + 32 << "' y='" << ly + 4 << "' class='label'>" << Escape(methods[m]) << "</text>\n";
  }
  const double ly = kTop + 82 + 22 * methods.size();
  svg << "<line x1='" << lx << "' x2='" << lx + 24 << "' y1='" << ly << "' y2='" << ly
      << "' stroke='#555' stroke-dasharray='6 4'/>\n<text x='" << lx + 32 << "' y='" << ly + 4
      << "' class='label'>plain decoding</text>\n</svg>\n";

  std::ofstream out(path);
  out << svg.str();
  if (!out) Fail("--plot: cannot write ", path);
}

}  // namespace kakeya::cli
