#include "pet/mutate/rule.hpp"

namespace pet::mutate {

MutantBuilder::MutantBuilder(const Graph& original)
    : Builder(g_), orig_(original), map_(size_t(original.num_tensors()), -1), replaced_(size_t(original.num_tensors()), false) {
  g_.name = original.name + "-mutant";
  GraphCopy c(original, g_);
  c.leaves();
  map_ = std::move(c.map);
}

TensorId MutantBuilder::mapped(TensorId t) const {
  if (map_[size_t(t)] < 0) throw NotMappedYet(cat("tensor '", orig_.tensor(t).name, "' is not in the mutant yet"));
  return map_[size_t(t)];
}

Result MutantBuilder::replace(TensorId original_output, TensorId replacement) {
  const TensorType &want = orig_.type(original_output), &have = g_.type(replacement);
  if (want != have)
    return no_match(cat("the replacement for '", orig_.tensor(original_output).name, "' is ", to_string(have), " instead of ",
                        to_string(want)));
  map_[size_t(original_output)] = replacement;
  replaced_[size_t(original_output)] = true;
  return {};
}

void MutantBuilder::copy_node(NodeId n) {
  const Node& node = orig_.node(n);
  bool all_replaced = true;
  for (TensorId t : node.outputs) all_replaced = all_replaced && replaced_[size_t(t)];
  if (all_replaced) return;
  std::vector<TensorId> in;
  for (TensorId t : node.inputs) in.push_back(mapped(t));
  GraphCopy c(orig_, g_);
  auto outs = c.node(n, false, nullptr, &in);
  for (size_t k = 0; k < outs.size(); ++k)
    if (!replaced_[size_t(node.outputs[k])]) map_[size_t(node.outputs[k])] = outs[k];
}

Graph MutantBuilder::finish() {
  for (TensorId t : orig_.outputs()) {
    TensorId m = mapped(t);
    const std::string& want = orig_.tensor(t).name;
    if (g_.tensor(m).name != want && !g_.tensor(m).is_constant() && m >= 0) {
      if (auto other = g_.find(want)) g_.rename(*other, g_.unique_name(want + "_orig"));
      g_.rename(m, want);
    }
    g_.add_output(m);
  }
  return remove_dead_nodes(g_);  // originals a rule replaced after copying them
}

}  // namespace pet::mutate
