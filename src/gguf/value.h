// GGUF metadata values: the 13 value types, arrays (also nested), typed getters.
#pragma once

#include <bit>
#include <concepts>
#include <cstring>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gguf/error.h"

namespace zinc::gguf {

static_assert(std::endian::native == std::endian::little, "zinc supports little-endian hosts only");

// On-disk value type tags (docs/formats.md §1.5). Note the 64-bit types come after STRING and ARRAY.
enum class ValueType : uint32_t {
    UINT8 = 0,
    INT8 = 1,
    UINT16 = 2,
    INT16 = 3,
    UINT32 = 4,
    INT32 = 5,
    FLOAT32 = 6,
    BOOL = 7,
    STRING = 8,
    ARRAY = 9,
    UINT64 = 10,
    INT64 = 11,
    FLOAT64 = 12,
};
inline constexpr uint32_t kValueTypeCount = 13;

// "UINT32", "STRING", ...; "INVALID(<n>)" for tags >= 13.
std::string value_type_name(ValueType t);
// Encoded size of one scalar of type t (strings: 8, the length field only; arrays: 12, the header only).
size_t value_type_min_size(ValueType t);
inline bool is_integer_type(ValueType t) {
    switch (t) {
    case ValueType::UINT8: case ValueType::INT8: case ValueType::UINT16: case ValueType::INT16:
    case ValueType::UINT32: case ValueType::INT32: case ValueType::UINT64: case ValueType::INT64:
        return true;
    default:
        return false;
    }
}
inline bool is_signed_type(ValueType t) {
    return t == ValueType::INT8 || t == ValueType::INT16 || t == ValueType::INT32 || t == ValueType::INT64;
}

// The C++ type that stores one scalar of each numeric value type.
template <class T> struct value_type_of;
template <> struct value_type_of<uint8_t> { static constexpr ValueType value = ValueType::UINT8; };
template <> struct value_type_of<int8_t> { static constexpr ValueType value = ValueType::INT8; };
template <> struct value_type_of<uint16_t> { static constexpr ValueType value = ValueType::UINT16; };
template <> struct value_type_of<int16_t> { static constexpr ValueType value = ValueType::INT16; };
template <> struct value_type_of<uint32_t> { static constexpr ValueType value = ValueType::UINT32; };
template <> struct value_type_of<int32_t> { static constexpr ValueType value = ValueType::INT32; };
template <> struct value_type_of<float> { static constexpr ValueType value = ValueType::FLOAT32; };
template <> struct value_type_of<bool> { static constexpr ValueType value = ValueType::BOOL; };
template <> struct value_type_of<uint64_t> { static constexpr ValueType value = ValueType::UINT64; };
template <> struct value_type_of<int64_t> { static constexpr ValueType value = ValueType::INT64; };
template <> struct value_type_of<double> { static constexpr ValueType value = ValueType::FLOAT64; };

template <class T>
concept NumericValue = requires { value_type_of<T>::value; };

// One metadata value. Scalars are stored by value; arrays keep numeric elements as their packed little-endian
// bytes (so a huge array costs what it costs on disk), strings as std::string, nested arrays as Values.
// A value read from a file remembers its key so that getter errors can name it.
class Value {
public:
    Value() = default;

    // --- construction (used by the reader and the writer) ---
    template <NumericValue T>
    static Value of(T v) {
        Value r(value_type_of<T>::value);
        r.store_scalar(v);
        return r;
    }
    static Value of(std::string s);
    static Value of(const char* s) { return of(std::string(s)); }
    static Value of(std::string_view s) { return of(std::string(s)); }
    // Array of numeric elements (also bool).
    template <NumericValue T>
    static Value array(std::span<const T> elems) {
        Value r(ValueType::ARRAY);
        auto a = std::make_shared<ArrayData>();
        a->elem = value_type_of<T>::value;
        a->count = elems.size();
        if constexpr (std::same_as<T, bool>) {
            a->raw.resize(elems.size());
            for (size_t i = 0; i < elems.size(); ++i) a->raw[i] = elems[i] ? 1 : 0;
        } else {
            a->raw.resize(elems.size() * sizeof(T));
            if (!elems.empty()) std::memcpy(a->raw.data(), elems.data(), a->raw.size());
        }
        r.arr_ = std::move(a);
        return r;
    }
    template <NumericValue T>
    static Value array(const std::vector<T>& elems) {
        if constexpr (std::same_as<T, bool>) {
            std::vector<uint8_t> tmp(elems.begin(), elems.end());
            return array_raw(ValueType::BOOL, elems.size(), std::move(tmp));
        } else {
            return array(std::span<const T>(elems));
        }
    }
    static Value array(std::vector<std::string> elems);
    // Array whose elements are arrays (each with its own element type).
    static Value array_of_arrays(std::vector<Value> elems);
    // Array of numeric elements from their packed little-endian bytes (raw.size() == count * element size).
    static Value array_raw(ValueType elem, uint64_t count, std::vector<uint8_t> raw);

    // --- inspection ---
    ValueType type() const { return type_; }
    const std::string& key() const { return key_; }
    void set_key(std::string k) { key_ = std::move(k); }
    bool is_array() const { return type_ == ValueType::ARRAY; }
    bool is_integer() const { return is_integer_type(type_); }

    // --- scalar getters: exact type, else Error naming the key, the expected and the actual type ---
    uint8_t get_u8() const { return static_cast<uint8_t>(scalar_u(ValueType::UINT8)); }
    int8_t get_i8() const { return static_cast<int8_t>(scalar_i(ValueType::INT8)); }
    uint16_t get_u16() const { return static_cast<uint16_t>(scalar_u(ValueType::UINT16)); }
    int16_t get_i16() const { return static_cast<int16_t>(scalar_i(ValueType::INT16)); }
    uint32_t get_u32() const { return static_cast<uint32_t>(scalar_u(ValueType::UINT32)); }
    int32_t get_i32() const { return static_cast<int32_t>(scalar_i(ValueType::INT32)); }
    uint64_t get_u64() const { return scalar_u(ValueType::UINT64); }
    int64_t get_i64() const { return scalar_i(ValueType::INT64); }
    float get_f32() const;
    double get_f64() const;
    bool get_bool() const;
    const std::string& get_string() const;

    // Any integer type whose value fits in T (else Error naming the key and the value).
    template <std::integral T>
    T get_int() const {
        if (!is_integer()) type_error("an integer");
        if (is_signed_type(type_)) {
            if (!std::in_range<T>(i_)) range_error(std::to_string(i_));
            return static_cast<T>(i_);
        }
        if (!std::in_range<T>(u_)) range_error(std::to_string(u_));
        return static_cast<T>(u_);
    }
    // FLOAT32 or FLOAT64 (also any integer type), as double.
    double get_number() const;

    // --- arrays ---
    ValueType element_type() const;  // throws unless ARRAY
    uint64_t size() const;           // number of elements; throws unless ARRAY
    Value at(uint64_t i) const;      // element i as a Value (key "key[i]")
    const std::vector<std::string>& get_string_array() const;
    const std::vector<Value>& get_array_array() const;  // elements of a nested array
    std::vector<float> get_f32_array() const;
    std::vector<bool> get_bool_array() const;
    // Integer array of any integer element type whose every element fits in T.
    template <std::integral T>
    std::vector<T> get_int_array() const {
        const uint64_t n = size();
        const ValueType et = element_type();
        if (!is_integer_type(et)) array_type_error("integers");
        std::vector<T> out;
        out.reserve(n);
        for (uint64_t i = 0; i < n; ++i) {
            if (is_signed_type(et)) {
                const int64_t v = raw_i(i);
                if (!std::in_range<T>(v)) range_error(std::to_string(v) + " at index " + std::to_string(i));
                out.push_back(static_cast<T>(v));
            } else {
                const uint64_t v = raw_u(i);
                if (!std::in_range<T>(v)) range_error(std::to_string(v) + " at index " + std::to_string(i));
                out.push_back(static_cast<T>(v));
            }
        }
        return out;
    }
    // Packed little-endian element bytes of a numeric/bool array.
    std::span<const uint8_t> raw_bytes() const;

    // Short human-readable rendering, safe to print: strings are cut after 64 bytes and made printable
    // (gguf/printable.h); arrays show at most max_elems elements in all, nested levels included.
    std::string to_string(size_t max_elems = 8) const;

    // Heap bytes an array value holds besides its elements (for the reader's memory budget).
    static size_t array_overhead();

    // Appends the on-disk encoding of the value (without key or type tag) to out.
    void encode(std::string& out) const;

    friend bool operator==(const Value& a, const Value& b);

private:
    struct ArrayData {
        ValueType elem = ValueType::UINT8;
        uint64_t count = 0;
        std::vector<uint8_t> raw;              // numeric and bool elements
        std::vector<std::string> strings;      // STRING elements
        std::vector<Value> arrays;             // ARRAY elements
    };

    explicit Value(ValueType t) : type_(t) {}
    template <class T>
    void store_scalar(T v) {
        if constexpr (std::same_as<T, float> || std::same_as<T, double>) d_ = v;
        else if constexpr (std::same_as<T, bool>) u_ = v ? 1 : 0;
        else if constexpr (std::is_signed_v<T>) i_ = v;
        else u_ = v;
    }
    void render(std::string& out, size_t& budget) const;
    uint64_t scalar_u(ValueType t) const;
    int64_t scalar_i(ValueType t) const;
    uint64_t raw_u(uint64_t i) const;
    int64_t raw_i(uint64_t i) const;
    const ArrayData& arr() const;
    [[noreturn]] void type_error(const std::string& expected) const;
    [[noreturn]] void array_type_error(const std::string& expected) const;
    [[noreturn]] void range_error(const std::string& what) const;
    std::string who() const;

    ValueType type_ = ValueType::UINT8;
    std::string key_;
    uint64_t u_ = 0;
    int64_t i_ = 0;
    double d_ = 0;
    std::string s_;
    std::shared_ptr<const ArrayData> arr_;

};

}  // namespace zinc::gguf
