// .npy files that lie: headers and shapes longer than the file, counts that overflow, bad
// descrs, every truncation of a good file, and random byte flips. Each raises kiln::Error
// (or loads, for a flip that keeps the file valid); none may allocate what the file cannot
// hold: a 14-byte file once made kiln allocate and zero 4 GiB before saying "truncated".
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>

#include "hostile.h"

using namespace kiln;
using hostile::expect_error;
namespace fs = std::filesystem;

namespace {

fs::path temp_file(const std::string& name) {
    return fs::temp_directory_path() / ("kiln-npy-hostile-" + std::to_string(getpid()) + "-" + name + ".npy");
}

std::string read_bytes(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

fs::path write_bytes(const std::string& name, const std::string& bytes) {
    fs::path path = temp_file(name);
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
}

// A v1.0 file with this header dict (padded as numpy pads it) and these data bytes.
std::string npy_v1(const std::string& dict, const std::string& data = "") {
    std::string header = dict;
    while ((10 + header.size() + 1) % 64 != 0) header += ' ';
    header += '\n';
    std::string out = std::string("\x93NUMPY\x01\x00", 8);
    out += char(header.size() & 0xff);
    out += char(header.size() >> 8);
    return out + header + data;
}

// Peak resident memory of this process, in bytes.
int64_t peak_rss_bytes() {
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    return int64_t(usage.ru_maxrss) * 1024;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(npy)

BOOST_AUTO_TEST_CASE(tiny_file_claiming_a_4_gib_header) {
    // magic, version 2.0, header length 0xffffffff, then two bytes of "header".
    fs::path path = write_bytes("huge-header", std::string("\x93NUMPY\x02\x00\xff\xff\xff\xff{'", 14));
    BOOST_TEST(fs::file_size(path) == 14u);
    int64_t before = peak_rss_bytes();
    expect_error([&] { load_npy(path.string()); }, {"truncated", "4294967295", "2 left"});
    BOOST_TEST(peak_rss_bytes() - before < (int64_t(256) << 20));  // nothing near 4 GiB was touched
    fs::remove(path);
}

BOOST_AUTO_TEST_CASE(shape_whose_count_overflows) {
    fs::path path = write_bytes("overflow", npy_v1("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }"));
    expect_error([&] { load_npy(path.string()); }, {"load_npy", "more elements than int64"});
    path = write_bytes("overflow-bytes", npy_v1("{'descr': '<f8', 'fortran_order': False, 'shape': (200000000000000000, 10), }"));
    expect_error([&] { load_npy(path.string()); }, {"load_npy", "too many to address in bytes"});
    fs::remove(path);
}

BOOST_AUTO_TEST_CASE(shape_larger_than_the_file) {
    fs::path path = write_bytes("big-shape", npy_v1("{'descr': '<f4', 'fortran_order': False, 'shape': (1048576, 1048576), }", "abcd"));
    int64_t before = peak_rss_bytes();
    expect_error([&] { load_npy(path.string()); }, {"truncated", "4398046511104 bytes", "found 4"});
    BOOST_TEST(peak_rss_bytes() - before < (int64_t(256) << 20));
    fs::remove(path);
}

BOOST_AUTO_TEST_CASE(garbage_descr_and_keys) {
    const char* bad[] = {
        "{'descr': '<q9', 'fortran_order': False, 'shape': (2,), }",
        "{'descr': '\x01\x02\xff', 'fortran_order': False, 'shape': (2,), }",
        "{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }",
        "{'descr': '<f4, 'fortran_order': False, 'shape': (2,), }",
        "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }",
        "{'descr': '<f4', 'fortran_order': Maybe, 'shape': (2,), }",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2 3), }",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'extra': 1}",
        "{'descr': '<f4', 'fortran_order': False}",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2,",
        "",
        "\xff\xfe garbage",
    };
    for (const char* dict : bad) {
        BOOST_TEST_CONTEXT(dict) {
            fs::path path = write_bytes("bad-descr", npy_v1(dict, std::string(64, '\0')));
            expect_error([&] { load_npy(path.string()); }, {"load_npy"});
            fs::remove(path);
        }
    }
}

BOOST_AUTO_TEST_CASE(bad_magic_and_versions) {
    for (std::string bytes : {std::string(""), std::string("\x93NUM", 4), std::string("\x93NUMPY", 6), std::string("PK\x03\x04zipzip", 10),
                              std::string("\x93NUMPY\x04\x00\x10\x00", 10), std::string("\x93NUMPY\x00\x00\x10\x00", 10),
                              std::string("\x93NUMPY\x01\x00\x00\x00", 10)}) {
        fs::path path = write_bytes("magic", bytes);
        expect_error([&] { load_npy(path.string()); }, {"load_npy"});
        fs::remove(path);
    }
    expect_error([] { load_npy("/nonexistent/kiln/file.npy"); }, {"load_npy", "cannot open"});
    expect_error([] { load_npy(fs::temp_directory_path().string()); }, {"load_npy"});  // a directory
}

BOOST_AUTO_TEST_CASE(fortran_order_is_read_as_c_order) {
    std::string data;
    for (float v : {0.f, 1.f, 2.f, 3.f, 4.f, 5.f}) data.append(reinterpret_cast<const char*>(&v), 4);
    fs::path path = write_bytes("fortran", npy_v1("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", data));
    Tensor t = load_npy(path.string());
    BOOST_TEST(t.shape() == Shape({2, 3}));
    BOOST_TEST(t.to_vector<float>() == std::vector<float>({0, 2, 4, 1, 3, 5}));  // column-major storage
    fs::remove(path);
}

BOOST_AUTO_TEST_CASE(every_truncation_of_a_good_file_raises) {
    fs::path good = temp_file("good");
    save_npy(arange(12, {.dtype = float64}).reshape({3, 4}), good.string());
    std::string bytes = read_bytes(good);
    for (size_t n = 0; n < bytes.size(); ++n) {
        BOOST_TEST_CONTEXT("first " << n << " of " << bytes.size() << " bytes") {
            fs::path path = write_bytes("truncated", bytes.substr(0, n));
            expect_error([&] { load_npy(path.string()); }, {"load_npy"});
        }
    }
    BOOST_TEST(load_npy(good.string()).to_vector<double>() == arange(12, {.dtype = float64}).to_vector<double>());
    fs::remove(good);
    fs::remove(temp_file("truncated"));
}

BOOST_AUTO_TEST_CASE(random_byte_flips_load_or_raise) {
    fs::path good = temp_file("flip-source");
    save_npy(arange(6, {.dtype = int64}).reshape({2, 3}), good.string());
    std::string bytes = read_bytes(good);
    std::mt19937 rng(1234);
    int loaded = 0, refused = 0;
    for (int trial = 0; trial < 400; ++trial) {
        std::string flipped = bytes;
        int flips = 1 + int(rng() % 3);
        for (int k = 0; k < flips; ++k) flipped[rng() % 64] = char(rng() % 256);  // the prefix and header
        fs::path path = write_bytes("flipped", flipped);
        try {
            Tensor t = load_npy(path.string());
            BOOST_TEST(t.nbytes() <= bytes.size());  // never more data than the file holds
            ++loaded;
        } catch (const kiln::Error&) {
            ++refused;
        }
    }
    BOOST_TEST(loaded + refused == 400);
    BOOST_TEST(refused > 0);
    fs::remove(good);
    fs::remove(temp_file("flipped"));
}

// Paths that are not files: opening a FIFO to read waits for a writer forever, /dev/zero
// never ends, a directory reads as nothing. Each raises at once, naming what it is.
BOOST_AUTO_TEST_CASE(fifos_devices_and_directories_raise_at_once) {
    fs::path fifo = temp_file("fifo");
    fs::remove(fifo);
    BOOST_REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
    expect_error([&] { load_npy(fifo.string()); }, {"load_npy", "not a regular file", "FIFO"});
    fs::remove(fifo);
    expect_error([&] { load_npy("/dev/zero"); }, {"load_npy", "not a regular file", "device"});
    expect_error([&] { load_npy(fs::temp_directory_path().string()); }, {"load_npy", "not a regular file", "directory"});
    expect_error([&] { load_npy("/nonexistent/kiln.npy"); }, {"load_npy", "cannot open", "No such file"});
    fs::path link = temp_file("link-to-zero");
    fs::remove(link);
    fs::create_symlink("/dev/zero", link);
    expect_error([&] { load_npy(link.string()); }, {"load_npy", "not a regular file"});
    fs::remove(link);
}

// Headers whose numbers are lies of a new kind: a byte count that overflows only at 8 bytes
// per element, a negative or signed dim, big-endian data, and ranks far past any real array.
BOOST_AUTO_TEST_CASE(header_numbers_of_a_new_kind) {
    // 2^60 elements of 8 bytes: the count fits int64, the byte count does not.
    fs::path bytes_overflow = write_bytes("bytes-overflow", npy_v1("{'descr': '<f8', 'fortran_order': False, 'shape': (1152921504606846976,), }"));
    expect_error([&] { load_npy(bytes_overflow.string()); }, {"load_npy"});
    fs::path negative = write_bytes("negative", npy_v1("{'descr': '<f4', 'fortran_order': False, 'shape': (-1, 4), }"));
    expect_error([&] { load_npy(negative.string()); }, {"load_npy", "malformed header"});
    fs::path plus = write_bytes("plus", npy_v1("{'descr': '<f4', 'fortran_order': False, 'shape': (+2,), }", std::string(8, '\0')));
    expect_error([&] { load_npy(plus.string()); }, {"load_npy", "malformed header"});
    fs::path big_endian = write_bytes("big-endian", npy_v1("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", std::string(8, '\0')));
    expect_error([&] { load_npy(big_endian.string()); }, {"load_npy", "'>f4'", "little-endian"});
    // Rank 2000 of ones: loads (one element), and the tensor works.
    std::string shape = "(";
    for (int i = 0; i < 2000; ++i) shape += "1, ";
    fs::path high_rank = write_bytes("high-rank", npy_v1("{'descr': '<f4', 'fortran_order': True, 'shape': " + shape + "), }", std::string("\0\0\x80\x3f", 4)));
    Tensor t = load_npy(high_rank.string());
    BOOST_TEST(t.dim() == 2000);
    BOOST_TEST(t.sum().item<double>() == 1.0);
    BOOST_TEST((t * 2.0).reshape({1}).item<double>() == 2.0);
    for (const fs::path& p : {bytes_overflow, negative, plus, big_endian, high_rank}) fs::remove(p);
}

BOOST_AUTO_TEST_SUITE_END()
