// The per-user on-disk cache that compiled kernels live in: a private directory whose
// entries are checked against a .meta file before anything in them is loaded.
#pragma once
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace kiln::codegen {

// 64-bit FNV-1a: stable across runs and machines, so it can name files. It catches
// corruption, not attacks; the owner and mode checks below are what keep others out.
uint64_t fnv1a64(std::string_view bytes, uint64_t hash = 0xcbf29ce484222325ull);
std::string hex64(uint64_t value);  // 16 lowercase hex digits

// This machine's CPU (model and feature flags), for cache keys: -march=native code only runs
// on CPUs like this one, and a cache in a shared $HOME may be used from several machines.
const std::string& cache_host_fingerprint();

// The cache directory for this call (read from the environment every time, so tests can
// switch it): $KILN_CACHE_DIR, else $XDG_CACHE_HOME/kiln, else $HOME/.cache/kiln.
// Created with mode 0700. Throws kiln::Error if it is not owned by us or if group/other
// can write to it, because anyone who can write there can make kiln run their code.
// The first call per directory deletes our temp files older than cache_stale_temp_seconds().
std::filesystem::path cache_dir();
// Age past which a temp file is a killed writer's litter: twice the compile timeout
// ($KILN_COMPILE_TIMEOUT_S, default 300 s), at least 10 minutes.
int64_t cache_stale_temp_seconds();

std::optional<std::string> read_file(const std::filesystem::path& path);
// A name beside final_path that no other process or thread will pick (pid, thread, counter).
std::filesystem::path unique_temp_path(const std::filesystem::path& final_path);
// Writes a temp file then rename()s it over path: readers see the old or the new file, never
// a half-written one. Throws kiln::Error on failure.
void write_file_atomic(const std::filesystem::path& path, std::string_view content);

// An entry X.so (or X.h.gch) has its meta at X.meta (X.h.meta):
// "size_bytes N\nfnv1a64x8 H\n", H being FNV-1a over 8-byte words of the content.
std::filesystem::path cache_meta_path(const std::filesystem::path& entry);
// Publishes a finished temp file as entry: writes the meta first, then renames temp -> entry.
void cache_publish(const std::filesystem::path& temp, const std::filesystem::path& entry);
// True if entry and its meta are regular files owned by us, not group/other writable, and
// entry's size and hash match the meta.
bool cache_entry_valid(const std::filesystem::path& entry);
// Entry and its meta; also a directory squatting on either name (renames onto it would fail).
void cache_entry_remove(const std::filesystem::path& entry);

// An exclusive lock between processes (flock on path, created if missing) while in scope.
// Used where concurrent writers' files must not be mixed: a PCH's bytes differ from build
// to build, so one writer's meta could otherwise describe another writer's .gch.
class CacheLock {
   public:
    explicit CacheLock(const std::filesystem::path& path);
    ~CacheLock();
    CacheLock(const CacheLock&) = delete;
    CacheLock& operator=(const CacheLock&) = delete;

   private:
    int fd_ = -1;
};

}  // namespace kiln::codegen
