// Eager pointwise kernels: one loop template, instantiated with each ops.def expression.
// Contiguous float32 runs the expression on xsimd batches (vector body, scalar tail);
// other dtypes run it on scalars. Broadcast or strided operands are first made contiguous.
#include <cmath>
#include <cstring>

#include "tensor/kernels.h"
#include "tensor/parallel.h"
#include "tensor/pointwise_math.h"

namespace kiln_math {
// One functor per pointwise op, defined here so that `exp`, `maximum`, ... resolve to the
// kiln_math vocabulary rather than to kiln's Tensor functions.
#define KILN_UNARY(name, math, ...)             \
    struct Math_##name {                        \
        template <class T>                      \
        static T f(T x) { return T(math); }     \
    };
#define KILN_BINARY(name, math, ...)            \
    struct Math_##name {                        \
        template <class T>                      \
        static T f(T x, T y) { return T(math); } \
    };
#define KILN_COMPARE(name, math)                   \
    struct Math_##name {                           \
        template <class T>                         \
        static bool f(T x, T y) { return math; }   \
    };
#include "tensor/ops.def"
}  // namespace kiln_math

namespace kiln {
namespace {

using Batch = xsimd::batch<float>;

// The type an op's math runs on for elements of type T: int64 wraps on overflow (see
// kiln_math::wrap_int64); float, double and batches run as themselves.
template <class T>
using MathType = std::conditional_t<std::is_same_v<T, int64_t>, kiln_math::wrap_int64, T>;
template <class M, class T>
T apply(T x) { return T(M::f(MathType<T>(x))); }
template <class M, class T>
T apply(T x, T y) { return T(M::f(MathType<T>(x), MathType<T>(y))); }

DType result_dtype(DType in, bool ints) { return pointwise_result_dtype(in, ints); }

// A pointwise operand: a contiguous array of the loop's type, or one broadcast value.
template <class T>
struct Operand {
    const T* p = nullptr;
    T value{};
    Tensor keep;  // owns the array
    T at(int64_t i) const { return p ? p[i] : value; }
};

template <class T>
Operand<T> make_operand(const Tensor& t, const Shape& out_shape, DType dt) {
    Operand<T> o;
    if (t.numel() == 1 && t.shape() != out_shape) {
        o.keep = contiguous_as(t, dt);
        o.value = ptr<T>(o.keep)[0];
    } else {
        o.keep = contiguous_as(t.shape() == out_shape ? t : t.expand(out_shape), dt);
        o.p = ptr<T>(o.keep);
    }
    return o;
}

template <class T>
Operand<T> scalar_operand(double v) {
    Operand<T> o;
    o.value = cast_value<T>(v);
    return o;
}

template <class M, class T>
void unary_loop(const T* x, T* out, int64_t n) {
    parallel_for(n, kParallelGrain, [&](int64_t b, int64_t e) {
        int64_t i = b;
        if constexpr (std::is_same_v<T, float>) {
            for (; i + int64_t(Batch::size) <= e; i += Batch::size)
                M::f(Batch::load_unaligned(x + i)).store_unaligned(out + i);
        }
        for (; i < e; ++i) out[i] = apply<M>(x[i]);
    });
}

template <class M, class T>
void binary_loop(const Operand<T>& x, const Operand<T>& y, T* out, int64_t n) {
    parallel_for(n, kParallelGrain, [&](int64_t b, int64_t e) {
        int64_t i = b;
        if constexpr (std::is_same_v<T, float>) {
            auto load = [](const Operand<T>& o, int64_t k) {
                return o.p ? Batch::load_unaligned(o.p + k) : Batch(o.value);
            };
            for (; i + int64_t(Batch::size) <= e; i += Batch::size)
                M::f(load(x, i), load(y, i)).store_unaligned(out + i);
        }
        for (; i < e; ++i) out[i] = apply<M>(x.at(i), y.at(i));
    });
}

// Ints: the op keeps int64 (otherwise the int64 instantiation, never run, is skipped).
template <class M, bool Ints>
Tensor unary_forward(std::span<const Tensor> in) {
    constexpr bool ints = Ints;
    const Tensor& x = in[0];
    DType dt = result_dtype(x.dtype(), ints);
    Tensor xs = contiguous_as(x, dt);
    Tensor out = empty(x.shape(), dt);
    visit_dtype(dt, [&](auto tag) {
        using T = decltype(tag);
        if constexpr (!std::is_same_v<T, bool> && (Ints || std::is_floating_point_v<T>))
            unary_loop<M>(ptr<T>(xs), ptr<T>(out), x.numel());
    });
    return out;
}

template <class T>
std::pair<Operand<T>, Operand<T>> binary_operands(std::span<const Tensor> in, const Attrs& a, const BinaryPlan& p) {
    switch (a.scalar_pos) {
        case ScalarPos::right: return {make_operand<T>(in[0], p.shape, p.dtype), scalar_operand<T>(a.scalar)};
        case ScalarPos::left: return {scalar_operand<T>(a.scalar), make_operand<T>(in[0], p.shape, p.dtype)};
        default: return {make_operand<T>(in[0], p.shape, p.dtype), make_operand<T>(in[1], p.shape, p.dtype)};
    }
}

template <class M, bool Ints>
Tensor binary_forward(std::span<const Tensor> in, const Attrs& a, const char* op) {
    constexpr bool ints = Ints;
    BinaryPlan p = plan_binary(in, a, ints, op);
    Tensor out = empty(p.shape, p.dtype);
    visit_dtype(p.dtype, [&](auto tag) {
        using T = decltype(tag);
        if constexpr (!std::is_same_v<T, bool> && (Ints || std::is_floating_point_v<T>)) {
            auto [x, y] = binary_operands<T>(in, a, p);
            binary_loop<M>(x, y, ptr<T>(out), out.numel());
        }
    });
    return out;
}

template <class M>
Tensor compare_forward(std::span<const Tensor> in, const Attrs& a, const char* op) {
    BinaryPlan p = plan_binary(in, a, true, op);
    if (p.dtype == DType::boolean) p.dtype = DType::int64;
    Tensor out = empty(p.shape, DType::boolean);
    visit_dtype(p.dtype, [&](auto tag) {
        using T = decltype(tag);
        if constexpr (!std::is_same_v<T, bool>) {
            auto [x, y] = binary_operands<T>(in, a, p);
            bool* o = ptr<bool>(out);
            parallel_for(out.numel(), kParallelGrain, [&](int64_t b, int64_t e) {
                for (int64_t i = b; i < e; ++i) o[i] = M::f(x.at(i), y.at(i));
            });
        }
    });
    return out;
}

}  // namespace

DType pointwise_result_dtype(DType in, bool ints) {
    if (is_floating(in)) return in;
    return ints && in == DType::int64 ? DType::int64 : DType::float32;
}

DType binary_result_dtype(DType x, DType y, bool ints) { return result_dtype(promote(x, y), ints); }

DType scalar_result_dtype(DType t, double scalar, bool ints) {
    // An int-valued scalar keeps int64 (the C++ API cannot tell 2 from 2.0, see
    // docs/robustness.md); NaN, inf and values past int64 never count as integral.
    bool integral = std::trunc(scalar) == scalar && scalar >= -9223372036854775808.0 &&
                    scalar < 9223372036854775808.0;
    DType dt = t == DType::float64                                              ? t
               : (t == DType::int64 || t == DType::boolean) && integral && ints ? DType::int64
                                                                                : DType::float32;
    return result_dtype(dt, ints);
}

BinaryPlan plan_binary(std::span<const Tensor> in, const Attrs& a, bool ints, const char* op) {
    if (a.scalar_pos != ScalarPos::none)
        return {in[0].shape(), scalar_result_dtype(in[0].dtype(), a.scalar, ints)};
    KILN_CHECK(in[0].device() == in[1].device(), op, ": tensors on different devices (", in[0].device(), " and ", in[1].device(), ")");
    return {broadcast_shapes(in[0].shape(), in[1].shape(), op),
            binary_result_dtype(in[0].dtype(), in[1].dtype(), ints)};
}

// --- forward kernels for the table's pointwise entries
#define KILN_UNARY(name, math, dx, saves, ints, ...)                  \
    Tensor forward_##name(std::span<const Tensor> in, const Attrs&) { \
        return unary_forward<kiln_math::Math_##name, ints>(in);       \
    }
#define KILN_BINARY(name, math, dx, dy, saves, ints, ...)                  \
    Tensor forward_##name(std::span<const Tensor> in, const Attrs& a) {    \
        return binary_forward<kiln_math::Math_##name, ints>(in, a, #name); \
    }
#define KILN_COMPARE(name, math)                                        \
    Tensor forward_##name(std::span<const Tensor> in, const Attrs& a) { \
        return compare_forward<kiln_math::Math_##name>(in, a, #name);   \
    }
#include "tensor/ops.def"

// --- derivative formulas, as written in the table
#define KILN_UNARY(name, math, dx, saves, ints, ...)             \
    std::vector<Tensor> backward_##name(const BackwardArgs& b) { \
        [[maybe_unused]] const Tensor& x = b.inputs[0];          \
        [[maybe_unused]] const Tensor& out = b.out;              \
        const Tensor& grad = b.grad;                             \
        return {dx};                                             \
    }
#define KILN_BINARY(name, math, dx_expr, dy_expr, saves, ints, ...)                               \
    std::vector<Tensor> backward_##name(const BackwardArgs& b) {                                  \
        const Attrs& a = b.attrs;                                                                 \
        DType dt = b.grad.dtype();                                                                \
        bool left = a.scalar_pos == ScalarPos::left, right = a.scalar_pos == ScalarPos::right;    \
        [[maybe_unused]] Tensor x = left ? scalar_tensor(a.scalar, dt) : b.inputs[0];             \
        [[maybe_unused]] Tensor y = right ? scalar_tensor(a.scalar, dt) : b.inputs[left ? 0 : 1]; \
        [[maybe_unused]] const Tensor& out = b.out;                                               \
        const Tensor& grad = b.grad;                                                              \
        if (left) return {b.needs(0) ? sum_to(dy_expr, b.input_shapes[0]) : Tensor()};            \
        if (right) return {b.needs(0) ? sum_to(dx_expr, b.input_shapes[0]) : Tensor()};           \
        return {b.needs(0) ? sum_to(dx_expr, b.input_shapes[0]) : Tensor(),                       \
                b.needs(1) ? sum_to(dy_expr, b.input_shapes[1]) : Tensor()};                      \
    }
#include "tensor/ops.def"

// --- where(cond, a, b) and cast
Tensor forward_where(std::span<const Tensor> in, const Attrs&) {
    Shape shape = broadcast_shapes(broadcast_shapes(in[0].shape(), in[1].shape(), "where"), in[2].shape(), "where");
    DType dt = promote(in[1].dtype(), in[2].dtype());
    Tensor cond = contiguous_as(in[0].expand(shape), DType::boolean);
    Tensor out = empty(shape, dt);
    visit_dtype(dt, [&](auto tag) {
        using T = decltype(tag);
        auto a = make_operand<T>(in[1], shape, dt);
        auto b = make_operand<T>(in[2], shape, dt);
        const bool* c = ptr<bool>(cond);
        T* o = ptr<T>(out);
        parallel_for(out.numel(), kParallelGrain, [&](int64_t s, int64_t e) {
            for (int64_t i = s; i < e; ++i) o[i] = c[i] ? a.at(i) : b.at(i);
        });
    });
    return out;
}
std::vector<Tensor> backward_where(const BackwardArgs& b) {
    const Tensor& cond = b.inputs[0];
    Tensor zero = zeros_like(b.grad);
    return {Tensor(),
            b.needs(1) ? sum_to(where(cond, b.grad, zero), b.input_shapes[1]) : Tensor(),
            b.needs(2) ? sum_to(where(cond, zero, b.grad), b.input_shapes[2]) : Tensor()};
}

Tensor forward_cast(std::span<const Tensor> in, const Attrs& a) {
    Tensor out = contiguous_as(in[0], a.dtype);
    return out.same(in[0]) ? materialize(in[0]) : out;  // a cast always returns new storage
}
std::vector<Tensor> backward_cast(const BackwardArgs& b) { return {b.grad.to(b.input_dtypes[0])}; }

}  // namespace kiln
