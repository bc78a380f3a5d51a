// Element types and devices: the two tags every tensor carries.
#pragma once
#include <cstdint>
#include <limits>
#include <ostream>
#include <string>
#include <type_traits>
#include <vector>

namespace kiln {

enum class DType : uint8_t { float32, float64, int64, boolean };

inline constexpr DType float32 = DType::float32;
inline constexpr DType float64 = DType::float64;
inline constexpr DType int64 = DType::int64;
inline constexpr DType boolean = DType::boolean;

inline size_t dtype_bytes(DType t) {
    switch (t) {
        case DType::float32: return 4;
        case DType::float64: return 8;
        case DType::int64: return 8;
        case DType::boolean: return 1;
    }
    return 0;
}
inline const char* dtype_name(DType t) {
    switch (t) {
        case DType::float32: return "float32";
        case DType::float64: return "float64";
        case DType::int64: return "int64";
        case DType::boolean: return "bool";
    }
    return "?";
}
inline bool is_floating(DType t) { return t == DType::float32 || t == DType::float64; }
// PyTorch-style promotion between two tensors: bool < int64 < float32 < float64.
inline DType promote(DType a, DType b) { return static_cast<uint8_t>(a) == static_cast<uint8_t>(b) ? a : (a == DType::float64 || b == DType::float64) ? DType::float64 : (a == DType::float32 || b == DType::float32) ? DType::float32 : DType::int64; }
inline std::ostream& operator<<(std::ostream& os, DType t) { return os << dtype_name(t); }

// Converts one element between kiln's C++ types without undefined behaviour. A float that
// int64 cannot hold (NaN, +-inf, |v| >= 2^63) becomes INT64_MIN, which is what x86 (and so
// PyTorch's and NumPy's CPU casts) give; a plain static_cast would be UB there.
template <class To, class From>
inline To cast_value(From v) {
    if constexpr (std::is_same_v<To, int64_t> && std::is_floating_point_v<From>) {
        constexpr From limit = From(9223372036854775808.0);  // 2^63: exact in float and double
        return v >= -limit && v < limit ? static_cast<int64_t>(v) : std::numeric_limits<int64_t>::min();
    } else {
        return static_cast<To>(v);
    }
}

template <class T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<float>() { return DType::float32; }
template <> constexpr DType dtype_of<double>() { return DType::float64; }
template <> constexpr DType dtype_of<int64_t>() { return DType::int64; }
template <> constexpr DType dtype_of<bool>() { return DType::boolean; }

enum class DeviceType : uint8_t { cpu, cuda };
struct Device {
    DeviceType type = DeviceType::cpu;
    int index = 0;
    bool operator==(const Device&) const = default;
};
inline constexpr Device cpu{DeviceType::cpu, 0};
inline std::ostream& operator<<(std::ostream& os, Device d) {
    return d.type == DeviceType::cpu ? os << "cpu" : os << "cuda:" << d.index;
}

using Shape = std::vector<int64_t>;  // sizes, in elements
inline std::ostream& operator<<(std::ostream& os, const Shape& s) {
    os << "[";
    for (size_t i = 0; i < s.size(); ++i) os << (i ? ", " : "") << s[i];
    return os << "]";
}
// Product of the sizes. Shapes of real tensors passed checked_numel (tensor/tensor.h) and
// never overflow; for an unchecked shape the product saturates at INT64_MAX instead of UB.
inline int64_t shape_numel(const Shape& s) {
    int64_t n = 1;
    for (auto d : s)
        if (__builtin_mul_overflow(n, d, &n)) return std::numeric_limits<int64_t>::max();
    return n;
}

}  // namespace kiln
