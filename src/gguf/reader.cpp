#include "gguf/reader.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <unordered_set>

#include "gguf/printable.h"

namespace zinc::gguf {

namespace {

bool mul_overflow(uint64_t a, uint64_t b, uint64_t* r) { return __builtin_mul_overflow(a, b, r); }
bool add_overflow(uint64_t a, uint64_t b, uint64_t* r) { return __builtin_add_overflow(a, b, r); }

// Estimates of what the containers of a parsed header cost on the heap, for the memory budget.
constexpr uint64_t kAllocOverhead = 16;  // malloc's header and rounding, per allocation

uint64_t string_heap(uint64_t len) {
    static const uint64_t inline_capacity = std::string().capacity();  // short strings live inside the object
    return len > inline_capacity ? len + 1 + kAllocOverhead : 0;
}

// One entry of a name -> index map besides its key's characters: the node (key object, value, next pointer,
// cached hash) and a bucket.
constexpr uint64_t kIndexEntry = sizeof(std::string) + sizeof(size_t) + 3 * sizeof(void*) + kAllocOverhead;

uint64_t mul_saturated(uint64_t a, uint64_t b) {
    uint64_t r = 0;
    return mul_overflow(a, b, &r) ? std::numeric_limits<uint64_t>::max() : r;
}

// A name from the file, quoted and made safe for an error message.
std::string quoted(std::string_view name) {
    std::string r = "'";
    r += printable(name, 256);
    r += '\'';
    return r;
}

// What memory is charged for: "key 'x'", "tensor 'y'", "kv count"; formatted only when an error needs it.
struct Owner {
    const char* kind;
    std::string_view name = {};
    std::string str() const { return name.empty() ? std::string(kind) : std::string(kind) + " " + quoted(name); }
};

// Reads little-endian fields from [base, base + size) with every access bounds-checked.
class Cursor {
public:
    Cursor(const std::string& name, const uint8_t* base, uint64_t size) : name_(name), base_(base), size_(size) {
        if (mul_overflow(size, kMetadataMemoryPerByte, &memory_limit_) ||
            add_overflow(memory_limit_, kMetadataMemoryBase, &memory_limit_))
            memory_limit_ = std::numeric_limits<uint64_t>::max();
    }

    uint64_t pos() const { return pos_; }
    uint64_t remaining() const { return size_ - pos_; }

    [[noreturn]] void fail(const std::string& what, uint64_t at) const {
        throw Error(name_ + ": " + what + " (at byte " + std::to_string(at) + ")");
    }
    [[noreturn]] void fail(const std::string& what) const { fail(what, pos_); }

    void need(uint64_t n, const char* what) const {
        if (n > remaining())
            fail("file truncated: " + std::string(what) + " needs " + std::to_string(n) + " bytes, " +
                 std::to_string(remaining()) + " left");
    }

    template <class T>
    T read(const char* what) {
        need(sizeof(T), what);
        T v;
        std::memcpy(&v, base_ + pos_, sizeof(T));
        pos_ += sizeof(T);
        return v;
    }

    // Accounts for `bytes` of memory about to be allocated for `owner`, failing once the parsed header would exceed
    // its budget (kMetadataMemoryPerByte per byte of the file + kMetadataMemoryBase).
    void charge(uint64_t bytes, const Owner& owner, uint64_t at) {
        if (add_overflow(memory_used_, bytes, &memory_used_) || memory_used_ > memory_limit_)
            fail(owner.str() + ": the metadata and tensor infos would take more than " +
                     std::to_string(memory_limit_) + " bytes of memory, the limit for a file of " +
                     std::to_string(size_) + " bytes (" + std::to_string(kMetadataMemoryPerByte) +
                     " per byte of the file + " + std::to_string(kMetadataMemoryBase) + ")",
                 at);
    }

    // Reads a string, charging its memory to the budget on behalf of `owner` (the key or tensor it belongs to).
    std::string read_string(const char* what, const Owner& owner) {
        const uint64_t at = pos_;
        const uint64_t len = read<uint64_t>(what);
        if (len > kMaxStringLength)
            fail(std::string(what) + " length " + std::to_string(len) + " exceeds the limit of " +
                     std::to_string(kMaxStringLength) + " bytes",
                 at);
        if (len > remaining())
            fail("file truncated: " + std::string(what) + " length " + std::to_string(len) + " exceeds the " +
                     std::to_string(remaining()) + " bytes left",
                 at);
        charge(string_heap(len), owner, at);
        std::string s(reinterpret_cast<const char*>(base_ + pos_), static_cast<size_t>(len));
        pos_ += len;
        return s;
    }

    const uint8_t* here() const { return base_ + pos_; }
    void skip(uint64_t n) { pos_ += n; }  // caller has called need()

private:
    const std::string& name_;
    const uint8_t* base_;
    uint64_t size_;
    uint64_t pos_ = 0;
    uint64_t memory_limit_ = 0;
    uint64_t memory_used_ = 0;
};

bool valid_value_type(uint32_t t) { return t < kValueTypeCount; }

// `owner` names the value in errors (its key).
Value read_value(Cursor& c, ValueType t, uint32_t depth, const Owner& owner);

Value read_array(Cursor& c, uint32_t depth, const Owner& owner) {
    const uint64_t at = c.pos();
    const uint32_t et = c.read<uint32_t>("array element type");
    if (!valid_value_type(et)) c.fail("invalid array element type " + std::to_string(et), at);
    const auto elem = static_cast<ValueType>(et);
    const uint64_t count = c.read<uint64_t>("array count");
    if (count > kMaxArrayCount)
        c.fail("array count " + std::to_string(count) + " exceeds the limit of " + std::to_string(kMaxArrayCount), at);
    const uint64_t min = value_type_min_size(elem);
    // count <= 2^30 and min <= 12, so the product cannot overflow.
    if (count * min > c.remaining())
        c.fail("file truncated: array of " + std::to_string(count) + " " + value_type_name(elem) +
                   " needs at least " + std::to_string(count * min) + " bytes, " + std::to_string(c.remaining()) +
                   " left",
               at);
    // The elements' storage (count * at most sizeof(Value), so no overflow) is charged before it is reserved.
    const uint64_t slot = elem == ValueType::STRING  ? sizeof(std::string)
                          : elem == ValueType::ARRAY ? sizeof(Value)
                                                     : min;
    c.charge(Value::array_overhead() + count * slot + kAllocOverhead, owner, at);
    if (elem == ValueType::STRING) {
        std::vector<std::string> v;
        v.reserve(count);
        for (uint64_t i = 0; i < count; ++i) v.push_back(c.read_string("string array element", owner));
        return Value::array(std::move(v));
    }
    if (elem == ValueType::ARRAY) {
        if (depth + 1 > kMaxArrayDepth)
            c.fail("nested arrays deeper than " + std::to_string(kMaxArrayDepth) + " levels", at);
        std::vector<Value> v;
        v.reserve(count);
        for (uint64_t i = 0; i < count; ++i) v.push_back(read_array(c, depth + 1, owner));
        return Value::array_of_arrays(std::move(v));
    }
    const uint64_t n = count * min;
    std::vector<uint8_t> raw(c.here(), c.here() + n);
    c.skip(n);
    return Value::array_raw(elem, count, std::move(raw));
}

Value read_value(Cursor& c, ValueType t, uint32_t depth, const Owner& owner) {
    switch (t) {
    case ValueType::UINT8: return Value::of(c.read<uint8_t>("UINT8 value"));
    case ValueType::INT8: return Value::of(c.read<int8_t>("INT8 value"));
    case ValueType::UINT16: return Value::of(c.read<uint16_t>("UINT16 value"));
    case ValueType::INT16: return Value::of(c.read<int16_t>("INT16 value"));
    case ValueType::UINT32: return Value::of(c.read<uint32_t>("UINT32 value"));
    case ValueType::INT32: return Value::of(c.read<int32_t>("INT32 value"));
    case ValueType::FLOAT32: return Value::of(c.read<float>("FLOAT32 value"));
    case ValueType::BOOL: return Value::of(c.read<uint8_t>("BOOL value") != 0);
    case ValueType::STRING: return Value::of(c.read_string("string value", owner));
    case ValueType::ARRAY: return read_array(c, depth, owner);
    case ValueType::UINT64: return Value::of(c.read<uint64_t>("UINT64 value"));
    case ValueType::INT64: return Value::of(c.read<int64_t>("INT64 value"));
    case ValueType::FLOAT64: return Value::of(c.read<double>("FLOAT64 value"));
    }
    c.fail("invalid value type " + std::to_string(static_cast<uint32_t>(t)));
}

// "a FIFO", "a directory", ... for the error that refuses a file that is not a regular file.
std::string file_kind(mode_t mode) {
    if (S_ISDIR(mode)) return "a directory";
    if (S_ISFIFO(mode)) return "a FIFO";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    if (S_ISSOCK(mode)) return "a socket";
    return "not a regular file";
}

[[noreturn]] void refuse_not_regular(const std::string& path, mode_t mode) {
    throw Error(path + " is not a regular file (it is " + file_kind(mode) + ")");
}

}  // namespace

File::File(const std::string& path, ReadOptions opts) {
    path_ = path;
    // Refuse what is not a regular file before opening it: opening a FIFO blocks until a writer comes, and opening
    // a device can act on it. The path can change between stat and open, so the open below is non-blocking and
    // fstat checks again what was opened. O_NONBLOCK does nothing to a regular file or to mmap, so it stays set.
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) refuse_not_regular(path, st.st_mode);
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) throw Error(path + ": cannot open: " + std::strerror(errno));
    if (::fstat(fd, &st) != 0) {
        const int e = errno;
        ::close(fd);
        throw Error(path + ": cannot stat: " + std::strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        ::close(fd);
        refuse_not_regular(path, st.st_mode);
    }
    size_ = static_cast<uint64_t>(st.st_size);
    if (size_ > 0) {
        void* m = ::mmap(nullptr, static_cast<size_t>(size_), PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED) {
            const int e = errno;
            ::close(fd);
            throw Error(path + ": cannot mmap: " + std::strerror(e));
        }
        map_ = m;
        map_len_ = static_cast<size_t>(size_);
        base_ = static_cast<const uint8_t*>(m);
    }
    ::close(fd);
    parse(opts);  // on throw, the destructor does not run: unmap here
}

File File::from_memory(std::span<const uint8_t> bytes, std::string name, ReadOptions opts) {
    File f;
    f.path_ = std::move(name);
    f.base_ = bytes.data();
    f.size_ = bytes.size();
    f.parse(opts);
    return f;
}

File::File(File&& o) noexcept { *this = std::move(o); }

File& File::operator=(File&& o) noexcept {
    if (this != &o) {
        if (map_) ::munmap(map_, map_len_);
        path_ = std::move(o.path_);
        base_ = o.base_;
        size_ = o.size_;
        map_ = o.map_;
        map_len_ = o.map_len_;
        version_ = o.version_;
        alignment_ = o.alignment_;
        data_offset_ = o.data_offset_;
        kv_ = std::move(o.kv_);
        kv_index_ = std::move(o.kv_index_);
        tensors_ = std::move(o.tensors_);
        tensor_index_ = std::move(o.tensor_index_);
        o.map_ = nullptr;
        o.base_ = nullptr;
        o.size_ = 0;
    }
    return *this;
}

File::~File() {
    if (map_) ::munmap(map_, map_len_);
}

void File::parse(ReadOptions opts) {
    try {
        Cursor c(path_, base_, size_);
        if (size_ < 24) c.fail("file too small to be GGUF (" + std::to_string(size_) + " bytes, need at least 24)", 0);
        const uint32_t magic = c.read<uint32_t>("magic");
        if (magic != kMagic) {
            char buf[64];
            std::snprintf(buf, sizeof buf, "bad magic 0x%08x (expected \"GGUF\")", magic);
            c.fail(buf, 0);
        }
        version_ = c.read<uint32_t>("version");
        if ((version_ & 0xffffu) == 0 && version_ != 0)
            c.fail("big-endian GGUF file (version field reads 0x" +
                       [&] { char b[16]; std::snprintf(b, sizeof b, "%08x", version_); return std::string(b); }() +
                       "); only little-endian files are supported",
                   4);
        if (version_ == 1) c.fail("unsupported GGUF version 1 (obsolete; only versions 2 and 3 are supported)", 4);
        if (version_ != 2 && version_ != 3)
            c.fail("unsupported GGUF version " + std::to_string(version_) + " (only versions 2 and 3 are supported)", 4);
        const uint64_t n_tensors = c.read<uint64_t>("tensor count");
        const uint64_t n_kv = c.read<uint64_t>("kv count");
        if (n_tensors > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
            c.fail("negative tensor count", 8);
        if (n_kv > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) c.fail("negative kv count", 16);
        // Plausibility: each KV record takes at least 14 bytes, each tensor info at least 25.
        if (n_kv > c.remaining() / 14)
            c.fail("implausible kv count " + std::to_string(n_kv) + " for " + std::to_string(c.remaining()) +
                       " remaining bytes",
                   16);
        if (n_tensors > (c.remaining() - n_kv * 14) / 25)  // n_kv * 14 <= remaining: checked above
            c.fail("implausible tensor count " + std::to_string(n_tensors) + " for " +
                       std::to_string(c.remaining()) + " remaining bytes",
                   8);

        // --- metadata ---
        // Every container is charged to the memory budget before it is allocated.
        c.charge(mul_saturated(n_kv, sizeof(KeyValue)), Owner{"kv count"}, 16);
        kv_.reserve(n_kv);
        uint64_t alignment_at = 0;
        for (uint64_t i = 0; i < n_kv; ++i) {
            const uint64_t at = c.pos();
            std::string key = c.read_string("key", Owner{"the key of a kv record"});
            if (key.empty()) c.fail("empty key in kv record " + std::to_string(i), at);
            if (kv_index_.count(key)) c.fail("duplicate key " + quoted(key), at);
            const Owner owner{"key", key};
            c.charge(2 * string_heap(key.size()) + kIndexEntry, owner, at);  // its copies in the value and the index
            const uint64_t tat = c.pos();
            const uint32_t t = c.read<uint32_t>("value type");
            if (!valid_value_type(t))
                c.fail("invalid value type " + std::to_string(t) + " for key " + quoted(key), tat);
            Value v = read_value(c, static_cast<ValueType>(t), 0, owner);
            v.set_key(key);
            if (key == "general.alignment") alignment_at = at;
            kv_index_.emplace(key, kv_.size());
            kv_.push_back(KeyValue{std::move(key), std::move(v)});
        }

        // --- alignment ---
        if (const Value* a = find("general.alignment")) {
            if (a->type() != ValueType::UINT32)
                c.fail("general.alignment has type " + value_type_name(a->type()) + ", expected UINT32", alignment_at);
            const uint32_t av = a->get_u32();
            if (!is_pow2(av))
                c.fail("general.alignment " + std::to_string(av) + " is not a non-zero power of two", alignment_at);
            alignment_ = av;
        }

        // --- tensor infos ---
        c.charge(mul_saturated(n_tensors, sizeof(TensorInfo)), Owner{"tensor count"}, 8);
        tensors_.reserve(n_tensors);
        for (uint64_t i = 0; i < n_tensors; ++i) {
            TensorInfo ti;
            const uint64_t at = c.pos();
            ti.name = c.read_string("tensor name", Owner{"the name of a tensor info"});
            if (ti.name.empty()) c.fail("empty tensor name (tensor " + std::to_string(i) + ")", at);
            if (ti.name.size() > kMaxTensorName)
                c.fail("tensor name too long (" + std::to_string(ti.name.size()) + " bytes, limit " +
                           std::to_string(kMaxTensorName) + ")",
                       at);
            if (tensor_index_.count(ti.name)) c.fail("duplicate tensor name " + quoted(ti.name), at);
            c.charge(string_heap(ti.name.size()) + kIndexEntry, Owner{"tensor", ti.name}, at);  // its index entry
            const std::string tn = "tensor " + quoted(ti.name);
            const uint64_t dat = c.pos();
            ti.n_dims = c.read<uint32_t>("n_dims");
            if (ti.n_dims > kMaxDims)
                c.fail(tn + ": n_dims " + std::to_string(ti.n_dims) + " exceeds " + std::to_string(kMaxDims), dat);
            for (uint32_t d = 0; d < ti.n_dims; ++d) {
                const uint64_t nat = c.pos();
                const int64_t ne = c.read<int64_t>("tensor dimension");
                if (ne < 0) c.fail(tn + ": negative dimension ne[" + std::to_string(d) + "] = " + std::to_string(ne), nat);
                ti.ne[d] = ne;
            }
            // Element count, overflow-checked in int64 like llama.cpp.
            uint64_t nel = 1;
            for (uint32_t d = 0; d < 4; ++d) {
                if (mul_overflow(nel, static_cast<uint64_t>(ti.ne[d]), &nel) ||
                    nel > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
                    c.fail(tn + ": element count overflows int64", dat);
            }
            ti.n_elements = nel;
            const uint64_t tat = c.pos();
            const uint32_t type = c.read<uint32_t>("tensor type");
            const auto tt = type_traits(type);
            if (!tt) {
                if (type < kTensorTypeIdEnd)
                    c.fail(tn + ": tensor type id " + std::to_string(type) + " was removed from ggml", tat);
                c.fail(tn + ": invalid tensor type id " + std::to_string(type), tat);
            }
            ti.type = static_cast<TensorType>(type);
            if (ti.ne[0] % tt->block_elems != 0)
                c.fail(tn + ": ne[0] = " + std::to_string(ti.ne[0]) + " is not a multiple of the block size " +
                           std::to_string(tt->block_elems) + " of type " + std::string(tt->name),
                       dat);
            if (mul_overflow(nel / tt->block_elems, tt->block_bytes, &ti.nbytes))
                c.fail(tn + ": byte size overflows", dat);
            const uint64_t oat = c.pos();
            ti.offset = c.read<uint64_t>("tensor offset");
            if (ti.offset % alignment_ != 0)
                c.fail(tn + ": offset " + std::to_string(ti.offset) + " is not a multiple of the alignment " +
                           std::to_string(alignment_),
                       oat);
            tensor_index_.emplace(ti.name, tensors_.size());
            tensors_.push_back(std::move(ti));
        }

        // --- data section ---
        const uint64_t end_infos = c.pos();
        if (n_tensors == 0) {
            data_offset_ = std::min<uint64_t>(align_up(end_infos, alignment_), size_);
            return;
        }
        data_offset_ = align_up(end_infos, alignment_);  // end_infos <= size_ < 2^63, no overflow
        if (data_offset_ > size_)
            c.fail("file truncated: data section would start at " + std::to_string(data_offset_) +
                       " but the file has " + std::to_string(size_) + " bytes",
                   end_infos);
        for (TensorInfo& ti : tensors_) {
            uint64_t start = 0, end = 0;
            if (add_overflow(data_offset_, ti.offset, &start) || add_overflow(start, ti.nbytes, &end) || end > size_)
                c.fail("tensor " + quoted(ti.name) + " (offset " + std::to_string(ti.offset) + ", " +
                           std::to_string(ti.nbytes) + " bytes) extends past the end of the file (" +
                           std::to_string(size_) + " bytes)",
                       end_infos);
            ti.file_offset = start;
            ti.data = base_ + start;
        }
        if (opts.strict_layout) {
            uint64_t expect = 0;
            for (const TensorInfo& ti : tensors_) {
                if (ti.offset != expect)
                    c.fail("tensor " + quoted(ti.name) + " has offset " + std::to_string(ti.offset) + ", expected " +
                               std::to_string(expect) + " (strict layout)",
                           end_infos);
                expect = ti.offset + align_up(ti.nbytes, alignment_);
            }
        } else {
            std::vector<const TensorInfo*> order;
            order.reserve(tensors_.size());
            for (const TensorInfo& ti : tensors_)
                if (ti.nbytes > 0) order.push_back(&ti);
            std::sort(order.begin(), order.end(),
                      [](const TensorInfo* a, const TensorInfo* b) { return a->offset < b->offset; });
            for (size_t k = 1; k < order.size(); ++k)
                if (order[k - 1]->offset + order[k - 1]->nbytes > order[k]->offset)
                    c.fail("tensors " + quoted(order[k - 1]->name) + " and " + quoted(order[k]->name) + " overlap",
                           end_infos);
        }
        // Writers pad the data to the alignment and stop: more bytes after the last tensor than that mean the data
        // was laid out for another alignment (a general.alignment changed under it would have every tensor read
        // from the wrong place).
        uint64_t data_end = data_offset_;
        for (const TensorInfo& ti : tensors_) data_end = std::max(data_end, ti.file_offset + ti.nbytes);
        if (size_ - data_end >= alignment_)
            c.fail("the file has " + std::to_string(size_ - data_end) + " bytes after its last tensor, as many as its "
                       "alignment (" + std::to_string(alignment_) + ") or more: its general.alignment does not "
                       "describe how its data was written",
                   end_infos);
    } catch (...) {
        if (map_) {
            ::munmap(map_, map_len_);
            map_ = nullptr;
        }
        throw;
    }
}

const Value* File::find(std::string_view key) const {
    auto it = kv_index_.find(key);
    return it == kv_index_.end() ? nullptr : &kv_[it->second].value;
}

const Value& File::get(std::string_view key) const {
    if (const Value* v = find(key)) return *v;
    throw Error(path_ + ": missing key " + quoted(key));
}

const TensorInfo* File::find_tensor(std::string_view name) const {
    auto it = tensor_index_.find(name);
    return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

const TensorInfo& File::tensor(std::string_view name) const {
    if (const TensorInfo* t = find_tensor(name)) return *t;
    throw Error(path_ + ": missing tensor " + quoted(name));
}

}  // namespace zinc::gguf
