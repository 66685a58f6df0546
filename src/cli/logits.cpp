// `zinc logits`: the logits of every position of a prompt, as .npy, for validation against references.
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/options.h"
#include "model/metadata.h"
#include "tokenizer/tokenizer.h"

namespace zinc::cli {
namespace {

struct LogitsArgs {
    ModelFlags model;
    PromptFlags prompt;
    std::string ids, out, ids_out;
    CLI::Option* ids_option = nullptr;
    int batch = 0;  // tokens per forward call; 0 = the whole prompt at once
};

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
    if (!f) throw std::runtime_error("cannot write " + path + ": " + std::strerror(errno));
    const uint16_t hlen = static_cast<uint16_t>(header.size());
    f.write("\x93NUMPY\x01\x00", 8);
    f.write(reinterpret_cast<const char*>(&hlen), 2);
    f << header;
    f.write(static_cast<const char*>(data), static_cast<std::streamsize>(bytes));
    f.close();
    if (!f) throw std::runtime_error("error writing " + path + ": " + std::strerror(errno));
}

void run_logits(const LogitsArgs& o) {
    auto model = std::make_unique<gguf::Model>(o.model.open.path);
    std::vector<int32_t> ids;
    if (o.ids_option->count() > 0) {
        ids = parse_ids("--ids", o.ids);
    } else {
        if (o.prompt.text_option->count() == 0 && o.prompt.file.empty() && stdin_is_terminal())
            throw CLI::ValidationError("no prompt", "give --ids, -p TEXT, -f FILE or text on standard input");
        const std::string text = read_prompt(o.prompt);
        ids = tokenizer::Tokenizer::from_gguf(model->first()).encode(text, true, true);
        if (ids.empty()) throw std::invalid_argument("the prompt has no tokens");
    }
    check_ids("--ids", ids, model::Metadata(*model).n_vocab());

    ModelFlags flags = o.model;
    flags.open.all_logits = true;
    int& n_ctx = flags.open.context.n_ctx;
    if (n_ctx <= 0) n_ctx = static_cast<int>(ids.size());  // the context the prompt needs
    if (static_cast<int64_t>(ids.size()) > n_ctx)
        throw CLI::ValidationError("--ctx-size", "the prompt has " + std::to_string(ids.size()) +
                                                     " tokens; a context of " + std::to_string(n_ctx) +
                                                     " does not hold them");
    gguf::check_output_path(o.out, model.get(), false);
    if (!o.ids_out.empty()) gguf::check_output_path(o.ids_out, model.get(), false);
    engine::OpenedModel om = open_model(flags, std::move(model));
    engine::Family& family = om.session->family();
    if (o.model.verbose) {
        std::fprintf(stderr, "zinc: %s\n", describe_plan(om.plan).c_str());
        std::fprintf(stderr, "zinc: prompt %zu tokens\n", ids.size());
    }
    std::vector<float> logits;
    const size_t step = o.batch > 0 ? static_cast<size_t>(o.batch) : ids.size();
    for (size_t i = 0; i < ids.size(); i += step) {
        const size_t n = std::min(step, ids.size() - i);
        family.forward(std::span<const int32_t>(ids).subspan(i, n), static_cast<int64_t>(i), true, logits);
    }
    write_npy(o.out, "<f4", logits.data(), logits.size() * sizeof(float),
              {ids.size(), static_cast<size_t>(family.n_vocab())});
    if (!o.ids_out.empty()) write_npy(o.ids_out, "<i4", ids.data(), ids.size() * sizeof(int32_t), {ids.size()});
    std::fprintf(stderr, "wrote logits of %zu positions x %d to %s\n", ids.size(), family.n_vocab(), o.out.c_str());
}

}  // namespace

void register_logits(CLI::App& app) {
    auto o = std::make_shared<LogitsArgs>();
    auto* cmd = app.add_subcommand("logits", "Write the logits of every prompt position as a float32 .npy");
    add_model_options(cmd, o->model);
    o->ids_option = cmd->add_option("--ids", o->ids, "the prompt as comma-separated token ids");
    add_prompt_options(cmd, o->prompt);
    o->ids_option->excludes(o->prompt.text_option)->excludes(o->prompt.file_option);
    cmd->get_option("--ctx-size")->description("context length in tokens (default: the prompt's length)");
    cmd->add_option("-o,--out", o->out, "output .npy of shape [tokens, n_vocab]")->required();
    cmd->add_option("--ids-out", o->ids_out, "also write the token ids as an int32 .npy");
    cmd->add_option("-b,--batch", o->batch, "tokens per forward call (default: the whole prompt)")
        ->transform(integer_in(1, INT_MAX));
    cmd->callback([o] { run_logits(*o); });
}

}  // namespace zinc::cli
