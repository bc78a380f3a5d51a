// Text formatting of kiln script: f-string format specs (f"{x:>8.3f}"), str.format and
// printf-style `%`, after Python's format mini-language.
#pragma once
#include <string>

#include "cli/interp/interp.h"

namespace kiln::interp {

// format(v, spec): "", ".3f", ">8", "+.2e", ",d", "%" ... A 0-d tensor formats as its item.
std::string format_value(Interp& in, const Value& v, const std::string& spec);
// "%d of %s" % (1, "x"): %s %r %d %i %f %e %g %x %% with flags, width and precision.
std::string percent_format(Interp& in, const std::string& fmt, const Value& args);
// "{} and {name:.2f}".format(*args, **kwargs)
std::string str_format(Interp& in, const std::string& fmt, const CallArgs& args);
// "...".format: a callable taking any positional and keyword arguments.
Value str_format_method(const std::string& fmt);

}  // namespace kiln::interp
