/* kiln's C API: a stable ABI over the lazy tensor API of kiln/kiln.h, for C programs and for
 * bindings (Python, other languages). Link libkiln.so: `pkg-config --cflags --libs kiln`.
 *
 *   kiln_device dev;
 *   if (kiln_device_open("cpu", NULL, &dev) != KILN_OK) fprintf(stderr, "%s\n", kiln_last_error());
 *   int64_t shape[] = {4};
 *   float a[4] = {1, 2, 3, 4}, out[4];
 *   kiln_tensor x, y;
 *   kiln_tensor_from_host(dev, KILN_F32, shape, 1, a, sizeof a, &x);
 *   kiln_exp(x, &y);                         // recorded, nothing runs
 *   kiln_tensor_to_host(y, out, sizeof out); // fused, compiled, run
 *   kiln_tensor_release(y); kiln_tensor_release(x); kiln_device_release(dev);
 *
 * Conventions.
 * - Every function that can fail returns kiln_status; KILN_OK is 0. On failure,
 *   kiln_last_error() returns the message (what failed and why), and every out-parameter is left
 *   untouched. Results come back through out-parameters, named `out`.
 * - Handles are opaque. Each kiln_device and kiln_tensor handle a function gives you is yours:
 *   release it once with kiln_device_release / kiln_tensor_release (NULL is allowed and does
 *   nothing). Tensors keep their device alive, and a tensor keeps alive what it was computed
 *   from, so handles may be released in any order. kiln_tensor_retain gives a second handle to
 *   the same tensor.
 * - Ops are lazy: they check dtypes and shapes at once (a bad op fails with its message) and
 *   record the computation; kiln_tensor_realize, kiln_realize, kiln_tensor_to_host and
 *   kiln_tensor_to_dlpack run it.
 * - Shapes are arrays of int64_t with a rank; a rank of 0 is a scalar (the pointer may be NULL).
 * - No C++ type or exception crosses this API.
 *
 * Threads. Unless a function says otherwise, it may be called from any thread, at the same time
 * as any other call, including on the same handles: handles refer to shared, internally locked
 * state. The exceptions: releasing a handle while another thread still uses that handle, and
 * kiln_options_* on one kiln_options from two threads at once (an options record is a plain
 * value; once given to kiln_device_open it is copied and may be freed). kiln_last_error() is per
 * thread.
 *
 * ABI. KILN_C_ABI_VERSION changes only when an existing function or type changes incompatibly;
 * functions are only ever added within one ABI version. kiln_abi_version() is the version of the
 * library loaded at run time: a program built against this header can refuse to run on a
 * library whose ABI differs (docs/embedding.md, "ABI"). */
#ifndef KILN_KILN_C_H
#define KILN_KILN_C_H

#include <stddef.h>
#include <stdint.h>

#include "kiln/export.h"

#ifdef __cplusplus
extern "C" {
#endif

#define KILN_VERSION_MAJOR 0
#define KILN_VERSION_MINOR 1
#define KILN_VERSION_PATCH 0
#define KILN_C_ABI_VERSION 1

/* "0.1.0": the library's version. */
KILN_EXPORT const char* kiln_version(void);
/* The KILN_C_ABI_VERSION the library was built with. */
KILN_EXPORT int kiln_abi_version(void);

typedef enum kiln_status {
  KILN_OK = 0,
  /* A null handle or pointer, an unknown enum value, a size that does not match, a bad option. */
  KILN_ERROR_INVALID_ARGUMENT = 1,
  /* An op on operands it does not accept: their dtypes, their shapes, or tensors of two devices
   * (the message names the op and the operands). */
  KILN_ERROR_INVALID_OPERATION = 2,
  /* Opening a device, compiling or running failed; an allocation could not be met. */
  KILN_ERROR_DEVICE = 3,
  /* A DLPack tensor kiln cannot take: its device, dtype, byte order or layout. */
  KILN_ERROR_UNSUPPORTED = 4
} kiln_status;

/* The message of the last failed call on this thread ("" if none has failed); valid until the
 * next failing call on this thread. */
KILN_EXPORT const char* kiln_last_error(void);
/* "KILN_OK", "KILN_ERROR_INVALID_ARGUMENT", ... */
KILN_EXPORT const char* kiln_status_name(kiln_status status);

/* The element types (kiln/dtype.h); the values are part of the ABI. */
typedef enum kiln_dtype {
  KILN_F32 = 0,
  KILN_F64 = 1,
  KILN_F16 = 2,
  KILN_BF16 = 3,
  KILN_I32 = 4,
  KILN_I64 = 5,
  KILN_I8 = 6,
  KILN_U8 = 7,
  KILN_BOOL = 8
} kiln_dtype;

/* "f32", "f64", ... as kiln's graph files spell them; NULL for a value that is no dtype. */
KILN_EXPORT const char* kiln_dtype_name(kiln_dtype dtype);
/* Bytes per element; 0 for a value that is no dtype. */
KILN_EXPORT size_t kiln_dtype_size(kiln_dtype dtype);

/* ---- Options ------------------------------------------------------------------------------ */

/* The settings a device opens with: every kiln.toml key, by its dotted name and with the values
 * kiln.toml takes written as text ("autotune.level" = "balanced", "compilation.cache" =
 * "file=/path/kiln.sqlite", "fusion.beam_search.max_blocks" = "5", "autotune.enabled" = "false",
 * "compilation.logger.targets" = "log,file=kiln.log"), plus "threads" (the cpu's threads; "0"
 * = every core) and "cpu_rates" / "gpu_rates" ("measured" or "reference": the cost model's
 * rates, as KILN_CPU_RATES / KILN_GPU_RATES). Without options, or with a fresh record, a device uses kiln's defaults and
 * reads neither kiln.toml nor the environment; kiln_options_use_config asks for both, with
 * settings given here applied over them. docs/embedding.md lists the keys. */
typedef struct kiln_options_s* kiln_options;

KILN_EXPORT kiln_status kiln_options_create(kiln_options* out);
KILN_EXPORT void kiln_options_release(kiln_options options);
/* Checks the key and value at once: an unknown key (with the closest one) or a value the key
 * does not take is KILN_ERROR_INVALID_ARGUMENT. A later setting of one key replaces the earlier. */
KILN_EXPORT kiln_status kiln_options_set(kiln_options options, const char* key, const char* value);
/* Read kiln.toml (KILN_CONFIG, else found upward from `directory`; NULL: the working
 * directory) and the KILN_* environment variables, as the `kiln` program does, under the
 * settings given with kiln_options_set. */
KILN_EXPORT kiln_status kiln_options_use_config(kiln_options options, const char* directory);

/* Where the `log` logger target's lines go, for the whole process (not per device): `component`
 * is "fusion", "autotune", "compilation", "cache" or "memory", `level` the component's level
 * name. Called from whichever thread logs, possibly several at once; the strings are valid for
 * the call only. NULL removes the callback. */
typedef void (*kiln_log_callback)(const char* component, const char* level, const char* message,
                                  void* user_data);
KILN_EXPORT void kiln_set_log_callback(kiln_log_callback callback, void* user_data);

/* ---- Devices ------------------------------------------------------------------------------ */

typedef struct kiln_device_s* kiln_device;

/* `name`: "cpu", "reference" (the f64 interpreter), "vulkan:N" or "cuda:N". `options` may be
 * NULL (kiln's defaults). A device that is not there is KILN_ERROR_DEVICE, naming those that are. */
KILN_EXPORT kiln_status kiln_device_open(const char* name, kiln_options options, kiln_device* out);
KILN_EXPORT void kiln_device_release(kiln_device device);
/* The name it was opened with; valid while the handle is. */
KILN_EXPORT const char* kiln_device_name(kiln_device device);

typedef struct kiln_realize_stats {
  int32_t kernels;        /* kernels launched */
  int32_t compiled;       /* of them, compiled in this realize (not found in a cache) */
  double compile_ms;
  double run_ms;
  /* 1 when the plan was in the device's memory from an earlier realize of the graph (its source
     "memory"); one read from the persistent cache or made from a symbolic plan is not:
     kiln_device_last_plan_source says which */
  int32_t plan_cache_hit;
} kiln_realize_stats;
/* Statistics of the latest realize on the device, from whichever thread. */
KILN_EXPORT kiln_status kiln_device_last_stats(kiln_device device, kiln_realize_stats* out);
/* Of the latest realize's kernels, how many take their outer size (or, on the cpu, their inner
 * sizes) at run time, so that another size of it compiles nothing (docs/dynamic-shapes.md). */
KILN_EXPORT kiln_status kiln_device_last_dynamic_kernels(kiln_device device, int32_t* out);
/* How many of the latest realize's results were written over the memory of an operand that
 * nothing but the realize held (buffer donation: `w = w - lr * g`, or a decoder's key/value cache
 * updated in place; docs/embedding.md). */
KILN_EXPORT kiln_status kiln_device_last_donated(kiln_device device, int32_t* out);
/* Where the latest realize's plan came from: "memory" (this device ran these shapes before),
 * "symbolic" (the symbolic plan of the graph at other sizes, made in this process or read from the
 * persistent cache: nothing lowered or compiled; docs/dynamic-shapes.md), "disk" (a plan stored in
 * the persistent cache) or "built"; "" before the first realize. The string is static: it stays
 * valid for the life of the program. */
KILN_EXPORT kiln_status kiln_device_last_plan_source(kiln_device device, const char** out);
/* Why the latest realize compiled for a graph the device ran before at other sizes, one line per
 * reason joined by '\n' ("" when there is none): an input dimension that changed, a kernel made
 * to take its sizes at run time, or one kept at its sizes (docs/dynamic-shapes.md), as
 * `kiln run --stats` prints them. Copied into `buf` (`capacity` bytes, NUL-terminated, cut to
 * fit; `buf` may be NULL when `capacity` is 0); `*length` (unless NULL) gets the whole text's
 * length without the NUL, so a first call with capacity 0 sizes the buffer. */
KILN_EXPORT kiln_status kiln_device_last_recompiles(kiln_device device, char* buf, size_t capacity,
                                                    size_t* length);

/* ---- Tensors ------------------------------------------------------------------------------ */

typedef struct kiln_tensor_s* kiln_tensor;

/* A tensor holding a copy of `bytes` bytes at `data` (C order, little-endian; bool is one byte,
 * 0 or 1): `bytes` must be the shape's element count times kiln_dtype_size(dtype). */
KILN_EXPORT kiln_status kiln_tensor_from_host(kiln_device device, kiln_dtype dtype,
                                              const int64_t* shape, int32_t rank,
                                              const void* data, size_t bytes, kiln_tensor* out);
KILN_EXPORT kiln_status kiln_full(kiln_device device, kiln_dtype dtype, const int64_t* shape,
                                  int32_t rank, double value, kiln_tensor* out);
/* [start, end) by step, of dtype `dtype` (integer or float). */
KILN_EXPORT kiln_status kiln_arange(kiln_device device, int64_t start, int64_t end, int64_t step,
                                    kiln_dtype dtype, kiln_tensor* out);
/* A second handle to the same tensor (release both). */
KILN_EXPORT kiln_status kiln_tensor_retain(kiln_tensor tensor, kiln_tensor* out);
KILN_EXPORT void kiln_tensor_release(kiln_tensor tensor);

KILN_EXPORT kiln_status kiln_tensor_dtype(kiln_tensor tensor, kiln_dtype* out);
KILN_EXPORT kiln_status kiln_tensor_rank(kiln_tensor tensor, int32_t* out);
/* Writes the extents into `dims`, which holds `capacity` of them (at least the rank). */
KILN_EXPORT kiln_status kiln_tensor_shape(kiln_tensor tensor, int64_t* dims, int32_t capacity);
KILN_EXPORT kiln_status kiln_tensor_numel(kiln_tensor tensor, int64_t* out);

/* Runs what the tensor depends on (once; later ops read the result). Realizing a tensor that
 * another thread is realizing waits for that realize. */
KILN_EXPORT kiln_status kiln_tensor_realize(kiln_tensor tensor);
/* Marks axis `axis` (negative counts from the end) of the tensor dynamic: where it is an input of
 * a realize, the plan's kernels take that size at run time (docs/dynamic-shapes.md). `name` names
 * the size symbol (NULL or "": "s<axis>"). An axis out of range is KILN_ERROR_INVALID_ARGUMENT. */
KILN_EXPORT kiln_status kiln_tensor_mark_dynamic(kiln_tensor tensor, int64_t axis, const char* name);
/* Realizes `count` tensors of one device in one request: one plan, shared intermediates. Tensors
 * of two devices are KILN_ERROR_INVALID_OPERATION (nothing runs); a compile or run that fails is
 * KILN_ERROR_DEVICE. */
KILN_EXPORT kiln_status kiln_realize(const kiln_tensor* tensors, size_t count);
/* Realizes and copies the result into `data`, which holds `bytes` bytes (exactly the tensor's
 * element count times its dtype's size). */
KILN_EXPORT kiln_status kiln_tensor_to_host(kiln_tensor tensor, void* data, size_t bytes);

/* ---- DLPack (dlpack/dlpack.h) ------------------------------------------------------------- */

struct DLManagedTensor;

/* A tensor over a DLPack CPU tensor (kDLCPU) of a kiln dtype (lanes 1; bool is kDLBool, code 6).
 * Compact (strides NULL or row-major) and aligned to its element size: used in place, without a
 * copy, and `managed`'s deleter runs when kiln is done with it (its memory is read when a realize
 * runs: its owner must not change it meanwhile). Other strides: copied, and the deleter runs
 * before this returns. On failure (KILN_ERROR_UNSUPPORTED: another device, an unknown dtype)
 * kiln does not take `managed`. */
KILN_EXPORT kiln_status kiln_tensor_from_dlpack(kiln_device device, struct DLManagedTensor* managed,
                                                kiln_tensor* out);
/* Realizes the tensor and hands out its buffer without a copy: a compact kDLCPU tensor that
 * keeps the buffer alive until its deleter is called (call it exactly once). */
KILN_EXPORT kiln_status kiln_tensor_to_dlpack(kiln_tensor tensor, struct DLManagedTensor** out);
/* For Python bindings written without a C compiler (ctypes, cffi's ABI mode): a PyCapsule
 * destructor (`void (*)(PyObject*)`, here `void*`) for the DLPack protocol's capsules named
 * "dltensor" holding a DLManagedTensor (from kiln_tensor_to_dlpack): when no consumer took the
 * capsule (it is still named "dltensor", not "used_dltensor"), it calls the tensor's deleter, and
 * it keeps any pending Python exception as it was. A destructor written in Python cannot: a
 * ctypes callback that returns while an exception is set replaces that exception. It calls the
 * Python C API of the process it runs in (found when first called; without one it does nothing),
 * as every capsule destructor does, with the GIL held. */
KILN_EXPORT void kiln_dlpack_capsule_destructor(void* capsule);

/* ---- Ops: each records one op and returns its result in `out` ------------------------------ */

/* Elementwise, broadcasting like numpy. Unary: neg abs exp log sqrt rsqrt recip sin cos tanh
 * sigmoid relu gelu erf floor ceil sign logical_not. Binary: add sub mul div pow maximum minimum
 * eq ne lt le gt ge logical_and logical_or. Ternary: where(cond, a, b). One function per
 * elementwise row of kiln's op table (kiln/ops.def, its `api` column), named kiln_<name>. */
#define KILN_API_unary(fn) \
  KILN_EXPORT kiln_status kiln_##fn(kiln_tensor x, kiln_tensor* out);
#define KILN_API_binary(fn) \
  KILN_EXPORT kiln_status kiln_##fn(kiln_tensor a, kiln_tensor b, kiln_tensor* out);
#define KILN_API_ternary(fn) \
  KILN_EXPORT kiln_status kiln_##fn(kiln_tensor cond, kiln_tensor a, kiln_tensor b, kiln_tensor* out);
#define KILN_API_member(fn)
#define KILN_API_manual(fn) /* kiln_clip, below */
#define KILN_ELEMENTWISE(Enum, name, arity, dtypes, cost, api) KILN_API_##api
#include "kiln/ops.def"
#undef KILN_API_unary
#undef KILN_API_binary
#undef KILN_API_ternary
#undef KILN_API_member
#undef KILN_API_manual

/* A scalar of `x`'s dtype combined with `x`: x + s, x - s, s - x, x * s, x / s, s / x. */
KILN_EXPORT kiln_status kiln_add_scalar(kiln_tensor x, double s, kiln_tensor* out);
KILN_EXPORT kiln_status kiln_sub_scalar(kiln_tensor x, double s, kiln_tensor* out);
KILN_EXPORT kiln_status kiln_rsub_scalar(kiln_tensor x, double s, kiln_tensor* out);
KILN_EXPORT kiln_status kiln_mul_scalar(kiln_tensor x, double s, kiln_tensor* out);
KILN_EXPORT kiln_status kiln_div_scalar(kiln_tensor x, double s, kiln_tensor* out);
KILN_EXPORT kiln_status kiln_rdiv_scalar(kiln_tensor x, double s, kiln_tensor* out);
KILN_EXPORT kiln_status kiln_cast(kiln_tensor x, kiln_dtype to, kiln_tensor* out);

/* Reductions over `axes` (`count` of them; none: all axes); keepdim 0 or 1. */
KILN_EXPORT kiln_status kiln_sum(kiln_tensor x, const int64_t* axes, int32_t count, int keepdim,
                                 kiln_tensor* out);
KILN_EXPORT kiln_status kiln_mean(kiln_tensor x, const int64_t* axes, int32_t count, int keepdim,
                                  kiln_tensor* out);
KILN_EXPORT kiln_status kiln_max(kiln_tensor x, const int64_t* axes, int32_t count, int keepdim,
                                 kiln_tensor* out);
KILN_EXPORT kiln_status kiln_min(kiln_tensor x, const int64_t* axes, int32_t count, int keepdim,
                                 kiln_tensor* out);
KILN_EXPORT kiln_status kiln_prod(kiln_tensor x, const int64_t* axes, int32_t count, int keepdim,
                                  kiln_tensor* out);
KILN_EXPORT kiln_status kiln_argmax(kiln_tensor x, int64_t axis, int keepdim, kiln_tensor* out);
KILN_EXPORT kiln_status kiln_argmin(kiln_tensor x, int64_t axis, int keepdim, kiln_tensor* out);

/* Views (free: they become index expressions of the loads that read them). */
KILN_EXPORT kiln_status kiln_reshape(kiln_tensor x, const int64_t* shape, int32_t rank,
                                     kiln_tensor* out);
KILN_EXPORT kiln_status kiln_permute(kiln_tensor x, const int64_t* dims, int32_t count,
                                     kiln_tensor* out);
/* Swaps the last two axes. */
KILN_EXPORT kiln_status kiln_transpose(kiln_tensor x, kiln_tensor* out);
KILN_EXPORT kiln_status kiln_expand(kiln_tensor x, const int64_t* shape, int32_t rank,
                                    kiln_tensor* out);
/* x[start:end:step] along `axis`; has_start / has_end 0 leave that end open, as in Python. */
KILN_EXPORT kiln_status kiln_slice(kiln_tensor x, int64_t axis, int has_start, int64_t start,
                                   int has_end, int64_t end, int64_t step, kiln_tensor* out);
/* `count` = x's rank entries in `before` and in `after`. */
KILN_EXPORT kiln_status kiln_pad(kiln_tensor x, const int64_t* before, const int64_t* after,
                                 int32_t count, double value, kiln_tensor* out);
KILN_EXPORT kiln_status kiln_flip(kiln_tensor x, const int64_t* axes, int32_t count,
                                  kiln_tensor* out);
KILN_EXPORT kiln_status kiln_roll(kiln_tensor x, const int64_t* shifts, const int64_t* axes,
                                  int32_t count, kiln_tensor* out);
KILN_EXPORT kiln_status kiln_unfold(kiln_tensor x, int64_t dim, int64_t size, int64_t step,
                                    kiln_tensor* out);
KILN_EXPORT kiln_status kiln_concat(const kiln_tensor* xs, int32_t count, int64_t axis,
                                    kiln_tensor* out);

/* Indexed reads. `idx` is i32 or i64; an index i < 0 reads i + n, and indices are then clamped
 * into [0, n) (n = x's length along `axis`), so none reads outside x. kiln_gather: numpy take /
 * ONNX Gather, the result's shape x.shape[:axis] + idx.shape + x.shape[axis+1:].
 * kiln_gather_elements: numpy take_along_axis / ONNX GatherElements, idx of x's rank, the result's
 * shape idx's. Like the other ops, callable from any thread. */
KILN_EXPORT kiln_status kiln_gather(kiln_tensor x, kiln_tensor idx, int64_t axis, kiln_tensor* out);
KILN_EXPORT kiln_status kiln_gather_elements(kiln_tensor x, kiln_tensor idx, int64_t axis,
                                             kiln_tensor* out);

KILN_EXPORT kiln_status kiln_matmul(kiln_tensor a, kiln_tensor b, kiln_tensor* out);
/* kiln::clip (numpy clip, ONNX Clip): min(max(x, lo), hi); lo or hi NULL: that bound is not
 * applied. NaN propagates; lo > hi gives hi; the bounds broadcast and have x's dtype. */
KILN_EXPORT kiln_status kiln_clip(kiln_tensor x, kiln_tensor lo, kiln_tensor hi, kiln_tensor* out);
/* kiln::trilu: the upper (upper 1) or lower (0) triangle of the last two axes, relative to
 * diagonal k (ONNX Trilu); the rest 0. */
KILN_EXPORT kiln_status kiln_trilu(kiln_tensor x, int64_t k, int upper, kiln_tensor* out);
/* Indexed write (ONNX ScatterElements): x with upd[p] written (reduction "none", or NULL) or
 * folded ("add", "mul", "max", "min") at p with p[axis] = idx[p], for every position p of idx
 * (i32 or i64; idx and upd of x's rank and one shape). An index i < 0 means i + n, once; an index
 * still out of range drops its update; with "none" the last of duplicate indices along the axis
 * wins. */
KILN_EXPORT kiln_status kiln_scatter_elements(kiln_tensor x, kiln_tensor idx, kiln_tensor upd,
                                              int64_t axis, const char* reduction,
                                              kiln_tensor* out);
/* The running sum along `axis` (ONNX CumSum); exclusive and reverse are flags (nonzero: true). */
KILN_EXPORT kiln_status kiln_cumsum(kiln_tensor x, int64_t axis, int exclusive, int reverse,
                                    kiln_tensor* out);
/* ONNX TopK: the k largest (largest 1) or smallest (0) elements along `axis` and their i64
 * indices, best first (ties: lower index first; NaN above every number); 0 <= k <= n. sorted is
 * accepted for ONNX's sake: the result is always sorted. On success both out-handles are set; on
 * failure neither is. */
KILN_EXPORT kiln_status kiln_topk(kiln_tensor x, int64_t k, int64_t axis, int largest, int sorted,
                                  kiln_tensor* values, kiln_tensor* indices);
/* kiln::resize (kiln/kiln.h; one resize op per axis): x resized to sizes[rank] (rank = x's). mode, coordinate_transformation_mode
 * and nearest_mode are ONNX Resize's names; NULL picks "nearest", "half_pixel",
 * "round_prefer_floor". Unknown names and linear or cubic of integer data are
 * KILN_ERROR_INVALID_OPERATION. */
KILN_EXPORT kiln_status kiln_resize(kiln_tensor x, const int64_t* sizes, int32_t rank,
                                    const char* mode, const char* coordinate_transformation_mode,
                                    const char* nearest_mode, kiln_tensor* out);
/* Composites, built from the primitives above. */
KILN_EXPORT kiln_status kiln_softmax(kiln_tensor x, int64_t axis, kiln_tensor* out);
KILN_EXPORT kiln_status kiln_log_softmax(kiln_tensor x, int64_t axis, kiln_tensor* out);
KILN_EXPORT kiln_status kiln_layernorm(kiln_tensor x, kiln_tensor gamma, kiln_tensor beta,
                                       int64_t axis, double eps, kiln_tensor* out);
/* has_scale 0: 1/sqrt(head dimension). */
KILN_EXPORT kiln_status kiln_attention(kiln_tensor q, kiln_tensor k, kiln_tensor v, int causal,
                                       int has_scale, double scale, kiln_tensor* out);

/* ---- Graph files (.kg) --------------------------------------------------------------------- */

/* A `.kg` graph (docs/graph-format.md), read once, then called on tensors like an op, any number
 * of times and from any number of threads at once, or dumped. Release it with
 * kiln_graph_release; the tensors it recorded keep what they need of it. */
typedef struct kiln_graph_s* kiln_graph;

/* Reads a graph file by its extension: `.onnx`, an ONNX model (docs/onnx.md: its initializers
 * and constants are bound by the graph itself, copied to each device at its first call there and
 * kept while the graph lives; a symbolic dimension of its inputs (dim_param) is a size symbol, as
 * `?b` in `.kg`: a call binds a tensor of any size there), or `.kg` text. A file
 * that cannot be read, or is not a valid graph, is KILN_ERROR_INVALID_ARGUMENT with the message
 * "FILE:LINE:COL: error: WHAT" (for a model, "FILE: onnx: node N 'NAME' (OP): WHAT"). */
KILN_EXPORT kiln_status kiln_graph_load(const char* path, kiln_graph* out);
/* The same for .kg text (NUL-terminated); `filename` names it in messages (NULL: "<text>"). */
KILN_EXPORT kiln_status kiln_graph_parse(const char* text, const char* filename, kiln_graph* out);
/* Trace and replay (kiln::Graph::trace): the graph of the ops recorded between the `num_args`
 * tensors `args` and the `num_outputs` tensors `outputs` (all of one device). Its inputs are the
 * args (arg0, arg1, ...), its outputs out0, out1, ...; every other realized tensor those ops read
 * is captured: held by the graph, and bound by it at each kiln_graph_call, which must be on its
 * device. A tensor whose value changes between calls (a cache) must be an arg. Nothing runs. A
 * tensor with an error, tensors of two devices, an arg given twice, or a tensor the outputs read
 * that was realized after the args were made (its value, perhaps computed from them, would be
 * replayed as it is) is KILN_ERROR_INVALID_ARGUMENT. */
KILN_EXPORT kiln_status kiln_graph_trace(const kiln_tensor* outputs, int32_t num_outputs,
                                         const kiln_tensor* args, int32_t num_args,
                                         kiln_graph* out);
KILN_EXPORT void kiln_graph_release(kiln_graph graph);
/* How many inputs (in declaration order; for an ONNX model, those it does not bind itself) and
 * outputs (in `output` order) the graph has; either pointer may be NULL. */
KILN_EXPORT kiln_status kiln_graph_counts(kiln_graph graph, int32_t* inputs, int32_t* outputs);
/* Input `index`: its name (without '%'; valid while the graph handle is), dtype and rank; each
 * pointer may be NULL. An index out of range is KILN_ERROR_INVALID_ARGUMENT. */
KILN_EXPORT kiln_status kiln_graph_input(kiln_graph graph, int32_t index, const char** name,
                                         kiln_dtype* dtype, int32_t* rank);
/* Input `index`'s extents, into `dims`, which holds `capacity` of them (at least its rank). */
KILN_EXPORT kiln_status kiln_graph_input_shape(kiln_graph graph, int32_t index, int64_t* dims,
                                               int32_t capacity);
/* Input `index`'s size symbol at `axis` (without '?'; valid while the graph handle is): `b` for
 * a `.kg` input declared `f32[?b=64,784]`, `batch` for an ONNX input dimension whose dim_param is
 * batch; "" for an axis of fixed size. A call may bind a tensor of any size at a symbol's axis
 * (docs/dynamic-shapes.md); kiln_graph_input_shape gives the size the file declares there (an
 * ONNX model's: 1, or the first size it reads at, docs/onnx.md). An index or axis out of range is
 * KILN_ERROR_INVALID_ARGUMENT. */
KILN_EXPORT kiln_status kiln_graph_input_symbol(kiln_graph graph, int32_t index, int32_t axis,
                                                const char** symbol);
/* Output `index`'s name (without '%'; valid while the graph handle is). */
KILN_EXPORT kiln_status kiln_graph_output(kiln_graph graph, int32_t index, const char** name);
/* Records the graph's outputs over `count` input tensors of `device`: `inputs[i]` is bound to the
 * input named `names[i]` (a leading '%' is allowed), or, with `names` NULL, to the i-th input.
 * Every input is bound once, with the dtype and shape the graph declares; otherwise
 * KILN_ERROR_INVALID_ARGUMENT says which input and what it expects. An input of another device
 * is KILN_ERROR_INVALID_OPERATION, as an op's operand is. Writes one new tensor handle
 * per output into `outputs` (`capacity` of them, at least the output count), in `output` order.
 * Like an op it runs nothing: realize the outputs together (kiln_realize) to compute their common
 * values once. */
KILN_EXPORT kiln_status kiln_graph_call(kiln_device device, kiln_graph graph,
                                        const char* const* names, const kiln_tensor* inputs,
                                        int32_t count, kiln_tensor* outputs, int32_t capacity);

/* ---- Dumps: what a realize would run, as `kiln dump` shows it (docs/dump.md) --------------- */

/* Plans the graph's outputs on `device` (and for "source" compiles their kernels) with the
 * device's options and caches, as a realize would, and writes the text of `stage` into `*out`:
 * "graph" (the optimized graph, as .kg), "groups" (the kernels, the values each computes, cost
 * estimates; with `why` non-zero, the reason for each kernel boundary), "kernels" (kernel IR),
 * "analyze" (what code generation is told of each kernel) or "source" (each kernel's generated
 * source: LLVM IR on cpu, CUDA C on cuda:N, GLSL on vulkan:N). Values keep the file's names.
 * Release the text with kiln_string_release. An unknown stage is KILN_ERROR_INVALID_ARGUMENT; the
 * `reference` device, which builds no kernels, and a failure to plan or compile are
 * KILN_ERROR_DEVICE. */
KILN_EXPORT kiln_status kiln_graph_dump(kiln_device device, kiln_graph graph, const char* stage,
                                        int why, char** out);
/* The same for what realizing `count` tensors of one device would compute now (values already
 * realized are its inputs, named %t<id> like every value); nothing is realized. Tensors of two
 * devices are KILN_ERROR_INVALID_OPERATION. */
KILN_EXPORT kiln_status kiln_dump(const kiln_tensor* tensors, size_t count, const char* stage,
                                  int why, char** out);
/* Frees text that kiln handed out (NULL is allowed). */
KILN_EXPORT void kiln_string_release(char* text);

#ifdef __cplusplus
}
#endif

#endif /* KILN_KILN_C_H */
