#include "gguf/describe.h"

#include <cctype>
#include <cstdarg>
#include <cstdio>
#include <map>
#include <optional>

#include <nlohmann/json.hpp>

#include "gguf/printable.h"

namespace zinc::gguf {

namespace {

using json = nlohmann::ordered_json;

constexpr uint64_t kJsonArrayLimit = 64;  // arrays with more values than this are summarized in JSON
constexpr uint64_t kJsonArrayHead = 8;    // elements shown of a summarized array
constexpr size_t kTextArrayElems = 6;     // elements shown of an array in the text table
constexpr size_t kTextStringBytes = 256;  // bytes shown of a key, a name or a path in the text report

const char* ftype_name(uint64_t v) {
    switch (v) {
    case 0: return "ALL_F32"; case 1: return "MOSTLY_F16"; case 2: return "MOSTLY_Q4_0";
    case 3: return "MOSTLY_Q4_1"; case 7: return "MOSTLY_Q8_0"; case 8: return "MOSTLY_Q5_0";
    case 9: return "MOSTLY_Q5_1"; case 10: return "MOSTLY_Q2_K"; case 11: return "MOSTLY_Q3_K_S";
    case 12: return "MOSTLY_Q3_K_M"; case 13: return "MOSTLY_Q3_K_L"; case 14: return "MOSTLY_Q4_K_S";
    case 15: return "MOSTLY_Q4_K_M"; case 16: return "MOSTLY_Q5_K_S"; case 17: return "MOSTLY_Q5_K_M";
    case 18: return "MOSTLY_Q6_K"; case 19: return "MOSTLY_IQ2_XXS"; case 20: return "MOSTLY_IQ2_XS";
    case 21: return "MOSTLY_Q2_K_S"; case 22: return "MOSTLY_IQ3_XS"; case 23: return "MOSTLY_IQ3_XXS";
    case 24: return "MOSTLY_IQ1_S"; case 25: return "MOSTLY_IQ4_NL"; case 26: return "MOSTLY_IQ3_S";
    case 27: return "MOSTLY_IQ3_M"; case 28: return "MOSTLY_IQ2_S"; case 29: return "MOSTLY_IQ2_M";
    case 30: return "MOSTLY_IQ4_XS"; case 31: return "MOSTLY_IQ1_M"; case 32: return "MOSTLY_BF16";
    case 36: return "MOSTLY_TQ1_0"; case 37: return "MOSTLY_TQ2_0"; case 38: return "MOSTLY_MXFP4_MOE";
    case 39: return "MOSTLY_NVFP4"; case 40: return "MOSTLY_Q1_0"; case 41: return "MOSTLY_Q2_0";
    default: return "unknown";
    }
}

// general.file_type as a llama_ftype id: any integer type holding a non-negative value. Floats, negative values
// and other types have none (converting them to an unsigned integer would be undefined for most of them).
std::optional<uint64_t> file_type_id(const Value& v) {
    if (!v.is_integer()) return std::nullopt;
    if (is_signed_type(v.type())) {
        const int64_t i = v.get_int<int64_t>();
        if (i < 0) return std::nullopt;
        return static_cast<uint64_t>(i);
    }
    return v.get_int<uint64_t>();
}

[[gnu::format(printf, 2, 3)]] void appendf(std::string& out, const char* fmt, ...) {
    va_list ap, again;
    va_start(ap, fmt);
    va_copy(again, ap);
    const int n = std::vsnprintf(nullptr, 0, fmt, ap);
    va_end(ap);
    if (n > 0) {
        const size_t at = out.size();
        out.resize(at + static_cast<size_t>(n) + 1);
        std::vsnprintf(out.data() + at, static_cast<size_t>(n) + 1, fmt, again);
        out.resize(at + static_cast<size_t>(n));
    }
    va_end(again);
}

std::string upper(std::string_view s) {
    std::string r(s);
    for (char& c : r) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    return r;
}

// Type name as gguf-py spells it (ggml's name upper-cased: Q4_K, IQ2_XXS, BF16).
std::string tensor_type_name(TensorType t) { return upper(type_name(t)); }

std::string group(uint64_t v) {
    std::string s = std::to_string(v), r;
    for (size_t i = 0; i < s.size(); ++i) {
        if (i && (s.size() - i) % 3 == 0) r += ',';
        r += s[i];
    }
    return r;
}

std::string human(double v, const char* const* units, double step) {
    int u = 0;
    while (v >= step && units[u + 1]) {
        v /= step;
        ++u;
    }
    char b[48];
    std::snprintf(b, sizeof b, u ? "%.2f %s" : "%.0f%s", v, units[u]);
    return b;
}
std::string human_bytes(uint64_t v) {
    static const char* const units[] = {" B", "KiB", "MiB", "GiB", "TiB", nullptr};
    return human(static_cast<double>(v), units, 1024);
}
std::string human_count(uint64_t v) {
    static const char* const units[] = {"", "K", "M", "B", "T", nullptr};
    return human(static_cast<double>(v), units, 1000);
}

std::string shape_str(const TensorInfo& t) {
    std::string s = "[";
    for (uint32_t d = 0; d < t.n_dims; ++d) s += (d ? ", " : "") + std::to_string(t.ne[d]);
    return s + "]";
}

std::string type_str(const Value& v) {
    if (!v.is_array()) return value_type_name(v.type());
    std::string s = "ARRAY[";
    s += value_type_name(v.element_type());
    if (v.element_type() == ValueType::ARRAY && v.size() > 0) {
        s += '[';
        s += value_type_name(v.at(0).element_type());
        s += ']';
    }
    s += ']';
    return s;
}

json scalar_json(const Value& v) {
    switch (v.type()) {
    case ValueType::UINT8: case ValueType::UINT16: case ValueType::UINT32: case ValueType::UINT64:
        return v.get_int<uint64_t>();
    case ValueType::INT8: case ValueType::INT16: case ValueType::INT32: case ValueType::INT64:
        return v.get_int<int64_t>();
    case ValueType::FLOAT32: return v.get_f32();
    case ValueType::FLOAT64: return v.get_f64();
    case ValueType::BOOL: return v.get_bool();
    case ValueType::STRING: return v.get_string();
    case ValueType::ARRAY: break;
    }
    return nullptr;
}

// Values in an array, every level counted (an array of arrays: its elements plus theirs); stops counting once
// past `limit`, so the cost is bounded however large the array.
uint64_t array_values(const Value& v, uint64_t limit) {
    uint64_t n = v.size();
    if (v.element_type() != ValueType::ARRAY) return n;
    for (const Value& e : v.get_array_array()) {
        if (n > limit) break;
        n += array_values(e, limit);
    }
    return n;
}

// Only called on values array_values() found small.
json value_json(const Value& v) {
    if (!v.is_array()) return scalar_json(v);
    json a = json::array();
    for (uint64_t i = 0; i < v.size(); ++i) a.push_back(value_json(v.at(i)));
    return a;
}

json kv_json(const KeyValue& kv) {
    json j;
    j["key"] = kv.key;
    j["type"] = value_type_name(kv.value.type());
    if (!kv.value.is_array()) {
        j["value"] = scalar_json(kv.value);
        return j;
    }
    const Value& v = kv.value;
    j["element_type"] = value_type_name(v.element_type());
    if (v.element_type() == ValueType::ARRAY && v.size() > 0)
        j["inner_element_type"] = value_type_name(v.at(0).element_type());
    j["length"] = v.size();
    if (array_values(v, kJsonArrayLimit) <= kJsonArrayLimit) {
        j["value"] = value_json(v);
    } else {
        j["truncated"] = true;
        // The first elements, unless they are arrays themselves (which could be of any size).
        if (v.element_type() != ValueType::ARRAY) {
            json head = json::array();
            for (uint64_t i = 0; i < kJsonArrayHead; ++i) head.push_back(scalar_json(v.at(i)));
            j["head"] = head;
        }
    }
    return j;
}

struct TypeTotal {
    uint64_t count = 0, elements = 0, bytes = 0;
};

struct Summary {
    const Value* architecture = nullptr;
    const Value* name = nullptr;
    const Value* file_type = nullptr;
    uint64_t params = 0, data_bytes = 0;
    std::map<uint32_t, TypeTotal> by_type;
};

Summary summarize(const Model& m) {
    Summary s;
    if (const Value* v = m.find("general.architecture"); v && v->type() == ValueType::STRING) s.architecture = v;
    if (const Value* v = m.find("general.name"); v && v->type() == ValueType::STRING) s.name = v;
    s.file_type = m.find("general.file_type");
    for (const ModelTensor& mt : m.tensors()) {
        s.params += mt.info->n_elements;
        s.data_bytes += mt.info->nbytes;
        TypeTotal& t = s.by_type[static_cast<uint32_t>(mt.info->type)];
        ++t.count;
        t.elements += mt.info->n_elements;
        t.bytes += mt.info->nbytes;
    }
    return s;
}

std::string file_type_str(const Value* v) {
    if (!v) return "-";
    if (const auto id = file_type_id(*v)) return std::to_string(*id) + " (" + ftype_name(*id) + ")";
    return v->to_string(kTextArrayElems) + " (unknown)";
}

std::string text_or_dash(const Value* v) {
    return v ? printable(v->get_string(), kTextStringBytes) : std::string("-");
}

json string_or_null(const Value* v) { return v ? json(v->get_string()) : json(nullptr); }

}  // namespace

std::string describe_json(const Model& m, std::string_view path) {
    const Summary s = summarize(m);
    const File& f = m.first();
    json j;
    j["file"] = path;
    j["version"] = f.version();
    j["file_size"] = m.total_size();
    j["alignment"] = f.alignment();
    j["data_offset"] = f.data_offset();
    j["architecture"] = string_or_null(s.architecture);
    j["name"] = string_or_null(s.name);
    if (s.file_type) {
        const auto id = file_type_id(*s.file_type);
        j["file_type"] = {{"id", scalar_json(*s.file_type)}, {"name", id ? ftype_name(*id) : "unknown"}};
    } else {
        j["file_type"] = nullptr;
    }
    j["tensor_count"] = m.tensors().size();
    j["parameter_count"] = s.params;
    j["tensor_bytes"] = s.data_bytes;
    if (m.is_split()) {
        json files = json::array();
        for (const File& sf : m.files())
            files.push_back({{"path", sf.path()}, {"file_size", sf.file_size()}, {"tensor_count", sf.tensors().size()}});
        j["split"] = {{"count", m.n_splits()}, {"files", files}};
    } else {
        j["split"] = nullptr;
    }
    json md = json::array();
    for (const KeyValue& kv : m.metadata()) md.push_back(kv_json(kv));
    j["metadata"] = md;
    json ts = json::array();
    for (const ModelTensor& mt : m.tensors()) {
        const TensorInfo& t = *mt.info;
        json tj;
        tj["name"] = t.name;
        tj["type"] = tensor_type_name(t.type);
        tj["shape"] = json(std::vector<int64_t>(t.shape().begin(), t.shape().end()));
        tj["n_elements"] = t.n_elements;
        tj["bytes"] = t.nbytes;
        tj["offset"] = t.offset;
        tj["file_offset"] = t.file_offset;
        if (m.is_split()) tj["shard"] = mt.shard;
        ts.push_back(tj);
    }
    j["tensors"] = ts;
    json tot = json::array();
    for (const auto& [id, t] : s.by_type)
        tot.push_back({{"type", tensor_type_name(static_cast<TensorType>(id))},
                       {"count", t.count},
                       {"elements", t.elements},
                       {"bytes", t.bytes}});
    j["totals_by_type"] = tot;
    return j.dump(2, ' ', /*ensure_ascii=*/true, json::error_handler_t::replace) + "\n";
}

std::string describe_text(const Model& m, std::string_view path) {
    const Summary s = summarize(m);
    const File& f = m.first();
    std::string o;
    appendf(o, "file:          %s\n", printable(path, kTextStringBytes).c_str());
    appendf(o, "format:        GGUF v%u, little-endian, alignment %u, data section at byte %s\n", f.version(),
            f.alignment(), group(f.data_offset()).c_str());
    appendf(o, "architecture:  %s\n", text_or_dash(s.architecture).c_str());
    appendf(o, "name:          %s\n", text_or_dash(s.name).c_str());
    appendf(o, "file type:     %s\n", file_type_str(s.file_type).c_str());
    appendf(o, "tensors:       %zu\n", m.tensors().size());
    appendf(o, "parameters:    %s (%s)\n", group(s.params).c_str(), human_count(s.params).c_str());
    appendf(o, "file size:     %s bytes (%s)\n", group(m.total_size()).c_str(), human_bytes(m.total_size()).c_str());
    if (m.is_split()) {
        appendf(o, "split:         %u file(s)\n", m.n_splits());
        for (uint32_t i = 0; i < m.n_splits(); ++i)
            appendf(o, "  [%u] %s: %zu tensors, %s bytes\n", i, printable(m.files()[i].path(), kTextStringBytes).c_str(),
                    m.files()[i].tensors().size(), group(m.files()[i].file_size()).c_str());
    } else {
        appendf(o, "split:         no\n");
    }

    std::vector<std::string> keys;
    keys.reserve(m.metadata().size());
    size_t kw = 3;
    for (const KeyValue& kv : m.metadata()) {
        keys.push_back(printable(kv.key, kTextStringBytes));
        kw = std::max(kw, std::min<size_t>(keys.back().size(), 48));
    }
    appendf(o, "\nmetadata (%zu keys):\n", m.metadata().size());
    appendf(o, "  %4s  %-*s  %-18s  %s\n", "#", static_cast<int>(kw), "key", "type", "value");
    for (size_t i = 0; i < m.metadata().size(); ++i) {
        const Value& v = m.metadata()[i].value;
        const std::string val = v.is_array() ? "len " + std::to_string(v.size()) + " " + v.to_string(kTextArrayElems)
                                             : v.to_string();
        appendf(o, "  %4zu  %-*s  %-18s  %s\n", i, static_cast<int>(kw), keys[i].c_str(), type_str(v).c_str(),
                val.c_str());
    }

    std::vector<std::string> names;
    names.reserve(m.tensors().size());
    size_t nw = 4;
    for (const ModelTensor& mt : m.tensors()) {
        names.push_back(printable(mt.info->name));
        nw = std::max(nw, names.back().size());
    }
    appendf(o, "\ntensors (%zu):\n", m.tensors().size());
    appendf(o, "  %4s  %-*s  %-8s  %-24s  %14s  %14s%s\n", "#", static_cast<int>(nw), "name", "type", "shape", "bytes",
            "offset", m.is_split() ? "  shard" : "");
    for (size_t i = 0; i < m.tensors().size(); ++i) {
        const ModelTensor& mt = m.tensors()[i];
        const TensorInfo& t = *mt.info;
        appendf(o, "  %4zu  %-*s  %-8s  %-24s  %14s  %14s", i, static_cast<int>(nw), names[i].c_str(),
                tensor_type_name(t.type).c_str(), shape_str(t).c_str(), group(t.nbytes).c_str(),
                group(t.offset).c_str());
        if (m.is_split()) appendf(o, "  %5u", mt.shard);
        o += '\n';
    }

    appendf(o, "\ntotals by type:\n");
    appendf(o, "  %-8s  %6s  %16s  %16s\n", "type", "count", "elements", "bytes");
    for (const auto& [id, t] : s.by_type)
        appendf(o, "  %-8s  %6s  %16s  %16s\n", tensor_type_name(static_cast<TensorType>(id)).c_str(),
                group(t.count).c_str(), group(t.elements).c_str(), group(t.bytes).c_str());
    appendf(o, "  %-8s  %6s  %16s  %16s\n", "total", group(m.tensors().size()).c_str(), group(s.params).c_str(),
            group(s.data_bytes).c_str());
    return o;
}

}  // namespace zinc::gguf
