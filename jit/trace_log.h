// The structured compile log (docs/trace.md, issue 29): KILN_TRACE=DIR, jit::trace_to(DIR) or
// `kiln run --trace DIR` write DIR/trace_<pid>.jsonl, one JSON object per line per event
// (graphs, guards, breaks, recompiles, symbols, AOT halves, pipeline stages, schedule,
// generated source with provenance, counters), for `kiln report` to render.
//
// jit/trace_log.cpp writes the file and counts calls; jit/trace_events.cpp builds the events of
// jit/; jit/trace_json.cpp is the JSON writer; codegen/trace_codegen.cpp adds the inductor's.
// The hooks elsewhere are one line each: `if (trace_log::on()) trace_log::graph_recorded(...)`.
// Off (the default), each costs one relaxed load of a bool.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace kiln {
struct CompileOptions;
namespace jit {
class Graph;
class GraphBuilder;
struct Entry;
struct BreakInfo;
struct ArgValue;
using Args = std::vector<ArgValue>;
namespace aot {
struct AotPlan;
struct Partition;
}  // namespace aot

// Starts the log in `dir` (created if missing), ending any log already open; throws kiln::Error
// naming the directory when it cannot be written. The log ends at trace_stop() or process exit.
void trace_to(const std::string& dir);
// Writes the counters and trace_end, and closes the file (no-op when no log is open).
void trace_stop();
// The file being written ("" when none).
std::string trace_path();

namespace trace_log {

// --- a JSON object being built, field by field (values are escaped; raw() takes JSON text)
class Json {
   public:
    Json& str(std::string_view key, std::string_view value);
    Json& num(std::string_view key, double value);
    template <class I>
    requires(std::is_integral_v<I> && !std::is_same_v<I, bool>) Json& num(std::string_view key,
                                                                          I value) {
        return raw(key, std::to_string(value));
    }
    Json& boolean(std::string_view key, bool value) { return raw(key, value ? "true" : "false"); }
    Json& raw(std::string_view key, std::string_view json);
    Json& raw_fields(std::string_view fields);  // `"a":1,"b":2` (another object's body)
    std::string text() const { return "{" + body_ + "}"; }
    const std::string& body() const { return body_; }

   private:
    std::string body_;
};
std::string quote(std::string_view s);                     // a JSON string literal
std::string array(const std::vector<std::string>& items);  // items are JSON already
std::string string_array(const std::vector<std::string>& items);

// --- on/off
extern std::atomic<bool> enabled;
inline bool on() { return enabled.load(std::memory_order_relaxed); }
// Starts a log in KILN_TRACE when it is set and no log is open (each compile() calls it).
void start_from_env();
// Writes one event: {"ev":ev,"seq":..,"t_us":.., <fields>} (nothing when the log is off).
void emit(std::string_view ev, const Json& fields);

// A graph as JSON: {"graph":uid,"nodes":[..],"outputs":[..],"text":".."}. Node ids are "n<index>".
std::string graph_json(const Graph& g, const std::vector<std::string>* lines = nullptr);
inline std::string node_id(int index) { return "n" + std::to_string(index); }

// --- hooks (jit/)
// A compiled function's core (keyed by its TraceConfig's address) got a call.
void call_begin(const void* fn, const CompileOptions& options);
// How that call was served: "hit", "record", "recompile", "replay", "rerun", "eager",
// "eager_fallback". Every result but "hit" is also a "call" event.
void call_result(const void* fn, std::string_view result);
// A recompile: the first failing guard of the entry that `reason` names ("entry 2: ...", else
// the first), with the value recorded and the value now.
void recompile(const void* fn, int new_entry, const std::vector<std::unique_ptr<Entry>>& entries,
               const Args& args, const CompileOptions& options, const std::string& reason);
// An entry's recording ended, `first_call_ms` after the call began (tracing, backend
// compiles, running): its guards (with where each came from) and symbols.
void entry_recorded(const void* fn, const Entry& e, const CompileOptions& options,
                    double first_call_ms);
// The tracer started a graph / recorded node `builder_id` (its user line: jit::host_site()).
void recording_started();
void node_recorded(int builder_id);
// A segment's graph, before its backend compiles it.
void graph_recorded(const void* fn, int entry, int segment, const std::string& title,
                    const Graph& g, const GraphBuilder& b);
void graph_break(const void* fn, int entry, const BreakInfo& brk);
void runs_eagerly(const void* fn, int entry, const std::string& why);
void symbol_pinned(const void* fn, int entry, int sym, int64_t value, const std::string& why);
// AOT: the joint graph of `forward` cut into two halves.
void aot_planned(const Graph& forward, const aot::AotPlan& p, const aot::Partition& part);

// --- hooks (codegen/): what a backend chose for a graph it was handed ("generated",
// "interpreted: why"), shown per function in the counters event.
void backend_choice(uint64_t graph_uid, int backend_graph_id, const std::string& choice);

}  // namespace trace_log
}  // namespace jit
}  // namespace kiln
