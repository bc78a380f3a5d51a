#!/usr/bin/env python3
"""Writes basic/trace_4242.jsonl: a small hand-made trace in docs/trace.md's format (format 1)
with every event kind the report draws: an inductor function (schedule, source, provenance,
stages), and an AOT function (break, recompile, symbols, pin, joint/forward/backward, the
forward half compiled), plus an event kind the report does not know."""
import json, os

ev = []
t = [0]


def e(event, **k):
    t[0] += 137
    d = {"ev": event, "seq": len(ev), "t_us": t[0]}
    d.update(k)
    ev.append(d)


def N(id, op, inputs, shape, line="", kind="call", dtype="float32"):
    n = {"id": id, "name": op + "_" + id[1:], "kind": kind, "op": op, "inputs": inputs, "shape": shape, "dtype": dtype, "device": "cpu"}
    if line:
        n["line"] = line
    return n


def text(ns):
    return "\n".join("%s = %s(%s)" % (n["id"], n["op"], ", ".join(n["inputs"])) for n in ns)


def G(uid, ns, outs):
    return {"graph": uid, "num_symbols": 0, "nodes": ns, "outputs": outs, "text": text(ns)}


e("trace_start", pid=4242, argv=["kiln", "run", "demo.kn"], device="cpu", format=1)
e("function", fn=0, name="modified_sigmoid", backend="inductor", mode="default", dynamic="auto", fullgraph=False, cache_size_limit=8, arg_names=["x"])
e("call", fn=0, call=1, result="record")
nodes = [N("n0", "placeholder", [], [1024], "demo.kn:2 in modified_sigmoid", kind="placeholder"), N("n1", "neg", ["n0"], [1024], "demo.kn:3 in modified_sigmoid"),
         N("n2", "exp", ["n1"], [1024], "demo.kn:3 in modified_sigmoid"), N("n3", "add", ["n2"], [1024], "demo.kn:4 in modified_sigmoid"),
         N("n4", "reciprocal", ["n3"], [1024], "demo.kn:4 in modified_sigmoid"), N("n5", "sum", ["n4"], [], "demo.kn:5 in modified_sigmoid"),
         N("n6", "mul", ["n4", "n0"], [1024], "demo.kn:6 in modified_sigmoid")]
e("graph", fn=0, entry=1, segment=1, title="modified_sigmoid entry 1 graph 1", **G(1, nodes, ["n5", "n6"]))
src = '''// kiln generated: graph 1 (modified_sigmoid)
#include <cmath>
#include <cstdint>

/* kernel_0: pointwise n1 n2 n3 n4 n6
   one pass over 1024 elements */
extern "C" void kernel_0(const float* __restrict__ in0, float* out0, float* out1, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        float v1 = -in0[i];
        float v2 = std::exp(v1);
        float v3 = v2 + 1.0f;
        float v4 = 1.0f / v3;
        out0[i] = v4;
        out1[i] = v4 * in0[i];
    }
}

extern "C" void kernel_1(const float* in0, float* out0, int64_t n) {
    double acc = 0.0;  // sum
    for (int64_t i = 0; i < n; ++i) acc += in0[i];
    out0[0] = float(acc);
}
'''
e("stage", graph=1, backend_graph=1, stage="lower", file_stage="0_lowered", ms=0.4, text="lowered:\n" + text(nodes))
e("stage", graph=1, backend_graph=1, stage="schedule", file_stage="2_scheduled", ms=0.9, text="kernel_0: pointwise [n1 n2 n3 n4 n6]\nkernel_1: row [n5]")
e("schedule", graph=1, backend_graph=1, kernels=[
    {"name": "kernel_0", "kind": "pointwise", "nodes": ["n1", "n2", "n3", "n4", "n6"], "loads": ["n0"], "stores": ["n4", "n6"], "domain": [1024]},
    {"name": "kernel_1", "kind": "row", "nodes": ["n5"], "loads": ["n4"], "stores": ["n5"], "domain": [1024]}],
  not_fused=[{"node": "n5", "why": "a reduction over the whole tensor starts its own kernel"}], conv_fusions=[],
  text="kernel_0  pointwise [1024]  n1 n2 n3 n4 n6\nkernel_1  row [1024]  n5")
e("stage", graph=1, backend_graph=1, stage="emit", file_stage="4_emitted", ms=1.3, text=src)
e("source", graph=1, backend_graph=1, target="cpp", file="output_code_1.cpp", text=src, provenance=[
    {"node": "n0", "kernel": "kernel_0", "lines": [[9, 9], [14, 14]]},
    {"node": "n1", "kernel": "kernel_0", "lines": [[9, 9]]}, {"node": "n2", "kernel": "kernel_0", "lines": [[10, 10]]},
    {"node": "n3", "kernel": "kernel_0", "lines": [[11, 11]]}, {"node": "n4", "kernel": "kernel_0", "lines": [[12, 13]]},
    {"node": "n6", "kernel": "kernel_0", "lines": [[14, 14]]}, {"node": "n5", "kernel": "kernel_1", "lines": [[18, 21]]}])
e("stage", graph=1, backend_graph=1, stage="build", file_stage="5_built", ms=412.5, text="g++ -O3 -march=native -shared output_code_1.cpp")
e("backend", graph=1, backend_graph=1, choice="generated")
e("choice", backend_graph=1, text="measuring generated kernels against eager (3 timed calls each): generated 2.1x faster")
e("guards", fn=0, entry=1, guards=[{"text": "x: float32[1024] cpu", "kind": "argument", "source": "argument x"},
                                  {"text": "grad_mode: disabled", "kind": "grad_mode", "source": "autograd's grad mode when modified_sigmoid was recorded"}])
# fn 1: aot, a break, a recompile to dynamic sizes
e("function", fn=1, name="train_step", backend="inductor", mode="default", dynamic="auto", fullgraph=False, cache_size_limit=8, arg_names=["x", "w"])
e("call", fn=1, call=1, result="record")
fw = [N("n0", "placeholder", [], [128, 8], kind="placeholder"), N("n1", "placeholder", [], [8, 4], kind="placeholder"),
      N("n2", "matmul", ["n0", "n1"], [128, 4], "demo.kn:11 in train_step"), N("n3", "tanh", ["n2"], [128, 4], "demo.kn:12 in train_step"),
      N("n4", "sum", ["n3"], [], "demo.kn:13 in train_step")]
e("graph", fn=1, entry=1, segment=1, title="train_step entry 1 graph 1", **G(2, fw, ["n4"]))
joint = [N("n0", "placeholder", [], [128, 8], kind="placeholder"), N("n1", "placeholder", [], [8, 4], kind="placeholder"),
         N("n2", "placeholder", [], [], kind="placeholder"), N("n3", "matmul", ["n0", "n1"], [128, 4]), N("n4", "tanh", ["n3"], [128, 4]),
         N("n5", "sum", ["n4"], []), N("n6", "expand", ["n2"], [128, 4]), N("n7", "tanh_backward", ["n6", "n4"], [128, 4]),
         N("n8", "matmul", ["n0", "n7"], [8, 4])]
fwd = [N("n0", "placeholder", [], [128, 8], kind="placeholder"), N("n1", "placeholder", [], [8, 4], kind="placeholder"),
       N("n2", "matmul", ["n0", "n1"], [128, 4]), N("n3", "tanh", ["n2"], [128, 4]), N("n4", "sum", ["n3"], [])]
bwd = [N("n0", "placeholder", [], [128, 8], kind="placeholder"), N("n1", "placeholder", [], [128, 4], kind="placeholder"),
       N("n2", "placeholder", [], [], kind="placeholder"), N("n3", "expand", ["n2"], [128, 4]), N("n4", "tanh_backward", ["n3", "n1"], [128, 4]),
       N("n5", "matmul", ["n0", "n4"], [8, 4])]
e("aot", graph=2, joint=G(3, joint, ["n5", "n8"]), forward=G(4, fwd, ["n4", "n0", "n3"]), backward=G(5, bwd, ["n5"]),
  saved=[{"id": "n0", "name": "x", "bytes": 4096}, {"id": "n4", "name": "tanh", "bytes": 2048}], saved_bytes=6144,
  forward_saved=["n0", "n3"], backward_saved=["n0", "n1"], recomputed=["n6"],
  eager_saved=[{"name": "x", "bytes": 4096}, {"name": "mm", "bytes": 2048}, {"name": "tanh", "bytes": 2048}], eager_saved_bytes=8192)
fsrc = '''// kiln generated: graph 4 (train_step forward)
extern "C" void kernel_0(const float* in0, float* out0, float* out1, int64_t n) {
    double acc = 0.0;
    for (int64_t i = 0; i < n; ++i) {
        float t3 = std::tanh(in0[i]);
        out0[i] = t3;
        acc += t3;
    }
    out1[0] = float(acc);
}
'''
e("stage", graph=4, backend_graph=2, stage="lower", file_stage="0_lowered", ms=0.2, text=text(fwd))
e("schedule", graph=4, backend_graph=2, kernels=[{"name": "extern_0", "kind": "blas", "nodes": ["n2"], "loads": ["n0", "n1"], "stores": ["n2"], "domain": [128, 4]},
                                                 {"name": "kernel_0", "kind": "row", "nodes": ["n3", "n4"], "loads": ["n2"], "stores": ["n3", "n4"], "domain": [512]}],
  not_fused=[], conv_fusions=[], text="extern_0 blas n2\nkernel_0 row n3 n4")
e("source", graph=4, backend_graph=2, target="cpp", file="output_code_2.cpp", text=fsrc,
  provenance=[{"node": "n3", "kernel": "kernel_0", "lines": [[5, 6]]}, {"node": "n4", "kernel": "kernel_0", "lines": [[3, 3], [7, 7], [9, 9]]}])
e("stage", graph=4, backend_graph=2, stage="build", file_stage="5_built", ms=388.0, text="g++ output_code_2.cpp")
e("guards", fn=1, entry=1, guards=[{"text": "x: float32[128, 8] cpu", "kind": "argument", "source": "argument x"}])
e("call", fn=1, call=2, result="recompile")
e("recompile", fn=1, entry=2, failed_entry=1, guard="x.size(0) == 128", old="128", new="64",
  reason="entry 1: x.size(0) == 128 failed (64)", note="sizes that changed become symbols")
g6 = [N("n0", "placeholder", [], ["s0", 8], kind="placeholder"), N("n1", "tanh", ["n0"], ["s0", 8], "demo.kn:12 in train_step")]
e("graph", fn=1, entry=2, segment=1, title="train_step entry 2 graph 1", **G(6, g6, ["n1"]))
e("break", fn=1, entry=2, kind="item()", reason="item() reads a tensor's value on the host", line="demo.kn:14 in train_step",
  hint="keep the value a tensor, or use torch.where")
e("symbols", fn=1, entry=2, symbols=[{"name": "s0", "from": "x.size(0)", "value": 64, "pinned": False}])
e("pin", fn=1, entry=2, symbol="s1", value=8, why="x.size(1) read by reshape", line="demo.kn:12")
e("guards", fn=1, entry=2, guards=[{"text": "x.size(0) >= 2", "kind": "symbol", "source": "x.size(0)"}])
e("counters", fn=0, name="modified_sigmoid", calls=10, hits=9, records=1, recompiles=0, replays=0, reruns=0, eager_runs=0, eager_fallbacks=0, backend_choice={"1": "generated"})
e("counters", fn=1, name="train_step", calls=3, hits=1, records=2, recompiles=1, replays=0, reruns=0, eager_runs=0, eager_fallbacks=0, backend_choice={"2": "generated"})
e("totals", compiles=3, recompiles=1, cache_hits=10, replays=0, reruns=0, graphs_compiled=2, graph_breaks=1, eager_fallbacks=0, eager_runs=0)
e("future_event", fn=0)
e("trace_end")
out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "basic", "trace_4242.jsonl")
with open(out, "w") as f:
    for d in ev:
        f.write(json.dumps(d, separators=(",", ":")) + "\n")
