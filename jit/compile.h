// kiln::compile: the public face of the JIT (DESIGN.md §6, PyTorch's torch.compile).
//
//   auto f = compile(modified_sigmoid, {.backend = "eager"});
//   Tensor out = f(a, b);    // record, guard, compile, run; later calls: guards + graphs only
//
// fn may take Tensors, arithmetic scalars, objects such as nn::Module& (guarded by
// identity; their parameters are lifted into the graphs) and std::map<std::string, Tensor>;
// it returns a Tensor, a std::vector<Tensor> or a std::tuple of Tensors.
#pragma once
#include <functional>
#include <map>
#include <tuple>
#include <type_traits>

#include "jit/cache.h"

namespace kiln {
namespace jit {

// --- the signature of anything callable
template <class T>
struct fn_traits : fn_traits<decltype(&T::operator())> {};
template <class R, class... A>
struct fn_traits<R (*)(A...)> { using sig = R(A...); };
template <class R, class... A>
struct fn_traits<R(A...)> { using sig = R(A...); };
template <class C, class R, class... A>
struct fn_traits<R (C::*)(A...) const> { using sig = R(A...); };
template <class C, class R, class... A>
struct fn_traits<R (C::*)(A...)> { using sig = R(A...); };

// --- arguments, flattened for the guards
inline void flatten_arg(Args& out, const Tensor& t, int pos) { out.push_back({.kind = ArgKind::tensor, .tensor = t, .position = pos}); }
inline void flatten_arg(Args& out, const std::map<std::string, Tensor>& d, int pos) {
    for (const auto& [k, t] : d) out.push_back({.kind = ArgKind::tensor, .tensor = t, .position = pos, .key = &k});
}
template <class T>
    requires std::is_arithmetic_v<std::remove_cvref_t<T>>
void flatten_arg(Args& out, T v, int pos) {
    out.push_back({.kind = ArgKind::scalar, .scalar = double(v), .position = pos});
}
template <class T>
    requires std::is_class_v<T>
void flatten_arg(Args& out, const T& object, int pos) {  // modules and other objects: by identity
    out.push_back({.kind = ArgKind::object, .object = &object, .position = pos});
}

// --- results
inline std::vector<Tensor> flatten_result(const Tensor& t) { return {t}; }
inline std::vector<Tensor> flatten_result(const std::vector<Tensor>& ts) { return ts; }
template <class... T>
std::vector<Tensor> flatten_result(const std::tuple<T...>& ts) {
    return std::apply([](const auto&... t) { return std::vector<Tensor>{t...}; }, ts);
}
template <class R>
R unflatten_result(std::vector<Tensor> out) {
    if constexpr (std::is_same_v<R, Tensor>) return std::move(out.at(0));
    else if constexpr (std::is_same_v<R, std::vector<Tensor>>) return out;
    else return [&]<size_t... I>(std::index_sequence<I...>) { return R{out.at(I)...}; }(std::make_index_sequence<std::tuple_size_v<R>>());
}

template <class Sig>
class Compiled;

// A compiled function with fn's signature. Copies share one cache.
template <class R, class... A>
class Compiled<R(A...)> {
   public:
    Compiled(std::function<R(A...)> fn, CompileOptions options)
        : fn_(std::move(fn)), core_(std::make_shared<CompiledCore>(std::move(options))) {
        register_core(core_);
    }

    R operator()(A... a) const {
        // Inside another compiled function's recording: inline fn into that recording.
        if (dispatch_hook()) return fn_(a...);
        Args args;
        args.reserve(sizeof...(A));
        int pos = 0;
        (flatten_arg(args, a, pos++), ...);
        auto run_fn = [&] { return flatten_result(fn_(a...)); };
        // A reference_wrapper fits std::function's inline buffer: no allocation per call
        // (the lambda itself captures too much for it). run_fn outlives the call.
        HostFn host = std::ref(run_fn);
        return unflatten_result<R>(core_->call(args, host));
    }

    CompiledCore& core() const { return *core_; }
    const std::function<R(A...)>& original() const { return fn_; }

   private:
    std::function<R(A...)> fn_;
    std::shared_ptr<CompiledCore> core_;
};

template <class M>
concept HasForward = requires { &M::forward; };

}  // namespace jit

// Compiles a function, function pointer or lambda.
template <class F>
    requires(!jit::HasForward<std::remove_cvref_t<F>>)
auto compile(F&& fn, CompileOptions options = {}) {
    using Sig = typename jit::fn_traits<std::remove_cvref_t<std::remove_pointer_t<std::decay_t<F>>>>::sig;
    return jit::Compiled<Sig>(std::function<Sig>(std::forward<F>(fn)), std::move(options));
}

// Compiles a module's forward; the module is captured by reference (keep it alive).
template <jit::HasForward M>
auto compile(M& module, CompileOptions options = {}) {
    using Sig = typename jit::fn_traits<decltype(&M::forward)>::sig;
    return [&]<class R, class... A>(std::type_identity<R(A...)>) {
        return jit::Compiled<R(A...)>([m = &module](A... a) -> R { return m->forward(a...); }, std::move(options));
    }(std::type_identity<Sig>{});
}

}  // namespace kiln
