// `kiln launch --nproc N PROGRAM ARGS`: N processes of one data-parallel job (torchrun's
// habits): each gets RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT
// and its own GPU (CUDA_VISIBLE_DEVICES); signals are forwarded; when one rank fails the
// others are stopped and the failing rank's error is shown. A PROGRAM ending in .kiln or .py
// is a kiln script, run with `kiln run`. docs/distributed.md.
#pragma once
#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace kiln::cli {

struct LaunchCommand {
    CLI::App* command = nullptr;
    int nproc = 1;
    int master_port = 0;       // 0: MASTER_PORT from the environment, else a free port
    std::string mpi = "auto";  // "auto": through mpirun when kiln has MPI and mpirun is found
    bool as_rank = false;      // internal: the per-rank wrapper (what mpirun or launch starts)
    std::vector<std::string> program;  // PROGRAM ARGS...
};
// For `kiln --help`; the command line itself is read by launch_main (argv[0] is "launch"),
// since the program's own options must pass through untouched.
void add_launch_command(CLI::App& app, LaunchCommand& launch);
int launch_main(int argc, char** argv);
int run_launch(const LaunchCommand& launch);

}  // namespace kiln::cli
