// Text helpers for the report's pages: HTML escaping, and C++/CUDA syntax highlighting of
// generated source (a small tokenizer, done when the page is written, so pages need no script
// to read well).
#pragma once
#include <string>
#include <vector>

namespace kiln::report {

// &, <, >, " and ' as entities: safe in element text and in quoted attributes.
std::string html_escape(const std::string& text);

// The source as escaped HTML, one string per line, tokens wrapped in <span class="tok-K">
// with K one of kw (keyword), ty (type), num, str, com (comment), pre (preprocessor).
// A span never crosses a line: a block comment is closed and reopened at each line end.
std::vector<std::string> highlight_cpp(const std::string& source);

}  // namespace kiln::report
