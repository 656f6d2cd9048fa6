// Experiment 4: Z3 vs the finite-field verifier on random operator pairs (small shapes):
// per box intersection, does Z3's symbolic verdict (proved / refuted at the tested
// positions) agree with the F_p verdict? Also the time per check of each.
// Usage: exp_z3 [pairs=1000] [out.csv] [seed]
#include "pairs.hpp"
#include "z3_check.hpp"
#include "common.hpp"

using namespace pet;

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 1000;
  const std::string path = argc > 2 ? argv[2] : "z3_agreement.csv";
  Rng rng(argc > 3 ? std::strtoull(argv[3], nullptr, 10) : 11);
  auto csv = lab::open_csv(path, "Z3 (simplify som=true, QF_NRA, watchdog 10 s) vs F_p verifier (t=2, p=2^31-1) per box intersection",
                           "pair,family,verdict,boxes,positions,z3_proved,z3_refuted,z3_unknown,boxes_agree,boxes_disagree,boxes_undecided,"
                           "seconds_ff,seconds_z3");
  lab::Progress progress("z3", n);
  int64_t agree = 0, disagree = 0, undecided = 0, pairs_agree = 0, boxes = 0;
  double t_ff = 0, t_z3 = 0;
  std::string version;
  for (int i = 0; i < n; ++i) {
    lab::Pair p = lab::random_pair(rng, 5);
    auto r = verify::verify(p.original, p.mutant);
    auto z = lab::z3_cross_check(p.original, p.mutant, r);
    version = z.version;
    agree += z.agree;
    disagree += z.disagree;
    undecided += z.undecided;
    boxes += r.boxes_checked;
    pairs_agree += z.disagree == 0 && z.undecided == 0;
    t_ff += r.seconds;
    t_z3 += z.seconds;
    csv << i << "," << p.name << "," << verify::verdict_name(r.verdict) << "," << r.boxes_checked << "," << r.positions_tested << ","
        << z.proved << "," << z.refuted << "," << z.unknown << "," << z.agree << "," << z.disagree << "," << z.undecided << "," << r.seconds
        << "," << z.seconds << "\n";
    progress.tick(i + 1);
  }
  std::printf("z3 %s vs F_p on %d random pairs (%lld box intersections): %lld agree, %lld disagree, %lld undecided; pairs fully agreeing "
              "%lld/%d; mean time per pair: F_p %.2f ms, Z3 %.1f ms\n",
              version.c_str(), n, (long long)boxes, (long long)agree, (long long)disagree, (long long)undecided, (long long)pairs_agree, n,
              1e3 * t_ff / n, 1e3 * t_z3 / n);
  return disagree == 0 ? 0 : 1;
}
