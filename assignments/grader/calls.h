// Which functions a task's code can reach, read from the student's object files (ELF
// relocations). The grader uses it to fail a task that calls kiln's own implementation of
// the task (manifest.h): the call must be in the machine code, so no test can miss it.
//
// Attribution: the object files are built with -ffunction-sections -fdata-sections, so each
// function (and each lambda, static helper, vtable or jump table) has its own section, and
// each relocation says which section refers to which symbol. A task's code is everything
// reachable from its functions through those references, across the student's object and
// the assignment's given code. Code that runs before main (static initializers) and code in
// the student's object that no task reaches count for every task.
#pragma once
#include <string>
#include <vector>

namespace kiln::assignments {

// One call (or address taken) that the reachable code makes.
struct ReachedCall {
    std::string name;  // the callee's qualified name ("kiln::jit::aot::partition")
    std::string via;   // how the task reaches it: "student::partition -> student::helper"
    bool from_initializer = false;  // reached only from the file's static initializers
};

class CallGraph {
   public:
    // Reads relocatable ELF objects; `student_object` is the file the student wrote (its
    // unreached code and initializers count for every task). Throws
    // std::runtime_error naming the file when one can't be read.
    CallGraph(const std::string& student_object, const std::vector<std::string>& other_objects);
    ~CallGraph();
    CallGraph(const CallGraph&) = delete;
    CallGraph& operator=(const CallGraph&) = delete;

    // Every symbol referred to by code reachable from the functions named in `roots`
    // (qualified names; a class name covers its members), plus the student's initializers
    // and the student's code that none of `every_task_root` reaches. False in `found_root`
    // when none of `roots` is defined.
    std::vector<ReachedCall> reachable(const std::vector<std::string>& roots,
                                       const std::vector<std::string>& every_task_root,
                                       bool* found_root = nullptr) const;

   private:
    struct Impl;
    Impl* impl_;
};

// The names of what the student's object holds beyond calls (manifests forbid them like
// calls): a system call instruction in its machine code (inline assembly), and a global
// definition outside namespace student ("defines kiln::jit::aot::copied_min_cut").
inline const std::string kSystemCallName = "asm:syscall";
inline const std::string kForeignDefinitionPrefix = "defines ";

// "kiln::jit::aot::partition" from a demangled symbol such as
// "kiln::jit::aot::Partition kiln::jit::aot::partition<...>(std::vector<...> const&)".
std::string qualified_name(const std::string& demangled);
// Whether `name` is `spec` or a member of it ("student::Recorder::call" is in "student::Recorder");
// a `spec` ending in `*` matches every name that starts with the rest ("kiln::backward_*").
bool name_matches(const std::string& name, const std::string& spec);

}  // namespace kiln::assignments
