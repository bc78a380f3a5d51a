// Per-user kernel cache on disk: where it is, why it is trusted, and how entries are
// written so that concurrent processes never see half a file.
#include "codegen/disk_cache.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <functional>
#include <mutex>
#include <set>
#include <sstream>
#include <system_error>
#include <thread>
#include <vector>

#include "tensor/error.h"

namespace kiln::codegen {
namespace fs = std::filesystem;

uint64_t fnv1a64(std::string_view bytes, uint64_t hash) {
    for (unsigned char byte : bytes) {
        hash ^= byte;
        hash *= 0x100000001b3ull;
    }
    return hash;
}

std::string hex64(uint64_t value) {
    char text[17];
    std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(value));
    return text;
}

const std::string& cache_host_fingerprint() {
    static const std::string& fingerprint = *new std::string([] {  // leaked: see remove_stale_temps
        std::istringstream cpuinfo(read_file("/proc/cpuinfo").value_or(""));
        std::string line, model, flags;
        while (std::getline(cpuinfo, line)) {
            if (model.empty() && line.rfind("model name", 0) == 0) model = line;
            if (flags.empty() && line.rfind("flags", 0) == 0) flags = line;
        }
        return model + "\n" + flags;
    }());
    return fingerprint;
}

namespace {

std::optional<std::string> env_var(const char* name) {
    const char* value = std::getenv(name);
    if (value == nullptr || *value == '\0') return std::nullopt;  // empty counts as unset
    return std::string(value);
}

fs::path resolve_cache_dir() {
    if (auto dir = env_var("KILN_CACHE_DIR")) return fs::absolute(*dir);
    if (auto dir = env_var("XDG_CACHE_HOME")) return fs::absolute(*dir) / "kiln";
    if (auto home = env_var("HOME")) return fs::absolute(*home) / ".cache" / "kiln";
    fail("codegen: no cache directory: set KILN_CACHE_DIR (or HOME)");
}

std::string octal_mode(mode_t mode) {
    char text[8];
    std::snprintf(text, sizeof text, "%04o", static_cast<unsigned>(mode & 07777));
    return text;
}

// Parents are made like `mkdir -p` (their modes are the user's business); only the cache
// directory itself must be private.
void create_private_dir(const fs::path& dir) {
    std::error_code ignored;  // a failure here shows up as mkdir's error just below
    fs::create_directories(dir.parent_path(), ignored);
    if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
        fail("codegen: cannot create cache directory '", dir.string(), "': ",
             std::strerror(errno), ". Set KILN_CACHE_DIR to a writable private directory.");
}

void check_private_dir(const fs::path& dir) {
    struct stat st {};
    if (stat(dir.c_str(), &st) != 0)
        fail("codegen: cannot stat cache directory '", dir.string(), "': ", std::strerror(errno));
    KILN_CHECK(S_ISDIR(st.st_mode), "codegen: cache path '", dir.string(),
               "' is not a directory. Set KILN_CACHE_DIR to a private directory.");
    bool ours = st.st_uid == geteuid();
    bool others_can_write = (st.st_mode & (S_IWGRP | S_IWOTH)) != 0;
    if (ours && !others_can_write) return;
    fail("codegen: refusing to use cache directory '", dir.string(), "': owner uid ", st.st_uid,
         " (you are uid ", geteuid(), "), mode ", octal_mode(st.st_mode),
         ". kiln loads compiled code from it, so it must be yours and writable only by you. "
         "Hint: `chmod 700 ",
         dir.string(), "` if it is yours, or set KILN_CACHE_DIR to a private directory.");
}

// lstat, not stat: a symlink planted in the cache must not redirect us to another file.
bool is_private_regular_file(const fs::path& path) {
    struct stat st {};
    if (lstat(path.c_str(), &st) != 0) return false;
    return S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
           (st.st_mode & (S_IWGRP | S_IWOTH)) == 0;
}

// FNV-1a taking 8 bytes per step (then bytes for the tail): a PCH is ~100 MB and every new
// process checks it once, so this runs ~8x faster than byte-wise FNV (0.02 s, not 0.15 s).
uint64_t fnv1a64_words(std::string_view bytes, uint64_t hash) {
    size_t whole = bytes.size() - bytes.size() % 8;
    for (size_t at = 0; at < whole; at += 8) {
        uint64_t word;
        std::memcpy(&word, bytes.data() + at, 8);
        hash = (hash ^ word) * 0x100000001b3ull;
    }
    return fnv1a64(bytes.substr(whole), hash);
}

// Streamed in chunks (a multiple of 8 bytes, so words line up) rather than read whole.
std::optional<std::string> meta_text_of(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return std::nullopt;
    uint64_t hash = fnv1a64("");
    uint64_t size_bytes = 0;
    std::vector<char> chunk(1 << 16);
    while (in.read(chunk.data(), static_cast<std::streamsize>(chunk.size())) || in.gcount() > 0) {
        std::string_view got(chunk.data(), static_cast<size_t>(in.gcount()));
        hash = fnv1a64_words(got, hash);
        size_bytes += got.size();
    }
    if (in.bad()) return std::nullopt;
    return "size_bytes " + std::to_string(size_bytes) + "\nfnv1a64x8 " + hex64(hash) + "\n";
}

// A directory where a file goes (made by hand, or by a tool that mistook the name) would
// make every rename onto that name fail, and kiln would fall back to eager for good. Only
// directories need this: rename() replaces any other kind of file.
void remove_squatter(const fs::path& path) {
    struct stat st {};
    if (lstat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return;
    std::error_code ignored;  // if it cannot go, the rename that follows reports the path
    fs::remove_all(path, ignored);
}

int rename_into_place(const fs::path& temp, const fs::path& path) {
    remove_squatter(path);
    return std::rename(temp.c_str(), path.c_str());
}

// Temp files (`<name>.tmp.<pid>.<thread>.<n>`) of a compile that was killed before it could
// clean up (SIGKILL, a power cut) stay forever; a PCH's is ~96 MB. A live writer renames
// or deletes its temp within the compile timeout, so an older one, owned by us, is litter.
void remove_stale_temps(const fs::path& dir) {
    static std::mutex mutex;
    // Once per directory per process. Leaked: a background build may still run it while the
    // process exits (codegen::launch waits for builds only from a static destructor).
    static std::set<std::string>* cleaned = new std::set<std::string>;
    std::lock_guard lock(mutex);
    if (!cleaned->insert(dir.string()).second) return;
    std::error_code error;
    for (const fs::directory_entry& entry : fs::directory_iterator(dir, error)) {
        std::string name = entry.path().filename().string();
        struct stat st {};
        if (name.find(".tmp.") == std::string::npos || lstat(entry.path().c_str(), &st) != 0) continue;
        bool ours = st.st_uid == geteuid() && S_ISREG(st.st_mode);
        if (ours && std::time(nullptr) - st.st_mtime > cache_stale_temp_seconds()) ::unlink(entry.path().c_str());
    }
}

void write_all(int fd, std::string_view content, const fs::path& path) {
    while (!content.empty()) {
        ssize_t written = ::write(fd, content.data(), content.size());
        if (written < 0 && errno == EINTR) continue;
        if (written < 0) fail("codegen: cannot write '", path.string(), "': ", std::strerror(errno));
        content.remove_prefix(static_cast<size_t>(written));
    }
}

}  // namespace

int64_t cache_stale_temp_seconds() {
    const char* text = std::getenv("KILN_COMPILE_TIMEOUT_S");
    double timeout = text && *text ? std::strtod(text, nullptr) : 300;
    return std::max<int64_t>(600, int64_t(2 * std::min(timeout, 1e6)));
}

fs::path cache_dir() {
    fs::path dir = resolve_cache_dir();
    create_private_dir(dir);
    check_private_dir(dir);
    remove_stale_temps(dir);
    return dir;
}

std::optional<std::string> read_file(const fs::path& path) {
    // O_NONBLOCK and the fstat: a FIFO squatting on a cache path would block the open or the
    // read forever, and a link to /dev/zero would never end. Only regular files are read.
    int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return std::nullopt;
    struct stat st {};
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        ::close(fd);
        return std::nullopt;
    }
    std::string content;
    char buffer[1 << 16];
    for (;;) {
        ssize_t got = ::read(fd, buffer, sizeof buffer);
        if (got > 0) content.append(buffer, size_t(got));
        else if (got == 0) break;
        else if (errno != EINTR) {
            ::close(fd);
            return std::nullopt;
        }
    }
    ::close(fd);
    return content;
}

fs::path unique_temp_path(const fs::path& final_path) {
    static std::atomic<uint64_t> counter{0};
    size_t thread = std::hash<std::thread::id>{}(std::this_thread::get_id());
    fs::path temp = final_path;
    temp += ".tmp." + std::to_string(getpid()) + "." + hex64(thread) + "." +
            std::to_string(counter++);
    return temp;
}

void write_file_atomic(const fs::path& path, std::string_view content) {
    fs::path temp = unique_temp_path(path);
    int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) fail("codegen: cannot create '", temp.string(), "': ", std::strerror(errno));
    try {
        write_all(fd, content, temp);
    } catch (...) {
        ::close(fd);
        ::unlink(temp.c_str());
        throw;
    }
    ::close(fd);
    if (rename_into_place(temp, path) != 0) {
        int error = errno;
        ::unlink(temp.c_str());
        fail("codegen: cannot rename '", temp.string(), "' to '", path.string(), "': ",
             std::strerror(error));
    }
}

fs::path cache_meta_path(const fs::path& entry) {
    fs::path meta = entry;
    meta.replace_extension(".meta");
    return meta;
}

// Meta goes first: a reader that sees the new entry also sees its meta. Two writers of the
// same key race harmlessly; at worst a reader sees a mismatched pair and rebuilds it.
void cache_publish(const fs::path& temp, const fs::path& entry) {
    std::optional<std::string> meta = meta_text_of(temp);
    KILN_CHECK(meta.has_value(), "codegen: cannot read back '", temp.string(), "'");
    write_file_atomic(cache_meta_path(entry), *meta);
    if (rename_into_place(temp, entry) != 0)
        fail("codegen: cannot rename '", temp.string(), "' to '", entry.string(), "': ",
             std::strerror(errno));
}

bool cache_entry_valid(const fs::path& entry) {
    fs::path meta = cache_meta_path(entry);
    if (!is_private_regular_file(entry) || !is_private_regular_file(meta)) return false;
    std::optional<std::string> recorded = read_file(meta);
    return recorded && *recorded == meta_text_of(entry);
}

void cache_entry_remove(const fs::path& entry) {
    for (const fs::path& path : {entry, cache_meta_path(entry)}) {
        remove_squatter(path);
        ::unlink(path.c_str());  // ENOENT is fine: another process may have removed it first
    }
}

CacheLock::CacheLock(const fs::path& path) {
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd_ < 0 && errno == EISDIR) {
        remove_squatter(path);
        fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    }
    if (fd_ < 0) fail("codegen: cannot open lock '", path.string(), "': ", std::strerror(errno));
    while (flock(fd_, LOCK_EX) != 0) {
        if (errno == EINTR) continue;
        int error = errno;
        ::close(fd_);
        fail("codegen: cannot lock '", path.string(), "': ", std::strerror(error));
    }
}

CacheLock::~CacheLock() { ::close(fd_); }  // closing releases the flock

}  // namespace kiln::codegen
