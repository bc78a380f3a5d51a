// load_manifest and forbidden_calls (manifest.h).
#include "assignments/grader/manifest.h"

#include <fstream>
#include <sstream>
#include <stdexcept>

namespace kiln::assignments {

const ManifestTask* Manifest::task(const std::string& id) const {
    for (const ManifestTask& t : tasks)
        if (t.id == id) return &t;
    return nullptr;
}

Manifest load_manifest(const std::string& path) {
    std::ifstream in(path);
    if (!in) throw std::runtime_error("grader: cannot read the manifest " + path);
    Manifest m;
    m.path = path;
    std::string line;
    for (int number = 1; std::getline(in, line); ++number) {
        auto bad = [&](const std::string& what) {
            return std::runtime_error("grader: " + path + ":" + std::to_string(number) + ": " +
                                      what + ": " + line);
        };
        std::istringstream words(line);
        std::string kind;
        if (!(words >> kind) || kind.front() == '#') continue;
        if (kind == "task") {
            ManifestTask t;
            if (!(words >> t.id >> t.points)) throw bad("expected `task ID POINTS FUNCTION...`");
            for (std::string f; words >> f;) t.functions.push_back(f);
            if (t.functions.empty()) throw bad("a task names the functions it is made of");
            m.tasks.push_back(std::move(t));
        } else if (kind == "forbid") {
            ForbiddenCall f;
            std::string ids, colon;
            if (!(words >> ids >> f.function >> colon) || colon != ":")
                throw bad("expected `forbid ID[,ID...] FUNCTION : WHY`");
            std::getline(words >> std::ws, f.why);
            std::istringstream split(ids);
            for (std::string id; std::getline(split, id, ',');) {
                if (id != "*" && !m.task(id)) throw bad("unknown task " + id);
                f.tasks.push_back(id);
            }
            if (f.why.empty()) throw bad("a forbidden call says why");
            m.forbidden.push_back(std::move(f));
        } else if (kind == "header-initializer") {
            std::string function, colon, where;
            if (!(words >> function >> colon) || colon != ":" || !std::getline(words, where))
                throw bad("expected `header-initializer FUNCTION : WHERE`");
            m.header_initializers.push_back(function);
        } else {
            throw bad("unknown entry " + kind);
        }
    }
    if (m.tasks.empty()) throw std::runtime_error("grader: " + path + " lists no task");
    return m;
}

std::vector<std::string> forbidden_calls(const Manifest& manifest, const CallGraph& calls,
                                         const std::string& id) {
    const ManifestTask* task = manifest.task(id);
    if (!task) return {};
    std::vector<std::string> every_root;
    for (const ManifestTask& t : manifest.tasks)
        every_root.insert(every_root.end(), t.functions.begin(), t.functions.end());
    bool found = false;
    std::vector<ReachedCall> reached = calls.reachable(task->functions, every_root, &found);
    std::vector<std::string> out;
    if (!found) out.push_back("the student's object defines none of this task's functions");
    for (const ReachedCall& call : reached) {
        bool header = false;
        for (const std::string& h : manifest.header_initializers)
            header = header || (call.from_initializer && name_matches(call.name, h));
        if (header) continue;
        for (const ForbiddenCall& f : manifest.forbidden) {
            bool applies = false;
            for (const std::string& t : f.tasks) applies = applies || t == "*" || t == id;
            if (applies && name_matches(call.name, f.function)) {
                bool defines = call.name.starts_with(kForeignDefinitionPrefix);
                out.push_back((defines ? "" : "calls ") + call.name + " (via " + call.via +
                              "): " + f.why);
                break;
            }
        }
    }
    return out;
}

}  // namespace kiln::assignments
