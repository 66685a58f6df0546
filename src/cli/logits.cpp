// `zinc logits`: the logits of every position of a prompt, as .npy, for validation against references.
#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "cli/commands.h"
#include "cli/model_loading.h"
#include "engine/family.h"
#include "gguf/split.h"

namespace zinc::cli {
namespace {

struct Options {
    std::string model, ids, out, ids_out;
    int threads = 0;
    std::string backend = "auto";
    int device = -1;
    int batch = 0;  // tokens per forward call; 0 = the whole prompt at once
};

std::vector<int32_t> parse_ids(const std::string& s) {
    std::vector<int32_t> ids;
    std::stringstream ss(s);
    std::string item;
    while (std::getline(ss, item, ',')) {
        size_t used = 0;
        long v = std::stol(item, &used);
        if (used != item.size() || v < 0 || v > INT32_MAX) throw std::invalid_argument("bad token id '" + item + "'");
        ids.push_back(static_cast<int32_t>(v));
    }
    if (ids.empty()) throw std::invalid_argument("--ids is empty");
    return ids;
}

// Writes a C-order little-endian .npy array (format version 1.0).
void write_npy(const std::string& path, const char* descr, const void* data, size_t bytes,
               std::initializer_list<size_t> shape) {
    std::string dims;
    for (size_t d : shape) dims += std::to_string(d) + ",";
    if (shape.size() > 1) dims.pop_back();
    std::string header = "{'descr': '" + std::string(descr) + "', 'fortran_order': False, 'shape': (" + dims + "), }";
    const size_t total = 10 + header.size() + 1;
    header.append((64 - total % 64) % 64, ' ');
    header += '\n';
    std::ofstream f(path, std::ios::binary);
    if (!f) throw std::runtime_error("cannot write " + path);
    const uint16_t hlen = static_cast<uint16_t>(header.size());
    f.write("\x93NUMPY\x01\x00", 8);
    f.write(reinterpret_cast<const char*>(&hlen), 2);
    f << header;
    f.write(static_cast<const char*>(data), static_cast<std::streamsize>(bytes));
    if (!f) throw std::runtime_error("error writing " + path);
}

void run(const Options& o) {
    const std::vector<int32_t> ids = parse_ids(o.ids);
    gguf::Model model(o.model);
    auto be = make_backend({o.backend, o.device, o.threads});
    auto family = engine::make_family(model, *be, {static_cast<int>(ids.size())});
    std::vector<float> logits;
    const size_t step = o.batch > 0 ? static_cast<size_t>(o.batch) : ids.size();
    for (size_t i = 0; i < ids.size(); i += step) {
        const size_t n = std::min(step, ids.size() - i);
        family->forward(std::span<const int32_t>(ids).subspan(i, n), static_cast<int64_t>(i), true, logits);
    }
    write_npy(o.out, "<f4", logits.data(), logits.size() * sizeof(float),
              {ids.size(), static_cast<size_t>(family->n_vocab())});
    if (!o.ids_out.empty()) write_npy(o.ids_out, "<i4", ids.data(), ids.size() * sizeof(int32_t), {ids.size()});
    std::fprintf(stderr, "wrote logits of %zu positions x %d to %s\n", ids.size(), family->n_vocab(), o.out.c_str());
}

}  // namespace

void register_logits(CLI::App& app) {
    auto opts = std::make_shared<Options>();
    auto* cmd = app.add_subcommand("logits", "Write the logits of every prompt position as a float32 .npy");
    cmd->add_option("-m,--model", opts->model, "GGUF model file")->required();
    cmd->add_option("--ids", opts->ids, "comma-separated token ids of the prompt")->required();
    cmd->add_option("-o,--out", opts->out, "output .npy of shape [tokens, n_vocab]")->required();
    cmd->add_option("--ids-out", opts->ids_out, "also write the token ids as an int32 .npy");
    cmd->add_option("-t,--threads", opts->threads, "CPU threads (default: all cores)");
    add_backend_options(cmd, opts->backend, opts->device);
    cmd->add_option("-b,--batch", opts->batch, "tokens per forward pass (default: the whole prompt)");
    cmd->callback([opts] { run(*opts); });
}

}  // namespace zinc::cli
