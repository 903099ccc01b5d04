// An MLP forward pass and a few steps of training it, through kiln's C++ API (kiln/kiln.h), as a
// framework's backend would run them. Exits non-zero when a result is wrong.
#include <kiln/kiln.h>

#include <cmath>
#include <cstdio>
#include <span>
#include <vector>

namespace {
std::vector<float> ramp(size_t n, float scale, float offset) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = scale * static_cast<float>((i * 7) % 13) + offset;
  return v;
}
}  // namespace

int main(int argc, char** argv) {
  const char* device = argc > 1 ? argv[1] : "cpu";
  auto dev = kiln::Device::open(device, kiln::Options{});
  if (!dev) {
    std::fprintf(stderr, "embed_mlp: %s\n", dev.error().message.c_str());
    return 1;
  }
  auto tensor = [&](const std::vector<float>& v, kiln::Shape shape) {
    return kiln::Tensor::from_host(*dev, std::span<const float>(v), std::move(shape));
  };
  const auto xs = ramp(32 * 16, 0.1f, -0.6f), labels = ramp(32 * 4, 0.05f, 0.f);
  kiln::Tensor x = tensor(xs, {32, 16}), y = tensor(labels, {32, 4});
  kiln::Tensor w1 = tensor(ramp(16 * 64, 0.02f, -0.12f), {16, 64});
  kiln::Tensor w2 = tensor(ramp(64 * 4, 0.03f, -0.18f), {64, 4});

  // Forward: softmax(relu(x w1) w2); every row of probabilities sums to 1.
  auto probs = kiln::softmax(kiln::matmul(kiln::relu(kiln::matmul(x, w1)), w2)).to_vector<float>();
  if (!probs) {
    std::fprintf(stderr, "embed_mlp: %s\n", probs.error().message.c_str());
    return 1;
  }
  for (int r = 0; r < 32; ++r) {
    double sum = 0;
    for (int c = 0; c < 4; ++c) sum += (*probs)[r * 4 + c];
    if (std::fabs(sum - 1) > 1e-5) {
      std::fprintf(stderr, "embed_mlp: row %d of the softmax sums to %g\n", r, sum);
      return 1;
    }
  }

  // Training the last layer on a squared error, one realize per step: the loss must fall.
  kiln::Tensor h = kiln::relu(kiln::matmul(x, w1));
  double first = 0, last = 0;
  for (int step = 0; step < 50; ++step) {
    kiln::Tensor err = kiln::matmul(h, w2) - y;
    auto loss = (err * err).mean().to_vector<float>();
    if (!loss) {
      std::fprintf(stderr, "embed_mlp: %s\n", loss.error().message.c_str());
      return 1;
    }
    (step == 0 ? first : last) = (*loss)[0];
    w2 = w2 - kiln::matmul(h.transpose(), err) * (0.5 / 32);
    if (auto r = w2.realize(); !r) {
      std::fprintf(stderr, "embed_mlp: %s\n", r.error().message.c_str());
      return 1;
    }
  }
  std::printf("embed_mlp on %s: probabilities of row 0: %.4f %.4f %.4f %.4f; loss %.5f -> %.5f\n",
              device, (*probs)[0], (*probs)[1], (*probs)[2], (*probs)[3], first, last);
  return last < 0.5 * first ? 0 : 1;
}
