// Kernels that differ only in names are compiled once, for both dialects (emit_kernels in
// emit_core.cpp). See docs/codegen.md, "Kernels that differ only in names".
#pragma once
#include <cctype>
#include <cstring>
#include <map>
#include <string>
#include <unordered_set>

#include "codegen/schedule.h"

namespace kiln::codegen {

// Kernels whose code differs only in names (ResNet's blocks of one stage run the same loops
// over the same shapes) are compiled once: on the CPU a repeat's entry point calls the first
// one's; on CUDA the runner launches the first one's __global__ function for the repeat.
// Two kernels are the same code when their texts are equal after renaming each value (and
// the kernel itself) to v0, v1, ... in order of first use: a renaming both ways, so equal
// canonical texts read the same buffers in the same order and compute the same thing.
class SameCode {
   public:
    explicit SameCode(const Schedule& s) : s_(s) {
        for (const LValue& v : s.graph.inputs) names_.insert(s.value_name(v.id));
        for (const LNode& n : s.graph.nodes) names_.insert(s.value_name(n.out.id));
        for (size_t k = 0; k < s.kernels.size(); ++k) names_.insert(s.kernel_name(int(k)));  // "the epilogue of kernel_7"
    }
    std::string canonical(int k, const std::string& text) const {
        const std::string kernel = s_.kernel_name(k);
        std::map<std::string, std::string> renamed;
        std::string out;
        for (size_t i = 0; i < text.size();) {
            if (!std::isalpha(static_cast<unsigned char>(text[i])) && text[i] != '_') {
                out += text[i++];
                continue;
            }
            size_t end = i;
            while (end < text.size() && (std::isalnum(static_cast<unsigned char>(text[end])) || text[end] == '_')) ++end;
            std::string word = text.substr(i, end - i), suffix;
            // Every name ends in "_<number>" (value_name, kernel_name): a word with no '_' before
            // a digit is none and holds none (xsimd, batch, load_unaligned), so is not looked up.
            if (!has_numbered_part(word)) {
                out += word;
                i = end;
                continue;
            }
            // A name with a suffix of its own (x_0_ptr, relu_5_v, kernel_3_body) renames its stem.
            for (size_t cut = word.rfind('_'); !is_name(word, kernel) && cut != std::string::npos && cut > 0;
                 cut = word.rfind('_', cut - 1))
                if (is_name(word.substr(0, cut), kernel)) {
                    suffix = word.substr(cut);
                    word.resize(cut);
                }
            if (is_name(word, kernel)) {
                auto [it, fresh] = renamed.try_emplace(word, "v" + std::to_string(renamed.size()));
                word = it->second;
            }
            out += word + suffix;
            i = end;
        }
        return out;
    }

   private:
    static bool has_numbered_part(const std::string& word) {
        for (size_t i = 0; i + 1 < word.size(); ++i)
            if (word[i] == '_' && std::isdigit(static_cast<unsigned char>(word[i + 1])))
                return true;
        return false;
    }
    bool is_name(const std::string& word, const std::string& kernel) const { return word == kernel || names_.count(word) > 0; }
    const Schedule& s_;
    std::unordered_set<std::string> names_;  // hashed: canonical looks up every word of a kernel
};

// First kernel name by canonical text, over every graph of one translation unit.
using SeenKernels = std::map<std::string, std::string>;

}  // namespace kiln::codegen
