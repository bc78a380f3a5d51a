// libFuzzer target for the kiln script parser: any bytes must give an AST or a
// SyntaxError, never a crash, a hang or a sanitizer report. Built by `make fuzz_parser`
// when clang++ is available; ctest runs it for 10 s (fuzz_parser_smoke).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "cli/script/parser.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::string_view source(reinterpret_cast<const char*>(data), size);
    try {
        kiln::script::parse_program(source, "fuzz.ks");
    } catch (const kiln::script::SyntaxError&) {
    }
    try {
        kiln::script::parse_expression(source, "fuzz.ks");
    } catch (const kiln::script::SyntaxError&) {
    }
    kiln::script::is_complete_input(source);
    return 0;
}
