// CallGraph (calls.h): sections and relocations of ELF64 relocatable objects, searched
// breadth first so each reached call comes with the shortest chain that reaches it.
#include "assignments/grader/calls.h"

#include <cxxabi.h>
#include <elf.h>

#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <stdexcept>

namespace kiln::assignments {

std::string qualified_name(const std::string& demangled) {
    std::string s = demangled;
    for (size_t at; (at = s.find("(anonymous namespace)")) != std::string::npos;)
        s.replace(at, 21, "{anonymous}");
    std::string out;
    int depth = 0;
    for (size_t i = 0; i < s.size(); ++i) {
        char c = s[i];
        if (depth == 0 && out.ends_with("operator")) {  // operator(), operator<< ...
            if (s.compare(i, 2, "()") == 0) {
                out += "()";
                ++i;
                continue;
            }
            size_t j = i;
            while (j < s.size() && j < i + 3 && std::strchr("<>=!+-*/%&|^~[],", s[j])) ++j;
            if (j > i) {
                out += s.substr(i, j - i);
                i = j - 1;
                continue;
            }
        }
        if (c == '(' && depth == 0) break;  // the parameters
        if (c == '<' || c == '(' || c == '[' || c == '{') {
            if (c == '{' && depth == 0) out += "{...}";  // a lambda's or the anonymous name
            ++depth;
        } else if (c == '>' || c == ')' || c == ']' || c == '}') {
            depth = depth > 0 ? depth - 1 : 0;
        } else if (depth == 0) {
            out += c;
        }
    }
    // A return type before the name (templates): the name is the last word.
    size_t space = out.rfind(' ');
    if (space != std::string::npos && !out.ends_with(" ")) out = out.substr(space + 1);
    return out;
}

bool name_matches(const std::string& name, const std::string& spec) {
    if (spec.ends_with("*")) return name.starts_with(spec.substr(0, spec.size() - 1));
    return name == spec || (name.size() > spec.size() + 2 && name.starts_with(spec) &&
                            name.compare(spec.size(), 2, "::") == 0);
}

namespace {

// The sections of `path` whose machine code holds a system call instruction (inline
// assembly), from objdump's disassembly: such code can end the process or do anything else
// without a call the relocations would show.
std::set<std::string> sections_with_system_calls(const std::string& path) {
    std::string quoted = "'";
    for (char c : path) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
    FILE* pipe = popen(("objdump -d -w " + quoted + "' 2>&1").c_str(), "r");
    if (!pipe) throw std::runtime_error("grader: cannot run objdump on " + path);
    std::string text;
    char buf[4096];
    for (size_t n; (n = fread(buf, 1, sizeof buf, pipe)) > 0;) text.append(buf, n);
    if (pclose(pipe) != 0)
        throw std::runtime_error("grader: objdump (binutils) could not read " + path + ": " +
                                 text.substr(0, 300));
    std::set<std::string> out;
    std::string section, line;
    for (size_t at = 0, end; at < text.size(); at = end + 1) {
        end = text.find('\n', at);
        if (end == std::string::npos) end = text.size();
        line = text.substr(at, end - at);
        const std::string header = "Disassembly of section ";
        if (line.starts_with(header)) {
            section = line.substr(header.size(), line.size() - header.size() - 1);  // no ':'
            continue;
        }
        // "   7:\t0f 05                \tsyscall" : address, bytes, instruction.
        size_t tab = line.find('\t');
        if (tab == std::string::npos || (tab = line.find('\t', tab + 1)) == std::string::npos)
            continue;
        std::string insn = line.substr(tab + 1);
        std::string word = insn.substr(0, insn.find_first_of(" \t"));
        if (word == "syscall" || word == "sysenter" || word == "svc" ||
            (word == "int" && insn.find("0x80") != std::string::npos))
            out.insert(section);
    }
    return out;
}

std::string demangle(const char* mangled) {
    int status = 0;
    char* d = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
    if (status != 0 || !d) return mangled;
    std::string s = d;
    std::free(d);
    return s;
}

struct Symbol {
    std::string mangled, name;  // name: qualified_name(demangled)
    int section = 0;            // SHN_UNDEF (0) when undefined here
    unsigned char type = 0, bind = 0;
};

// A reference from one section: to a node of the graph, or to a symbol nothing here defines.
struct Edge {
    int node = -1;     // -1: external
    std::string name;  // the target's name
};

struct Section {
    std::string name, label;  // label: its first function's (or object's) qualified name
    bool code = false;
    bool foreign_definition = false;  // defines a global name outside namespace student
    std::vector<Edge> edges;
};

struct Object {
    std::string path;
    std::vector<char> bytes;
    std::vector<Symbol> symbols;
    int first_node = 0;              // node id of section 0
    std::vector<int> init_sections;  // .init_array / .ctors
    std::vector<std::string> sec_names;
};

template <class T>
const T* at(const Object& o, size_t offset, size_t count = 1) {
    if (offset + sizeof(T) * count > o.bytes.size())
        throw std::runtime_error("grader: " + o.path + " is truncated or not an ELF64 object");
    return reinterpret_cast<const T*>(o.bytes.data() + offset);
}

}  // namespace

struct CallGraph::Impl {
    std::vector<Object> objects;
    std::vector<Section> nodes;
    std::map<std::string, int> global_defs;  // mangled -> node, for references across objects

    void read(const std::string& path) {
        Object o;
        o.path = path;
        std::ifstream in(path, std::ios::binary);
        if (!in) throw std::runtime_error("grader: cannot read the object file " + path);
        o.bytes.assign(std::istreambuf_iterator<char>(in), {});
        const auto* eh = at<Elf64_Ehdr>(o, 0);
        if (std::memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
            eh->e_type != ET_REL)
            throw std::runtime_error("grader: " + path + " is not a relocatable ELF64 object");
        const auto* sh = at<Elf64_Shdr>(o, eh->e_shoff, eh->e_shnum);
        const char* shstr = at<char>(o, sh[eh->e_shstrndx].sh_offset);
        o.first_node = int(nodes.size());
        for (int i = 0; i < eh->e_shnum; ++i) {
            Section s;
            s.name = shstr + sh[i].sh_name;
            s.code = sh[i].sh_flags & SHF_EXECINSTR;
            o.sec_names.push_back(s.name);
            if (s.name == ".init_array" || s.name.starts_with(".init_array.") || s.name == ".ctors")
                o.init_sections.push_back(i);
            nodes.push_back(std::move(s));
        }
        // The symbol table.
        for (int i = 0; i < eh->e_shnum; ++i) {
            if (sh[i].sh_type != SHT_SYMTAB) continue;
            const char* str = at<char>(o, sh[sh[i].sh_link].sh_offset);
            size_t n = sh[i].sh_size / sizeof(Elf64_Sym);
            const auto* syms = at<Elf64_Sym>(o, sh[i].sh_offset, n);
            for (size_t k = 0; k < n; ++k) {
                Symbol s;
                s.mangled = str + syms[k].st_name;
                s.name = qualified_name(demangle(s.mangled.c_str()));
                s.section = syms[k].st_shndx >= SHN_LORESERVE ? 0 : syms[k].st_shndx;
                s.type = ELF64_ST_TYPE(syms[k].st_info);
                s.bind = ELF64_ST_BIND(syms[k].st_info);
                o.symbols.push_back(std::move(s));
            }
        }
        for (const Symbol& s : o.symbols) {
            if (s.section == 0 || s.type == STT_SECTION || s.type == STT_FILE) continue;
            Section& sec = nodes[o.first_node + s.section];
            bool better = s.type == STT_FUNC && (sec.label.empty() || sec.label.front() == '.');
            if (sec.label.empty() || better) sec.label = s.name;
            if (s.bind != STB_LOCAL) global_defs.emplace(s.mangled, o.first_node + s.section);
        }
        for (int i = 0; i < eh->e_shnum; ++i)
            if (nodes[o.first_node + i].label.empty())
                nodes[o.first_node + i].label = o.sec_names[i];
        if (objects.empty()) {  // the student's own file
            // Code only the student's file could hold: a system call written as assembly,
            // and a definition of a name outside namespace student (kiln's own source
            // compiled in under another name, or a replacement for a function of kiln or of
            // the test framework). Each is an edge to a name the manifests forbid.
            std::set<std::string> syscalls = sections_with_system_calls(path);
            for (int i = 0; i < eh->e_shnum; ++i)
                if (syscalls.count(o.sec_names[i]))
                    nodes[o.first_node + i].edges.push_back({-1, kSystemCallName});
            for (const Symbol& s : o.symbols)
                if (s.section != 0 && s.bind == STB_GLOBAL &&
                    (s.type == STT_FUNC || s.type == STT_OBJECT) &&
                    !s.name.starts_with("student::")) {
                    Section& sec = nodes[o.first_node + s.section];
                    sec.edges.push_back({-1, kForeignDefinitionPrefix + s.name});
                    sec.foreign_definition = true;
                }
        }
        objects.push_back(std::move(o));
    }

    // Relocations, once every object's global definitions are known.
    void link(const Object& o) {
        const auto* eh = at<Elf64_Ehdr>(o, 0);
        const auto* sh = at<Elf64_Shdr>(o, eh->e_shoff, eh->e_shnum);
        for (int i = 0; i < eh->e_shnum; ++i) {
            if (sh[i].sh_type != SHT_RELA && sh[i].sh_type != SHT_REL) continue;
            Section& from = nodes[o.first_node + int(sh[i].sh_info)];
            size_t size = sh[i].sh_type == SHT_RELA ? sizeof(Elf64_Rela) : sizeof(Elf64_Rel);
            size_t n = sh[i].sh_size / size;
            for (size_t k = 0; k < n; ++k) {
                uint64_t info = sh[i].sh_type == SHT_RELA
                                    ? at<Elf64_Rela>(o, sh[i].sh_offset + k * size)->r_info
                                    : at<Elf64_Rel>(o, sh[i].sh_offset + k * size)->r_info;
                size_t sym = ELF64_R_SYM(info);
                if (sym == 0 || sym >= o.symbols.size()) continue;
                const Symbol& s = o.symbols[sym];
                Edge e;
                if (s.section != 0) {
                    e.node = o.first_node + s.section;
                    e.name = s.type == STT_SECTION ? nodes[e.node].label : s.name;
                } else if (auto it = global_defs.find(s.mangled); it != global_defs.end()) {
                    e.node = it->second, e.name = s.name;
                } else {
                    e.name = s.name;
                }
                from.edges.push_back(std::move(e));
            }
        }
    }

    // Breadth first from `starts`; via[n] = the chain that first reached node n.
    std::map<int, std::string> search(const std::vector<std::pair<int, std::string>>& starts,
                                      std::vector<ReachedCall>* calls) const {
        std::map<int, std::string> via;
        std::deque<int> queue;
        for (const auto& [n, label] : starts)
            if (via.emplace(n, label).second) queue.push_back(n);
        std::set<std::string> seen_calls;
        while (!queue.empty()) {
            int n = queue.front();
            queue.pop_front();
            for (const Edge& e : nodes[n].edges) {
                if (calls && seen_calls.insert(e.name).second) calls->push_back({e.name, via[n]});
                if (e.node >= 0 && !via.count(e.node)) {
                    const std::string& label = nodes[e.node].label;
                    bool same = label == nodes[n].label || label.starts_with(".") ||
                                label.starts_with("_GLOBAL__sub_I");
                    via[e.node] = same ? via[n] : via[n] + " -> " + label;
                    queue.push_back(e.node);
                }
            }
        }
        return via;
    }

    std::vector<std::pair<int, std::string>> roots(const std::vector<std::string>& specs) const {
        std::vector<std::pair<int, std::string>> out;
        for (const Object& o : objects)
            for (const Symbol& s : o.symbols) {
                if (s.section == 0 || (s.type != STT_FUNC && s.type != STT_OBJECT)) continue;
                for (const std::string& spec : specs)
                    if (name_matches(s.name, spec))
                        out.push_back({o.first_node + s.section, s.name});
            }
        return out;
    }
};

CallGraph::CallGraph(const std::string& student_object, const std::vector<std::string>& others)
    : impl_(new Impl) {
    try {
        impl_->read(student_object);
        for (const std::string& path : others) impl_->read(path);
        for (const Object& o : impl_->objects) impl_->link(o);
    } catch (...) {
        delete impl_;
        throw;
    }
}

CallGraph::~CallGraph() { delete impl_; }

std::vector<ReachedCall> CallGraph::reachable(const std::vector<std::string>& roots,
                                              const std::vector<std::string>& every_task_root,
                                              bool* found_root) const {
    auto starts = impl_->roots(roots);
    if (found_root) *found_root = !starts.empty();
    // Code that counts for every task: the student's static initializers, and the student's
    // code that no task's functions reach (only a name lookup at run time could call it).
    const Object& student = impl_->objects.front();
    std::vector<std::pair<int, std::string>> shared;
    for (int s : student.init_sections)
        shared.push_back({student.first_node + s, "a static initializer"});
    auto reached = impl_->search(impl_->roots(every_task_root), nullptr);
    auto init_reached = impl_->search(shared, nullptr);
    for (size_t i = 0; i < student.sec_names.size(); ++i) {
        int n = student.first_node + int(i);
        if ((impl_->nodes[n].code || impl_->nodes[n].foreign_definition) && !reached.count(n) &&
            !init_reached.count(n))
            shared.push_back({n, impl_->nodes[n].label + " (called by no task)"});
    }
    // The task's code and the unreached code first, so that a call they make is never
    // reported as the initializers' (ReachedCall::from_initializer).
    std::vector<std::pair<int, std::string>> inits(shared.begin(),
                                                   shared.begin() + student.init_sections.size());
    starts.insert(starts.end(), shared.begin() + student.init_sections.size(), shared.end());
    std::vector<ReachedCall> calls, init_calls;
    impl_->search(starts, &calls);
    impl_->search(inits, &init_calls);
    for (ReachedCall& c : init_calls) {
        bool known = false;
        for (const ReachedCall& k : calls) known = known || k.name == c.name;
        if (!known) c.from_initializer = true, calls.push_back(std::move(c));
    }
    return calls;
}

}  // namespace kiln::assignments
