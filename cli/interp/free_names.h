// The names a script function reads but never assigns: its globals and enclosing-scope
// variables (Python's free names). compile() passes their values to the JIT with the
// arguments, so rebinding a global between calls is seen, as Dynamo guards G['w'].
#pragma once
#include <string>
#include <vector>

#include "cli/script/ast.h"

namespace kiln::interp {

// Sorted, without duplicates. A name assigned anywhere in the function (or a parameter)
// is local, as in Python, and is left out.
std::vector<std::string> free_names(const script::Def& def);

}  // namespace kiln::interp
