// Each `zinc` subcommand lives in its own file and registers itself on the application here.
#pragma once

#include <CLI/CLI.hpp>

namespace zinc::cli {

// Adds the subcommand to `app`; its callback runs the command and throws on failure.
void register_devices(CLI::App& app);
void register_inspect(CLI::App& app);
void register_logits(CLI::App& app);
void register_embed(CLI::App& app);
void register_perplexity(CLI::App& app);
void register_bench(CLI::App& app);
void register_run(CLI::App& app);
void register_chat(CLI::App& app);
void register_tokenize(CLI::App& app);
void register_detokenize(CLI::App& app);
void register_synth(CLI::App& app);
void register_quantize(CLI::App& app);
void register_template(CLI::App& app);
void register_serve(CLI::App& app);
// pull, list and rm (pull.cpp).
void register_pull(CLI::App& app);

}  // namespace zinc::cli
