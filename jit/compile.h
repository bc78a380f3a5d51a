// kiln::compile: the public face of the JIT (docs/jit.md, PyTorch's torch.compile).
//
//   auto f = compile(modified_sigmoid, {.backend = "eager"});
//   Tensor out = f(a, b);    // record, guard, compile, run; later calls: guards + graphs only
//
// fn may take Tensors, numbers (floats bit-exact, ints exact), strings, nn::Module& (by
// identity plus its training flag and registered state; parameters are lifted into the
// graphs) and containers of these (vector, array, tuple, pair, map<string, T>, nested):
// every leaf is guarded. Other types (plain structs, pointers) are refused at compile
// time. fn returns a Tensor, a std::vector<Tensor> or a std::tuple of Tensors.
#pragma once
#include <array>
#include <functional>
#include <map>
#include <string_view>
#include <tuple>
#include <type_traits>

#include "jit/cache.h"
#include "nn/module.h"

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

// --- arguments, flattened for the guards: every leaf an argument holds is guarded.
struct ArgPath {
    int position = 0;                  // which parameter of fn
    const std::string* key = nullptr;  // innermost map key
    int index = -1;                    // innermost sequence index
};
inline void push_leaf(Args& out, ArgValue v, ArgPath at) {
    v.position = at.position, v.key = at.key, v.index = at.index;
    out.push_back(std::move(v));
}

template <class T>
struct is_std_array : std::false_type {};
template <class T, size_t N>
struct is_std_array<std::array<T, N>> : std::true_type {};
template <class T>
concept TupleLike = requires { std::tuple_size<T>::value; } && !is_std_array<T>::value;
template <class T>
concept Sequence = requires(const T& v) { v.size(); v.begin(); v.end(); typename T::value_type; } &&
                   !std::is_convertible_v<const T&, std::string_view> &&
                   !requires { typename T::mapped_type; };
template <class T>
concept StringMap = requires { typename T::mapped_type; } && std::is_same_v<typename T::key_type, std::string>;

// Whether kiln can guard a value of type T; compile() refuses fn otherwise (static_assert).
template <class T>
constexpr bool guardable() {
    using U = std::remove_cvref_t<T>;
    if constexpr (std::is_same_v<U, Tensor> || std::is_arithmetic_v<U> || std::is_convertible_v<const U&, std::string_view>)
        return true;
    else if constexpr (std::is_base_of_v<nn::Module, U>) return true;
    else if constexpr (StringMap<U>) return guardable<typename U::mapped_type>();
    else if constexpr (Sequence<U>) return guardable<typename U::value_type>();
    else if constexpr (TupleLike<U>)
        return []<size_t... I>(std::index_sequence<I...>) {
            return (guardable<std::tuple_element_t<I, U>>() && ...);
        }(std::make_index_sequence<std::tuple_size_v<U>>());
    else return false;
}

template <class T>
void flatten_arg(Args& out, const T& v, ArgPath at) {
    using U = std::remove_cvref_t<T>;
    if constexpr (std::is_same_v<U, Tensor>) {
        push_leaf(out, {.kind = ArgKind::tensor, .tensor = v}, at);
    } else if constexpr (std::is_floating_point_v<U>) {
        push_leaf(out, {.kind = ArgKind::scalar, .scalar = double(v)}, at);
    } else if constexpr (std::is_arithmetic_v<U>) {  // ints and bools: exact (2^53 + 1 is not 2^53)
        push_leaf(out, {.kind = ArgKind::integer, .integer = int64_t(v)}, at);
    } else if constexpr (std::is_convertible_v<const U&, std::string_view>) {
        push_leaf(out, {.kind = ArgKind::string, .text = std::string_view(v)}, at);
    } else if constexpr (std::is_base_of_v<nn::Module, U>) {
        // By identity; the module's training flag and registered state (its state version)
        // are guarded by the recording (guard_module_state).
        push_leaf(out, {.kind = ArgKind::object, .object = &v}, at);
    } else if constexpr (StringMap<U>) {
        push_leaf(out, {.kind = ArgKind::integer, .integer = int64_t(v.size())}, {at.position, at.key, kLengthLeaf});
        for (const auto& [k, item] : v) flatten_arg(out, item, {at.position, &k, -1});
    } else if constexpr (Sequence<U>) {
        push_leaf(out, {.kind = ArgKind::integer, .integer = int64_t(v.size())}, {at.position, at.key, kLengthLeaf});
        int i = 0;
        for (const auto& item : v) flatten_arg(out, item, {at.position, at.key, i++});
    } else if constexpr (TupleLike<U>) {
        [&]<size_t... I>(std::index_sequence<I...>) {
            (flatten_arg(out, std::get<I>(v), ArgPath{at.position, at.key, int(I)}), ...);
        }(std::make_index_sequence<std::tuple_size_v<U>>());
    } else {
        static_assert(guardable<U>(), "compile: kiln can't guard an argument of this type (a plain struct or pointer "
                                      "would be compared by address, so changed values would go unseen); pass its fields "
                                      "as Tensors, numbers, strings or containers of them, or pass an nn::Module by reference");
    }
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

// Under a recording: guards a module argument's state version (nn::Module::state_changed).
template <class T>
void guard_module_state(const T& v) {
    if constexpr (std::is_base_of_v<nn::Module, std::remove_cvref_t<T>>) v.report_guard_state();
}

template <class Sig>
class Compiled;

// A compiled function with fn's signature. Copies share one cache.
template <class R, class... A>
class Compiled<R(A...)> {
    static_assert((guardable<A>() && ...), "compile: fn takes an argument type kiln can't guard (see jit::guardable): "
                                           "use Tensors, numbers, strings, containers of them, or nn::Module&");

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
        (flatten_arg(args, a, ArgPath{.position = pos++}), ...);
        auto run_fn = [&] {
            (guard_module_state(a), ...);  // a module argument's state, even if fn never calls it
            return flatten_result(fn_(a...));
        };
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
        return jit::Compiled<R(A...)>(
            [m = &module](A... a) -> R {
                // forward reads the module's state (is_training() or not): guard it, as
                // calling m(x) would.
                if constexpr (std::is_base_of_v<nn::Module, M>) m->report_guard_state();
                return m->forward(a...);
            },
            std::move(options));
    }(std::type_identity<Sig>{});
}

}  // namespace kiln
