/* kiln/kiln_c.h compiled as C (C11, -pedantic, warnings as errors) and used from C: a small
 * computation whose every value is checked, and a failure's status and message. */
#include <kiln/kiln_c.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#define CHECK(call)                                                                      \
  do {                                                                                   \
    kiln_status s_ = (call);                                                             \
    if (s_ != KILN_OK) {                                                                 \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, kiln_status_name(s_),        \
              kiln_last_error());                                                        \
      return 1;                                                                          \
    }                                                                                    \
  } while (0)

int main(void) {
  kiln_device dev;
  kiln_tensor x, e, y, bad;
  float in[6] = {0, 1, 2, 3, 4, 5}, out[2];
  int64_t shape[2] = {2, 3}, axis = 1;
  int i;
  if (kiln_abi_version() != KILN_C_ABI_VERSION) return 1;
  CHECK(kiln_device_open("cpu", NULL, &dev));
  CHECK(kiln_tensor_from_host(dev, KILN_F32, shape, 2, in, sizeof in, &x));
  CHECK(kiln_exp(x, &e));
  CHECK(kiln_sum(e, &axis, 1, 0, &y));
  CHECK(kiln_tensor_to_host(y, out, sizeof out));
  for (i = 0; i < 2; ++i) {
    double want = exp(3.0 * i) + exp(3.0 * i + 1) + exp(3.0 * i + 2);
    if (fabs(out[i] - want) > 1e-5 * want) {
      fprintf(stderr, "row %d: %g, expected %g\n", i, out[i], want);
      return 1;
    }
  }
  if (kiln_matmul(x, x, &bad) != KILN_ERROR_INVALID_OPERATION || strlen(kiln_last_error()) == 0) {
    fprintf(stderr, "matmul of [2,3] by [2,3] was not refused\n");
    return 1;
  }
  printf("kiln %s (C ABI %d): sum(exp(x), 1) = %g %g\n", kiln_version(), kiln_abi_version(),
         out[0], out[1]);
  kiln_tensor_release(y);
  kiln_tensor_release(e);
  kiln_tensor_release(x);
  kiln_device_release(dev);
  return 0;
}
