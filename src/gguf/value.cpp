#include "gguf/value.h"

#include <cmath>
#include <cstdio>

#include "gguf/printable.h"

namespace zinc::gguf {

namespace {

constexpr size_t kMaxKeyShown = 256;  // bytes of a key quoted in an error message

size_t scalar_size(ValueType t) {
    switch (t) {
    case ValueType::UINT8: case ValueType::INT8: case ValueType::BOOL: return 1;
    case ValueType::UINT16: case ValueType::INT16: return 2;
    case ValueType::UINT32: case ValueType::INT32: case ValueType::FLOAT32: return 4;
    case ValueType::UINT64: case ValueType::INT64: case ValueType::FLOAT64: return 8;
    default: return 0;
    }
}

template <class T>
T load(const uint8_t* p) {
    T v;
    std::memcpy(&v, p, sizeof(T));
    return v;
}

template <class T>
void put(std::string& out, T v) {
    char b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    out.append(b, sizeof(T));
}

std::string fmt_double(double d) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.9g", d);
    return buf;
}

// A string value for display: its first max_len bytes, made printable, in quotes.
std::string quote(const std::string& s, size_t max_len = 64) {
    std::string r = "\"";
    for (char c : printable(s, max_len)) {
        if (c == '"') r += '\\';
        r += c;
    }
    return r + "\"";
}

}  // namespace

std::string value_type_name(ValueType t) {
    static const char* const names[kValueTypeCount] = {"UINT8",   "INT8",  "UINT16", "INT16", "UINT32",
                                                       "INT32",   "FLOAT32", "BOOL", "STRING", "ARRAY",
                                                       "UINT64",  "INT64", "FLOAT64"};
    const auto i = static_cast<uint32_t>(t);
    if (i < kValueTypeCount) return names[i];
    return "INVALID(" + std::to_string(i) + ")";
}

size_t value_type_min_size(ValueType t) {
    if (t == ValueType::STRING) return 8;
    if (t == ValueType::ARRAY) return 12;
    return scalar_size(t);
}

Value Value::of(std::string s) {
    Value r(ValueType::STRING);
    r.s_ = std::move(s);
    return r;
}

Value Value::array(std::vector<std::string> elems) {
    Value r(ValueType::ARRAY);
    auto a = std::make_shared<ArrayData>();
    a->elem = ValueType::STRING;
    a->count = elems.size();
    a->strings = std::move(elems);
    r.arr_ = std::move(a);
    return r;
}

Value Value::array_of_arrays(std::vector<Value> elems) {
    for (const Value& e : elems)
        if (e.type() != ValueType::ARRAY) throw Error("array_of_arrays: element is " + value_type_name(e.type()));
    Value r(ValueType::ARRAY);
    auto a = std::make_shared<ArrayData>();
    a->elem = ValueType::ARRAY;
    a->count = elems.size();
    a->arrays = std::move(elems);
    r.arr_ = std::move(a);
    return r;
}

Value Value::array_raw(ValueType elem, uint64_t count, std::vector<uint8_t> raw) {
    const size_t es = scalar_size(elem);
    if (es == 0) throw Error("array_raw: element type " + value_type_name(elem) + " is not a numeric type");
    if (raw.size() / es != count || raw.size() % es != 0)
        throw Error("array_raw: " + std::to_string(raw.size()) + " bytes for " + std::to_string(count) + " elements");
    if (elem == ValueType::BOOL)
        for (auto& b : raw) b = b ? 1 : 0;
    Value r(ValueType::ARRAY);
    auto a = std::make_shared<ArrayData>();
    a->elem = elem;
    a->count = count;
    a->raw = std::move(raw);
    r.arr_ = std::move(a);
    return r;
}

std::string Value::who() const {
    return key_.empty() ? std::string("metadata value") : "key '" + printable(key_, kMaxKeyShown) + "'";
}

size_t Value::array_overhead() {
    // make_shared puts the control block (two counts and a vtable pointer) next to the ArrayData.
    return sizeof(ArrayData) + 2 * sizeof(long) + sizeof(void*);
}

void Value::type_error(const std::string& expected) const {
    throw Error(who() + " has wrong type: expected " + expected + ", got " + value_type_name(type_));
}

void Value::array_type_error(const std::string& expected) const {
    throw Error(who() + " has wrong type: expected ARRAY of " + expected + ", got ARRAY of " +
                value_type_name(arr_->elem));
}

void Value::range_error(const std::string& what) const {
    throw Error(who() + ": value " + what + " does not fit the requested integer type");
}

uint64_t Value::scalar_u(ValueType t) const {
    if (type_ != t) type_error(value_type_name(t));
    return u_;
}

int64_t Value::scalar_i(ValueType t) const {
    if (type_ != t) type_error(value_type_name(t));
    return i_;
}

float Value::get_f32() const {
    if (type_ != ValueType::FLOAT32) type_error("FLOAT32");
    return static_cast<float>(d_);
}

double Value::get_f64() const {
    if (type_ != ValueType::FLOAT64) type_error("FLOAT64");
    return d_;
}

bool Value::get_bool() const {
    if (type_ != ValueType::BOOL) type_error("BOOL");
    return u_ != 0;
}

const std::string& Value::get_string() const {
    if (type_ != ValueType::STRING) type_error("STRING");
    return s_;
}

double Value::get_number() const {
    if (type_ == ValueType::FLOAT32 || type_ == ValueType::FLOAT64) return d_;
    if (is_integer()) return is_signed_type(type_) ? static_cast<double>(i_) : static_cast<double>(u_);
    type_error("a number");
}

const Value::ArrayData& Value::arr() const {
    if (type_ != ValueType::ARRAY || !arr_) type_error("ARRAY");
    return *arr_;
}

ValueType Value::element_type() const { return arr().elem; }
uint64_t Value::size() const { return arr().count; }

uint64_t Value::raw_u(uint64_t i) const {
    const ArrayData& a = arr();
    const uint8_t* p = a.raw.data() + i * scalar_size(a.elem);
    switch (a.elem) {
    case ValueType::UINT8: case ValueType::BOOL: return load<uint8_t>(p);
    case ValueType::UINT16: return load<uint16_t>(p);
    case ValueType::UINT32: return load<uint32_t>(p);
    case ValueType::UINT64: return load<uint64_t>(p);
    default: return 0;
    }
}

int64_t Value::raw_i(uint64_t i) const {
    const ArrayData& a = arr();
    const uint8_t* p = a.raw.data() + i * scalar_size(a.elem);
    switch (a.elem) {
    case ValueType::INT8: return load<int8_t>(p);
    case ValueType::INT16: return load<int16_t>(p);
    case ValueType::INT32: return load<int32_t>(p);
    case ValueType::INT64: return load<int64_t>(p);
    default: return 0;
    }
}

Value Value::at(uint64_t i) const {
    const ArrayData& a = arr();
    if (i >= a.count)
        throw Error(who() + ": index " + std::to_string(i) + " out of range (size " + std::to_string(a.count) + ")");
    Value r(a.elem);
    const uint8_t* p = a.raw.data() + i * scalar_size(a.elem);
    switch (a.elem) {
    case ValueType::UINT8: case ValueType::UINT16: case ValueType::UINT32: case ValueType::UINT64:
    case ValueType::BOOL:
        r.u_ = raw_u(i);
        break;
    case ValueType::INT8: case ValueType::INT16: case ValueType::INT32: case ValueType::INT64:
        r.i_ = raw_i(i);
        break;
    case ValueType::FLOAT32: r.d_ = load<float>(p); break;
    case ValueType::FLOAT64: r.d_ = load<double>(p); break;
    case ValueType::STRING: r.s_ = a.strings[i]; break;
    case ValueType::ARRAY: r = a.arrays[i]; break;
    }
    r.key_ = key_ + "[" + std::to_string(i) + "]";
    return r;
}

const std::vector<std::string>& Value::get_string_array() const {
    const ArrayData& a = arr();
    if (a.elem != ValueType::STRING) array_type_error("STRING");
    return a.strings;
}

const std::vector<Value>& Value::get_array_array() const {
    const ArrayData& a = arr();
    if (a.elem != ValueType::ARRAY) array_type_error("ARRAY");
    return a.arrays;
}

std::vector<float> Value::get_f32_array() const {
    const ArrayData& a = arr();
    if (a.elem != ValueType::FLOAT32) array_type_error("FLOAT32");
    std::vector<float> out(a.count);
    if (a.count) std::memcpy(out.data(), a.raw.data(), a.count * sizeof(float));
    return out;
}

std::vector<bool> Value::get_bool_array() const {
    const ArrayData& a = arr();
    if (a.elem != ValueType::BOOL) array_type_error("BOOL");
    std::vector<bool> out(a.count);
    for (uint64_t i = 0; i < a.count; ++i) out[i] = a.raw[i] != 0;
    return out;
}

std::span<const uint8_t> Value::raw_bytes() const {
    const ArrayData& a = arr();
    if (scalar_size(a.elem) == 0) array_type_error("a numeric type");
    return a.raw;
}

std::string Value::to_string(size_t max_elems) const {
    std::string r;
    size_t budget = max_elems;
    render(r, budget);
    return r;
}

void Value::render(std::string& out, size_t& budget) const {
    switch (type_) {
    case ValueType::UINT8: case ValueType::UINT16: case ValueType::UINT32: case ValueType::UINT64:
        out += std::to_string(u_);
        return;
    case ValueType::INT8: case ValueType::INT16: case ValueType::INT32: case ValueType::INT64:
        out += std::to_string(i_);
        return;
    case ValueType::FLOAT32: case ValueType::FLOAT64: out += fmt_double(d_); return;
    case ValueType::BOOL: out += u_ ? "true" : "false"; return;
    case ValueType::STRING: out += quote(s_); return;
    case ValueType::ARRAY: break;
    }
    // The budget counts the elements shown at every level together, so that nested arrays stay short too.
    const ArrayData& a = arr();
    out += '[';
    for (uint64_t i = 0; i < a.count; ++i) {
        if (budget == 0) {
            out += i ? ", ..." : "...";
            break;
        }
        if (i) out += ", ";
        --budget;
        if (a.elem == ValueType::ARRAY)
            a.arrays[i].render(out, budget);
        else if (a.elem == ValueType::STRING)
            out += quote(a.strings[i]);  // not at(i): that would copy a string of up to 1 GiB
        else
            out += at(i).to_string();
    }
    out += ']';
}

void Value::encode(std::string& out) const {
    switch (type_) {
    case ValueType::UINT8: put<uint8_t>(out, static_cast<uint8_t>(u_)); break;
    case ValueType::INT8: put<int8_t>(out, static_cast<int8_t>(i_)); break;
    case ValueType::UINT16: put<uint16_t>(out, static_cast<uint16_t>(u_)); break;
    case ValueType::INT16: put<int16_t>(out, static_cast<int16_t>(i_)); break;
    case ValueType::UINT32: put<uint32_t>(out, static_cast<uint32_t>(u_)); break;
    case ValueType::INT32: put<int32_t>(out, static_cast<int32_t>(i_)); break;
    case ValueType::FLOAT32: put<float>(out, static_cast<float>(d_)); break;
    case ValueType::BOOL: put<uint8_t>(out, u_ ? 1 : 0); break;
    case ValueType::STRING:
        put<uint64_t>(out, s_.size());
        out += s_;
        break;
    case ValueType::UINT64: put<uint64_t>(out, u_); break;
    case ValueType::INT64: put<int64_t>(out, i_); break;
    case ValueType::FLOAT64: put<double>(out, d_); break;
    case ValueType::ARRAY: {
        const ArrayData& a = arr();
        put<uint32_t>(out, static_cast<uint32_t>(a.elem));
        put<uint64_t>(out, a.count);
        if (a.elem == ValueType::STRING) {
            for (const auto& s : a.strings) {
                put<uint64_t>(out, s.size());
                out += s;
            }
        } else if (a.elem == ValueType::ARRAY) {
            for (const auto& v : a.arrays) v.encode(out);
        } else {
            out.append(reinterpret_cast<const char*>(a.raw.data()), a.raw.size());
        }
        break;
    }
    }
}

bool operator==(const Value& a, const Value& b) {
    if (a.type_ != b.type_) return false;
    switch (a.type_) {
    case ValueType::STRING: return a.s_ == b.s_;
    case ValueType::FLOAT32: case ValueType::FLOAT64:
        return a.d_ == b.d_ || (std::isnan(a.d_) && std::isnan(b.d_));
    case ValueType::ARRAY: {
        const auto& x = a.arr();
        const auto& y = b.arr();
        return x.elem == y.elem && x.count == y.count && x.raw == y.raw && x.strings == y.strings &&
               x.arrays == y.arrays;
    }
    default: return a.u_ == b.u_ && a.i_ == b.i_;
    }
}

}  // namespace zinc::gguf
