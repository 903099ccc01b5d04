// The Llama-style decoder of examples/llm/llama.py through kiln's C++ API (kiln/kiln.h): the same
// configuration, the same hashed weights bit for bit, the same top-k pick, so that both print the
// same tokens (tests/python/test_llm.py checks them against llama.py's numpy reference).
//
//   kiln_llm_decode [--steps N] [--topk K] [--device NAME] [--cache SETTING]
//
// --cache sets kiln.toml's compilation.cache and autotune.cache ("none", "file=PATH", ...).
//
// Prints the generated tokens, the first step's time (compilation included unless the cache has
// the plan), the median time per token after it and the kernels compiled over the whole run.
#include <kiln/kiln.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <span>
#include <string>
#include <vector>

namespace {

struct Config {
  int64_t layers = 4, width = 256, heads = 8, mlp = 688, vocab = 4096, ctx = 512;
  double eps = 1e-5, rope_base = 10000.0;
  int64_t head_dim() const { return width / heads; }
};

// llama.py's hashed(): ((i * 2654435761 + base) mod 2^32) / 2^32 in double, scaled, rounded once.
std::vector<float> hashed(int64_t n, uint64_t tensor_id, uint64_t seed, double scale) {
  const uint64_t base = (seed * 1000003 + tensor_id * 7919) % (uint64_t{1} << 32);
  std::vector<float> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t x = (static_cast<uint64_t>(i) * 2654435761u + base) % (uint64_t{1} << 32);
    const double u = static_cast<double>(x) / 4294967296.0;
    out[static_cast<size_t>(i)] = static_cast<float>((2.0 * u - 1.0) * scale);
  }
  return out;
}

// 1 + hashed(..., 0.1) (the norm gains), as llama.py computes it: the hashed float32 widened.
std::vector<float> gain(int64_t n, uint64_t tensor_id, uint64_t seed) {
  std::vector<float> h = hashed(n, tensor_id, seed, 0.1);
  for (float& v : h) v = static_cast<float>(1.0 + static_cast<double>(v));
  return h;
}

struct Layer {
  kiln::Tensor attn_norm, wq, wk, wv, wo, mlp_norm, wg, wu, wd;
};

struct Model {
  Config cfg;
  std::vector<Layer> layers;
  kiln::Tensor emb, norm, out, cos, sin, rows, ninf;
};

Model build(const kiln::Device& dev, const Config& c, uint64_t seed) {
  uint64_t id = 0;
  auto t = [&](std::vector<float> v, kiln::Shape shape) {
    return kiln::Tensor::from_host(dev, std::span<const float>(v), std::move(shape));
  };
  auto mat = [&](int64_t rows, int64_t cols) {
    // fan_in ** -0.5 as llama.py computes it (pow, not 1 / sqrt: they can differ in the last bit).
    return t(hashed(rows * cols, ++id, seed, std::pow(static_cast<double>(rows), -0.5)),
             {rows, cols});
  };
  auto g = [&](int64_t n) { return t(gain(n, ++id, seed), {n}); };
  Model m;
  m.cfg = c;
  const int64_t d = c.width;
  for (int64_t l = 0; l < c.layers; ++l) {
    Layer L;
    L.attn_norm = g(d);
    L.wq = mat(d, d);
    L.wk = mat(d, d);
    L.wv = mat(d, d);
    L.wo = mat(d, d);
    L.mlp_norm = g(d);
    L.wg = mat(d, c.mlp);
    L.wu = mat(d, c.mlp);
    L.wd = mat(c.mlp, d);
    m.layers.push_back(L);
  }
  m.emb = t(hashed(c.vocab * d, ++id, seed, 1.0), {c.vocab, d});
  m.norm = g(d);
  m.out = mat(d, c.vocab);
  // cos and sin of position * base^(-2i/head_dim), the half repeated (llama.py's rope_tables,
  // which calls the same libm functions).
  const int64_t hd = c.head_dim(), half = hd / 2;
  std::vector<float> cs(static_cast<size_t>(c.ctx * hd)), sn(cs.size());
  for (int64_t p = 0; p < c.ctx; ++p)
    for (int64_t i = 0; i < hd; ++i) {
      const double inv =
          std::pow(c.rope_base, -static_cast<double>(i % half) * 2.0 / static_cast<double>(hd));
      const double a = static_cast<double>(p) * inv;
      cs[static_cast<size_t>(p * hd + i)] = static_cast<float>(std::cos(a));
      sn[static_cast<size_t>(p * hd + i)] = static_cast<float>(std::sin(a));
    }
  m.cos = t(cs, {c.ctx, hd});
  m.sin = t(sn, {c.ctx, hd});
  m.rows = kiln::Tensor::arange(dev, 0, c.ctx).reshape({c.ctx, 1});
  m.ninf = kiln::Tensor::full(dev, {1}, -std::numeric_limits<double>::infinity());
  return m;
}

kiln::Tensor rms(const Model& m, const kiln::Tensor& x, const kiln::Tensor& g) {
  return x * kiln::rsqrt((x * x).mean({-1}, true) + m.cfg.eps) * g;
}

kiln::Tensor rope(const Model& m, const kiln::Tensor& x, const kiln::Tensor& cos,
                  const kiln::Tensor& sin) {
  const Config& c = m.cfg;
  kiln::Tensor h = x.reshape({c.heads, c.head_dim()});
  const int64_t half = c.head_dim() / 2;
  kiln::Tensor rot = kiln::concat({-h.slice(1, half, std::nullopt), h.slice(1, 0, half)}, 1);
  return (h * cos + rot * sin).reshape({1, c.width});
}

// llama.py's pick(): which of the k best tokens step `step` takes.
int64_t pick(int64_t step, int64_t k) {
  return static_cast<int64_t>(
      ((static_cast<uint64_t>(step) * 2654435761u + 12345) % (uint64_t{1} << 32)) %
      static_cast<uint64_t>(k));
}

struct Decoder {
  const kiln::Device& dev;
  const Model& m;
  std::vector<kiln::Tensor> k, v;  // per layer: [ctx, width]
  int compiled = 0, first_compiled = 0, kernels = 0;
  // Steps whose realize wrote every layer's new key and value caches over the old ones (buffer
  // donation: the old caches are held by nothing but the step's graph).
  int in_place = 0;
  std::vector<double> run_ms;  // each step's realize: time running its kernels

  Decoder(const kiln::Device& d, const Model& model) : dev(d), m(model) {
    std::vector<float> zeros(static_cast<size_t>(m.cfg.ctx * m.cfg.width), 0.f);
    for (int64_t l = 0; l < m.cfg.layers; ++l) {
      k.push_back(kiln::Tensor::from_host(dev, std::span<const float>(zeros),
                                          {m.cfg.ctx, m.cfg.width}));
      v.push_back(kiln::Tensor::from_host(dev, std::span<const float>(zeros),
                                          {m.cfg.ctx, m.cfg.width}));
    }
  }

  // One token at position `pos`: the chosen next token, or -1 after printing an error.
  int64_t step(int32_t token, int32_t pos, int64_t topk) {
    const Config& c = m.cfg;
    const int32_t tok_v[1] = {token}, pos_v[1] = {pos};
    kiln::Tensor tok = kiln::Tensor::from_host(dev, std::span<const int32_t>(tok_v), {1});
    kiln::Tensor at = kiln::Tensor::from_host(dev, std::span<const int32_t>(pos_v), {1});
    kiln::Tensor x = kiln::gather(m.emb, tok, 0);
    kiln::Tensor cos = kiln::gather(m.cos, at, 0), sin = kiln::gather(m.sin, at, 0);
    kiln::Tensor here = kiln::eq(m.rows, at);
    kiln::Tensor live = kiln::le(m.rows, at).reshape({1, 1, c.ctx});
    const double scale = std::pow(static_cast<double>(c.head_dim()), -0.5);  // as llama.py
    std::vector<kiln::Tensor> outs;
    for (int64_t l = 0; l < c.layers; ++l) {
      const Layer& L = m.layers[static_cast<size_t>(l)];
      kiln::Tensor h = rms(m, x, L.attn_norm);
      kiln::Tensor q = rope(m, kiln::matmul(h, L.wq), cos, sin);
      kiln::Tensor kc = kiln::where(here, rope(m, kiln::matmul(h, L.wk), cos, sin), k[l]);
      kiln::Tensor vc = kiln::where(here, kiln::matmul(h, L.wv), v[l]);
      k[l] = kc;
      v[l] = vc;
      kiln::Tensor qh = q.reshape({c.heads, 1, c.head_dim()});
      kiln::Tensor kh = kc.reshape({c.ctx, c.heads, c.head_dim()}).permute({1, 2, 0});
      kiln::Tensor vh = vc.reshape({c.ctx, c.heads, c.head_dim()}).permute({1, 0, 2});
      kiln::Tensor s = kiln::where(live, kiln::matmul(qh, kh) * scale, m.ninf);
      kiln::Tensor o = kiln::matmul(kiln::softmax(s, -1), vh).permute({1, 0, 2}).reshape({1, c.width});
      x = x + kiln::matmul(o, L.wo);
      h = rms(m, x, L.mlp_norm);
      kiln::Tensor g = kiln::matmul(h, L.wg);
      x = x + kiln::matmul(g * kiln::sigmoid(g) * kiln::matmul(h, L.wu), L.wd);
    }
    kiln::Tensor logits = kiln::matmul(rms(m, x, m.norm), m.out);
    kiln::Tensor next = topk == 1 ? logits.argmax(-1) : kiln::topk(logits, topk).indices;
    outs.push_back(next);
    outs.insert(outs.end(), k.begin(), k.end());
    outs.insert(outs.end(), v.begin(), v.end());
    if (auto r = kiln::realize(outs); !r) {
      std::fprintf(stderr, "kiln_llm_decode: step at position %d: %s\n", pos,
                   r.error().message.c_str());
      return -1;
    }
    const kiln::RealizeStats st = dev.last_stats();
    if (pos == 0) first_compiled = st.compiled;
    compiled += st.compiled;
    kernels = st.kernels;
    run_ms.push_back(st.run_ms);
    if (st.donated == 2 * c.layers) ++in_place;
    auto ids = next.to_vector<int64_t>();
    if (!ids) {
      std::fprintf(stderr, "kiln_llm_decode: %s\n", ids.error().message.c_str());
      return -1;
    }
    return (*ids)[static_cast<size_t>(topk == 1 ? 0 : pick(pos, topk))];
  }
};

}  // namespace

int main(int argc, char** argv) {
  int64_t steps = 200, topk = 1;
  std::string device = "cpu", cache;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "kiln_llm_decode: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    // A whole decimal integer ("1e2", "10x" and past int64 are no count).
    auto integer = [&]() -> int64_t {
      const std::string text = value();
      int64_t v = 0;
      auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
      if (ec != std::errc() || end != text.data() + text.size() || text.empty()) {
        std::fprintf(stderr, "kiln_llm_decode: %s: expected an integer, got '%s'\n", a.c_str(),
                     text.c_str());
        std::exit(2);
      }
      return v;
    };
    if (a == "--steps")
      steps = integer();
    else if (a == "--topk")
      topk = integer();
    else if (a == "--device") device = value();
    else if (a == "--cache") cache = value();
    else {
      std::fprintf(stderr,
                   "usage: kiln_llm_decode [--steps N] [--topk K] [--device NAME] [--cache SETTING]\n");
      return 2;
    }
  }
  const Config cfg;
  const std::vector<int32_t> prompt = [&] {
    std::vector<int32_t> p;
    for (int i = 0; i < 8; ++i) p.push_back(static_cast<int32_t>((17 + 101 * i) % cfg.vocab));
    return p;
  }();
  // The prompt and every generated token but the last are fed, one position each.
  const int64_t room = cfg.ctx - static_cast<int64_t>(prompt.size()) + 1;
  if (steps < 1 || topk < 1 || topk > cfg.vocab || steps > room) {
    std::fprintf(stderr, "kiln_llm_decode: --steps must be in [1, %lld] and --topk in [1, %lld]\n",
                 static_cast<long long>(room), static_cast<long long>(cfg.vocab));
    return 2;
  }
  // kiln.toml and the KILN_* environment apply (KILN_DUMP, KILN_COMPILATION_CACHE, ...), as in
  // the kiln program; the settings below come after them.
  kiln::Options options{.settings = {}, .use_config = true, .config_dir = ""};
  options.settings.push_back({"autotune.logger.targets", "stderr"});  // stdout is the tokens
  if (!cache.empty()) {  // kernels and plans, and tuning decisions, in the same place
    options.settings.push_back({"compilation.cache", cache});
    options.settings.push_back({"autotune.cache", cache});
  }
  auto dev = kiln::Device::open(device, options);
  if (!dev) {
    std::fprintf(stderr, "kiln_llm_decode: %s\n", dev.error().message.c_str());
    return 1;
  }
  const Model model = build(*dev, cfg, 1);
  Decoder dec(*dev, model);
  std::vector<int64_t> tokens;
  std::vector<double> ms;
  int32_t token = prompt[0];
  const int64_t positions = static_cast<int64_t>(prompt.size()) + steps - 1;
  for (int32_t pos = 0; pos < positions; ++pos) {
    const auto t0 = std::chrono::steady_clock::now();
    const int64_t next = dec.step(token, pos, topk);
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    if (next < 0) return 1;
    const bool prompting = pos + 1 < static_cast<int32_t>(prompt.size());
    token = prompting ? prompt[static_cast<size_t>(pos + 1)] : static_cast<int32_t>(next);
    if (!prompting) tokens.push_back(next);
  }
  std::vector<double> rest(ms.begin() + 1, ms.end());
  std::sort(rest.begin(), rest.end());
  const double median = rest.empty() ? ms[0] : rest[rest.size() / 2];
  std::printf("kiln C++ (%s): %zu tokens, first step %.1f ms, then %.2f ms per token (median), "
              "%.0f tokens/s\n",
              device.c_str(), tokens.size(), ms[0], median, 1000.0 / median);
  std::vector<double> run(dec.run_ms.begin() + 1, dec.run_ms.end());
  std::sort(run.begin(), run.end());
  std::printf("kiln C++: %lld steps, %d kernels a step, %d kernels compiled in all (first step %d); "
              "%.2f ms a step running kernels (median)\n",
              static_cast<long long>(positions), dec.kernels, dec.compiled, dec.first_compiled,
              run.empty() ? dec.run_ms[0] : run[run.size() / 2]);
  std::printf("kiln C++: caches updated in place in %d of %lld steps\n", dec.in_place,
              static_cast<long long>(positions));
  std::printf("tokens:");
  for (int64_t t : tokens) std::printf(" %lld", static_cast<long long>(t));
  std::printf("\n");
  return 0;
}
