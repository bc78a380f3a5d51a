// The rendezvous store: a small key-value table every rank can reach, used only to meet
// (who joined, NCCL's unique id), never to move tensors (torch.distributed's TCPStore and
// FileStore). Gets wait for the key until a deadline, then raise a kiln::Error.
#pragma once
#include <chrono>
#include <memory>
#include <string>

namespace kiln::dist {

class Store {
   public:
    virtual ~Store() = default;
    virtual void set(const std::string& key, const std::string& value) = 0;
    // The value of `key`, waiting for it up to `timeout`; raises naming the key when it
    // never comes (`what` says what the key stands for, for the message).
    virtual std::string get(const std::string& key, std::chrono::milliseconds timeout,
                            const std::string& what) = 0;
    // The value of `key` now, or "" with found = false.
    virtual std::string try_get(const std::string& key, bool& found) = 0;
};

// A directory shared by the ranks of one host: a key is a file, written whole then renamed.
std::unique_ptr<Store> make_file_store(const std::string& directory);
// Rank 0 serves the table on `port` (0.0.0.0), every rank (rank 0 too) connects to
// addr:port; connecting retries until `timeout`.
std::unique_ptr<Store> make_tcp_store(const std::string& addr, int port, bool is_server,
                                      std::chrono::milliseconds timeout);

}  // namespace kiln::dist
