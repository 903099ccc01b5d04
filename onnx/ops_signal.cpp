// ONNX's signal ops. The window functions (Hann, Hamming, Blackman) and MelWeightMatrix depend
// only on scalars known at import, so they are computed here and fold like constants. DFT and
// STFT are matmuls of the signal with constant twiddle matrices (cos and sin of 2*pi*j*k/n): O(n)
// work per output bin instead of an FFT's O(log n), but kiln's own primitives, fused like any
// matmul, and exact to the dtype's rounding.
#include <cmath>
#include <fmt/format.h>
#include <numbers>
#include <numeric>

#include "onnx/import_context.h"

namespace kiln::onnx {

namespace {

using ir::Node;
using ir::Op;

Expected<ir::DType> output_dtype(Context& c) {
  auto t = onnx_dtype(int32_t(c.attr_i("output_datatype", 1)));
  if (!t) return c.unsupported(t.error().message);
  return *t;
}

Expected<int64_t> known_int(Context& c, size_t i, std::string_view what) {
  KILN_ONNX_TRY(std::vector<int64_t> v, c.ints(i, what));
  if (v.size() != 1) return c.fail(fmt::format("{} must be one value", what));
  return v[0];
}

// a0 - a1 cos(2 pi n / N) + a2 cos(4 pi n / N), N = size (periodic) or size - 1 (symmetric), as
// ONNX's HannWindow (0.5, 0.5), HammingWindow (25/46, 21/46) and BlackmanWindow (0.42, 0.5,
// 0.08) define it.
OpImporter window(double a0, double a1, double a2) {
  return [a0, a1, a2](Context& c) -> Outs {
    KILN_ONNX_TRY(int64_t size, known_int(c, 0, "size"));
    if (size < 0) return c.fail(fmt::format("size {} is negative", size));
    KILN_ONNX_TRY(std::ignore, check_table_size(c, {size}, "the window"));
    KILN_ONNX_TRY(ir::DType dtype, output_dtype(c));
    const double n = c.attr_i("periodic", 1) != 0 ? double(size) : double(size - 1);
    ir::HostTensor t = ir::HostTensor::zeros(dtype, {size});
    for (int64_t i = 0; i < size; ++i) {
      const double x = 2 * std::numbers::pi * double(i) / n;
      t.set(i, a0 - a1 * std::cos(x) + a2 * std::cos(2 * x));
    }
    return std::vector<Value>{Context::constant(std::move(t))};
  };
}

// ONNX's reference MelWeightMatrix: triangular filters between mel-spaced bin edges.
Outs mel_weight_matrix(Context& c) {
  KILN_ONNX_TRY(int64_t mels, known_int(c, 0, "num_mel_bins"));
  KILN_ONNX_TRY(int64_t dft_length, known_int(c, 1, "dft_length"));
  KILN_ONNX_TRY(double rate, c.scalar_of(2, "sample_rate"));
  KILN_ONNX_TRY(double lower, c.scalar_of(3, "lower_edge_hertz"));
  KILN_ONNX_TRY(double upper, c.scalar_of(4, "upper_edge_hertz"));
  KILN_ONNX_TRY(ir::DType dtype, output_dtype(c));
  if (mels <= 0 || dft_length <= 0 || rate <= 0)
    return c.fail("num_mel_bins, dft_length and sample_rate must be positive");
  const int64_t bins = dft_length / 2 + 1;
  KILN_ONNX_TRY(std::ignore, check_table_size(c, {bins, mels}, "the mel weight matrix"));
  auto mel = [](double hz) { return 2595 * std::log10(1 + hz / 700); };
  const double low = mel(lower), step = (mel(upper) - low) / double(mels + 2);
  std::vector<int64_t> edge(mels + 2);
  for (int64_t i = 0; i < mels + 2; ++i) {
    const double hz = 700 * (std::pow(10, (double(i) * step + low) / 2595) - 1);
    edge[i] = int64_t(std::floor(double(dft_length + 1) * hz / rate));
    if (edge[i] < 0 || edge[i] >= bins)
      return c.fail(fmt::format("mel bin edge {} falls outside the {} spectrogram bins", edge[i], bins));
  }
  std::vector<double> w(bins * mels, 0.0);
  for (int64_t i = 0; i < mels; ++i) {
    const int64_t left = edge[i], center = edge[i + 1], right = edge[i + 2];
    if (center == left)
      w[center * mels + i] = 1;
    else
      for (int64_t j = left; j <= center; ++j) w[j * mels + i] = double(j - left) / double(center - left);
    for (int64_t j = center; j < right; ++j) w[j * mels + i] = double(right - j) / double(right - center);
  }
  ir::HostTensor t = ir::HostTensor::zeros(dtype, {bins, mels});
  for (int64_t i = 0; i < t.numel(); ++i) t.set(i, w[i]);
  return std::vector<Value>{Context::constant(std::move(t))};
}

// The DFT along the last axis of a signal with real part `re` and imaginary part `im` (null for a
// real signal), zero-padded or truncated to `length`; the first `bins` frequencies. Returns the
// real and imaginary parts, frequency last. The inverse transform divides by `length`.
Expected<std::pair<const Node*, const Node*>> dft_last(Context& c, const Node* re, const Node* im,
                                                        int64_t length, int64_t bins, bool inverse) {
  ir::Builder& B = c.b();
  const size_t last = re->shape.size() - 1;
  const int64_t n = re->shape[last];
  auto fit = [&](const Node* x) -> Expected<const Node*> {
    if (n > length) return c.check(B.slice(x, last, 0, length, 1));
    if (n == length) return x;
    std::vector<int64_t> before(last + 1, 0), after(last + 1, 0);
    after[last] = length - n;
    return c.check(B.pad(x, before, after, 0));
  };
  KILN_ONNX_TRY(std::ignore, check_table_size(c, {length, bins}, "the DFT's cos and sin matrices"));
  KILN_ONNX_TRY(re, fit(re));
  if (im) { KILN_ONNX_TRY(im, fit(im)); }
  // cos and the signed sin of 2 pi j k / length: e^(-i t) forward, e^(+i t) inverse.
  ir::HostTensor cos_t = ir::HostTensor::zeros(re->dtype, {length, bins});
  ir::HostTensor sin_t = ir::HostTensor::zeros(re->dtype, {length, bins});
  const double scale = inverse ? 1.0 / double(length) : 1.0, sign = inverse ? -1 : 1;
  for (int64_t j = 0; j < length; ++j)
    for (int64_t k = 0; k < bins; ++k) {
      const double t = 2 * std::numbers::pi * double((j * k) % length) / double(length);
      cos_t.set(j * bins + k, scale * std::cos(t));
      sin_t.set(j * bins + k, sign * scale * std::sin(t));
    }
  Value cos_v = Context::constant(std::move(cos_t)), sin_v = Context::constant(std::move(sin_t));
  KILN_ONNX_TRY(const Node* cos_n, c.materialize(cos_v, "dft_cos"));
  KILN_ONNX_TRY(const Node* sin_n, c.materialize(sin_v, "dft_sin"));
  // (re + i im)(cos -+ i sin): re cos + im sin, im cos - re sin (sin signed above).
  KILN_ONNX_TRY(const Node* out_re, c.check(B.matmul(re, cos_n)));
  KILN_ONNX_TRY(const Node* re_sin, c.check(B.matmul(re, sin_n)));
  KILN_ONNX_TRY(const Node* out_im, c.check(B.unary(Op::Neg, re_sin)));
  if (im) {
    KILN_ONNX_TRY(const Node* im_sin, c.check(B.matmul(im, sin_n)));
    KILN_ONNX_TRY(const Node* im_cos, c.check(B.matmul(im, cos_n)));
    KILN_ONNX_TRY(out_re, c.check(B.binary(Op::Add, out_re, im_sin)));
    KILN_ONNX_TRY(out_im, c.check(B.binary(Op::Sub, im_cos, re_sin)));
  }
  return std::pair{out_re, out_im};
}

// [..., 1] or [..., 2] (ONNX's real or complex layout) into its parts, the last axis dropped.
Expected<std::pair<const Node*, const Node*>> complex_parts(Context& c, const Node* x) {
  ir::Builder& B = c.b();
  const size_t last = x->shape.size() - 1;
  ir::Shape part(x->shape.begin(), x->shape.end() - 1);
  KILN_ONNX_TRY(const Node* re, c.check(B.slice(x, last, 0, 1, 1)));
  KILN_ONNX_TRY(re, c.check(B.reshape(re, part)));
  if (x->shape[last] == 1) return std::pair<const Node*, const Node*>{re, nullptr};
  KILN_ONNX_TRY(const Node* im, c.check(B.slice(x, last, 1, 2, 1)));
  KILN_ONNX_TRY(im, c.check(B.reshape(im, part)));
  return std::pair{re, im};
}

// re and im stacked along a new last axis of 2.
Expected<const Node*> stack_complex(Context& c, const Node* re, const Node* im) {
  ir::Builder& B = c.b();
  ir::Shape col = re->shape;
  col.push_back(1);
  KILN_ONNX_TRY(re, c.check(B.reshape(re, col)));
  KILN_ONNX_TRY(im, c.check(B.reshape(im, col)));
  return c.check(B.concat({re, im}, int64_t(col.size() - 1)));
}

Outs dft(Context& c) {
  KILN_ONNX_TRY(const Node* x, c.x(0));
  const int64_t rank = x->shape.size();
  if (rank < 2 || (x->shape.back() != 1 && x->shape.back() != 2))
    return c.fail("input must be [batch, signal..., 1 or 2]");
  if (!ir::is_float(x->dtype)) return c.fail("input must be floating point");
  // Opset 20 moved the axis from an attribute (default 1) to input 2 (default -2).
  int64_t axis = c.opset() >= 20 ? -2 : c.attr_i("axis", 1);
  if (c.opset() >= 20 && c.has(2)) { KILN_ONNX_TRY(axis, known_int(c, 2, "axis")); }
  const int64_t given = axis;
  if (axis < 0) axis += rank;
  if (axis < 1 || axis >= rank - 1)
    return c.fail(fmt::format("axis {} is not a signal axis of rank {}", given, rank));
  const bool inverse = c.attr_i("inverse", 0) != 0, onesided = c.attr_i("onesided", 0) != 0;
  if (inverse && onesided) return c.unsupported("DFT with both inverse and onesided");
  int64_t length = x->shape[axis];
  if (c.has(1)) { KILN_ONNX_TRY(length, known_int(c, 1, "dft_length")); }
  if (length <= 0) return c.fail(fmt::format("dft_length {} is not positive", length));
  KILN_ONNX_TRY(auto parts, complex_parts(c, x));
  // The transform axis last, and back.
  std::vector<int64_t> perm, back(rank - 1);
  for (int64_t d = 0; d < rank - 1; ++d)
    if (d != axis) perm.push_back(d);
  perm.push_back(axis);
  for (size_t i = 0; i < perm.size(); ++i) back[perm[i]] = int64_t(i);
  ir::Builder& B = c.b();
  auto [re, im] = parts;
  KILN_ONNX_TRY(re, c.check(B.permute(re, perm)));
  if (im) { KILN_ONNX_TRY(im, c.check(B.permute(im, perm))); }
  KILN_ONNX_TRY(auto y, dft_last(c, re, im, length, onesided ? length / 2 + 1 : length, inverse));
  KILN_ONNX_TRY(const Node* yr, c.check(B.permute(y.first, back)));
  KILN_ONNX_TRY(const Node* yi, c.check(B.permute(y.second, back)));
  KILN_ONNX_TRY(const Node* out, stack_complex(c, yr, yi));
  return std::vector<Value>{c.out(out)};
}

// Frames of the signal ([batch, length, 1 or 2]) every frame_step samples, each times the
// window, through a DFT: [batch, frames, bins, 2].
Outs stft(Context& c) {
  KILN_ONNX_TRY(const Node* x, c.x(0));
  if (x->shape.size() != 3 || (x->shape[2] != 1 && x->shape[2] != 2))
    return c.fail("signal must be [batch, length, 1 or 2]");
  if (!ir::is_float(x->dtype)) return c.fail("signal must be floating point");
  KILN_ONNX_TRY(int64_t step, known_int(c, 1, "frame_step"));
  const Node* window = nullptr;
  int64_t length = -1;
  if (c.has(2)) {
    KILN_ONNX_TRY(window, c.x(2));
    if (window->shape.size() != 1) return c.fail("window must be one-dimensional");
    length = window->shape[0];
  }
  if (c.has(3)) {
    KILN_ONNX_TRY(int64_t given, known_int(c, 3, "frame_length"));
    if (window && given != length)
      return c.fail(fmt::format("frame_length {} differs from the window's length {}", given, length));
    length = given;
  }
  if (length < 0 && (window || c.has(3)))
    return c.fail(fmt::format("frame_length {} is negative", length));
  if (length < 0) return c.fail("neither a window nor a frame_length is given");
  if (step <= 0 || length <= 0 || length > x->shape[1])
    return c.fail(fmt::format("frame_step {} and frame_length {} do not fit a signal of {} samples", step,
                              length, x->shape[1]));
  ir::Builder& B = c.b();
  KILN_ONNX_TRY(const Node* frames, c.check(B.unfold(x, 1, length, step)));  // [batch, frames, 1|2, length]
  KILN_ONNX_TRY(frames, c.check(B.permute(frames, {0, 1, 3, 2})));
  KILN_ONNX_TRY(auto parts, complex_parts(c, frames));
  auto [re, im] = parts;
  if (window) {
    KILN_ONNX_TRY(re, c.check(B.binary(Op::Mul, re, window)));
    if (im) { KILN_ONNX_TRY(im, c.check(B.binary(Op::Mul, im, window))); }
  }
  const bool onesided = c.attr_i("onesided", 1) != 0;
  KILN_ONNX_TRY(auto y, dft_last(c, re, im, length, onesided ? length / 2 + 1 : length, false));
  KILN_ONNX_TRY(const Node* out, stack_complex(c, y.first, y.second));
  return std::vector<Value>{c.out(out)};
}

}  // namespace

void add_signal_ops(OpTable& t) {
  t["HannWindow"] = window(0.5, 0.5, 0);
  t["HammingWindow"] = window(25.0 / 46, 21.0 / 46, 0);
  t["BlackmanWindow"] = window(0.42, 0.5, 0.08);
  t["MelWeightMatrix"] = mel_weight_matrix;
  t["DFT"] = dft;
  t["STFT"] = stft;
}

}  // namespace kiln::onnx
