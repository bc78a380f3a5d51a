// `kiln launch` (cli/launch.h): the launcher, and the small wrapper it puts around each rank
// (`kiln launch --as-rank`) to set the rank's environment, forward signals and keep the tail of
// its stderr, so the launcher can show the error of the rank that failed first.
#include "cli/launch.h"

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "dist/backend.h"

namespace kiln::cli {
namespace {

constexpr size_t kTailBytes = 8192;  // how much of a failing rank's stderr is shown again

std::vector<pid_t> g_children;        // filled before the handlers are installed
bool g_children_lead_groups = false;  // the rank wrapper's program leads its own process group
volatile sig_atomic_t g_signal = 0;
void forward_signal(int sig) {
    g_signal = sig;
    for (pid_t p : g_children)
        if (p > 0) kill(g_children_lead_groups ? -p : p, sig);
}
void install_forwarding() {
    struct sigaction sa {};
    sa.sa_handler = forward_signal;
    sigemptyset(&sa.sa_mask);
    for (int s : {SIGINT, SIGTERM, SIGHUP}) sigaction(s, &sa, nullptr);
}

std::string env(const char* name, const char* fallback = nullptr) {
    const char* v = std::getenv(name);
    if ((!v || !*v) && fallback) v = std::getenv(fallback);
    return v ? v : "";
}
std::string self_exe() {
    std::error_code ec;
    auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
    return ec ? "kiln" : p.string();
}
bool ends_with(const std::string& s, const std::string& tail) {
    return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}
// A kiln script runs through `kiln run`; anything else runs as it is.
std::vector<std::string> rank_command(const std::vector<std::string>& program) {
    std::vector<std::string> cmd = program;
    if (ends_with(program[0], ".kn") || ends_with(program[0], ".kiln") ||
        ends_with(program[0], ".py"))
        cmd.insert(cmd.begin(), {self_exe(), "run"});
    return cmd;
}
[[noreturn]] void exec(const std::vector<std::string>& cmd) {
    std::vector<char*> argv;
    for (const auto& a : cmd) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execvp(argv[0], argv.data());
    std::cerr << "kiln launch: cannot run " << cmd[0] << ": " << std::strerror(errno) << std::endl;
    _exit(127);
}
int exit_code(int status) {
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
std::string describe(int status) {
    if (WIFEXITED(status)) return "exit code " + std::to_string(WEXITSTATUS(status));
    return "killed by signal " + std::to_string(WTERMSIG(status)) + " (" +
           strsignal(WTERMSIG(status)) + ")";
}
int64_t now_ns() {
    timespec t{};
    clock_gettime(CLOCK_MONOTONIC, &t);
    return int64_t(t.tv_sec) * 1000000000 + t.tv_nsec;
}

// --- one rank: environment, the program with its stderr through a pipe, the record it leaves
void set_rank_environment() {
    std::string rank = env("RANK", "OMPI_COMM_WORLD_RANK"),
                world = env("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE");
    std::string local = env("LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK");
    std::string local_world = env("LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE");
    if (local.empty()) local = rank;
    if (local_world.empty()) local_world = world;
    setenv("RANK", rank.c_str(), 1);
    setenv("WORLD_SIZE", world.c_str(), 1);
    setenv("LOCAL_RANK", local.c_str(), 1);
    setenv("LOCAL_WORLD_SIZE", local_world.c_str(), 1);
    // Threads per rank, as torchrun sets OMP_NUM_THREADS: the host's cores shared among its
    // ranks (each rank's pool, oneDNN and BLAS otherwise start one thread per core, and the
    // ranks' threads fight over the cores). A value the user set is kept.
    if (int ranks_here = std::atoi(local_world.c_str()); ranks_here > 1) {
        unsigned cores = std::max(1u, std::thread::hardware_concurrency());
        std::string per_rank = std::to_string(std::max(1u, cores / unsigned(ranks_here)));
        if (env("KILN_NUM_THREADS").empty()) {
            setenv("KILN_NUM_THREADS", per_rank.c_str(), 1);
            setenv("KILN_LAUNCH_THREADS", per_rank.c_str(), 1);  // what the launcher chose
        }
        if (env("OMP_NUM_THREADS").empty()) setenv("OMP_NUM_THREADS", per_rank.c_str(), 1);
    }
    // kiln drives cuda:0: each rank sees its own GPU there (the LOCAL_RANK-th of those visible).
    std::string visible = env("CUDA_VISIBLE_DEVICES");
    std::string gpu = local;
    size_t gpus = 0;  // on this host, as the driver lists them (/proc/driver/nvidia/gpus)
    if (!visible.empty()) {
        std::vector<std::string> ids;
        std::stringstream s(visible);
        for (std::string id; std::getline(s, id, ',');) ids.push_back(id);
        gpu = ids[size_t(std::atoi(local.c_str())) % ids.size()];
        gpus = ids.size();
    } else {
        std::error_code ec;
        for (auto it = std::filesystem::directory_iterator("/proc/driver/nvidia/gpus", ec);
             !ec && it != std::filesystem::directory_iterator(); it.increment(ec))
            ++gpus;
    }
    setenv("CUDA_VISIBLE_DEVICES", gpu.c_str(), 1);
    // How many GPUs the ranks share: a program can tell "one GPU per rank" from "too few"
    // (each rank sees only its own as cuda:0; tests/dist/test_cuda.cpp).
    setenv("KILN_LAUNCH_GPUS", std::to_string(gpus).c_str(), 1);
}

int run_as_rank(const LaunchCommand& l) {
    set_rank_environment();
    std::string rank = env("RANK"), dir = env("KILN_LAUNCH_DIR");
    int pipe_fds[2];
    if (pipe(pipe_fds) != 0) return 127;
    pid_t child = fork();
    if (child == 0) {
        setpgid(0, 0);  // a signal reaches what the program started too (sh -c's children)
        dup2(pipe_fds[1], 2);
        close(pipe_fds[0]);
        close(pipe_fds[1]);
        exec(rank_command(l.program));
    }
    close(pipe_fds[1]);
    setpgid(child, child);
    g_children = {child};
    g_children_lead_groups = true;
    install_forwarding();
    std::string tail;
    char buf[4096];
    for (;;) {  // stderr passes through; its last bytes are kept
        ssize_t n = read(pipe_fds[0], buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        ssize_t unused = write(2, buf, size_t(n));
        (void)unused;
        tail.append(buf, size_t(n));
        if (tail.size() > 2 * kTailBytes) tail.erase(0, tail.size() - kTailBytes);
    }
    int status = 0;
    while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
    }
    if (!dir.empty()) {
        std::ofstream(dir + "/rank" + rank + ".status")
            << exit_code(status) << " " << now_ns() << " " << describe(status);
        std::ofstream(dir + "/rank" + rank + ".err")
            << (tail.size() > kTailBytes ? tail.substr(tail.size() - kTailBytes) : tail);
    }
    return exit_code(status);
}

// --- the launcher
int free_port() {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t n = sizeof a;
    int port = 29500;
    if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
        getsockname(fd, reinterpret_cast<sockaddr*>(&a), &n) == 0)
        port = ntohs(a.sin_port);
    close(fd);
    return port;
}
bool on_path(const std::string& exe) {
    std::stringstream path(env("PATH"));
    for (std::string d; std::getline(path, d, ':');)
        if (access((d + "/" + exe).c_str(), X_OK) == 0) return true;
    return false;
}

// Waits for every child; after the first failure the others get SIGTERM, then SIGKILL 10 s later.
int wait_all() {
    size_t alive = g_children.size();
    int first_failure = 0;
    int64_t kill_at = 0;
    while (alive > 0) {
        int status = 0;
        pid_t p = waitpid(-1, &status, WNOHANG);
        if (p > 0) {
            --alive;
            for (pid_t& c : g_children)
                if (c == p) c = -1;  // never signalled again
            if (exit_code(status) != 0 && first_failure == 0) {
                first_failure = exit_code(status);
                for (pid_t c : g_children)
                    if (c > 0) kill(c, SIGTERM);
                kill_at = now_ns() + int64_t(10e9);
            }
            continue;
        }
        if (kill_at && now_ns() > kill_at) {
            for (pid_t c : g_children)
                if (c > 0) kill(c, SIGKILL);
            kill_at = 0;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return first_failure;
}

// The rank whose failure came first, from the records the wrappers left; -1 when none failed.
void report_failure(const std::string& dir, int nproc, int& rc) {
    int first = -1;
    int64_t first_ns = 0;
    std::string first_what;
    for (int r = 0; r < nproc; ++r) {
        std::ifstream in(dir + "/rank" + std::to_string(r) + ".status");
        int code = 0;
        int64_t ns = 0;
        std::string what;
        if (!(in >> code >> ns) || code == 0) continue;
        std::getline(in >> std::ws, what);
        bool stopped =
            code == 128 + SIGTERM || code == 128 + SIGKILL;  // most likely stopped by the launcher
        if (first < 0 ||
            (!stopped && (first_what.find("signal") != std::string::npos || ns < first_ns)))
            first = r, first_ns = ns, first_what = what, rc = code;
    }
    if (first < 0) return;
    std::ifstream err(dir + "/rank" + std::to_string(first) + ".err");
    std::stringstream tail;
    tail << err.rdbuf();
    std::cerr << "kiln launch: rank " << first << " of " << nproc << " failed first (" << first_what
              << "); the other ranks were stopped. Its last error output:\n"
              << tail.str() << (tail.str().empty() || tail.str().back() == '\n' ? "" : "\n");
}

}  // namespace

void add_launch_command(CLI::App& app, LaunchCommand& l) {
    l.command = app.add_subcommand(
        "launch", "run PROGRAM ARGS as N ranks of one data-parallel job (torchrun)");
    l.command->add_option("--nproc", l.nproc, "how many processes (ranks)")->capture_default_str();
    l.command->add_option("--master-port", l.master_port,
                          "rank 0's rendezvous port (default: MASTER_PORT, else a free one)");
    l.command->add_option("--mpi", l.mpi, "start the ranks through mpirun: auto, on or off")
        ->check(CLI::IsMember({"auto", "on", "off"}))
        ->capture_default_str();
    l.command->add_flag("--as-rank", l.as_rank, "")->group("");
    l.command->footer(
        "PROGRAM ARGS... follow the options and are the program's, options included; a .kn, "
        ".kiln or .py PROGRAM runs as a kiln script.");
}

// argv[0] is "launch". The options end at the first argument that is not one of them (or at
// "--"): from there on everything is the program's, as torchrun does.
int launch_main(int argc, char** argv) {
    CLI::App app{"kiln launch"};
    LaunchCommand l;
    add_launch_command(app, l);
    std::vector<std::string> mine = {"kiln", "launch"};
    int i = 1;
    for (; i < argc; ++i) {
        std::string a = argv[i];
        if (a == "--") {
            ++i;
            break;
        }
        if (a.rfind("--", 0) != 0 && a != "-h") break;
        mine.push_back(a);
        bool takes_value = (a == "--nproc" || a == "--master-port" || a == "--mpi");
        if (takes_value && i + 1 < argc) mine.push_back(argv[++i]);
    }
    for (; i < argc; ++i) l.program.push_back(argv[i]);
    std::vector<const char*> args;
    for (const auto& m : mine) args.push_back(m.c_str());
    try {
        app.parse(int(args.size()), args.data());
    } catch (const CLI::ParseError& e) {
        return app.exit(e);
    }
    return run_launch(l);
}

int run_launch(const LaunchCommand& given) {
    LaunchCommand l = given;
    if (l.program.empty()) {
        std::cerr << "kiln launch: no PROGRAM to run (kiln launch --nproc N PROGRAM ARGS...)\n";
        return 2;
    }
    if (l.as_rank) return run_as_rank(l);
    if (l.nproc < 1) {
        std::cerr << "kiln launch: --nproc must be at least 1, got " << l.nproc << "\n";
        return 2;
    }
    bool mpi = l.mpi == "on" || (l.mpi == "auto" && dist::detail::mpi_built() && on_path("mpirun"));
    if (l.mpi == "on" && !dist::detail::mpi_built()) {
        std::cerr << "kiln launch --mpi on: " << dist::detail::mpi_summary() << "\n";
        return 2;
    }
    char dir_template[] = "/tmp/kiln-launch-XXXXXX";
    std::string dir = mkdtemp(dir_template);
    std::string port = l.master_port ? std::to_string(l.master_port) : env("MASTER_PORT");
    if (port.empty()) port = std::to_string(free_port());
    setenv("MASTER_ADDR", env("MASTER_ADDR").empty() ? "127.0.0.1" : env("MASTER_ADDR").c_str(), 1);
    setenv("MASTER_PORT", port.c_str(), 1);
    setenv("KILN_LAUNCH_DIR", dir.c_str(), 1);
    std::string n = std::to_string(l.nproc);
    std::vector<std::string> wrapper = {self_exe(), "launch", "--as-rank", "--"};
    wrapper.insert(wrapper.end(), l.program.begin(), l.program.end());
    if (mpi) {  // one mpirun; it starts the wrappers (ranks) and stops them all when one fails
        std::vector<std::string> cmd = {"mpirun",
                                        "--allow-run-as-root",
                                        "--oversubscribe",
                                        "--bind-to",
                                        "none",
                                        "-np",
                                        n,
                                        "-x",
                                        "MASTER_ADDR",
                                        "-x",
                                        "MASTER_PORT",
                                        "-x",
                                        "KILN_LAUNCH_DIR"};
        cmd.insert(cmd.end(), wrapper.begin(), wrapper.end());
        pid_t p = fork();
        if (p == 0) exec(cmd);
        g_children.push_back(p);
    } else {
        setenv("WORLD_SIZE", n.c_str(), 1);
        setenv("LOCAL_WORLD_SIZE", n.c_str(), 1);
        for (int r = 0; r < l.nproc; ++r) {
            pid_t p = fork();
            if (p == 0) {
                setenv("RANK", std::to_string(r).c_str(), 1);
                setenv("LOCAL_RANK", std::to_string(r).c_str(), 1);
                exec(wrapper);
            }
            g_children.push_back(p);
        }
    }
    install_forwarding();
    int rc = wait_all();
    if (g_signal)
        std::cerr << "kiln launch: got signal " << int(g_signal) << " (" << strsignal(g_signal)
                  << "), passed it to every rank\n";
    else if (rc != 0)
        report_failure(dir, l.nproc, rc);
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
    return g_signal ? 128 + g_signal : rc;
}

}  // namespace kiln::cli
