// Tests for cli/interp: golden transcripts (tests/cli/golden/*.ks against *.out), the
// bad-input corpus (tests/cli/bad/*.ks: an error naming its line, never a crash), and
// the JIT integration (a script `if` on a tensor is a real graph break), state dicts on disk.
// KILN_UPDATE_GOLDEN=1 rewrites the .out files from the current output.
#include <boost/test/unit_test.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <unistd.h>

#include "cli/interp/builtins.h"
#include "cli/interp/compiled.h"
#include "cli/interp/interp.h"

namespace fs = std::filesystem;
using namespace kiln;
using namespace kiln::interp;

namespace {

const fs::path kSourceDir = KILN_SOURCE_DIR;  // CMake defines it for every target linking kiln

std::string read(const fs::path& p) {
    std::ifstream f(p, std::ios::binary);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
}

// Runs a script as `kiln run` does, printing an error where it stops. Names are relative
// (golden/x.ks) so the expected output does not depend on where the repo lives.
std::string run_script(const std::string& source, const std::string& name, const std::string& backend = "eager") {
    std::ostringstream out;
    Interp in(out);
    in.default_backend = backend;
    jit::reset();
    try {
        in.run_source(source, name);
    } catch (const kiln::Error& e) {
        out << e.what() << "\n";
    }
    return out.str();
}

std::vector<fs::path> scripts(const std::string& folder) {
    std::vector<fs::path> files;
    for (const auto& f : fs::directory_iterator(kSourceDir / "tests/cli" / folder))
        if (f.path().extension() == ".ks") files.push_back(f.path());
    std::sort(files.begin(), files.end());
    return files;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(interp)

BOOST_AUTO_TEST_CASE(golden_transcripts) {
    std::vector<fs::path> files = scripts("golden");
    BOOST_TEST(files.size() >= 9u);
    bool update = std::getenv("KILN_UPDATE_GOLDEN") != nullptr;
    for (const fs::path& f : files) {
        BOOST_TEST_CONTEXT(f.filename()) {
            std::string got = run_script(read(f), "golden/" + f.filename().string());
            fs::path expected = fs::path(f).replace_extension(".out");
            if (update) std::ofstream(expected, std::ios::binary) << got;
            BOOST_TEST(got == read(expected));
        }
    }
}

BOOST_AUTO_TEST_CASE(bad_inputs_name_their_line) {
    std::vector<fs::path> files = scripts("bad");
    BOOST_TEST(files.size() >= 50u);
    for (const fs::path& f : files) {
        BOOST_TEST_CONTEXT(f.filename()) {
            std::string source = read(f);
            std::string kind = source.substr(10, source.find('\n') - 10);  // "# expect: TypeError"
            std::ostringstream out;
            Interp in(out);
            in.default_backend = "eager";
            bool raised = false;
            try {
                in.run_source(source, f.filename().string());
            } catch (const kiln::Error& e) {
                raised = true;
                std::string what = e.what();
                BOOST_TEST(what.find(kind + ":") != std::string::npos, what);
                BOOST_TEST(what.find(", line ") != std::string::npos, what);
                BOOST_TEST(what.find('^') != std::string::npos, what);  // the caret under the spot
            }
            BOOST_TEST(raised);
        }
    }
}

BOOST_AUTO_TEST_CASE(variables_survive_an_error) {
    std::ostringstream out;
    Interp in(out);
    in.run_source("x = 41\n", "<stdin>");
    BOOST_CHECK_THROW(in.run_source("y = x + undefined_name\n", "<stdin>"), ScriptError);
    in.run_source("print(x + 1)\n", "<stdin>");
    BOOST_TEST(out.str() == "42\n");
}

BOOST_AUTO_TEST_CASE(runtime_error_traceback_names_each_frame) {
    std::ostringstream out;
    Interp in(out);
    std::string src = "import torch\ndef f(a, b):\n    return a @ b\nf(torch.ones(2, 3), torch.ones(2, 3))\n";
    try {
        in.run_source(src, "t.ks");
        BOOST_FAIL("expected a shape error");
    } catch (const ScriptError& e) {
        BOOST_TEST(e.kind() == "RuntimeError");
        std::string what = e.what();
        BOOST_TEST(what.find("File \"t.ks\", line 4") != std::string::npos, what);
        BOOST_TEST(what.find("File \"t.ks\", line 3, column 14, in f") != std::string::npos, what);
        BOOST_TEST(what.find("matmul") != std::string::npos, what);
    }
}

BOOST_AUTO_TEST_CASE(script_if_on_a_tensor_is_a_graph_break) {
    std::ostringstream out;
    Interp in(out);
    jit::reset();
    in.run_source(
        "def bar(a, b):\n"
        "    x = a / (abs(a) + 1)\n"
        "    if b.sum() < 0:\n"
        "        b = b * -1\n"
        "    return x * b\n"
        "opt = compile(bar, backend='eager')\n"
        "a = randn(10)\n"
        "b = randn(10)\n"
        "ok1 = allclose(opt(a, b), bar(a, b))\n"
        "ok2 = allclose(opt(a, -b), bar(a, -b))\n"
        "ok3 = allclose(opt(a, b), bar(a, b))\n",
        "bar.ks");
    for (const char* ok : {"ok1", "ok2", "ok3"}) {
        const bool* value = in.lookup(ok)->as<bool>();
        BOOST_TEST((value && *value), ok);
    }
    jit::Counters c = jit::counters();
    BOOST_TEST(c.compiles == 1);
    BOOST_TEST(c.graph_breaks == 1);
    BOOST_TEST(c.graphs_compiled == 3);  // before the if; each branch's tail
    BOOST_TEST(c.cache_hits == 1);
    auto* compiled = in.lookup("opt")->as<std::shared_ptr<CompiledObj>>();
    BOOST_TEST(graphs_text(**compiled).find("entry 1, graph 3") != std::string::npos);
    BOOST_TEST(guards_text(**compiled).find("a: float32[10]") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(explain_names_the_script_line_of_each_break) {
    std::ostringstream out;
    Interp in(out);
    in.run_source(
        "def f(x):\n"
        "    if x.mean() > 0:\n"
        "        x = x * 2\n"
        "    return x.cos()\n"
        "e = explain(f)(ones(3))\n",
        "f.ks");
    auto* e = in.lookup("e")->as<std::shared_ptr<ExplainObj>>();
    BOOST_REQUIRE(e);
    BOOST_TEST((*e)->output.graph_count == 2);
    BOOST_TEST((*e)->output.graph_break_count == 1);
    BOOST_TEST(explain_text(**e).find("Location: f.ks:2 in f") != std::string::npos, explain_text(**e));
}

BOOST_AUTO_TEST_CASE(torch_prefixes_resolve_to_the_same_builtins) {
    std::ostringstream out;
    Interp in(out);
    in.run_source(
        "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\nfrom torch import optim\n"
        "print(torch.sin is sin, F.relu is torch.nn.functional.relu, nn.Linear is torch.nn.Linear, optim.SGD is torch.optim.SGD)\n",
        "p.ks");
    BOOST_TEST(out.str() == "True True True True\n");
}

BOOST_AUTO_TEST_CASE(every_op_of_the_table_is_a_builtin_and_a_method) {
#define KILN_UNARY(name, ...) BOOST_TEST(find_builtin(#name) != nullptr); BOOST_TEST(find_builtin("Tensor." #name) != nullptr);
#define KILN_BINARY(name, ...) BOOST_TEST(find_builtin(#name) != nullptr); BOOST_TEST(find_builtin("Tensor." #name) != nullptr);
#include "tensor/ops.def"
}

// Python's round and torch.round share one name: numbers round as Python does, tensors
// elementwise (half to even) with torch's decimals, as a function and as a method.
BOOST_AUTO_TEST_CASE(round_serves_numbers_and_tensors) {
    std::ostringstream out;
    Interp in(out);
    in.run_source(
        "import torch\n"
        "t = torch.tensor([0.5, 1.5, 2.25, -2.5], dtype=torch.float64)\n"
        "print(round(2.5), round(2.675, 2), round(1250, -2))\n"
        "print(torch.round(t).tolist(), round(t, 1).tolist(), t.round(decimals=1).tolist())\n"
        "print(torch.round(t, decimals=-1).tolist(), torch.floor(t).tolist(), t.frac().tolist())\n",
        "r.ks");
    BOOST_TEST(out.str() ==
               "2 2.67 1200\n[0.0, 2.0, 2.0, -2.0] [0.5, 1.5, 2.2, -2.5] [0.5, 1.5, 2.2, -2.5]\n"
               "[0.0, 0.0, 0.0, -0.0] [0.0, 1.0, 2.0, -3.0] [0.5, 0.5, 0.25, -0.5]\n");
}

BOOST_AUTO_TEST_CASE(floats_print_like_python) {
    BOOST_TEST(repr_float(0.1) == "0.1");
    BOOST_TEST(repr_float(3.0) == "3.0");
    BOOST_TEST(repr_float(1e-5) == "1e-05");
    BOOST_TEST(repr_float(1e16) == "1e+16");
    BOOST_TEST(repr_float(123456.5) == "123456.5");
    BOOST_TEST(repr_float(-0.25) == "-0.25");
}

// kiln.save_state_dict / read_state_dict_npy / load_state_dict_npy: a model's weights through
// a directory of .npy files (a golden transcript cannot own a temporary directory).
BOOST_AUTO_TEST_CASE(state_dicts_round_trip_through_npy_files) {
    fs::path dir = fs::temp_directory_path() / ("kiln-script-state-dict-" + std::to_string(::getpid()));
    std::string quoted = "'" + dir.string() + "'";
    std::string source = "import torch\nimport kiln\ntorch.manual_seed(0)\n"
                         "a = kiln.models.gpt(vocab_size=16, max_positions=8, layers=1, d_model=8, heads=2)\n"
                         "b = kiln.models.gpt(vocab_size=16, max_positions=8, layers=1, d_model=8, heads=2)\n"
                         "kiln.save_state_dict(a, " + quoted + ")\n"
                         "d = kiln.read_state_dict_npy(" + quoted + ")\n"
                         "print(len(d), list(d)[:2], d['wte.weight'].shape)\n"
                         "t = torch.randint(0, 16, (1, 5))\n"
                         "print(torch.allclose(a(t), b(t)), kiln.load_state_dict_npy(b, " + quoted + "))\n"
                         "print(torch.allclose(a(t), b(t), rtol=0, atol=0))\n"
                         "try:\n    kiln.read_state_dict_npy(" + quoted + " + '/none')\n"
                         "except RuntimeError as e:\n    print('RuntimeError:', e)\n"
                         "kiln.save_state_dict(t, " + quoted + ")\n";
    std::string got = run_script(source, "state_dict.ks");
    fs::remove_all(dir);
    std::string want = "16 ['h.0.attn.in_proj_bias', 'h.0.attn.in_proj_weight'] torch.Size([16, 8])\n"
                       "False <All keys matched successfully>\n"
                       "True\n"
                       "RuntimeError: read_state_dict_npy: '" + dir.string() + "/none' is not a directory\n";
    BOOST_TEST(got.substr(0, want.size()) == want);
    BOOST_TEST(got.find("TypeError: kiln.save_state_dict(): argument 'module' must be an nn.Module, not Tensor") != std::string::npos, got);
}

BOOST_AUTO_TEST_SUITE_END()
