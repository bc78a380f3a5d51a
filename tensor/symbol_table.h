// A run-time library's entry points as one table (the libraries kiln opens with dlopen:
// tensor/cuda_runtime.h). The table is a macro, KILN_<LIBRARY>_SYMBOLS(X), with one line
// X(field, "symbol", type) per entry point; the library's struct of function pointers
// expands it twice: with KILN_SYMBOL_FIELD for its fields, and with KILN_SYMBOL_BIND in its
// bind(const LibrarySymbols& symbols), which looks each one up by name (a missing one raises
// the kiln::Error LibrarySymbols gives). An entry point is thus written once.
#pragma once
#include <type_traits>

#define KILN_SYMBOL_FIELD(field, symbol, ...) std::type_identity_t<__VA_ARGS__> field = nullptr;
#define KILN_SYMBOL_BIND(field, symbol, ...) symbols.bind(field, symbol);
