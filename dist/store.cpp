// The rendezvous stores of dist/store.h: a directory of files, and a TCP table served by rank 0.
#include "dist/store.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include "tensor/error.h"

namespace kiln::dist {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kPoll = std::chrono::milliseconds(5);

// Waits for `key` by polling try_get: both stores answer "not yet" at once.
std::string wait_for(Store& s, const std::string& key, std::chrono::milliseconds timeout,
                     const std::string& what, const std::string& where) {
    auto deadline = Clock::now() + timeout;
    for (;;) {
        bool found = false;
        std::string v = s.try_get(key, found);
        if (found) return v;
        KILN_CHECK(Clock::now() < deadline, "dist: timed out after ", timeout.count() / 1000.0,
                   " s waiting for ", what, " (store key '", key, "' at ", where,
                   "); a rank died or never joined. The timeout is KILN_DIST_TIMEOUT (seconds).");
        std::this_thread::sleep_for(kPoll);
    }
}

// --- a directory of files
class FileStore final : public Store {
   public:
    explicit FileStore(std::string dir) : dir_(std::move(dir)) {
        std::error_code ec;
        std::filesystem::create_directories(dir_, ec);
        KILN_CHECK(!ec, "dist: cannot create the rendezvous directory ", dir_, ": ", ec.message());
    }
    void set(const std::string& key, const std::string& value) override {
        std::string path = file(key), tmp = path + ".tmp" + std::to_string(getpid());
        {
            std::ofstream out(tmp, std::ios::binary);
            out << value;
            KILN_CHECK(out.good(), "dist: cannot write the rendezvous file ", tmp);
        }
        std::filesystem::rename(tmp, path);  // readers see the whole value or nothing
    }
    std::string get(const std::string& key, std::chrono::milliseconds timeout,
                    const std::string& what) override {
        return wait_for(*this, key, timeout, what, "file store " + dir_);
    }
    std::string try_get(const std::string& key, bool& found) override {
        std::ifstream in(file(key), std::ios::binary);
        found = in.good();
        if (!found) return "";
        std::ostringstream s;
        s << in.rdbuf();
        return s.str();
    }

   private:
    std::string file(const std::string& key) const {
        std::string name = key;
        for (char& c : name)
            if (c == '/') c = '_';
        return dir_ + "/" + name;
    }
    std::string dir_;
};

// --- TCP: requests are 'S' key value (set) or 'G' key (get now); strings are u32 length + bytes.
bool send_all(int fd, const void* p, size_t n) {
    auto* b = static_cast<const char*>(p);
    while (n > 0) {
        ssize_t k = ::send(fd, b, n, MSG_NOSIGNAL);
        if (k <= 0) return false;
        b += k, n -= size_t(k);
    }
    return true;
}
bool recv_all(int fd, void* p, size_t n) {
    auto* b = static_cast<char*>(p);
    while (n > 0) {
        ssize_t k = ::recv(fd, b, n, 0);
        if (k <= 0) return false;
        b += k, n -= size_t(k);
    }
    return true;
}
bool send_string(int fd, const std::string& s) {
    uint32_t n = uint32_t(s.size());
    return send_all(fd, &n, 4) && send_all(fd, s.data(), s.size());
}
bool recv_string(int fd, std::string& s) {
    uint32_t n = 0;
    if (!recv_all(fd, &n, 4)) return false;
    s.resize(n);
    return recv_all(fd, s.data(), n);
}

struct Table {
    std::mutex mu;
    std::map<std::string, std::string> values;
};

void serve_client(int fd, std::shared_ptr<Table> table) {
    for (;;) {
        char op = 0;
        std::string key, value;
        if (!recv_all(fd, &op, 1) || !recv_string(fd, key)) break;
        if (op == 'S') {
            if (!recv_string(fd, value)) break;
            std::lock_guard lock(table->mu);
            table->values[key] = value;
        } else {
            char found = 0;
            {
                std::lock_guard lock(table->mu);
                auto it = table->values.find(key);
                if (it != table->values.end()) found = 1, value = it->second;
            }
            if (!send_all(fd, &found, 1) || !send_string(fd, value)) break;
        }
    }
    ::close(fd);
}

// Rank 0's server: accepts for as long as the process lives (threads are detached; the table
// is shared with them).
void serve(int port) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    KILN_CHECK(fd >= 0, "dist: socket() failed: ", std::strerror(errno));
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    a.sin_port = htons(uint16_t(port));
    if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd, 128) != 0) {
        std::string why = std::strerror(errno);
        ::close(fd);
        fail("dist: rank 0 cannot serve the rendezvous store on port ", port,
             " (MASTER_PORT): ", why);
    }
    auto table = std::make_shared<Table>();
    std::thread([fd, table] {
        for (;;) {
            int c = ::accept(fd, nullptr, nullptr);
            if (c < 0) {
                if (errno == EINTR) continue;
                return;
            }
            int on = 1;
            ::setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
            std::thread(serve_client, c, table).detach();
        }
    }).detach();
}

class TcpStore final : public Store {
   public:
    TcpStore(const std::string& addr, int port, std::chrono::milliseconds timeout)
        : where_("tcp store " + addr + ":" + std::to_string(port)) {
        addrinfo hints{}, *res = nullptr;
        hints.ai_family = AF_INET;
        hints.ai_socktype = SOCK_STREAM;
        int rc = ::getaddrinfo(addr.c_str(), std::to_string(port).c_str(), &hints, &res);
        KILN_CHECK(rc == 0, "dist: cannot resolve MASTER_ADDR '", addr, "': ", gai_strerror(rc));
        auto deadline = Clock::now() + timeout;
        std::string why;
        for (;;) {  // rank 0 may not listen yet
            fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
            if (::connect(fd_, res->ai_addr, res->ai_addrlen) == 0) break;
            why = std::strerror(errno);
            ::close(fd_);
            fd_ = -1;
            if (Clock::now() >= deadline) break;
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        ::freeaddrinfo(res);
        KILN_CHECK(fd_ >= 0, "dist: cannot reach rank 0's rendezvous store at ", addr, ":", port,
                   " (MASTER_ADDR:MASTER_PORT) within ", timeout.count() / 1000.0, " s: ", why,
                   ". Is rank 0 running? The timeout is KILN_DIST_TIMEOUT (seconds).");
        int on = 1;
        ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
        timeval tv{};  // a store that stops answering is an error, not a hang
        tv.tv_sec = std::max<long>(1, long(timeout.count() / 1000));
        ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    }
    ~TcpStore() override {
        if (fd_ >= 0) ::close(fd_);
    }
    void set(const std::string& key, const std::string& value) override {
        std::lock_guard lock(mu_);
        char op = 'S';
        KILN_CHECK(send_all(fd_, &op, 1) && send_string(fd_, key) && send_string(fd_, value),
                   "dist: lost the ", where_, " while setting '", key, "' (rank 0 exited?)");
    }
    std::string get(const std::string& key, std::chrono::milliseconds timeout,
                    const std::string& what) override {
        return wait_for(*this, key, timeout, what, where_);
    }
    std::string try_get(const std::string& key, bool& found) override {
        std::lock_guard lock(mu_);
        char op = 'G', f = 0;
        std::string value;
        KILN_CHECK(send_all(fd_, &op, 1) && send_string(fd_, key) && recv_all(fd_, &f, 1) &&
                       recv_string(fd_, value),
                   "dist: lost the ", where_, " while reading '", key, "' (rank 0 exited?)");
        found = f != 0;
        return value;
    }

   private:
    int fd_ = -1;
    std::string where_;
    std::mutex mu_;
};

}  // namespace

std::unique_ptr<Store> make_file_store(const std::string& directory) {
    return std::make_unique<FileStore>(directory);
}

std::unique_ptr<Store> make_tcp_store(const std::string& addr, int port, bool is_server,
                                      std::chrono::milliseconds timeout) {
    if (is_server) serve(port);
    return std::make_unique<TcpStore>(addr, port, timeout);
}

}  // namespace kiln::dist
