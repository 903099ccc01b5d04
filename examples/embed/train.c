/* Linear regression by gradient descent through kiln's C API, built with
 *   cc train.c $(pkg-config --cflags --libs kiln) -lm
 * Exits non-zero when a call fails or the loss does not fall. */
#include <kiln/kiln_c.h>

#include <stdio.h>
#include <stdlib.h>

#define CHECK(call)                                                                     \
  do {                                                                                  \
    kiln_status s_ = (call);                                                            \
    if (s_ != KILN_OK) {                                                                \
      fprintf(stderr, "train: %s: %s\n", kiln_status_name(s_), kiln_last_error());      \
      exit(1);                                                                          \
    }                                                                                   \
  } while (0)

enum { N = 256, D = 8 };

static double loss(const float* x, const float* y, const float* w) {
  double sum = 0;
  int i, j;
  for (i = 0; i < N; ++i) {
    double p = 0;
    for (j = 0; j < D; ++j) p += x[i * D + j] * w[j];
    sum += (p - y[i]) * (p - y[i]);
  }
  return sum / N;
}

int main(int argc, char** argv) {
  static float x[N * D], y[N], w0[D], w[D];
  const int64_t xs[2] = {N, D}, ys[2] = {N, 1}, ws[2] = {D, 1};
  kiln_device dev;
  kiln_tensor tx, txt, ty, tw;
  int i, j, step;
  for (i = 0; i < N; ++i) {
    y[i] = 0;
    for (j = 0; j < D; ++j) {
      x[i * D + j] = (float)((i * 7 + j * 3) % 11) / 11.0f - 0.5f;
      y[i] += (float)(j + 1) * 0.25f * x[i * D + j]; /* the weights to learn: 0.25, 0.5, ... */
    }
  }
  CHECK(kiln_device_open(argc > 1 ? argv[1] : "cpu", NULL, &dev));
  CHECK(kiln_tensor_from_host(dev, KILN_F32, xs, 2, x, sizeof x, &tx));
  CHECK(kiln_tensor_from_host(dev, KILN_F32, ys, 2, y, sizeof y, &ty));
  CHECK(kiln_tensor_from_host(dev, KILN_F32, ws, 2, w0, sizeof w0, &tw));
  CHECK(kiln_transpose(tx, &txt));
  for (step = 0; step < 200; ++step) {
    kiln_tensor p, e, g, gs, next;
    CHECK(kiln_matmul(tx, tw, &p));
    CHECK(kiln_sub(p, ty, &e));
    CHECK(kiln_matmul(txt, e, &g));
    CHECK(kiln_mul_scalar(g, 1.0 / N, &gs));
    CHECK(kiln_sub(tw, gs, &next));
    CHECK(kiln_tensor_realize(next));
    kiln_tensor_release(p), kiln_tensor_release(e), kiln_tensor_release(g), kiln_tensor_release(gs);
    kiln_tensor_release(tw);
    tw = next;
  }
  CHECK(kiln_tensor_to_host(tw, w, sizeof w));
  printf("train on %s (kiln %s): loss %.5f -> %.5f; w =", kiln_device_name(dev), kiln_version(),
         loss(x, y, w0), loss(x, y, w));
  for (j = 0; j < D; ++j) printf(" %.3f", w[j]);
  printf("\n");
  kiln_tensor_release(tw), kiln_tensor_release(tx), kiln_tensor_release(txt), kiln_tensor_release(ty);
  kiln_device_release(dev);
  return loss(x, y, w) < 0.1 * loss(x, y, w0) ? 0 : 1;
}
