// The seed documents' Python, run as kiln script. tests/cli/seeds/NNN_MM.py is code block MM
// of seed NNN (../shared/seeds/, extracted with `torch.` kept; tests/cli/seeds/README.md says
// how). The blocks of one seed run in order in one interpreter, as a reader pastes them
// into one REPL session. Each block's output (or its error) must match NNN_MM.out.
// A block that needs what kiln deliberately lacks (CUDA, torchvision, numpy, scipy,
// pretrained downloads, Triton) is skipped with its reason; a few get a listed mechanical
// edit. The test prints the count: ran / skipped (reason) / failed (reason).
// KILN_UPDATE_GOLDEN=1 rewrites the .out files from the current output.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <regex>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "cli/interp/interp.h"
#include "jit/cache.h"
#include "tensor/cuda.h"

namespace fs = std::filesystem;
using namespace kiln;
using namespace kiln::interp;

namespace {

const fs::path kSeeds = fs::path(KILN_SOURCE_DIR) / "tests/cli/seeds";

std::string read(const fs::path& p) {
    std::ifstream f(p, std::ios::binary);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
}

// Blocks that cannot run in kiln, and why. Everything not listed here must run.
const std::map<std::string, std::string> kSkipped = {
    {"001_05", "pseudocode: compile_and_optimize and FailToCompileError are placeholders of the prose"},
    {"001_12", "pseudocode: forward_graph and backward_graph are placeholders of the prose"},
    {"002_01", "notebook magic (%matplotlib), not Python"},
    {"002_06", "torchvision (densenet121), CUDA events"},
    {"002_07", "needs 002_06's model (torchvision) and CUDA timing"},
    {"002_08", "torchvision model, CUDA timing, numpy"},
    {"002_09", "torchvision model"},
    {"002_17", "scipy"},
    {"002_18", "needs 002_17's f3 (scipy)"},
    {"002_19", "needs 002_17's f3 (scipy)"},
    {"002_20", "needs 002_17's f3 (scipy)"},
    {"002_25", "torchvision model (init_model)"},
    {"003_05", "torchvision (resnet18), CUDA events"},
    {"003_06", "torchvision model, CUDA timing"},
    {"003_07", "torchvision model, CUDA timing, numpy"},
    {"003_08", "torchvision model, CUDA timing, numpy"},
    {"003_16", "scipy"},
    {"003_17", "needs 003_16's f3 (scipy)"},
    {"003_18", "needs 003_16's f3 (scipy)"},
    {"003_19", "needs 003_16's f3 (scipy)"},
    {"003_24", "torchvision model (init_model)"},
    {"004_01", "Triton kernel source (generated code shown by the prose), not a program"},
    {"004_02", "downloads a pretrained torchvision model (torch.hub)"},
    {"004_03", "transformers (BERT download), CUDA"},
    {"004_04", "timm (pretrained download)"},
};

// Mechanical edits, each with its reason: {block, {from, to}}.
const std::multimap<std::string, std::pair<std::string, std::string>> kEdits = {
    // The prose's imaginary decorator; torch.compile is what it stands for.
    {"001_06", {"@just_in_time_compile", "@torch.compile"}},
    // The last lines of these cells call init_model (torchvision); the rest runs.
    {"002_21", {"opt_model = torch.compile(init_model(), backend=custom_backend)\nopt_model(generate_data(16)[0])\n", ""}},
    {"003_20", {"opt_model = dynamo.optimize(custom_backend)(init_model())\nopt_model(generate_data(16)[0])\n", ""}},
    {"003_25", {"model_exp = dynamo.export(init_model(), generate_data(16)[0])\nprint(model_exp[0](generate_data(16)[0]))\n", ""}},
};

}  // namespace

BOOST_AUTO_TEST_SUITE(seeds)

// Printed outputs match when their text is equal, or equal except for decimal numbers that
// differ by one unit in their last printed digit: BLAS and SIMD paths on another CPU (the GPU
// machine's host) may round a value on a printing boundary the other way.
bool same_printout(const std::string& got, const std::string& want) {
    if (got == want) return true;
    static const std::regex number(R"([-+]?[0-9]+\.([0-9]+)(e([-+][0-9]+))?)");
    auto tokens = [](const std::string& text, std::vector<std::smatch>& numbers) {
        for (auto it = std::sregex_iterator(text.begin(), text.end(), number); it != std::sregex_iterator(); ++it) numbers.push_back(*it);
        return std::regex_replace(text, number, "#");
    };
    std::vector<std::smatch> a, b;
    if (tokens(got, a) != tokens(want, b) || a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i) {
        if (a[i].str() == b[i].str()) continue;
        if (a[i][1].length() != b[i][1].length() || a[i][3].str() != b[i][3].str()) return false;
        double unit = std::pow(10.0, -double(a[i][1].length()) + (a[i][3].matched ? std::stod(a[i][3].str()) : 0.0));
        if (std::abs(std::stod(a[i].str()) - std::stod(b[i].str())) > 1.01 * unit) return false;
    }
    return true;
}

BOOST_AUTO_TEST_CASE(printouts_match_up_to_one_unit_in_the_last_printed_digit) {
    BOOST_TEST(same_printout("x 1.9520e-04, 2", "x 1.9519e-04, 2"));
    BOOST_TEST(same_printout("tensor([0.50, -1.25])", "tensor([0.51, -1.24])"));
    BOOST_TEST(!same_printout("x 1.9522e-04", "x 1.9519e-04"));  // two units
    BOOST_TEST(!same_printout("x 1.9520e-04", "x 1.9520e-05"));  // another exponent
    BOOST_TEST(!same_printout("Graph Count: 2", "Graph Count: 3"));  // integers are exact
    BOOST_TEST(!same_printout("0.5", "0.50"));
    BOOST_TEST(!same_printout("a 0.5", "b 0.5"));
}

BOOST_AUTO_TEST_CASE(seed_blocks_run_and_print_what_the_seeds_say) {
    std::vector<fs::path> files;
    for (const auto& f : fs::directory_iterator(kSeeds))
        if (f.path().extension() == ".py") files.push_back(f.path());
    std::sort(files.begin(), files.end());
    BOOST_TEST(files.size() >= 60u);
    bool update = std::getenv("KILN_UPDATE_GOLDEN") != nullptr;
    int ran = 0, edited = 0, skipped = 0, failed = 0;
    std::string report, seed;
    std::unique_ptr<std::ostringstream> out;
    std::unique_ptr<Interp> in;
    for (const fs::path& f : files) {
        std::string block = f.stem().string();  // "001_07"
        if (block.substr(0, 3) != seed) {        // a new seed: a fresh session
            seed = block.substr(0, 3);
            in.reset();
            out = std::make_unique<std::ostringstream>();
            in = std::make_unique<Interp>(*out);
            in->default_backend = "eager";  // the inductor backend is covered by tests/jit; keep this test fast
            jit::reset();
            in->run_source("torch.manual_seed(0)\n", "<setup>");
        }
        if (auto s = kSkipped.find(block); s != kSkipped.end()) {
            ++skipped;
            report += "  skipped " + block + ": " + s->second + "\n";
            continue;
        }
        std::string source = read(f);
        auto [first, last] = kEdits.equal_range(block);
        for (auto it = first; it != last; ++it) {
            size_t at = source.find(it->second.first);
            BOOST_TEST_REQUIRE(at != std::string::npos, block + ": the edit no longer applies");
            source.replace(at, it->second.first.size(), it->second.second);
        }
        if (first != last) ++edited;
        out->str("");
        bool ok = true;
        try {
            in->run_source(source, "seeds/" + f.filename().string());
        } catch (const kiln::Error& e) {
            *out << e.what() << "\n";
            ok = false;
            ++failed;
            report += "  FAILED " + block + ": " + std::string(e.what()).substr(0, 300) + "\n";
        }
        if (ok) ++ran;
        // A block whose output depends on the GPU (002_02 warns unless it finds one) has its
        // GPU machine's output in <block>.gpu.out.
        fs::path expected = fs::path(f).replace_extension(".out");
        fs::path on_gpu = fs::path(f).replace_extension(".gpu.out");
        if (cuda::is_available() && fs::exists(on_gpu)) expected = on_gpu;
        if (update) std::ofstream(expected, std::ios::binary) << out->str();
        BOOST_TEST_CONTEXT(block) { BOOST_TEST(same_printout(out->str(), read(expected)), out->str() << "\n!=\n" << read(expected)); }
    }
    int total = int(files.size());
    std::string summary = "seed blocks: " + std::to_string(total) + "; ran " + std::to_string(ran) + " (" + std::to_string(edited) +
                          " with a listed edit), skipped " + std::to_string(skipped) + ", failed " + std::to_string(failed) + "\n" + report;
    BOOST_TEST_MESSAGE(summary);
    std::cout << summary;
    BOOST_TEST(failed == 0, summary);
    BOOST_TEST(ran >= (total - skipped) * 9 / 10);
}

BOOST_AUTO_TEST_SUITE_END()
