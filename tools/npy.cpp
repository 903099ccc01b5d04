// Reading and writing `.npy` files: the binary frame (magic, version, header length, data)
// around the header dict, and atomic writes through a temporary file.
#include "tools/npy.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>

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

// A file read front to back through its descriptor: the frame and the header first, then the
// data straight into the tensor. A file that is not a .npy file (or never ends: /dev/zero) fails
// at its first bytes, and a directory says so.
class InFile {
 public:
  ~InFile() {
    if (fd_ >= 0) ::close(fd_);
  }
  Expected<void> open(const std::string& path) {
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) return npy_error(path, fmt::format("cannot open: {}", std::strerror(errno)));
    struct stat st {};
    if (::fstat(fd_, &st) != 0)
      return npy_error(path, fmt::format("cannot open: {}", std::strerror(errno)));
    if (S_ISDIR(st.st_mode)) return npy_error(path, "cannot open: it is a directory");
    if (S_ISREG(st.st_mode)) size_ = static_cast<uint64_t>(st.st_size);
    return {};
  }
  // Up to `n` more bytes into `out` (fewer only at the end of the file); how many.
  Expected<size_t> read(const std::string& path, char* out, size_t n) {
    size_t done = 0;
    while (done < n) {
      const ssize_t got = ::read(fd_, out + done, n - done);
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) return npy_error(path, fmt::format("read error: {}", std::strerror(errno)));
      if (got == 0) break;
      done += static_cast<size_t>(got);
    }
    return done;
  }
  // Appends up to `n` more bytes to `out`, a chunk at a time: a header length the file does not
  // hold (up to 4 GiB in version 2) takes no more memory than the bytes that are there.
  Expected<void> append(const std::string& path, std::string& out, size_t n) {
    constexpr size_t kChunk = size_t{1} << 20;
    while (n > 0) {
      const size_t at = out.size(), want = std::min(n, kChunk);
      out.resize(at + want);
      auto got = read(path, out.data() + at, want);
      if (!got) return std::unexpected(got.error());
      out.resize(at + *got);
      if (*got < want) break;
      n -= want;
    }
    return {};
  }
  // A regular file's size in bytes (nullopt for a pipe or a device).
  std::optional<uint64_t> size() const { return size_; }

 private:
  int fd_ = -1;
  std::optional<uint64_t> size_;
};

// The header text (after checking magic and version) and where the data starts, read from `in`.
struct Frame {
  std::string header;
  size_t data_offset;
};

Expected<Frame> read_frame(const std::string& path, InFile& in) {
  std::string file;
  if (auto r = in.append(path, file, kMagic.size()); !r) return std::unexpected(r.error());
  if (file.size() < kMagic.size() || file.substr(0, kMagic.size()) != kMagic)
    return npy_error(path, "bad magic: not a .npy file (expected \"\\x93NUMPY\")");
  if (auto r = in.append(path, file, 2); !r) return std::unexpected(r.error());
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
  if (auto r = in.append(path, file, len_width); !r) return std::unexpected(r.error());
  if (file.size() < prefix) return npy_error(path, "truncated header: no header length");
  const size_t header_len = read_le(file, 8, len_width);
  std::string header;
  if (auto r = in.append(path, header, header_len); !r) return std::unexpected(r.error());
  if (header.size() < header_len)
    return npy_error(path, fmt::format("truncated header: expected {} bytes, found {}", header_len,
                                       header.size()));
  return Frame{std::move(header), prefix + header_len};
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

// Column-major data (numpy's fortran_order: what np.save writes for a transposed array) in
// kiln's row-major order: the element at index (i0, ..., in-1) is at sum(i_d * prod(shape[<d]))
// in `t`.
ir::HostTensor to_row_major(const ir::HostTensor& t) {
  ir::HostTensor out = ir::HostTensor::zeros(t.dtype, t.shape);
  const size_t rank = t.shape.size();
  const auto size = static_cast<size_t>(ir::dtype_size(t.dtype));
  std::vector<int64_t> column_stride(rank, 1), index(rank, 0);
  for (size_t d = 1; d < rank; ++d) column_stride[d] = column_stride[d - 1] * t.shape[d - 1];
  for (int64_t flat = 0; flat < t.numel(); ++flat) {
    int64_t from = 0;
    for (size_t d = 0; d < rank; ++d) from += index[d] * column_stride[d];
    std::memcpy(out.bytes.data() + flat * size, t.bytes.data() + from * size, size);
    for (size_t d = rank; d-- > 0;) {  // the next row-major index
      if (++index[d] < t.shape[d]) break;
      index[d] = 0;
    }
  }
  return out;
}

}  // namespace

Expected<ir::HostTensor> read_npy(const std::string& path) {
  InFile in;
  if (auto opened = in.open(path); !opened) return std::unexpected(opened.error());
  auto frame = read_frame(path, in);
  if (!frame) return std::unexpected(frame.error());
  auto header = npy::parse_header(frame->header);
  if (!header) return npy_error(path, header.error().message);

  if (auto problem = ir::shape_size_problem(header->shape))
    return npy_error(path, fmt::format("shape {} {}", ir::shape_brief(header->shape), *problem));
  const int64_t numel = ir::shape_numel(header->shape);
  const auto expected = static_cast<size_t>(numel * ir::dtype_size(header->dtype));
  const std::string what = fmt::format("{} bytes for {}{}", expected, ir::dtype_name(header->dtype),
                                       ir::shape_str(header->shape));
  // A regular file's size says what it holds before any data is read (or memory taken for it).
  if (const std::optional<uint64_t> size = in.size()) {
    const uint64_t found = *size - frame->data_offset;
    if (found != expected)
      return npy_error(
          path,
          fmt::format("{} data: expected {}, found {}",
                      found < expected ? "truncated" : "trailing bytes after the", what, found));
  }
  ir::HostTensor t = ir::HostTensor::zeros(header->dtype, header->shape);
  auto got = in.read(path, reinterpret_cast<char*>(t.bytes.data()), expected);
  if (!got) return std::unexpected(got.error());
  if (*got != expected)
    return npy_error(path, fmt::format("truncated data: expected {}, found {}", what, *got));
  char extra = 0;
  auto more = in.read(path, &extra, 1);
  if (!more) return std::unexpected(more.error());
  if (*more != 0)
    return npy_error(path,
                     fmt::format("trailing bytes after the data: expected {}, found more", what));
  if (t.dtype == ir::DType::boolean)  // numpy treats any non-zero byte as True
    for (std::byte& b : t.bytes) b = b != std::byte{0} ? std::byte{1} : std::byte{0};
  if (header->fortran && t.shape.size() > 1) t = to_row_major(t);
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
