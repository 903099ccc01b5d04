// Reproducers of failing fuzz graphs: the `.kg` text (inputs, outputs, the failure as comments)
// and the exact input data as `.npy` files beside it, replayable with `kiln run`.
#pragma once

#include <string>
#include <vector>

#include "fuzz_value.h"
#include "harness.h"

namespace kiln::testing::fuzz {

// The graph as `.kg` text with inputs %in0.. and outputs %out0.., preceded by comments that say
// the seed, the device, the problems and the command lines that replay it from `dir`.
std::string reproducer_text(const Case& c, const std::vector<FuzzValue>& outputs, uint64_t seed,
                            const std::string& device, const std::vector<std::string>& problems,
                            const std::string& dir);

// Writes DIR/seed-N.kg and DIR/seed-N/inK.npy; returns the .kg path, or why it could not.
Expected<std::string> write_reproducer(const Case& c, const std::string& text, uint64_t seed,
                                       const std::string& dir);

}  // namespace kiln::testing::fuzz
