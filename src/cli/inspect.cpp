// `zinc inspect FILE.gguf [--json]`: what a GGUF file (or split set) contains.
#include <cctype>
#include <cstdio>
#include <map>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "gguf/split.h"

namespace zinc::cli {

namespace {

using namespace zinc::gguf;
using json = nlohmann::ordered_json;

constexpr uint64_t kJsonArrayLimit = 64;  // arrays longer than this are summarized in --json
constexpr size_t kTextArrayElems = 6;     // elements shown for an array in the text table

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
    std::string s = "ARRAY[" + value_type_name(v.element_type());
    if (v.element_type() == ValueType::ARRAY && v.size() > 0) s += "[" + value_type_name(v.at(0).element_type()) + "]";
    return s + "]";
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
    if (v.size() <= kJsonArrayLimit) {
        j["value"] = value_json(v);
    } else {
        j["truncated"] = true;
        json head = json::array();
        for (uint64_t i = 0; i < 8; ++i) head.push_back(value_json(v.at(i)));
        j["head"] = head;
    }
    return j;
}

struct TypeTotal {
    uint64_t count = 0, elements = 0, bytes = 0;
};

struct Summary {
    std::string architecture, name;
    const Value* file_type = nullptr;
    uint64_t params = 0, data_bytes = 0;
    std::map<uint32_t, TypeTotal> by_type;
};

Summary summarize(const Model& m) {
    Summary s;
    if (const Value* v = m.find("general.architecture"); v && v->type() == ValueType::STRING) s.architecture = v->get_string();
    if (const Value* v = m.find("general.name"); v && v->type() == ValueType::STRING) s.name = v->get_string();
    if (const Value* v = m.find("general.file_type"); v && v->is_integer()) s.file_type = v;
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
    if (v->is_integer() && is_signed_type(v->type()) && v->get_int<int64_t>() < 0) return v->to_string();
    const uint64_t n = v->get_number() >= 0 ? static_cast<uint64_t>(v->get_number()) : 0;
    return std::to_string(n) + " (" + ftype_name(n) + ")";
}

void print_json(const std::string& path, const Model& m) {
    const Summary s = summarize(m);
    const File& f = m.first();
    json j;
    j["file"] = path;
    j["version"] = f.version();
    j["file_size"] = m.total_size();
    j["alignment"] = f.alignment();
    j["data_offset"] = f.data_offset();
    j["architecture"] = s.architecture.empty() ? json(nullptr) : json(s.architecture);
    j["name"] = s.name.empty() ? json(nullptr) : json(s.name);
    if (s.file_type) {
        j["file_type"] = {{"id", scalar_json(*s.file_type)},
                          {"name", ftype_name(static_cast<uint64_t>(std::max(0.0, s.file_type->get_number())))}};
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
    const std::string out = j.dump(2, ' ', false, json::error_handler_t::replace);
    std::fwrite(out.data(), 1, out.size(), stdout);
    std::fputc('\n', stdout);
}

void print_text(const std::string& path, const Model& m) {
    const Summary s = summarize(m);
    const File& f = m.first();
    std::printf("file:          %s\n", path.c_str());
    std::printf("format:        GGUF v%u, little-endian, alignment %u, data section at byte %s\n", f.version(),
                f.alignment(), group(f.data_offset()).c_str());
    std::printf("architecture:  %s\n", s.architecture.empty() ? "-" : s.architecture.c_str());
    std::printf("name:          %s\n", s.name.empty() ? "-" : s.name.c_str());
    std::printf("file type:     %s\n", file_type_str(s.file_type).c_str());
    std::printf("tensors:       %zu\n", m.tensors().size());
    std::printf("parameters:    %s (%s)\n", group(s.params).c_str(), human_count(s.params).c_str());
    std::printf("file size:     %s bytes (%s)\n", group(m.total_size()).c_str(), human_bytes(m.total_size()).c_str());
    if (m.is_split()) {
        std::printf("split:         %u file(s)\n", m.n_splits());
        for (uint32_t i = 0; i < m.n_splits(); ++i)
            std::printf("  [%u] %s: %zu tensors, %s bytes\n", i, m.files()[i].path().c_str(),
                        m.files()[i].tensors().size(), group(m.files()[i].file_size()).c_str());
    } else {
        std::printf("split:         no\n");
    }

    size_t kw = 3;
    for (const KeyValue& kv : m.metadata()) kw = std::max(kw, std::min<size_t>(kv.key.size(), 48));
    std::printf("\nmetadata (%zu keys):\n", m.metadata().size());
    std::printf("  %4s  %-*s  %-18s  %s\n", "#", static_cast<int>(kw), "key", "type", "value");
    size_t i = 0;
    for (const KeyValue& kv : m.metadata()) {
        std::string val;
        if (kv.value.is_array())
            val = "len " + std::to_string(kv.value.size()) + " " + kv.value.to_string(kTextArrayElems);
        else
            val = kv.value.to_string();
        std::printf("  %4zu  %-*s  %-18s  %s\n", i++, static_cast<int>(kw), kv.key.c_str(),
                    type_str(kv.value).c_str(), val.c_str());
    }

    size_t nw = 4;
    for (const ModelTensor& mt : m.tensors()) nw = std::max(nw, mt.info->name.size());
    std::printf("\ntensors (%zu):\n", m.tensors().size());
    std::printf("  %4s  %-*s  %-8s  %-24s  %14s  %14s%s\n", "#", static_cast<int>(nw), "name", "type", "shape", "bytes",
                "offset", m.is_split() ? "  shard" : "");
    i = 0;
    for (const ModelTensor& mt : m.tensors()) {
        const TensorInfo& t = *mt.info;
        std::printf("  %4zu  %-*s  %-8s  %-24s  %14s  %14s", i++, static_cast<int>(nw), t.name.c_str(),
                    tensor_type_name(t.type).c_str(), shape_str(t).c_str(), group(t.nbytes).c_str(),
                    group(t.offset).c_str());
        if (m.is_split()) std::printf("  %5u", mt.shard);
        std::printf("\n");
    }

    std::printf("\ntotals by type:\n");
    std::printf("  %-8s  %6s  %16s  %16s\n", "type", "count", "elements", "bytes");
    for (const auto& [id, t] : s.by_type)
        std::printf("  %-8s  %6s  %16s  %16s\n", tensor_type_name(static_cast<TensorType>(id)).c_str(),
                    group(t.count).c_str(), group(t.elements).c_str(), group(t.bytes).c_str());
    std::printf("  %-8s  %6s  %16s  %16s\n", "total", group(m.tensors().size()).c_str(), group(s.params).c_str(),
                group(s.data_bytes).c_str());
}

}  // namespace

void register_inspect(CLI::App& app) {
    struct Opts {
        std::string path;
        bool json = false;
    };
    auto opts = std::make_shared<Opts>();
    CLI::App* cmd = app.add_subcommand("inspect", "Show the metadata and tensors of a GGUF file");
    cmd->add_option("file", opts->path, "GGUF file (for a split model, the -00001-of-N file)")->required();
    cmd->add_flag("--json", opts->json, "Print one JSON document instead of tables");
    cmd->callback([opts] {
        const Model m(opts->path);
        if (opts->json)
            print_json(opts->path, m);
        else
            print_text(opts->path, m);
    });
}

}  // namespace zinc::cli
