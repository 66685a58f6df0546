// `zinc synth --preset NAME --type MIX -o FILE.gguf`: a randomly initialised GGUF of a real model's shape, with a
// real vocabulary, in a chosen quant mix, that llama.cpp also loads (benchmark models without downloads).
#include "synth/synth.h"

#include <chrono>
#include <cstdio>
#include <filesystem>

#include "cli/commands.h"
#include "cli/options.h"
#include "model/metadata.h"
#include "model/quant_mix.h"

namespace zinc::cli {
namespace {

struct Opts {
    synth::Options synth;
    bool list = false;
};

void list_presets() {
    std::printf("%-18s %-10s %7s %6s %7s %7s  %s\n", "preset", "arch", "layers", "embd", "vocab", "experts",
                "default vocab");
    for (const auto& p : model::presets())
        std::printf("%-18s %-10s %7u %6u %7u %7u  %s\n", p.name.c_str(), p.arch.c_str(), p.n_layer, p.n_embd,
                    p.n_vocab, p.n_expert, p.vocab.c_str());
}

void run_synth(const Opts& o) {
    if (o.list) {
        list_presets();
        return;
    }
    if (o.synth.preset.empty())
        throw CLI::ValidationError("--preset", "required (one of " + synth::preset_names() + ")");
    if (o.synth.out.empty()) throw CLI::ValidationError("-o,--output", "required");
    const auto t0 = std::chrono::steady_clock::now();
    const synth::Plan p = synth::plan(o.synth);
    std::fprintf(stderr, "synth: %s (%s, %u layers), %s, vocab %s from %s: %zu tensors, %.2f GB\n",
                 p.preset.name.c_str(), p.preset.arch.c_str(), p.preset.n_layer, model::quant_mix_name(p.mix).c_str(),
                 p.options.vocab.c_str(), p.tokenizer.tokenizer.string().c_str(), p.tensors.size(),
                 double(p.tensor_bytes) / 1e9);
    ProgressLine line("synth");
    synth::Events ev;
    ev.note = [](const std::string& s) { std::fprintf(stderr, "synth: %s\n", s.c_str()); };
    ev.progress = [&](const synth::Progress& pr) {
        char buf[128];
        std::snprintf(buf, sizeof buf, "%zu/%zu tensors, %.2f / %.2f GB", pr.tensors_done, pr.n_tensors,
                      double(pr.bytes_done) / 1e9, double(pr.total_bytes) / 1e9);
        line.update(buf, pr.tensors_done == pr.n_tensors);
    };
    synth::write(p, ev);
    line.finish();
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::fprintf(stderr, "synth: wrote %s (%.3f GiB) in %.1f s\n", o.synth.out.c_str(),
                 double(std::filesystem::file_size(o.synth.out)) / double(1ull << 30), secs);
}

}  // namespace

void register_synth(CLI::App& app) {
    auto o = std::make_shared<Opts>();
    CLI::App* cmd = app.add_subcommand(
        "synth",
        "Write a randomly initialised GGUF of a real model's shape (benchmark models without downloads)");
    cmd->footer(
        "The file has the real model's tensor names, shapes, metadata and vocabulary, in the chosen quant mix, and "
        "loads in llama.cpp. Weights are random (projections N(0, 0.02), norms near 1), so the model is useless for "
        "text but has the real cost. For speed, each (type, row width) gets a pool of --pool-rows random rows "
        "quantized with the reference quantizers; every tensor row is assembled from whole quantization blocks "
        "(about 256 weights) copied from random pool rows and positions, chosen by a PRNG seeded from --seed; the "
        "weights are therefore not i.i.d. across blocks, which does not matter for speed or numerics. --text-only "
        "writes zeros in the rows of the output matrix (of token_embd where it is tied, whose tokens then embed to "
        "zero) of every token that is not whole text: control and added tokens, byte-level pieces of a character, "
        "byte tokens >= 0x80; their logits are exactly 0 among random ones of both signs, so greedy decoding never "
        "picks them, at the same cost; every other byte of the file is the same.\n" +
        quant_mix_help());
    cmd->add_option("--preset", o->synth.preset, "Model shape: " + synth::preset_names())
        ->check(one_of("a preset", [] {
            std::vector<std::string> names;
            for (const auto& p : model::presets()) names.push_back(p.name);
            return names;
        }()));
    cmd->add_option("--type", o->synth.type, "Quant mix")
        ->capture_default_str()
        ->check(one_of("a quant mix", model::quant_mix_names(), true));
    cmd->add_option("-o,--output", o->synth.out, "Output .gguf file");
    cmd->add_option("--vocab", o->synth.vocab,
                    "Vocabulary: qwen3, gemma3 or tekken (default: the preset's)")
        ->check(one_of("a vocabulary", {std::begin(synth::kVocabularies), std::end(synth::kVocabularies)}));
    cmd->add_option("--tokenizer-dir", o->synth.tokenizer_dir,
                    "Directory with tokenizer.json[.xz] (+ tokenizer_config.json[.xz], config.json) "
                    "(default: data/tokenizers/<vocab> of the source tree)");
    cmd->add_option("--seed", o->synth.seed, "Random seed")->capture_default_str()->transform(integer_in(0, INT64_MAX));
    cmd->add_option("--layers", o->synth.layers, "Override the layer count (smaller test files of the real width)")
        ->transform(integer_in(1, model::kMaxLayers));
    cmd->add_option("--n-vocab", o->synth.n_vocab,
                    "Override the vocabulary size (tests only: the tokenizer is cut to the first N ids)")
        ->transform(integer_in(1, model::kMaxVocab));
    cmd->add_option("--n-expert", o->synth.n_expert,
                    "Override the expert count of a MoE preset (tests only: fewer experts of the real width)")
        ->transform(integer_in(1, 4096));
    cmd->add_option("--orig-ctx", o->synth.orig_ctx,
                    "Override the original context of a LongRoPE preset (tests only: the long factors apply to "
                    "contexts longer than it)")
        ->transform(integer_in(1, model::kMaxContext));
    cmd->add_option("-t,--threads", o->synth.threads, "Threads (default: every logical CPU)")
        ->transform(thread_count());
    cmd->add_option("--pool-rows", o->synth.pool_rows, "Random rows per (type, width) pool")
        ->capture_default_str()
        ->transform(integer_in(1, 65536));
    cmd->add_flag("--text-only", o->synth.text_only,
                  "Zero the output rows of tokens that are not whole text (special, partial UTF-8), so that greedy "
                  "replies are valid text (for llama-server, which refuses partial UTF-8)");
    cmd->add_flag("--list", o->list, "List the presets and exit");
    cmd->callback([o] { run_synth(*o); });
}

}  // namespace zinc::cli
