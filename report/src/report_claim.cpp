// spbench report, its opening sections: in short, and does ZeCO's claim hold? Per paper table and published ratio,
// what the measured rows and the simulation's predictions say against the paper: the verdicts of the tables further
// down, gathered, with why where there is none, and the few sentences they add up to.
#include <algorithm>
#include <map>
#include <set>
#include <sstream>

#include "report/src/report_common.h"

namespace spb {
namespace report_detail {

namespace {

std::string gpu_list(const std::vector<int>& v) {
  std::vector<std::string> s;
  for (int P : v) s.push_back(std::to_string(P));
  return join(s, ", ") + (v.size() == 1 && v[0] == 1 ? " GPU" : " GPUs");
}

// The measured answer for `method` of a table's lines: the verdict at every GPU count the paper published and we
// measured, or why there is none.
std::string measured_answer(const std::vector<Line>& lines, const std::string& method, const std::string& none_why) {
  std::vector<int> agree, measured_at;
  std::vector<std::string> off;
  for (const Line& l : lines) {
    if (l.method != method || !l.row) continue;
    if (std::find(measured_at.begin(), measured_at.end(), l.gpus) == measured_at.end()) measured_at.push_back(l.gpus);
    if (const auto p = paper_point(l)) {
      if (p->agrees()) agree.push_back(p->gpus);
      else off.push_back(std::to_string(p->gpus) + " GPUs (quotient " + fmt("%.2f", p->quotient()) + ")");
    }
  }
  if (agree.empty() && off.empty()) {
    if (measured_at.empty()) return "not known: " + none_why;
    // Our ratio at the most GPUs measured, for what it is worth beside the paper's smallest count.
    const Line* last = nullptr;
    for (const Line& l : lines)
      if (l.method == method && l.row && std::isfinite(l.r_measured) && (!last || l.gpus >= last->gpus)) last = &l;
    return "not known: measured at " + gpu_list(measured_at) + " only, where the paper published no number" +
           (last ? " (ours at " + std::to_string(last->gpus) + ": " + ratio_cell(last->r_measured) + ")" : "");
  }
  std::vector<std::string> parts;
  if (!agree.empty()) parts.push_back("**agrees** at " + gpu_list(agree));
  if (!off.empty()) parts.push_back("**disagrees** at " + join(off, ", "));
  return join(parts, "; ");
}

// The simulated answer: the prediction table's verdicts grouped by what came of them and the hold-out they rest on.
std::string simulated_answer(const std::vector<Claim>& claims, const std::string& method, const std::string& none_why) {
  struct Group {
    std::string head, tail;  // "**agrees**", "; resting on the hold-out of ..."
    std::vector<int> gpus;
    std::vector<std::string> quotients;
  };
  std::vector<Group> groups;  // in order of first appearance
  for (const Claim& k : claims) {
    if (k.method != method) continue;
    Group g;
    const RatioHoldOut& h = k.holdout;
    if (k.kind == Claim::agrees || k.kind == Claim::disagrees) {
      g.head = k.kind == Claim::agrees ? "**agrees**" : "**disagrees**";
      g.tail = "resting on the hold-out of " + h.summary();
    } else if (k.kind == Claim::no_verdict) {
      g.head = "not known";
      g.tail = !h.missing.empty() ? "no hold-out row of " + join(h.missing, " or ") +
                                        (h.timing.empty() ? "" : " timed " + timing_words(h.timing))
                                  : "the hold-out of its rows missed: " + h.summary();
    } else if (k.kind == Claim::not_compared) {
      g.head = "not compared", g.tail = "back-to-back calls are a throughput";
    } else {
      continue;
    }
    auto it = std::find_if(groups.begin(), groups.end(),
                           [&](const Group& x) { return x.head == g.head && x.tail == g.tail; });
    if (it == groups.end()) it = groups.insert(groups.end(), g);
    it->gpus.push_back(k.gpus);
    if (k.kind == Claim::agrees || k.kind == Claim::disagrees) it->quotients.push_back(fmt("%.2f", k.quotient));
  }
  if (groups.empty()) return "not known: " + none_why;
  std::vector<std::string> parts;
  for (const Group& g : groups)
    parts.push_back(g.head + " at " + gpu_list(g.gpus) + " (" +
                    (g.quotients.empty() ? "" : "quotient " + join(g.quotients, ", ") + "; ") + g.tail + ")");
  return join(parts, "; ");
}

// The methods of `lines` with a published ratio to `ref`, in the table's order.
std::vector<std::string> published(const std::vector<Line>& lines, const std::vector<std::string>& methods,
                                   const std::string& ref) {
  std::vector<std::string> out;
  for (const std::string& m : methods) {
    if (m == ref) continue;
    for (const Line& l : lines)
      if (l.method == m && std::isfinite(l.r_paper)) {
        out.push_back(m);
        break;
      }
  }
  return out;
}

std::string paper_span(const std::vector<Line>& lines, const std::string& method) {
  std::vector<std::pair<int, double>> v;
  for (const Line& l : lines)
    if (l.method == method && std::isfinite(l.r_paper) && (v.empty() || v.back().first != l.gpus))
      v.push_back({l.gpus, l.r_paper});
  if (v.empty()) return "";
  return ratio_cell(v.front().second) + " at " + std::to_string(v.front().first) + " GPUs" +
         (v.size() > 1 ? " to " + ratio_cell(v.back().second) + " at " + std::to_string(v.back().first) : "");
}

// The paper tables whose ratios the opening sections answer: each one's lines (measured), methods, reference, the
// simulated level and timing its predictions are read at, and why an answer may be missing.
struct Level {
  std::string title;
  std::vector<Line> lines;
  std::vector<std::string> methods;
  std::string ref, sim_level, timing;
  long long tokens;
  std::string measured_none, sim_none;
  // The simulated ratios ÷ the measured table's reference, so that both answer the same ratio.
  std::vector<Claim> claims;
};

std::vector<Level> claim_levels(Context& c) {
  std::vector<Level> levels;
  {
    const TableDef t = collective_table(c, kLatency);
    const bool back = !build_lines(c, collective_table(c, kBackToBack)).empty();
    levels.push_back({"Table 2 (collective, latency)", build_lines(c, t), t.methods, t.ref, "collective", kLatency,
                      16384,
                      back ? "no GPU row of the latency timing yet (the rows timed back to back measure a throughput)"
                           : "no GPU row at this setting",
                      "no simulated latency row at the paper's GPU counts yet" +
                          std::string(simulated_claims(c, "collective", 16384, kBackToBack).empty()
                                          ? ""
                                          : " (the simulated rows there are back-to-back: a throughput)")});
  }
  for (long long L : {16384LL, 32768LL}) {
    const TableDef t = operator_table(c, L);
    levels.push_back({std::string(L == 16384 ? "Table 3" : "Table 4") + " (operator, " + std::to_string(L) +
                          " tokens per GPU)",
                      build_lines(c, t), t.methods, t.ref, "operator", "", L, "no GPU row at this setting",
                      "not simulated at the paper's GPU counts"});
  }
  for (long long L : {16384LL, 32768LL}) {
    levels.push_back({std::string(L == 16384 ? "Table 5" : "Table 6") + " (model, " + std::to_string(L) +
                          " tokens per GPU)",
                      model_lines(c, L, false), operator_methods(c), "dp", "model", "", L,
                      "no GPU row at this setting",
                      "not simulated at the paper's GPU counts"});
  }
  for (Level& lv : levels) lv.claims = simulated_claims(c, lv.sim_level, lv.tokens, lv.timing, lv.ref);
  return levels;
}

}  // namespace

namespace {

// The verdicts, per paper table and published ratio.
std::string verdicts_md(const std::vector<Level>& levels) {
  std::ostringstream s;
  s << "## Does ZeCO's claim hold?\n\n"
    << "ZeCO's claim: its All-Scan beats LASP-2's All-Gather by a factor that grows with the GPUs (Table 2), and its "
       "operator and training step stay close to the ideal dp, ahead of LASP-2 and LASP-1 (Tables 3-6). For each "
       "ratio the paper published, what our rows say: **agrees** where our ratio ÷ the paper's lies within 0.80-1.25, "
       "**disagrees** where not, or not known and why. Measured answers are the tables' below (our GPUs); simulated "
       "ones the `" << kSimPredictPlatform << "` predictions', each verdict resting on the hold-out of the rows its "
       "ratio is made of (its two methods with their backends and timing, every hold-out row within 15%).\n\n";
  std::vector<std::string> unpublished;
  for (const Level& lv : levels) {
    const auto methods = published(lv.lines, lv.methods, lv.ref);
    if (methods.empty()) {
      unpublished.push_back(lv.title.substr(0, lv.title.find(" (")));
      continue;
    }
    const auto& claims = lv.claims;
    for (const std::string& m : methods) {
      s << "- **" << lv.title << ", " << m << " ÷ " << lv.ref << "** (paper: " << paper_span(lv.lines, m) << ").\n"
        << "  Measured: " << measured_answer(lv.lines, m, lv.measured_none) << ".\n"
        << "  Simulated (`" << kSimPredictPlatform << "`): " << simulated_answer(claims, m, lv.sim_none) << ".\n";
    }
  }
  if (!unpublished.empty())
    s << "- " << join(unpublished, ", ") << ": the paper's numbers are not published here (report/paper/README.md), "
      << "so there is no ratio to compare.\n";
  s << "\n";
  return s.str();
}

// "zeco 1.02x, lasp2 1.08x" of dp at the most GPUs measured for each method of `lv` with a published ratio.
struct MeasuredAt {
  int gpus = 0;
  std::vector<std::string> ratios;
};
MeasuredAt measured_at_most_gpus(const Level& lv, const std::vector<std::string>& methods) {
  MeasuredAt out;
  for (const Line& l : lv.lines)
    if (l.row && std::isfinite(l.r_measured) && l.method != lv.ref &&
        std::find(methods.begin(), methods.end(), l.method) != methods.end())
      out.gpus = std::max(out.gpus, l.gpus);
  for (const std::string& m : methods)
    for (const Line& l : lv.lines)
      if (l.method == m && l.gpus == out.gpus && l.row && std::isfinite(l.r_measured)) {
        out.ratios.push_back(m + " " + ratio_cell(l.r_measured));
        break;
      }
  return out;
}

// "2.82x at 8 GPUs to 6.72x at 256 (the paper: 1.66x to 3.93x)": a method's simulated ratios over the GPU counts.
std::string simulated_span(const std::vector<Claim>& claims, const std::string& method) {
  const Claim *first = nullptr, *last = nullptr;
  for (const Claim& k : claims)
    if (k.method == method && std::isfinite(k.ratio)) {
      if (!first || k.gpus < first->gpus) first = &k;
      if (!last || k.gpus > last->gpus) last = &k;
    }
  if (!first) return "";
  std::string s = ratio_cell(first->ratio) + " at " + std::to_string(first->gpus) + " GPUs";
  if (last != first) s += " to " + ratio_cell(last->ratio) + " at " + std::to_string(last->gpus);
  if (std::isfinite(first->paper_ratio))
    s += " (the paper: " + ratio_cell(first->paper_ratio) +
         (last != first && std::isfinite(last->paper_ratio) ? " to " + ratio_cell(last->paper_ratio) : "") + ")";
  return s;
}

std::string count_of(size_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}


// In short: what the measured rows show, what the simulation predicts, what is not known.
std::string summary_md(const std::vector<Level>& levels) {
  std::vector<std::string> measured, simulated, unknown;
  std::set<std::string> kinds, missing_parts;
  int max_measured_gpus = 0;
  size_t agree = 0, disagree = 0, no_holdout = 0, holdout_missed = 0;
  for (const Level& lv : levels) {
    const auto methods = published(lv.lines, lv.methods, lv.ref);
    if (methods.empty()) continue;
    const MeasuredAt m = measured_at_most_gpus(lv, methods);
    if (m.ratios.empty()) {
      unknown.push_back(lv.title + " measured: " + lv.measured_none);
    } else {
      measured.push_back(lv.title + " at " + std::to_string(m.gpus) + " GPUs: " + join(m.ratios, ", ") + " of " +
                         lv.ref);
      max_measured_gpus = std::max(max_measured_gpus, m.gpus);
      for (const Line& l : lv.lines)
        if (l.row && !col(*l.row, "gpu").empty()) kinds.insert(col(*l.row, "gpu"));
    }
    const auto& claims = lv.claims;
    std::vector<std::string> spans;
    for (const std::string& method : methods) {
      const std::string span = simulated_span(claims, method);
      if (!span.empty()) spans.push_back(method + " " + span);
    }
    if (!spans.empty()) simulated.push_back(lv.title + ", ÷ " + lv.ref + ": " + join(spans, "; "));
    for (const Claim& k : claims) {
      if (k.kind == Claim::agrees) ++agree;
      if (k.kind == Claim::disagrees) ++disagree;
      if (k.kind != Claim::no_verdict) continue;
      if (!k.holdout.missing.empty()) {
        ++no_holdout;
        missing_parts.insert(k.holdout.missing.begin(), k.holdout.missing.end());
      } else {
        ++holdout_missed;
      }
    }
  }
  std::ostringstream s;
  s << "## In short\n\n";
  if (measured.empty()) {
    s << "**Measured:** no GPU row at a setting of the paper's tables yet.\n\n";
  } else {
    s << "**Measured** on " << join({kinds.begin(), kinds.end()}, ", ") << ", up to " << max_measured_gpus
      << " GPUs: " << join(measured, "; ") << ". The paper's tables start at 8 GPUs, so at these counts the rows "
      << "check the code and hold the simulation out; they do not test the claim itself.\n\n";
  }
  if (simulated.empty()) {
    s << "**Simulated:** no prediction on `" << kSimPredictPlatform << "` yet.\n\n";
  } else {
    s << "**Simulated** on `" << kSimPredictPlatform << "` (the paper's cluster, 8 GPUs a node): "
      << join(simulated, ". ") << ". Of the " << agree + disagree + no_holdout + holdout_missed
      << " ratios set beside the paper's, " << agree << (agree == 1 ? " agrees, " : " agree, ") << disagree
      << (disagree == 1 ? " disagrees and " : " disagree and ")
      << no_holdout + holdout_missed << " have no verdict.\n\n";
  }
  std::vector<std::string> why;
  if (no_holdout)
    why.push_back(count_of(no_holdout, "ratio rests", "ratios rest") + " on rows with no measured counterpart to " +
                  "hold the simulation out against (" + join({missing_parts.begin(), missing_parts.end()}, ", ") +
                  ")");
  if (holdout_missed)
    why.push_back(count_of(holdout_missed, "ratio rests", "ratios rest") + " on rows whose hold-out missed by " +
                  "more than 15% somewhere");
  for (const std::string& u : unknown) why.push_back(u);
  if (!why.empty()) s << "**Not known:** " << join(why, "; ") << ". The next section gives each ratio's answer.\n\n";
  return s.str();
}

}  // namespace

std::string section_claim(Context& c) {
  const std::vector<Level> levels = claim_levels(c);
  return summary_md(levels) + verdicts_md(levels);
}

}  // namespace report_detail
}  // namespace spb
