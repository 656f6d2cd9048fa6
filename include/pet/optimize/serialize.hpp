#pragma once
// Window programs as JSON, for the search cache: every op with every attribute (from its
// PET_ATTRS list), tensors by index; float constants named w0, w1, ... that stand for the
// window's own weights are written as references, so an entry holds structure, not weights.
#include <nlohmann/json.hpp>

#include "pet/ir/graph.hpp"

namespace pet::optimize {

/// `p` as JSON; its float constants named like weights of `window` (same name and type) are
/// written as references to them.
nlohmann::json program_to_json(const Graph& p, const Graph& window);
/// The program back, its weight references bound to `window`'s constants. Throws Error when
/// the entry does not describe a valid program for this window.
Graph program_from_json(const nlohmann::json& j, const Graph& window);

}  // namespace pet::optimize
