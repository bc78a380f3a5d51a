// .npy load/save. The format (numpy.lib.format): the magic "\x93NUMPY", a major and minor
// version byte, the header length (uint16 in v1.0, uint32 in v2.0/v3.0), then the header:
// a Python dict literal such as {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
// padded with spaces and a final '\n' so that the data starts on a 64-byte boundary.
#include "tensor/npy.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>

#include "tensor/kernels.h"

namespace kiln {

static_assert(std::endian::native == std::endian::little, "kiln's .npy code assumes a little-endian host");

namespace {

constexpr char kMagic[] = "\x93NUMPY";  // 6 bytes, without the terminating NUL
constexpr size_t kMagicBytes = 6;
constexpr size_t kAlignBytes = 64;      // numpy aligns the data start to 64 bytes

using File = std::unique_ptr<std::FILE, int (*)(std::FILE*)>;

const char* npy_descr(DType t) {
    switch (t) {
        case DType::float32: return "<f4";
        case DType::float64: return "<f8";
        case DType::int64: return "<i8";
        case DType::boolean: return "|b1";
    }
    return "?";
}

// '<' is little-endian, '|' "byte order not applicable", '=' native (little, asserted above).
std::optional<DType> dtype_from_descr(const std::string& d) {
    if (d.size() != 3 || (d[0] != '<' && d[0] != '|' && d[0] != '=')) return std::nullopt;
    std::string kind = d.substr(1);
    if (kind == "f4") return DType::float32;
    if (kind == "f8") return DType::float64;
    if (kind == "i8") return DType::int64;
    if (kind == "b1") return DType::boolean;
    return std::nullopt;
}

std::string shape_tuple(const Shape& s) {
    std::string out = "(";
    for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
    return out + (s.size() == 1 ? ",)" : ")");
}

struct Header {
    DType dtype = DType::float32;
    bool fortran_order = false;
    Shape shape;
};

// A recursive-descent reader for the one dict literal numpy writes. `fail_here` reports
// what was expected, with the header text, so a hand-made file is easy to fix.
class HeaderParser {
   public:
    HeaderParser(const std::string& text, const std::string& path) : s_(text), path_(path) {}

    Header parse() {
        Header h;
        bool seen_descr = false, seen_order = false, seen_shape = false;
        expect('{');
        while (!peek('}')) {
            std::string key = quoted();
            expect(':');
            if (key == "descr") {
                skip_space();
                if (peek('[')) fail("load_npy: '", path_, "' holds a structured array (descr ", s_.substr(pos_, 40), "...), which kiln cannot load");
                std::string descr = quoted();
                auto dt = dtype_from_descr(descr);
                KILN_CHECK(dt, "load_npy: '", path_, "' has unsupported dtype '", descr,
                           "'; kiln reads '<f4' (float32), '<f8' (float64), '<i8' (int64) and '|b1' (bool)",
                           descr.starts_with(">") ? " in little-endian byte order" : "",
                           "; convert in NumPy first, e.g. np.save(path, arr.astype('<f4'))");
                h.dtype = *dt;
                seen_descr = true;
            } else if (key == "fortran_order") {
                h.fortran_order = boolean();
                seen_order = true;
            } else if (key == "shape") {
                h.shape = tuple();
                seen_shape = true;
            } else {
                fail_here("one of the keys 'descr', 'fortran_order', 'shape', not '" + key + "'");
            }
            if (!peek('}')) expect(',');
        }
        KILN_CHECK(seen_descr && seen_order && seen_shape, "load_npy: '", path_, "' header lacks one of 'descr', 'fortran_order', 'shape': ", s_);
        return h;
    }

   private:
    void skip_space() {
        while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
    }
    bool peek(char c) {
        skip_space();
        return pos_ < s_.size() && s_[pos_] == c;
    }
    void expect(char c) {
        if (!peek(c)) fail_here(std::string("'") + c + "'");
        ++pos_;
    }
    std::string quoted() {
        skip_space();
        if (pos_ >= s_.size() || (s_[pos_] != '\'' && s_[pos_] != '"')) fail_here("a quoted string");
        char q = s_[pos_++];
        size_t end = s_.find(q, pos_);
        if (end == std::string::npos) fail_here("a closing quote");
        std::string out = s_.substr(pos_, end - pos_);
        pos_ = end + 1;
        return out;
    }
    bool boolean() {
        skip_space();
        if (s_.compare(pos_, 4, "True") == 0) return pos_ += 4, true;
        if (s_.compare(pos_, 5, "False") == 0) return pos_ += 5, false;
        fail_here("True or False");
    }
    Shape tuple() {
        Shape out;
        expect('(');
        while (!peek(')')) {
            skip_space();
            size_t digits = pos_;
            while (digits < s_.size() && std::isdigit(static_cast<unsigned char>(s_[digits]))) ++digits;
            if (digits == pos_ || digits - pos_ > 18) fail_here("a non-negative dimension size");
            out.push_back(std::stoll(s_.substr(pos_, digits - pos_)));
            pos_ = digits;
            if (!peek(')')) expect(',');
        }
        ++pos_;
        return out;
    }
    [[noreturn]] void fail_here(const std::string& what) {
        fail("load_npy: '", path_, "' has a malformed header: expected ", what, " at character ", pos_, " of: ", s_);
    }

    const std::string& s_;
    const std::string& path_;
    size_t pos_ = 0;
};

// Bytes from the current position to the end of the file: every length a header claims is
// checked against this before anything of that length is allocated.
size_t bytes_left(std::FILE* f, const std::string& path) {
    long here = std::ftell(f);
    KILN_CHECK(here >= 0 && std::fseek(f, 0, SEEK_END) == 0, "load_npy: cannot seek in '", path, "': ", std::strerror(errno));
    long end = std::ftell(f);
    KILN_CHECK(end >= here && std::fseek(f, here, SEEK_SET) == 0, "load_npy: cannot seek in '", path, "': ", std::strerror(errno));
    return size_t(end - here);
}

// Reads exactly `bytes` or explains, with `what`, that the file ends early.
void read_exact(std::FILE* f, void* dst, size_t bytes, const std::string& path, const std::string& what) {
    size_t got = bytes ? std::fread(dst, 1, bytes, f) : 0;
    KILN_CHECK(got == bytes, "load_npy: '", path, "' is truncated: expected ", bytes, " bytes of ", what, ", found ", got);
}

std::string printable(const unsigned char* p, size_t n) {
    std::string out;
    char buf[8];
    for (size_t i = 0; i < n; ++i) {
        if (std::isprint(p[i])) out += char(p[i]);
        else std::snprintf(buf, sizeof buf, "\\x%02x", p[i]), out += buf;
    }
    return out;
}

}  // namespace

void save_npy(const Tensor& t, const std::string& path) {
    report_escape(t, Escape::data_access, std::source_location::current());
    Tensor c = contiguous_as(t.detach(), t.dtype());  // C order, whatever the strides of t
    std::string dict = std::string("{'descr': '") + npy_descr(t.dtype()) + "', 'fortran_order': False, 'shape': " + shape_tuple(t.shape()) + ", }";
    // v1.0 stores the header length in 2 bytes; bigger headers (rank in the thousands) need v2.0.
    bool v2 = kMagicBytes + 2 + 2 + dict.size() + 1 > 65535;
    size_t prefix = kMagicBytes + 2 + (v2 ? 4 : 2);
    size_t total = (prefix + dict.size() + 1 + kAlignBytes - 1) / kAlignBytes * kAlignBytes;
    std::string header = dict + std::string(total - prefix - dict.size() - 1, ' ') + '\n';

    std::string pre(kMagic, kMagicBytes);
    pre += char(v2 ? 2 : 1);
    pre += char(0);
    uint32_t len = uint32_t(header.size());
    for (int i = 0; i < (v2 ? 4 : 2); ++i) pre += char(len >> (8 * i) & 0xff);

    File f(std::fopen(path.c_str(), "wb"), &std::fclose);
    KILN_CHECK(f, "save_npy: cannot open '", path, "' for writing: ", std::strerror(errno));
    bool ok = std::fwrite(pre.data(), 1, pre.size(), f.get()) == pre.size() &&
              std::fwrite(header.data(), 1, header.size(), f.get()) == header.size() &&
              (c.nbytes() == 0 || std::fwrite(c.raw_data(), 1, c.nbytes(), f.get()) == c.nbytes());
    KILN_CHECK(ok, "save_npy: writing '", path, "' failed: ", std::strerror(errno));
    KILN_CHECK(std::fclose(f.release()) == 0, "save_npy: closing '", path, "' failed: ", std::strerror(errno));
}

namespace {

// Opens `path` for reading if it is a regular file. O_NONBLOCK: opening a FIFO would wait
// for a writer forever; a FIFO, a device (/dev/zero never ends) or a directory is refused.
File open_regular_file(const std::string& path) {
    int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    KILN_CHECK(fd >= 0, "load_npy: cannot open '", path, "': ", std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        ::close(fd);
        fail("load_npy: '", path, "' is not a regular file (",
             S_ISDIR(st.st_mode) ? "a directory" : S_ISFIFO(st.st_mode) ? "a FIFO" : "a device or socket", ")");
    }
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    File f(::fdopen(fd, "rb"), &std::fclose);
    if (!f) ::close(fd);
    KILN_CHECK(f, "load_npy: cannot open '", path, "': ", std::strerror(errno));
    return f;
}

}  // namespace

Tensor load_npy(const std::string& path) {
    File f = open_regular_file(path);

    unsigned char pre[kMagicBytes + 2];
    size_t got = std::fread(pre, 1, sizeof pre, f.get());
    KILN_CHECK(got >= kMagicBytes && std::memcmp(pre, kMagic, kMagicBytes) == 0, "load_npy: '", path,
               "' is not a .npy file: expected the magic \\x93NUMPY, found '", printable(pre, std::min(got, kMagicBytes)), "'");
    KILN_CHECK(got == sizeof pre, "load_npy: '", path, "' is truncated: it ends inside the version bytes");
    int major = pre[kMagicBytes], minor = pre[kMagicBytes + 1];
    KILN_CHECK(major >= 1 && major <= 3, "load_npy: '", path, "' has NPY format version ", major, ".", minor,
               "; kiln reads versions 1.0, 2.0 and 3.0");

    unsigned char len_bytes[4] = {0, 0, 0, 0};
    read_exact(f.get(), len_bytes, major == 1 ? 2 : 4, path, "header length");
    size_t header_len = len_bytes[0] | len_bytes[1] << 8 | size_t(len_bytes[2]) << 16 | size_t(len_bytes[3]) << 24;
    size_t left = bytes_left(f.get(), path);
    KILN_CHECK(header_len <= left, "load_npy: '", path, "' is truncated: its header claims ", header_len, " bytes, the file has ", left, " left");
    std::string text(header_len, '\0');
    read_exact(f.get(), text.data(), header_len, path, "header");
    Header h = HeaderParser(text, path).parse();

    // Check the size before allocating, so a corrupt shape cannot ask for terabytes.
    std::string op = "load_npy: '" + path + "'";
    size_t data_bytes = size_t(checked_numel(h.shape, op.c_str())) * dtype_bytes(h.dtype);
    left = bytes_left(f.get(), path);
    std::string what = std::string("data for shape ") + shape_tuple(h.shape) + " and dtype '" + npy_descr(h.dtype) + "'";
    KILN_CHECK(left >= data_bytes, "load_npy: '", path, "' is truncated: expected ", data_bytes, " bytes of ", what, ", found ", left);

    // Fortran order is C order of the reversed shape: read it so, then transpose back.
    Shape stored = h.shape;
    if (h.fortran_order) std::reverse(stored.begin(), stored.end());
    Tensor t = empty(stored, h.dtype);
    read_exact(f.get(), t.raw_data(), t.nbytes(), path, what);
    if (h.dtype == DType::boolean) {  // any nonzero byte is True; kiln's bools are 0 or 1
        auto* p = static_cast<unsigned char*>(t.raw_data());
        for (size_t i = 0; i < t.nbytes(); ++i) p[i] = p[i] != 0;
    }
    if (h.fortran_order && t.dim() > 1) {
        Tensor view = t.detach();  // a reversed-axes view, built by hand: no op is dispatched
        std::reverse(view.impl()->shape.begin(), view.impl()->shape.end());
        std::reverse(view.impl()->strides.begin(), view.impl()->strides.end());
        t = materialize(view);
    }
    return t;
}

}  // namespace kiln
