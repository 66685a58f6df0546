#include "synth/quantize.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <map>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "gguf/printable.h"
#include "gguf/writer.h"
#include "model/families.h"
#include "model/metadata.h"
#include "quant/dequantize.h"
#include "quant/quantize.h"

namespace zinc::synth {
namespace {

namespace fs = std::filesystem;
using gguf::TensorType;

// Keys llama-quantize does not copy as they are: an output of one file has no split keys, and the two it sets are
// written last.
bool rewritten_key(const std::string& key) {
    return key == "split.no" || key == "split.count" || key == "split.tensors.count" ||
           key == "general.quantization_version" || key == "general.file_type";
}

// The largest magnitude that F16 encodes as a finite value (everything from 65520 up rounds to infinity).
constexpr float kF16Limit = 65520.0f;

std::string gb(uint64_t bytes) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2f GB", static_cast<double>(bytes) / 1e9);
    return buf;
}

// Refuses an output that cannot fit on its file system (the input's metadata stands for the output's).
void check_free_space(const gguf::Model& in, const std::string& out, uint64_t tensor_bytes) {
    fs::path dir = fs::path(out).parent_path();
    if (dir.empty()) dir = ".";
    std::error_code ec;
    const fs::space_info s = fs::space(dir, ec);
    if (ec) return;  // the write itself will say what is wrong
    const uint64_t need = tensor_bytes + in.first().data_offset();
    if (s.available < need)
        throw std::runtime_error(out + ": needs " + gb(need) + ", but " + dir.string() + " has " + gb(s.available) +
                                 " free");
}

std::string number(float v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", static_cast<double>(v));
    return buf;
}

uint64_t rows_of(const gguf::TensorInfo& t) {
    return t.ne[0] > 0 ? t.n_elements / static_cast<uint64_t>(t.ne[0]) : 0;
}

// Produces the bytes of one converted tensor, chunk by chunk: each row is decoded to f32 and encoded in the new
// type, rows split between threads.
class RowConverter {
public:
    RowConverter(const QuantizedTensor& t, int threads)
        : src_(*t.source),
          type_(t.type),
          ne0_(static_cast<size_t>(t.source->ne[0])),
          in_row_(gguf::row_bytes(src_.type, ne0_)),
          out_row_(gguf::row_bytes(type_, ne0_)),
          threads_(threads) {}

    // Bytes [off, off + dst.size()) of the output tensor.
    void fill(uint64_t off, std::span<uint8_t> dst) const {
        const uint64_t r0 = off / out_row_, r1 = (off + dst.size() + out_row_ - 1) / out_row_;
        const uint64_t nrows = r1 - r0;
        // About 64k weights per thread at least: below that, starting a thread costs more than it saves.
        const uint64_t nt = std::clamp<uint64_t>(nrows * ne0_ / 65536, 1, static_cast<uint64_t>(threads_));
        std::exception_ptr error;
        std::mutex error_mutex;
        auto work = [&](uint64_t ra, uint64_t rz) {
            try {
                std::vector<float> f32(ne0_);
                std::vector<uint8_t> partial(out_row_);
                for (uint64_t r = ra; r < rz; ++r) {
                    const uint64_t start = r * out_row_;
                    const uint64_t a = std::max(off, start), z = std::min(off + dst.size(), start + out_row_);
                    if (a == start && z == start + out_row_) {
                        convert(r, f32.data(), dst.data() + (a - off));
                    } else {  // a row cut by the chunk's ends
                        convert(r, f32.data(), partial.data());
                        std::memcpy(dst.data() + (a - off), partial.data() + (a - start), static_cast<size_t>(z - a));
                    }
                }
            } catch (...) {
                const std::lock_guard<std::mutex> lock(error_mutex);
                if (!error) error = std::current_exception();
            }
        };
        if (nt == 1) {
            work(r0, r1);
        } else {
            std::vector<std::thread> ts;
            for (uint64_t k = 0; k < nt; ++k) ts.emplace_back(work, r0 + nrows * k / nt, r0 + nrows * (k + 1) / nt);
            for (auto& th : ts) th.join();
        }
        if (error) std::rethrow_exception(error);
    }

private:
    void convert(uint64_t row, float* f32, uint8_t* out) const {
        // A quantized source is decoded to the values its blocks stand for, which are the old quantization's grid
        // points and not the original weights: encoding them again adds the new type's rounding error to the old
        // one, so a requantized file is worse than one quantized from the original weights, even in a type with
        // more bits.
        quant::dequantize_row(src_.type, src_.data + row * in_row_, f32, ne0_);
        const float limit = type_ == TensorType::F16 ? kF16Limit : INFINITY;
        for (size_t i = 0; i < ne0_; ++i)
            if (!(std::fabs(f32[i]) < limit))
                throw std::runtime_error(gguf::printable(src_.name, 64) + ": row " + std::to_string(row) +
                                         ", column " + std::to_string(i) + " holds " + number(f32[i]) +
                                         (std::isfinite(f32[i]) ? ", beyond the range of f16" : ""));
        quant::quantize_row(type_, f32, out, ne0_);
    }

    const gguf::TensorInfo& src_;
    TensorType type_;
    size_t ne0_, in_row_, out_row_;
    int threads_;
};

}  // namespace

QuantizePlan plan_quantize(const QuantizeOptions& o) {
    QuantizePlan p;
    p.options = o;
    p.mix = model::parse_quant_mix(o.type);
    if (o.in.empty()) throw std::invalid_argument("no input file");
    if (o.out.empty()) throw std::invalid_argument("no output file");
    if (p.options.threads <= 0) p.options.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    p.input = std::make_unique<gguf::Model>(o.in);
    const gguf::Model& in = *p.input;
    // The output is written as OUT.tmp and renamed: neither may be a file of the input.
    gguf::check_output_path(o.out, &in, true);
    gguf::check_output_path(o.out + ".tmp", &in, true);

    const model::Metadata md(in);
    if (!model::is_supported_architecture(md.arch()))
        md.fail("architecture '" + gguf::printable(md.arch(), 64) + "' is not supported: zinc follows " +
                "llama-quantize's type rules for " + model::supported_architectures() + " only");
    p.model = model::read_mix_model(md);

    std::vector<model::TensorSpec> specs;
    specs.reserve(in.tensors().size());
    for (const gguf::ModelTensor& t : in.tensors()) {
        const auto shape = t.info->shape();
        specs.push_back({t.info->name, {shape.begin(), shape.end()}, model::TensorRole::Matrix,
                         model::layer_of(t.info->name)});
    }
    model::sort_like_llama_quantize(specs);
    std::vector<TensorType> types;
    try {
        types = model::choose_types(p.model, specs, p.mix);
    } catch (const std::invalid_argument& e) {
        md.fail(e.what());
    }

    std::vector<std::string> requantized;  // "name (type)"
    for (size_t i = 0; i < specs.size(); ++i) {
        QuantizedTensor q;
        q.source = in.tensor(specs[i].name).info;
        const gguf::TensorInfo& src = *q.source;
        // A tensor that is never quantized keeps its type, as in llama-quantize: F32 as converters write them, or
        // whatever an unusual file holds.
        q.type = model::allows_quantization(specs[i]) ? types[i] : src.type;
        if (q.converted()) {
            if (!quant::can_dequantize(src.type))
                throw std::runtime_error(md.name() + ": " + gguf::printable(src.name, 64) + " is " +
                                         std::string(gguf::type_name(src.type)) + ", which zinc cannot decode");
            if (!quant::can_quantize(q.type))
                throw std::runtime_error(gguf::printable(src.name, 64) + ": zinc cannot encode " +
                                         std::string(gguf::type_name(q.type)));
            if (q.requantized())
                requantized.push_back(gguf::printable(src.name, 64) + " (" + std::string(gguf::type_name(src.type)) +
                                      " to " + std::string(gguf::type_name(q.type)) + ")");
            q.nbytes = rows_of(src) * gguf::row_bytes(q.type, static_cast<size_t>(src.ne[0]));
        } else {
            q.nbytes = src.nbytes;
        }
        p.in_bytes += src.nbytes;
        p.out_bytes += q.nbytes;
        p.tensors.push_back(q);
    }
    if (!requantized.empty() && !o.allow_requantize)
        throw std::runtime_error(md.name() + ": " + std::to_string(requantized.size()) +
                                 " tensors are already quantized, first " + requantized.front() +
                                 "; quantizing them again loses more than quantizing the original weights "
                                 "(--allow-requantize does it anyway)");
    check_free_space(in, o.out, p.out_bytes);
    return p;
}

void write_quantized(const QuantizePlan& p, const Events& events) {
    gguf::Writer w;
    for (const gguf::KeyValue& kv : p.input->metadata())
        if (!rewritten_key(kv.key)) w.add(kv.key, kv.value);
    w.add("general.quantization_version", gguf::Value::of(uint32_t{2}));
    w.add("general.file_type", gguf::Value::of(model::file_type(p.mix)));

    // Reported from the writing thread, after every chunk.
    auto progress = std::make_shared<Progress>();
    progress->n_tensors = p.tensors.size();
    progress->total_bytes = p.out_bytes;
    auto report = [progress, &events](uint64_t bytes, bool tensor_done) {
        progress->bytes_done += bytes;
        if (tensor_done) ++progress->tensors_done;
        if (events.progress) events.progress(*progress);
    };

    std::vector<std::unique_ptr<RowConverter>> converters;
    for (const QuantizedTensor& t : p.tensors) {
        const gguf::TensorInfo& src = *t.source;
        // gguf writes ggml_n_dims: the rank without trailing extents of 1.
        std::vector<int64_t> ne(src.ne.begin(), src.ne.end());
        ne.resize(static_cast<size_t>(model::n_dims(ne)));
        const uint64_t nbytes = t.nbytes;
        if (nbytes == 0) ++progress->tensors_done;  // no chunk will report it
        if (!t.converted()) {
            w.add_tensor_fill(src.name, t.type, ne, [&src, nbytes, report](uint64_t off, std::span<uint8_t> dst) {
                std::memcpy(dst.data(), src.data + off, dst.size());
                report(dst.size(), off + dst.size() == nbytes);
            });
            continue;
        }
        converters.push_back(std::make_unique<RowConverter>(t, p.options.threads));
        const RowConverter* conv = converters.back().get();
        w.add_tensor_fill(src.name, t.type, ne, [conv, nbytes, report](uint64_t off, std::span<uint8_t> dst) {
            conv->fill(off, dst);
            report(dst.size(), off + dst.size() == nbytes);
        });
    }
    w.write(p.options.out);
}

}  // namespace zinc::synth
