#include "gguf_edit.h"

#include "gguf/writer.h"

namespace zinc::test {

void write_edited(const std::string& from, const std::string& to, const std::vector<gguf::KeyValue>& metadata,
                  const std::function<void(TensorEdit&)>& edit, uint32_t alignment) {
    const gguf::File src(from);
    gguf::Writer w(alignment);
    auto replaced = [&](const std::string& key) {
        for (const gguf::KeyValue& kv : metadata)
            if (kv.key == key) return true;
        return false;
    };
    for (const gguf::KeyValue& kv : src.metadata())
        if (kv.key != "general.alignment" && !replaced(kv.key)) w.add(kv.key, kv.value);
    for (const gguf::KeyValue& kv : metadata) w.add(kv.key, kv.value);
    for (const gguf::TensorInfo& t : src.tensors()) {
        TensorEdit e{t.name, t.type, std::vector<int64_t>(t.shape().begin(), t.shape().end()),
                     std::vector<uint8_t>(t.data, t.data + t.nbytes)};
        if (edit) edit(e);
        w.add_tensor(e.name, e.type, e.ne, e.bytes);
    }
    w.write(to);
}

}  // namespace zinc::test
