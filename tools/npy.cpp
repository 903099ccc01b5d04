// Reading and writing `.npy` files: the binary frame (magic, version, header length, data)
// around the header dict, and atomic writes through a temporary file.
#include "tools/npy.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>

#include <fmt/format.h>

#include "tools/npy_header.h"

namespace kiln::tools {

namespace {

constexpr std::string_view kMagic = "\x93NUMPY";
constexpr size_t kAlign = 64;  // numpy aligns the data to 64 bytes

std::unexpected<Error> npy_error(const std::string& path, std::string_view what) {
  return make_error(fmt::format("npy '{}': {}", path, what));
}

uint32_t read_le(std::string_view bytes, size_t offset, size_t width) {
  uint32_t v = 0;
  for (size_t i = 0; i < width; ++i)
    v |= static_cast<uint32_t>(static_cast<unsigned char>(bytes[offset + i])) << (8 * i);
  return v;
}

// The header text and where the data starts, after checking magic and version.
struct Frame {
  std::string_view header;
  size_t data_offset;
};

Expected<Frame> read_frame(const std::string& path, std::string_view file) {
  if (file.size() < kMagic.size() || file.substr(0, kMagic.size()) != kMagic)
    return npy_error(path, "bad magic: not a .npy file (expected \"\\x93NUMPY\")");
  if (file.size() < 8) return npy_error(path, "truncated header: no format version");
  const int major = static_cast<unsigned char>(file[6]),
            minor = static_cast<unsigned char>(file[7]);
  if (minor != 0 || major < 1 || major > 3)
    return npy_error(
        path,
        fmt::format("unsupported format version {}.{} (expected 1.0, 2.0 or 3.0)", major, minor));
  // Version 1.0 has a 2-byte header length, 2.0 and 3.0 (utf-8 header) a 4-byte one.
  const size_t len_width = major == 1 ? 2 : 4;
  const size_t prefix = 8 + len_width;
  if (file.size() < prefix) return npy_error(path, "truncated header: no header length");
  const size_t header_len = read_le(file, 8, len_width);
  if (file.size() - prefix < header_len)
    return npy_error(path, fmt::format("truncated header: expected {} bytes, found {}", header_len,
                                       file.size() - prefix));
  return Frame{file.substr(prefix, header_len), prefix + header_len};
}

Expected<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return npy_error(path, fmt::format("cannot open: {}", std::strerror(errno)));
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return npy_error(path, "read error");
  return bytes;
}

// Creates `<path>.tmp-<pid>-<n>` next to the target (same directory, so rename is atomic)
// and removes it again unless committed.
class TempFile {
 public:
  ~TempFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!name_.empty() && !committed_) ::unlink(name_.c_str());
  }
  Expected<void> create(const std::string& path) {
    static std::atomic<uint64_t> counter{0};
    for (int attempt = 0; attempt < 100; ++attempt) {
      std::string name = fmt::format("{}.tmp-{}-{}", path, ::getpid(), counter++);
      fd_ = ::open(name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
      if (fd_ >= 0) {
        name_ = std::move(name);
        return {};
      }
      if (errno != EEXIST) break;
    }
    return npy_error(path, fmt::format("cannot create a temporary file: {}", std::strerror(errno)));
  }
  Expected<void> write(const std::string& path, const char* data, size_t size) {
    while (size > 0) {
      const ssize_t n = ::write(fd_, data, size);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return npy_error(path, fmt::format("write failed: {}", std::strerror(errno)));
      data += n;
      size -= static_cast<size_t>(n);
    }
    return {};
  }
  // Flushes to disk, then renames over the target: readers see the old file or the new one.
  Expected<void> commit(const std::string& path) {
    if (::fsync(fd_) != 0 || ::close(std::exchange(fd_, -1)) != 0)
      return npy_error(path, fmt::format("write failed: {}", std::strerror(errno)));
    if (::rename(name_.c_str(), path.c_str()) != 0)
      return npy_error(path, fmt::format("cannot replace the file: {}", std::strerror(errno)));
    committed_ = true;
    return {};
  }

 private:
  std::string name_;
  int fd_ = -1;
  bool committed_ = false;
};

// Magic, version, header length and the header padded with spaces and a final newline so that
// the data starts at a multiple of 64 bytes (numpy's layout, including its full 64 bytes of
// padding when the text happens to end aligned).
std::string frame_header(const std::string& dict) {
  int major = 1;
  size_t prefix = 10;
  size_t total = prefix + dict.size() + 1;
  size_t padded = dict.size() + 1 + (kAlign - total % kAlign);
  if (padded > 0xffff) {
    major = 2;
    prefix = 12;
    total = prefix + dict.size() + 1;
    padded = dict.size() + 1 + (kAlign - total % kAlign);
  }
  std::string out(kMagic);
  out += static_cast<char>(major);
  out += '\0';
  for (size_t i = 0; i < prefix - 8; ++i) out += static_cast<char>((padded >> (8 * i)) & 0xff);
  out += dict;
  out.append(padded - dict.size() - 1, ' ');
  out += '\n';
  return out;
}

}  // namespace

Expected<ir::HostTensor> read_npy(const std::string& path) {
  auto file = read_file(path);
  if (!file) return std::unexpected(file.error());
  auto frame = read_frame(path, *file);
  if (!frame) return std::unexpected(frame.error());
  auto header = npy::parse_header(frame->header);
  if (!header) return npy_error(path, header.error().message);

  int64_t numel = 1;
  for (int64_t d : header->shape) {
    if (d != 0 && numel > ir::kMaxNumel / d)
      return npy_error(path, fmt::format("shape {} is too large (kiln indexes at most 2^59 elements)",
                                         ir::shape_str(header->shape)));
    numel *= d;
  }
  const auto expected = static_cast<size_t>(numel * ir::dtype_size(header->dtype));
  const size_t found = file->size() - frame->data_offset;
  if (found != expected)
    return npy_error(
        path, fmt::format("{} data: expected {} bytes for {}{}, found {}",
                          found < expected ? "truncated" : "trailing bytes after the", expected,
                          ir::dtype_name(header->dtype), ir::shape_str(header->shape), found));
  ir::HostTensor t = ir::HostTensor::zeros(header->dtype, header->shape);
  if (expected > 0) std::memcpy(t.bytes.data(), file->data() + frame->data_offset, expected);
  if (t.dtype == ir::DType::boolean)  // numpy treats any non-zero byte as True
    for (std::byte& b : t.bytes) b = b != std::byte{0} ? std::byte{1} : std::byte{0};
  return t;
}

Expected<void> write_npy(const std::string& path, const ir::HostTensor& t) {
  auto dict = npy::format_header(t.dtype, t.shape);
  if (!dict) return npy_error(path, dict.error().message);
  const auto expected = static_cast<size_t>(t.numel() * ir::dtype_size(t.dtype));
  if (t.bytes.size() != expected)
    return npy_error(path,
                     fmt::format("tensor {}{} holds {} bytes, expected {}", ir::dtype_name(t.dtype),
                                 ir::shape_str(t.shape), t.bytes.size(), expected));
  const std::string head = frame_header(*dict);
  TempFile tmp;
  if (auto r = tmp.create(path); !r) return r;
  if (auto r = tmp.write(path, head.data(), head.size()); !r) return r;
  if (auto r = tmp.write(path, reinterpret_cast<const char*>(t.bytes.data()), t.bytes.size()); !r)
    return r;
  return tmp.commit(path);
}

}  // namespace kiln::tools
