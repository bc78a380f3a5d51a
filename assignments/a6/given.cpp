// Assignment 6, given code: the kernel preamble and math text substitution (student.h).
#include <cctype>

#include "assignments/a6/student.h"
#include "tensor/kernels.h"

namespace student {

std::string cuda_preamble() {
    return std::string(kiln::cuda_math_prelude()) + "struct KernelArgs {\n    const float* in[" +
           std::to_string(kMaxOperands) + "];\n    float* out[" + std::to_string(kMaxOperands) +
           "];\n    long long n;\n};\n";
}

std::string math_text(const std::string& math, const std::string& x, const std::string& y) {
    auto word_char = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
    std::string out;
    size_t i = 0;
    while (i < math.size()) {
        size_t j = i;
        if (std::isdigit(static_cast<unsigned char>(math[i]))) {  // 1.f stays as it is
            while (j < math.size() && (word_char(math[j]) || math[j] == '.')) ++j;
            out += math.substr(i, j - i);
        } else if (word_char(math[i])) {
            while (j < math.size() && word_char(math[j])) ++j;
            std::string word = math.substr(i, j - i);
            out += word == "x" ? "(" + x + ")" : word == "y" ? "(" + y + ")" : word;
        } else {
            out += math[i];
            ++j;
        }
        i = j;
    }
    return out;
}

}  // namespace student
