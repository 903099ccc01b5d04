// clip: ONNX Clip and numpy clip, a composite of the max and min primitives (the importer, the
// `.kg` reader and the C++/C/Python APIs all build it here).
#pragma once

#include "ir/builder.h"

namespace kiln::ir {

// min(max(x, lo), hi), either bound optional (nullptr). The rules are max's and min's: a NaN in x
// gives NaN (numpy clip, ONNX Clip), and so does a NaN bound (numpy's maximum/minimum, torch.clamp;
// np.clip of numpy 1.24 ignores a NaN bound instead); lo > hi gives hi (ONNX Clip); integer dtypes
// clip exactly; bounds broadcast with x (numpy) and have x's dtype; bool is an error.
NodeResult clip(Builder& b, const Node* x, const Node* lo, const Node* hi);

}  // namespace kiln::ir
