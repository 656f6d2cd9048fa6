#pragma once
/// The worked example of docs/writing-rules.md: a conv's zero padding done by an explicit Pad
/// op, then the same conv without padding (exactly equivalent; it exposes the padding to
/// fusion with neighbouring copies).
#include "pet/mutate/rule.hpp"

namespace pet::mutate::rules {

struct ConvExplicitPad final : Rule<ops::Conv> {
  std::string_view name() const override { return "conv-explicit-pad"; }
  std::string_view description() const override { return "a conv's zero padding as an explicit Pad op"; }

  Result apply(const Match<ops::Conv>& m, MutantBuilder& b) const override {
    // Guards first, each with its reason; nothing is built before the last one.
    const ops::Conv& conv = m.op();
    bool padded = false;
    for (int64_t p : conv.pads) padded = padded || p != 0;
    if (!padded) return no_match("the conv has no padding");

    // ONNX pads: [begin of every dim..., end of every dim...]; batch and channels get none.
    const size_t k = conv.pads.size() / 2, rank = k + 2;
    std::vector<int64_t> pads(2 * rank, 0);
    for (size_t i = 0; i < k; ++i) {
      pads[2 + i] = conv.pads[i];
      pads[rank + 2 + i] = conv.pads[k + i];
    }
    TensorId x = b.pad(m.input(0), pads);  // the builder checks shapes as it goes

    ops::Conv unpadded = conv;
    unpadded.pads.assign(conv.pads.size(), 0);
    std::vector<TensorId> in{x, m.input(1)};
    if (m.num_inputs() == 3) in.push_back(m.input(2));
    return b.replace(m.output(0), b.add(unpadded, in, "conv_unpadded"));
  }
};

}  // namespace pet::mutate::rules
