// DLPack both ways through the C API: a realized tensor handed out without a copy, taken back in
// without a copy (same address), the deleter run exactly once when kiln is done; strided and
// misaligned memory copied; memory kiln cannot take refused without taking it.
#include <gtest/gtest.h>

#include <dlpack/dlpack.h>
#include <kiln/kiln_c.h>

#include <cstdint>
#include <cstring>
#include <vector>

namespace {

#define C_OK(call) ASSERT_EQ((call), KILN_OK) << kiln_last_error()

struct Device {
  kiln_device dev = nullptr;
  Device() {
    kiln_options o = nullptr;
    kiln_options_create(&o);
    kiln_options_set(o, "compilation.cache", "none");
    kiln_options_set(o, "autotune.enabled", "false");
    kiln_device_open("cpu", o, &dev);
    kiln_options_release(o);
  }
  ~Device() { kiln_device_release(dev); }
};

// A DLPack tensor over host floats this test owns; counts its deleter's calls.
struct Owned {
  std::vector<float> data;
  std::vector<int64_t> shape, strides;
  int deleted = 0;
  DLManagedTensor managed{};
  Owned(std::vector<float> d, std::vector<int64_t> s, std::vector<int64_t> st = {},
        int64_t byte_offset = 0)
      : data(std::move(d)), shape(std::move(s)), strides(std::move(st)) {
    DLTensor& t = managed.dl_tensor;
    t.data = data.data();
    t.device = {kDLCPU, 0};
    t.ndim = static_cast<int32_t>(shape.size());
    t.dtype = {kDLFloat, 32, 1};
    t.shape = shape.data();
    t.strides = strides.empty() ? nullptr : strides.data();
    t.byte_offset = static_cast<uint64_t>(byte_offset);
    managed.manager_ctx = this;
    managed.deleter = [](DLManagedTensor* self) { ++static_cast<Owned*>(self->manager_ctx)->deleted; };
  }
};

std::vector<float> values(kiln_tensor t, size_t n) {
  std::vector<float> v(n);
  EXPECT_EQ(kiln_tensor_to_host(t, v.data(), n * sizeof(float)), KILN_OK) << kiln_last_error();
  return v;
}

TEST(DLPack, ImportIsInPlaceAndTheDeleterRunsOnceWhenKilnIsDone) {
  Device d;
  Owned x({1, 2, 3, 4, 5, 6}, {2, 3});
  kiln_tensor t, y;
  C_OK(kiln_tensor_from_dlpack(d.dev, &x.managed, &t));
  // In place: exporting the imported tensor hands out the very same memory.
  DLManagedTensor* back = nullptr;
  C_OK(kiln_tensor_to_dlpack(t, &back));
  EXPECT_EQ(back->dl_tensor.data, x.data.data());
  C_OK(kiln_mul_scalar(t, 2, &y));
  kiln_tensor_release(t);
  EXPECT_EQ(values(y, 6), (std::vector<float>{2, 4, 6, 8, 10, 12}));
  kiln_tensor_release(y);
  EXPECT_EQ(x.deleted, 0);  // the export still holds the buffer
  back->deleter(back);
  EXPECT_EQ(x.deleted, 1);
}

TEST(DLPack, ExportIsInPlaceAndKeepsTheBufferAlive) {
  Device d;
  const int64_t shape[2] = {2, 2};
  kiln_tensor a, b;
  C_OK(kiln_arange(d.dev, 0, 4, 1, KILN_F32, &a));
  kiln_tensor r;
  C_OK(kiln_reshape(a, shape, 2, &r));
  C_OK(kiln_add_scalar(r, 0.5, &b));
  DLManagedTensor* m = nullptr;
  C_OK(kiln_tensor_to_dlpack(b, &m));
  kiln_tensor_release(a), kiln_tensor_release(r), kiln_tensor_release(b);  // the export keeps it
  const DLTensor& t = m->dl_tensor;
  EXPECT_EQ(t.device.device_type, kDLCPU);
  EXPECT_EQ(t.ndim, 2);
  EXPECT_EQ(t.shape[0], 2);
  EXPECT_EQ(t.shape[1], 2);
  EXPECT_EQ(t.strides, nullptr);
  EXPECT_EQ(t.dtype.code, kDLFloat);
  EXPECT_EQ(t.dtype.bits, 32);
  const auto* v = static_cast<const float*>(t.data);
  EXPECT_EQ(std::vector<float>(v, v + 4), (std::vector<float>{0.5f, 1.5f, 2.5f, 3.5f}));
  // Imported again on another device handle: no copy there either.
  Device other;
  kiln_tensor again;
  C_OK(kiln_tensor_from_dlpack(other.dev, m, &again));
  DLManagedTensor* m2 = nullptr;
  C_OK(kiln_tensor_to_dlpack(again, &m2));
  EXPECT_EQ(m2->dl_tensor.data, v);
  kiln_tensor_release(again);
  m2->deleter(m2);  // runs m's deleter in turn
}

TEST(DLPack, StridedAndMisalignedMemoryIsCopied) {
  Device d;
  // A transposed 2x3 view of a 3x2 array: strides (1, 2).
  Owned x({1, 2, 3, 4, 5, 6}, {2, 3}, {1, 2});
  kiln_tensor t;
  C_OK(kiln_tensor_from_dlpack(d.dev, &x.managed, &t));
  EXPECT_EQ(x.deleted, 1);  // copied: given back at once
  EXPECT_EQ(values(t, 6), (std::vector<float>{1, 3, 5, 2, 4, 6}));
  kiln_tensor_release(t);
  // Two bytes in: not aligned to a float.
  std::vector<float> raw(5);
  Owned y(raw, {4}, {}, 2);
  std::vector<unsigned char> bytes(sizeof(float) * 4 + 2);
  const float want[4] = {1.5f, -2.f, 3.25f, 8.f};
  std::memcpy(bytes.data() + 2, want, sizeof want);
  y.managed.dl_tensor.data = bytes.data();
  C_OK(kiln_tensor_from_dlpack(d.dev, &y.managed, &t));
  EXPECT_EQ(y.deleted, 1);
  EXPECT_EQ(values(t, 4), (std::vector<float>(want, want + 4)));
  kiln_tensor_release(t);
}

TEST(DLPack, BoolIsDLPacksBoolAndRoundTrips) {
  Device d;
  kiln_tensor x, half, mask, again;
  C_OK(kiln_arange(d.dev, 0, 4, 1, KILN_F32, &x));
  C_OK(kiln_full(d.dev, KILN_F32, nullptr, 0, 1.5, &half));
  C_OK(kiln_gt(x, half, &mask));
  DLManagedTensor* m = nullptr;
  C_OK(kiln_tensor_to_dlpack(mask, &m));
  EXPECT_EQ(m->dl_tensor.dtype.code, 6);  // kDLBool (DLPack 0.8)
  EXPECT_EQ(m->dl_tensor.dtype.bits, 8);
  C_OK(kiln_tensor_from_dlpack(d.dev, m, &again));
  kiln_dtype dt;
  C_OK(kiln_tensor_dtype(again, &dt));
  EXPECT_EQ(dt, KILN_BOOL);
  unsigned char v[4];
  C_OK(kiln_tensor_to_host(again, v, 4));
  EXPECT_EQ(std::vector<int>(v, v + 4), (std::vector<int>{0, 0, 1, 1}));
  for (kiln_tensor t : {x, half, mask, again}) kiln_tensor_release(t);
}

TEST(DLPack, WhatKilnCannotTakeIsRefusedAndNotTaken) {
  Device d;
  Owned gpu({1, 2}, {2});
  gpu.managed.dl_tensor.device = {kDLCUDA, 0};
  kiln_tensor t = nullptr;
  EXPECT_EQ(kiln_tensor_from_dlpack(d.dev, &gpu.managed, &t), KILN_ERROR_UNSUPPORTED);
  EXPECT_NE(std::string(kiln_last_error()).find("kDLCPU"), std::string::npos) << kiln_last_error();
  Owned complex({1, 2}, {1});
  complex.managed.dl_tensor.dtype = {kDLComplex, 64, 1};
  EXPECT_EQ(kiln_tensor_from_dlpack(d.dev, &complex.managed, &t), KILN_ERROR_UNSUPPORTED);
  EXPECT_NE(std::string(kiln_last_error()).find("code 5 bits 64"), std::string::npos) << kiln_last_error();
  // Strides that reach past any address space (their byte offsets would wrap 2^64 and read
  // row 0 again, or fault) are refused before anything is read.
  for (const int64_t stride : {int64_t{1} << 62, INT64_MIN, int64_t{1} << 60}) {
    Owned far({1, 2, 3, 4, 5, 6}, {2, 3}, {stride, 1});
    EXPECT_EQ(kiln_tensor_from_dlpack(d.dev, &far.managed, &t), KILN_ERROR_UNSUPPORTED) << stride;
    EXPECT_NE(std::string(kiln_last_error()).find("reach past any address space"),
              std::string::npos)
        << kiln_last_error();
    EXPECT_EQ(far.deleted, 0);
  }
  EXPECT_EQ(t, nullptr);
  EXPECT_EQ(gpu.deleted + complex.deleted, 0);
}

}  // namespace
