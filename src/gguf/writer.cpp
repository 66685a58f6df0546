#include "gguf/writer.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>

namespace zinc::gguf {

namespace {

template <class T>
void put(std::string& out, T v) {
    char b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    out.append(b, sizeof(T));
}

void put_string(std::string& out, const std::string& s) {
    put<uint64_t>(out, s.size());
    out += s;
}

}  // namespace

Writer::Writer(uint32_t alignment) : alignment_(alignment) {
    if (!is_pow2(alignment)) throw Error("gguf writer: alignment " + std::to_string(alignment) + " is not a power of two");
}

void Writer::add(const std::string& key, Value v) {
    if (key.empty()) throw Error("gguf writer: empty key");
    if (key.size() > kMaxStringLength) throw Error("gguf writer: key too long");
    if (keys_.count(key)) throw Error("gguf writer: duplicate key '" + key + "'");
    if (key == "general.alignment") {
        if (v.type() != ValueType::UINT32)
            throw Error("gguf writer: general.alignment must be UINT32, got " + value_type_name(v.type()));
        if (!is_pow2(v.get_u32()))
            throw Error("gguf writer: general.alignment " + std::to_string(v.get_u32()) + " is not a power of two");
        if (!tensors_.empty() && v.get_u32() != alignment_)
            throw Error("gguf writer: general.alignment must be set before adding tensors");
        alignment_ = v.get_u32();
    }
    v.set_key(key);
    keys_.insert(key);
    kv_.push_back(KeyValue{key, std::move(v)});
}

void Writer::add_tensor(const std::string& name, TensorType type, std::span<const int64_t> ne,
                        std::span<const uint8_t> data) {
    add_tensor_impl(name, type, ne, data, true);
}

void Writer::add_tensor_ref(const std::string& name, TensorType type, std::span<const int64_t> ne,
                            std::span<const uint8_t> data) {
    add_tensor_impl(name, type, ne, data, false);
}

void Writer::add_tensor_fill(const std::string& name, TensorType type, std::span<const int64_t> ne, Filler fill) {
    if (!fill) throw Error("gguf writer: tensor '" + name + "': empty filler");
    add_tensor_impl(name, type, ne, {}, false, std::move(fill));
}

void Writer::add_tensor_impl(const std::string& name, TensorType type, std::span<const int64_t> ne,
                             std::span<const uint8_t> data, bool copy, Filler fill) {
    const std::string tn = "gguf writer: tensor '" + name + "'";
    if (name.empty()) throw Error("gguf writer: empty tensor name");
    if (name.size() > kMaxTensorName)
        throw Error(tn + ": name longer than " + std::to_string(kMaxTensorName) + " bytes");
    if (names_.count(name)) throw Error("gguf writer: duplicate tensor name '" + name + "'");
    const auto tt = type_traits(static_cast<uint32_t>(type));
    if (!tt) throw Error(tn + ": invalid tensor type id " + std::to_string(static_cast<uint32_t>(type)));
    if (ne.size() > kMaxDims) throw Error(tn + ": more than 4 dimensions");
    uint64_t nel = 1;
    for (int64_t d : ne) {
        if (d < 0) throw Error(tn + ": negative dimension");
        if (__builtin_mul_overflow(nel, static_cast<uint64_t>(d), &nel) ||
            nel > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
            throw Error(tn + ": element count overflows");
    }
    const int64_t ne0 = ne.empty() ? 1 : ne[0];
    if (ne0 % tt->block_elems != 0)
        throw Error(tn + ": ne[0] = " + std::to_string(ne0) + " is not a multiple of the block size " +
                    std::to_string(tt->block_elems));
    uint64_t nbytes = 0;
    if (__builtin_mul_overflow(nel / tt->block_elems, tt->block_bytes, &nbytes)) throw Error(tn + ": size overflows");
    if (!fill && data.size() != nbytes)
        throw Error(tn + ": " + std::to_string(data.size()) + " bytes of data, expected " + std::to_string(nbytes));
    uint64_t offset = 0;
    if (!tensors_.empty()) {
        const Tensor& last = tensors_.back();
        offset = last.offset + align_up(last.nbytes, alignment_);  // checked below when `last` was added
    }
    uint64_t end = 0;
    if (nbytes > std::numeric_limits<uint64_t>::max() - (alignment_ - 1) ||
        __builtin_add_overflow(offset, align_up(nbytes, alignment_), &end))
        throw Error(tn + ": the data section would be larger than 2^64 bytes");
    Tensor t{name, type, std::vector<int64_t>(ne.begin(), ne.end()), nbytes, offset, {}, data, std::move(fill)};
    if (copy) {
        t.owned.assign(data.begin(), data.end());
        t.data = t.owned;
    }
    names_.insert(name);
    tensors_.push_back(std::move(t));
}

std::string Writer::header() const {
    std::string h;
    const bool add_alignment = alignment_ != kDefaultAlignment && !keys_.count("general.alignment");
    put<uint32_t>(h, kMagic);
    put<uint32_t>(h, 3);
    put<uint64_t>(h, tensors_.size());
    put<uint64_t>(h, kv_.size() + (add_alignment ? 1 : 0));
    for (const KeyValue& kv : kv_) {
        put_string(h, kv.key);
        put<uint32_t>(h, static_cast<uint32_t>(kv.value.type()));
        kv.value.encode(h);
    }
    if (add_alignment) {
        put_string(h, "general.alignment");
        put<uint32_t>(h, static_cast<uint32_t>(ValueType::UINT32));
        put<uint32_t>(h, alignment_);
    }
    for (const Tensor& t : tensors_) {
        put_string(h, t.name);
        put<uint32_t>(h, static_cast<uint32_t>(t.ne.size()));
        for (int64_t d : t.ne) put<int64_t>(h, d);
        put<uint32_t>(h, static_cast<uint32_t>(t.type));
        put<uint64_t>(h, t.offset);
    }
    h.resize(align_up(h.size(), alignment_), '\0');
    return h;
}

void Writer::write(std::ostream& out) const {
    const std::string h = header();
    out.write(h.data(), static_cast<std::streamsize>(h.size()));
    static const char zeros[256] = {};
    std::vector<uint8_t> buf;
    for (const Tensor& t : tensors_) {
        if (t.fill) {
            buf.resize(static_cast<size_t>(std::min<uint64_t>(t.nbytes, kFillChunk)));
            for (uint64_t off = 0; off < t.nbytes;) {
                const size_t n = static_cast<size_t>(std::min<uint64_t>(t.nbytes - off, kFillChunk));
                t.fill(off, std::span<uint8_t>(buf.data(), n));
                out.write(reinterpret_cast<const char*>(buf.data()), static_cast<std::streamsize>(n));
                if (!out) throw Error("gguf writer: write failed");
                off += n;
            }
        } else {
            out.write(reinterpret_cast<const char*>(t.data.data()), static_cast<std::streamsize>(t.data.size()));
        }
        uint64_t pad = align_up(t.nbytes, alignment_) - t.nbytes;
        while (pad > 0) {
            const uint64_t n = pad < sizeof zeros ? pad : sizeof zeros;
            out.write(zeros, static_cast<std::streamsize>(n));
            pad -= n;
        }
    }
    if (!out) throw Error("gguf writer: write failed");
}

std::vector<uint8_t> Writer::to_bytes() const {
    std::ostringstream os(std::ios::binary);
    write(os);
    const std::string s = std::move(os).str();
    return std::vector<uint8_t>(s.begin(), s.end());
}

void Writer::write(const std::string& path) const {
    const std::string tmp = path + ".tmp";
    {
        std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
        if (!f) throw Error(path + ": cannot open for writing");
        try {
            write(f);
            f.flush();
            if (!f) throw Error(path + ": write failed");
        } catch (...) {
            f.close();
            std::remove(tmp.c_str());
            throw;
        }
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0) {
        std::remove(tmp.c_str());
        throw Error(path + ": cannot rename " + tmp);
    }
}

}  // namespace zinc::gguf
