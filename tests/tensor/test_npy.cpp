// .npy round trips for every dtype and layout, files as NumPy writes them (v1.0, v2.0,
// Fortran order), and clear errors for files kiln cannot read.
#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <fstream>

#include <unistd.h>

#include "reference.h"
#include "tensor/npy.h"

using namespace kiln_test;

namespace {

// A fresh path under the system temp dir, removed when the test ends.
struct TempFile {
    std::string path;
    explicit TempFile(const std::string& name)
        : path((std::filesystem::temp_directory_path() / ("kiln_test_npy_" + std::to_string(::getpid()) + "_" + name)).string()) {}
    ~TempFile() { std::filesystem::remove(path); }
};

std::string read_bytes(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), {}};
}
void write_bytes(const std::string& path, const std::string& bytes) {
    std::ofstream(path, std::ios::binary) << bytes;
}

// An .npy file as NumPy lays it out: magic, version, header length, `dict` padded with
// spaces and '\n' to a multiple of 64 bytes, then `data`.
std::string npy_file(int major, const std::string& dict, const std::string& data) {
    size_t prefix = 6 + 2 + (major == 1 ? 2 : 4);
    size_t total = (prefix + dict.size() + 1 + 63) / 64 * 64;
    std::string header = dict + std::string(total - prefix - dict.size() - 1, ' ') + "\n";
    std::string out = std::string("\x93NUMPY", 6) + char(major) + char(0);
    for (int i = 0; i < (major == 1 ? 2 : 4); ++i) out += char(header.size() >> (8 * i) & 0xff);
    return out + header + data;
}
template <class T>
std::string raw(const std::vector<T>& v) {
    return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

void check_round_trip(const Tensor& t, const std::string& what) {
    TempFile f("round_trip.npy");
    kiln::save_npy(t, f.path);
    Tensor back = kiln::load_npy(f.path);
    BOOST_TEST_CONTEXT(what) {
        BOOST_TEST((back.dtype() == t.dtype()));
        BOOST_TEST(back.is_contiguous());
        check_equal(back, Ref{t.shape(), t.to_vector<double>()}, what);
    }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(npy)

BOOST_AUTO_TEST_CASE(round_trips_every_dtype_and_layout) {
    Ref x = random_ref({3, 4, 5}, -10, 10);
    for (kiln::DType dt : {kiln::float32, kiln::float64})
        for (Layout l : {Layout::contiguous, Layout::transposed, Layout::strided, Layout::offset})
            check_round_trip(make(x, l, dt), std::string(kiln::dtype_name(dt)) + " " + layout_name(l));
    check_round_trip(kiln::tensor(std::vector<int64_t>{-1, 0, int64_t(1) << 50}), "int64");
    check_round_trip(kiln::tensor(std::vector<bool>{true, false, true}), "bool");
    check_round_trip(make(x).expand({2, 3, 4, 5}), "expanded");
    check_round_trip(kiln::scalar_tensor(2.5, kiln::float64), "0-d");
    check_round_trip(kiln::zeros({0, 3}), "empty");
}

BOOST_AUTO_TEST_CASE(writes_the_header_numpy_expects) {
    TempFile f("header.npy");
    kiln::save_npy(kiln::arange(6.).reshape({2, 3}).t(), f.path);
    std::string bytes = read_bytes(f.path);
    BOOST_TEST(bytes.substr(0, 8) == std::string("\x93NUMPY\x01\x00", 8));
    size_t header_len = uint8_t(bytes[8]) | uint8_t(bytes[9]) << 8;
    BOOST_TEST((10 + header_len) % 64 == 0u);
    std::string header = bytes.substr(10, header_len);
    BOOST_TEST(header.starts_with("{'descr': '<f4', 'fortran_order': False, 'shape': (3, 2), }"));
    BOOST_TEST(header.back() == '\n');
    BOOST_TEST(bytes.substr(10 + header_len) == raw(std::vector<float>{0, 3, 1, 4, 2, 5}));  // C order of the transpose
    kiln::save_npy(kiln::arange(3.), f.path);
    BOOST_TEST(read_bytes(f.path).find("'shape': (3,)") != std::string::npos);  // Python's 1-tuple
    kiln::save_npy(kiln::scalar_tensor(1, kiln::boolean), f.path);
    BOOST_TEST(read_bytes(f.path).find("{'descr': '|b1', 'fortran_order': False, 'shape': (), }") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(reads_files_as_numpy_writes_them) {
    TempFile f("numpy.npy");
    // np.save of np.asfortranarray(np.arange(24, dtype=np.float32).reshape(2, 3, 4)): the data is
    // in column-major order; NumPy 2 pads the header with room for the shape to grow.
    std::vector<float> column_major;
    for (int k = 0; k < 4; ++k)
        for (int j = 0; j < 3; ++j)
            for (int i = 0; i < 2; ++i) column_major.push_back(float(i * 12 + j * 4 + k));
    write_bytes(f.path, npy_file(1, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3, 4), }                    ", raw(column_major)));
    Tensor t = kiln::load_npy(f.path);
    BOOST_TEST(t.is_contiguous());
    check_equal(t, Ref{{2, 3, 4}, kiln::arange(24.).to_vector<double>()}, "Fortran order");

    // np.lib.format.write_array(..., version=(2, 0)): a 4-byte header length.
    write_bytes(f.path, npy_file(2, "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }", raw(std::vector<double>{0, 1, 2, 3, 4, 5})));
    Tensor v2 = kiln::load_npy(f.path);
    BOOST_TEST((v2.dtype() == kiln::float64));
    check_equal(v2, Ref{{2, 3}, {0, 1, 2, 3, 4, 5}}, "version 2.0");

    write_bytes(f.path, npy_file(1, "{'descr': '<i8', 'fortran_order': False, 'shape': (), }", raw(std::vector<int64_t>{-42})));
    Tensor s = kiln::load_npy(f.path);
    BOOST_TEST(s.dim() == 0);
    BOOST_TEST(s.item<int64_t>() == -42);

    // Keys in another order, double quotes, no trailing comma; any nonzero byte is True.
    write_bytes(f.path, npy_file(1, "{\"shape\": (1, 2), \"fortran_order\": False, \"descr\": \"|b1\"}", std::string("\x01\x07", 2)));
    check_equal(kiln::load_npy(f.path), Ref{{1, 2}, {1, 1}}, "bool, reordered keys");
}

BOOST_AUTO_TEST_CASE(errors_name_the_path_and_the_problem) {
    TempFile f("bad.npy");
    auto fails_with = [&](const std::vector<std::string>& parts) {
        return [parts, path = f.path](const kiln::Error& e) {
            std::string msg = e.what();
            BOOST_TEST_MESSAGE(msg);
            if (msg.find(path) == std::string::npos) return false;
            for (const auto& p : parts)
                if (msg.find(p) == std::string::npos) return false;
            return true;
        };
    };
    BOOST_CHECK_EXCEPTION(kiln::load_npy(f.path), kiln::Error, fails_with({"cannot open", "No such file"}));

    write_bytes(f.path, "#include <kiln.h>\n");
    BOOST_CHECK_EXCEPTION(kiln::load_npy(f.path), kiln::Error, fails_with({"not a .npy file", "magic"}));

    write_bytes(f.path, npy_file(1, "{'descr': '<f2', 'fortran_order': False, 'shape': (2,), }", std::string(4, '\0')));
    BOOST_CHECK_EXCEPTION(kiln::load_npy(f.path), kiln::Error, fails_with({"unsupported dtype '<f2'", "<f4"}));
    write_bytes(f.path, npy_file(1, "{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", std::string(8, '\0')));
    BOOST_CHECK_EXCEPTION(kiln::load_npy(f.path), kiln::Error, fails_with({"'>f4'", "little-endian"}));

    std::string good = npy_file(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }", raw(std::vector<float>{1, 2, 3, 4}));
    write_bytes(f.path, good.substr(0, good.size() - 3));
    BOOST_CHECK_EXCEPTION(kiln::load_npy(f.path), kiln::Error, fails_with({"truncated", "16 bytes", "found 13"}));
    write_bytes(f.path, good.substr(0, 30));
    BOOST_CHECK_EXCEPTION(kiln::load_npy(f.path), kiln::Error, fails_with({"truncated", "header"}));
    write_bytes(f.path, good.substr(0, 7));
    BOOST_CHECK_EXCEPTION(kiln::load_npy(f.path), kiln::Error, fails_with({"truncated"}));

    write_bytes(f.path, npy_file(1, "{'descr': '<f4', 'fortran_order': maybe, 'shape': (4,), }", ""));
    BOOST_CHECK_EXCEPTION(kiln::load_npy(f.path), kiln::Error, fails_with({"malformed header", "True or False"}));
    write_bytes(f.path, npy_file(1, "{'descr': '<f4', 'fortran_order': False}", ""));
    BOOST_CHECK_EXCEPTION(kiln::load_npy(f.path), kiln::Error, fails_with({"lacks", "'shape'"}));
    std::string v9 = good;
    v9[6] = 9;
    write_bytes(f.path, v9);
    BOOST_CHECK_EXCEPTION(kiln::load_npy(f.path), kiln::Error, fails_with({"version 9.0"}));

    BOOST_CHECK_EXCEPTION(kiln::save_npy(kiln::ones({2}), "/nonexistent-dir/x.npy"), kiln::Error,
                          [](const kiln::Error& e) { return std::string(e.what()).find("/nonexistent-dir/x.npy") != std::string::npos; });
}

BOOST_AUTO_TEST_SUITE_END()
