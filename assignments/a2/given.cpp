// Assignment 2, given code: printing guards. Not a task.
#include <sstream>

#include "assignments/a2/student.h"

namespace student {

std::string guard_print(const Guard& guard) {
    using kiln::operator<<;
    std::ostringstream os;
    for (size_t i = 0; i < guard.tensors.size(); ++i) {
        const TensorGuard& t = guard.tensors[i];
        os << "tensors[" << i << "]: " << kiln::dtype_name(t.dtype) << t.shape
           << (t.requires_grad ? " requires_grad" : "") << "\n";
    }
    for (size_t i = 0; i < guard.scalars.size(); ++i)
        os << "scalars[" << i << "] == " << guard.scalars[i] << "\n";
    return os.str();
}

}  // namespace student
