// `zinc quantize -m IN.gguf -o OUT.gguf --type Q4_K_M` (or llama-quantize's `IN OUT TYPE`): a GGUF rewritten in another
// quant mix by zinc's reference quantizers, with the types and bytes llama-quantize gives it without an importance
// matrix.
#include "synth/quantize.h"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>

#include "cli/commands.h"
#include "cli/options.h"
#include "model/quant_mix.h"

namespace zinc::cli {
namespace {

// "113 f32, 84 q4_K, 15 q6_K": the output's tensors by type.
std::string type_counts(const synth::QuantizePlan& p) {
    std::map<uint32_t, size_t> n;
    for (const synth::QuantizedTensor& t : p.tensors) ++n[static_cast<uint32_t>(t.type)];
    std::string s;
    for (const auto& [type, count] : n)
        s += (s.empty() ? "" : ", ") + std::to_string(count) + " " +
             std::string(gguf::type_name(static_cast<gguf::TensorType>(type)));
    return s;
}

// llama-quantize's form, IN OUT [TYPE], as the flags -m, -o and --type; a file or type given both ways is refused.
void take_positionals(synth::QuantizeOptions& o, const std::vector<std::string>& args, bool type_given) {
    if (args.empty()) return;
    if (args.size() < 2 || args.size() > 3)
        throw CLI::ValidationError("quantize", "takes IN OUT [TYPE] as llama-quantize does, or -m IN -o OUT --type "
                                               "TYPE; not " + std::to_string(args.size()) + " words");
    if (!o.in.empty() || !o.out.empty())
        throw CLI::ValidationError("quantize", "the files are given both as IN OUT and as -m/-o");
    o.in = args[0];
    o.out = args[1];
    if (args.size() == 3) {
        if (type_given) throw CLI::ValidationError("quantize", "the type is given both as TYPE and as --type");
        std::string type = args[2];
        const std::string why = one_of("a quant mix", model::quant_mix_names(), true)(type);
        if (!why.empty()) throw CLI::ValidationError("TYPE", why);
        o.type = type;
    }
}

void run_quantize(const synth::QuantizeOptions& o) {
    if (o.in.empty()) throw CLI::ValidationError("-m,--model", "required (or IN OUT [TYPE] as llama-quantize)");
    if (o.out.empty()) throw CLI::ValidationError("-o,--output", "required (or IN OUT [TYPE] as llama-quantize)");
    const auto t0 = std::chrono::steady_clock::now();
    const synth::QuantizePlan p = synth::plan_quantize(o);
    size_t n_requantized = 0;
    for (const synth::QuantizedTensor& t : p.tensors) n_requantized += t.requantized() ? 1 : 0;
    std::fprintf(stderr, "quantize: %s (%s, %d layers): %zu tensors, %s of weights -> %s, %s, %d threads\n",
                 o.in.c_str(), p.model.arch.c_str(), p.model.n_layer, p.tensors.size(), size_text(p.in_bytes).c_str(),
                 model::quant_mix_name(p.mix).c_str(), size_text(p.out_bytes).c_str(), p.options.threads);
    if (n_requantized > 0)
        std::fprintf(stderr,
                     "quantize: warning: %zu tensors are already quantized; they are decoded and quantized again, "
                     "which loses more than quantizing the original weights\n",
                     n_requantized);
    ProgressLine line("quantize");
    synth::Events ev;
    ev.progress = [&](const synth::Progress& pr) {
        char buf[128];
        std::snprintf(buf, sizeof buf, "%zu/%zu tensors, %s of %s", pr.tensors_done, pr.n_tensors,
                      size_text(pr.bytes_done).c_str(), size_text(pr.total_bytes).c_str());
        line.update(buf, pr.tensors_done == pr.n_tensors && pr.bytes_done == pr.total_bytes);
    };
    synth::write_quantized(p, ev);
    line.finish();
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::fprintf(stderr, "quantize: wrote %s (%s): %s -> %s in %.1f s; tensors: %s\n", o.out.c_str(),
                 model::quant_mix_name(p.mix).c_str(), size_text(p.input->total_size()).c_str(),
                 size_text(std::filesystem::file_size(o.out)).c_str(), secs, type_counts(p).c_str());
}

}  // namespace

void register_quantize(CLI::App& app) {
    auto o = std::make_shared<synth::QuantizeOptions>();
    CLI::App* cmd = app.add_subcommand(
        "quantize", "Write a GGUF in another quant mix, quantized by zinc's reference quantizers (as llama-quantize)");
    cmd->footer(
        "Each tensor gets the type llama-quantize gives it for the mix without an importance matrix, and for the "
        "reference quantizers the same bytes; the tensors are written in llama-quantize's order and the metadata is "
        "copied with general.file_type set for the mix. F32, F16 and BF16 tensors are converted; tensors that are "
        "already quantized are refused unless --allow-requantize is given (they are then decoded first, which "
        "loses more than quantizing the original weights). A split model is read whole and written as one file.\n" +
        quant_mix_help());
    cmd->add_option("-m,--model", o->in, "Input .gguf file (for a split model, the -00001-of-N file)");
    cmd->add_option("-o,--output", o->out, "Output .gguf file (not the input)");
    cmd->add_option("--type", o->type, "Quant mix")
        ->capture_default_str()
        ->check(one_of("a quant mix", model::quant_mix_names(), true));
    cmd->add_option("-t,--threads", o->threads, "Threads (default: every logical CPU)")->transform(thread_count());
    cmd->add_flag("--allow-requantize", o->allow_requantize,
                  "Convert tensors that are already quantized (decoded first: worse than quantizing the original)");
    auto args = std::make_shared<std::vector<std::string>>();
    cmd->add_option("files", *args, "IN OUT [TYPE], as llama-quantize takes them (instead of -m, -o and --type)");
    cmd->callback([o, args, cmd] {
        take_positionals(*o, *args, cmd->count("--type") > 0);
        run_quantize(*o);
    });
}

}  // namespace zinc::cli
