// libFuzzer target for reading GGUF files and running a model family's reading and binding of them (also linked
// into the sanitized corpus runner).
// Every input is parsed by the reader; one it rejects must be rejected with gguf::Error. One it accepts is checked
// as a file (every value and tensor can be touched; it round-trips through the writer), then made a one-file model
// and run through each stage of kStages. A stage may reject the input with gguf::Error; anything else (another
// exception, a sanitizer report, a broken invariant) aborts.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "engine/memory_plan.h"
#include "gguf/describe.h"
#include "gguf/printable.h"
#include "gguf/reader.h"
#include "gguf/split.h"
#include "gguf/writer.h"
#include "model/weight_bytes.h"

namespace {

using namespace zinc::gguf;

[[noreturn]] void fail(const char* what) {
    std::fprintf(stderr, "gguf_fuzz: invariant violated: %s\n", what);
    std::abort();
}

uint64_t touch_value(const Value& v) {
    uint64_t h = v.to_string(4).size();
    if (v.is_array()) {
        const uint64_t n = v.size();
        if (n > 0) {
            h += v.at(0).to_string().size();
            h += v.at(n - 1).to_string().size();
        }
        if (v.element_type() == ValueType::ARRAY)
            for (const auto& e : v.get_array_array()) h += touch_value(e);
    }
    return h;
}

// Every value and tensor byte range can be read, and the lookups find every record.
void check_touch(const File& f) {
    volatile uint64_t sink = 0;
    for (const KeyValue& kv : f.metadata()) {
        sink = sink + touch_value(kv.value);
        if (f.find(kv.key) != &kv.value) fail("find() does not return the record");
    }
    for (const TensorInfo& t : f.tensors()) {
        if (t.nbytes > 0) sink = sink + t.data[0] + t.data[t.nbytes - 1];
        if (f.find_tensor(t.name) != &t) fail("find_tensor() does not return the record");
    }
}

// The writer turns the file into one valid in the strict layout and equivalent to it.
void check_round_trip(const File& f) {
    Writer w(f.alignment());
    for (const KeyValue& kv : f.metadata()) w.add(kv.key, kv.value);
    for (const TensorInfo& t : f.tensors()) w.add_tensor_ref(t.name, t.type, t.shape(), t.bytes());
    const std::vector<uint8_t> bytes = w.to_bytes();
    File g = File::from_memory(bytes, "roundtrip", ReadOptions{.strict_layout = true});
    if (g.metadata().size() != f.metadata().size()) fail("round trip changed the kv count");
    for (size_t i = 0; i < f.metadata().size(); ++i)
        if (g.metadata()[i].key != f.metadata()[i].key || !(g.metadata()[i].value == f.metadata()[i].value))
            fail("round trip changed a kv record");
    if (g.tensors().size() != f.tensors().size()) fail("round trip changed the tensor count");
    for (size_t i = 0; i < f.tensors().size(); ++i) {
        const TensorInfo& a = f.tensors()[i];
        const TensorInfo& b = g.tensors()[i];
        if (a.name != b.name || a.type != b.type || a.ne != b.ne || a.nbytes != b.nbytes)
            fail("round trip changed a tensor record");
        if (a.nbytes && std::memcmp(a.data, b.data, a.nbytes) != 0) fail("round trip changed tensor data");
    }
}

std::string without_backslashes(std::string_view s) {
    std::string r;
    for (char c : s)
        if (c != '\\') r += c;
    return r;
}

// `zinc inspect`: the text report reaches a terminal with nothing printable() would escape (apart from the
// backslashes of its own escapes); the JSON report is ASCII without control characters and parses back.
void check_describe(const Model& m) {
    const std::string text = describe_text(m, "fuzz");
    for (size_t at = 0; at < text.size();) {
        size_t end = text.find('\n', at);
        if (end == std::string::npos) end = text.size();
        const std::string_view line(text.data() + at, end - at);
        if (without_backslashes(printable(line)) != without_backslashes(line))
            fail("describe_text printed a character that printable() escapes");
        at = end + 1;
    }
    const std::string js = describe_json(m, "fuzz");
    for (char c : js)
        if (static_cast<uint8_t>(c) >= 0x7f || (static_cast<uint8_t>(c) < 0x20 && c != '\n'))
            fail("describe_json printed a byte that is not printable ASCII");
    const auto parsed = nlohmann::json::parse(js, nullptr, /*allow_exceptions=*/false);
    if (parsed.is_discarded()) fail("describe_json printed invalid JSON");
    if (parsed["metadata"].size() != m.metadata().size()) fail("describe_json lost a kv record");
    if (parsed["tensors"].size() != m.tensors().size()) fail("describe_json lost a tensor");
}

// A model family reads its hyper-parameters and binds its tensors (extents, f32 roles) as `zinc run` does, and one
// micro-batch runs on the sizing backend, whose op checks would catch a shape the binding let through. The file is
// refused with gguf::Error or planned; any other exception is a bug.
void check_family(const Model& m) {
    const Value* arch = m.find("general.architecture");
    if (!arch || arch->type() != ValueType::STRING) return;
    zinc::engine::plan_memory(m, {16, 4});
}

// `zinc bench`'s byte counts: refused with gguf::Error or counted, and a token never reads more than the model holds.
void check_weight_bytes(const Model& m) {
    const zinc::model::WeightBytes b = zinc::model::weight_bytes(m);
    if (b.per_token > b.total) fail("weight_bytes counts more bytes per token than the model holds");
}

// What runs on every accepted file, in order. To reach more code with hostile files, add a stage here.
struct Stage {
    const char* name;
    void (*run)(const Model&);
};
constexpr Stage kStages[] = {
    {"describe", check_describe},
    {"family", check_family},
    {"weight_bytes", check_weight_bytes},
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::optional<Model> model;
    try {
        File f = File::from_memory(std::span<const uint8_t>(data, size), "fuzz");
        check_touch(f);
        check_round_trip(f);
        model.emplace(std::move(f));  // refuses a shard of a split set (the other shards are not in memory)
    } catch (const Error&) {
        return 0;  // rejected cleanly
    }
    for (const Stage& stage : kStages) {
        try {
            stage.run(*model);
        } catch (const Error&) {
            // rejected cleanly by this stage; the next ones still run
        } catch (const std::exception& e) {
            std::fprintf(stderr, "gguf_fuzz: stage '%s' threw: %s\n", stage.name, e.what());
            std::abort();
        }
    }
    return 0;
}
