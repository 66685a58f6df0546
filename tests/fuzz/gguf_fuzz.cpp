// libFuzzer target for the GGUF reader (also linked into the sanitized corpus runner).
// Any input must either be rejected with gguf::Error or parse into a file whose every value and tensor can be
// touched, and which round-trips through the writer into an equivalent file.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "gguf/reader.h"
#include "gguf/writer.h"

namespace {

[[noreturn]] void fail(const char* what) {
    std::fprintf(stderr, "gguf_fuzz: invariant violated: %s\n", what);
    std::abort();
}

uint64_t touch_value(const zinc::gguf::Value& v) {
    uint64_t h = v.to_string(4).size();
    if (v.is_array()) {
        const uint64_t n = v.size();
        if (n > 0) {
            h += v.at(0).to_string().size();
            h += v.at(n - 1).to_string().size();
        }
        if (v.element_type() == zinc::gguf::ValueType::ARRAY)
            for (const auto& e : v.get_array_array()) h += touch_value(e);
    }
    return h;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace zinc::gguf;
    std::span<const uint8_t> in(data, size);
    try {
        File f = File::from_memory(in, "fuzz");
        volatile uint64_t sink = 0;
        for (const KeyValue& kv : f.metadata()) {
            sink = sink + touch_value(kv.value);
            if (f.find(kv.key) != &kv.value) fail("find() does not return the record");
        }
        for (const TensorInfo& t : f.tensors()) {
            if (t.nbytes > 0) sink = sink + t.data[0] + t.data[t.nbytes - 1];
            if (f.find_tensor(t.name) != &t) fail("find_tensor() does not return the record");
        }
        // Round trip through the writer: the result must be valid in the strict layout and equivalent.
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
    } catch (const Error&) {
        // rejected cleanly
    }
    return 0;
}
