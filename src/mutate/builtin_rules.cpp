// The built-in rule set: one line per rule.
#include "pet/mutate/rules/conv_dilated.hpp"
#include "pet/mutate/rules/conv_explicit_pad.hpp"
#include "pet/mutate/rules/merge.hpp"

namespace pet::mutate {

RuleSet make_builtin_rules() {
  using namespace rules;
  return RuleSet::of<ConvBatchToSpatial<1>, ConvBatchToSpatial<2>, ConvWidthToBatch<2>, ConvSpatialToBatch<4>,
                                         ConvSpatialToBatch<2>, ConvPadOdd, ConvTransposeSpatial, ConvDilatedToDense<false>,
                                         ConvDilatedToDense<true>, ConvMergeShared, ConvMergeGrouped, GroupedConvSplit,
                                         MatMulMergeShared, MatMulMergeBatched, Conv1x1ToMatMul, MatMulToConv1x1,
                                         ConvExplicitPad>();
}

const RuleSet& builtin_rules() {
  static const RuleSet set = make_builtin_rules();
  return set;
}

}  // namespace pet::mutate
