// Malformed `.kg` inputs: each gives exactly one "FILE:LINE:COL: error: WHAT" line.
#include "tests/ir/ir_test_support.h"

namespace kiln::ir {
namespace {

std::string read_error(const std::string& text) {
  Graph g;
  auto r = read_kg(g, text, "g.kg");
  EXPECT_FALSE(r.has_value()) << text;
  return r ? "<no error>" : r.error().message;
}

const std::string kHead = "kiln.graph v1\ninput %x : f32[3,4]\n";

struct ErrorCase {
  std::string text;
  std::string message;
};

const ErrorCase kCases[] = {
    {"", "g.kg:1:1: error: expected header 'kiln.graph v1'"},
    {"input %x : f32[3]\n", "g.kg:1:1: error: expected header 'kiln.graph v1'"},
    {"kiln.graph v2\n", "g.kg:1:12: error: unsupported version 'v2' (expected 'kiln.graph v1')"},
    {kHead + "%y = foo(%x)\noutput %y\n", "g.kg:3:6: error: unknown op 'foo'"},
    {kHead + "%y = add(%x, %q)\n", "g.kg:3:14: error: undefined value '%q'"},
    {kHead + "%y = exp(%x)\n%z = neg(%y)\n%y = abs(%z)\n",
     "g.kg:5:1: error: value '%y' is already defined"},
    {kHead + "input %x : f32[2]\n", "g.kg:3:7: error: value '%x' is already defined"},
    {kHead + "%y = add(%x, %x, %x)\n", "g.kg:3:6: error: add: expected 2 operands, got 3"},
    {kHead + "input %b : f32[5]\n%y = add(%x, %b)\n",
     "g.kg:4:6: error: add: shapes [3,4] and [5] do not broadcast"},
    {kHead + "%y = exp(%x)\n", "g.kg:4:1: error: expected at least one 'output' statement"},
    {kHead + "%y = exp(%x)", "g.kg:3:13: error: expected at least one 'output' statement"},
    {kHead + "output %z\n", "g.kg:3:8: error: undefined value '%z'"},
    {kHead + "output %x\noutput %x\n", "g.kg:4:8: error: output '%x' is already listed"},
    {kHead + "input %i : f31[2]\n",
     "g.kg:3:12: error: expected a dtype (f32 f64 f16 bf16 i32 i64 i8 u8 bool), got 'f31'"},
    {kHead + "input %i : f32[2,-1]\n",
     "g.kg:3:18: error: expected a non-negative integer dimension or a size symbol '?b', got '-1'"},
    {kHead + "input %h : f32[4294967296,4294967296]\n",
     "g.kg:3:7: error: input: shape [4294967296,4294967296] has too many elements (kiln indexes at "
     "most 2^59)"},
    {kHead + "%y = sum(%x, axes=[1.5])\n",
     "g.kg:3:20: error: expected an integer in the list, got '1.5'"},
    {kHead + "%y = sum(%x, axes=[1], axes=[0])\n",
     "g.kg:3:24: error: attribute 'axes' is given twice"},
    {kHead + "%y = sum(%x, foo=1)\n", "g.kg:3:6: error: sum: unknown attribute 'foo'"},
    {kHead + "%y = reshape(%x)\n", "g.kg:3:6: error: reshape: missing attribute 'shape'"},
    {kHead + "%y = cumsum(%x)\n", "g.kg:3:6: error: cumsum: missing attribute 'axis'"},
    {kHead + "%y = cumsum(%x, axis=2)\n",
     "g.kg:3:6: error: cumsum: axis 2 is out of range for shape [3,4]"},
    {kHead + "%y = cumsum(%x, axis=0, exclusive=1)\n",
     "g.kg:3:6: error: cumsum: attribute 'exclusive' must be true or false, got 1"},
    {kHead + "input %m : bool[3]\n%y = cumsum(%m, axis=0)\n",
     "g.kg:4:6: error: cumsum: needs a numeric dtype, got bool"},
    {kHead + "%y = topk_indices(%x, axis=0)\n",
     "g.kg:3:6: error: topk_indices: missing attribute 'k'"},
    {kHead + "%y = topk_indices(%x, k=5)\n",
     "g.kg:3:6: error: topk_indices: k = 5 is out of range [0, 4] for axis 1 of shape [3,4]"},
    {kHead + "%y = topk_indices(%x, k=-1, axis=0)\n",
     "g.kg:3:6: error: topk_indices: k = -1 is out of range [0, 3] for axis 0 of shape [3,4]"},
    {kHead + "%y = topk_indices(%x, k=1, axis=-3)\n",
     "g.kg:3:6: error: topk_indices: axis -3 is out of range for shape [3,4]"},
    {kHead + "input %m : bool[3]\n%y = topk_indices(%m, k=1)\n",
     "g.kg:4:6: error: topk_indices: needs a numeric dtype, got bool"},
    {kHead + "input %i : i64[3,4]\n%y = scatter_elements(%x, %i, %x, axis=0, reduction=sum)\n",
     "g.kg:4:53: error: expected an attribute value (a number, true, false, a dtype, a name or a "
     "list), "
     "got 'sum'"},
    {kHead + "input %i : i64[3,4]\n%y = scatter_elements(%x, %i, %x, axis=0, reduction=1)\n",
     "g.kg:4:6: error: scatter_elements: attribute 'reduction' must be a name (such as none, "
     "add, linear or half_pixel), got 1"},
    {kHead + "input %i : i64[3,4]\n%y = scatter_elements(%x, %i, axis=0)\n",
     "g.kg:4:6: error: scatter_elements: expected 3 operands, got 2"},
    {kHead + "%y = cast(%x, to=f99)\n",
     "g.kg:3:18: error: expected an attribute value (a number, true, false, a dtype, a name or a "
     "list), "
     "got 'f99'"},
    {kHead + "%y = sum(%x, keepdim=true, %x)\n",
     "g.kg:3:28: error: operands must come before the attributes"},
    {kHead + "%y = exp(%x\n", "g.kg:3:12: error: expected ',' or ')', got end of line"},
    {kHead + "%y = exp(%x) junk\n", "g.kg:3:14: error: unexpected 'junk' after the statement"},
    {kHead + "%y exp(%x)\n", "g.kg:3:4: error: expected '=' after the value name, got 'exp'"},
    {kHead + "%y = exp %x\n", "g.kg:3:10: error: expected '(' after 'exp', got '%x'"},
    {kHead + "%y = add(%x, 1e)\n", "g.kg:3:14: error: invalid number '1e'"},
    {kHead + "%y = add(%x, 2x)\n", "g.kg:3:14: error: invalid number '2x'"},
    {kHead + "%y = add(%x, $)\n", "g.kg:3:14: error: unexpected character '$'"},
    {kHead + "%y = add(%x, \xc3\xa9)\n",
     "g.kg:3:14: error: unexpected character '\xc3\xa9' (names, ops and numbers are ASCII)"},
    {kHead + "%y = add(%x, \x01)\n", "g.kg:3:14: error: unexpected character \\x01"},
    // A byte that starts no UTF-8 sequence (a binary file), or a sequence cut short.
    {kHead + "%y = add(%x, \xff\xfe)\n",
     "g.kg:3:14: error: unexpected character \\xff (not text: is this a .kg file?)"},
    {kHead + "%y = add(%x, \xc3)\n",
     "g.kg:3:14: error: unexpected character \\xc3 (not text: is this a .kg file?)"},
    {kHead + "% = exp(%x)\n", "g.kg:3:1: error: expected a value name after '%'"},
    {kHead + "y = exp(%x)\n",
     "g.kg:3:1: error: expected a statement ('input', 'output' or '%name = op(...)'), got 'y'"},
    {kHead + "%y = full(shape=[2], value=1, dtype=i32, value=2)\n",
     "g.kg:3:42: error: attribute 'value' is given twice"},
    {kHead + "%y = slice(%x, axis=99999999999999999999)\n",
     "g.kg:3:21: error: integer 99999999999999999999 is out of range"},
    {kHead + "%y = add(%x, 1e999)\n", "g.kg:3:14: error: number 1e999 is out of range"},
    {kHead + "%y = add(%x, foo)\n",
     "g.kg:3:14: error: expected an operand ('%x' or a number) or 'key=value', got 'foo'"},
    {kHead + "%y = exp(%x)\t# tab\n%z = exp(%y, 2)\n",
     "g.kg:4:6: error: exp: expected 1 operand, got 2"},
    {kHead + "input %i : i32[3,4]\n%y = add(%i, 0.5)\n",
     "g.kg:4:6: error: add: literal 0.5 is not representable in i32 (expected an integer)"},
};

TEST(KgErrors, ExactMessages) {
  for (const ErrorCase& c : kCases) EXPECT_EQ(read_error(c.text), c.message) << c.text;
}

TEST(KgErrors, MessagesAreOneLine) {
  for (const ErrorCase& c : kCases)
    EXPECT_EQ(read_error(c.text).find('\n'), std::string::npos) << c.text;
}

}  // namespace
}  // namespace kiln::ir
