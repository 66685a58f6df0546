#include <cstdio>
#include <exception>

#include "cli/commands.h"

int main(int argc, char** argv) {
    CLI::App app{"zinc: inference engine for GGUF language models"};
    app.require_subcommand(1);
    app.set_version_flag("--version", "zinc 0.1.0");
    zinc::cli::register_devices(app);
    zinc::cli::register_inspect(app);
    zinc::cli::register_logits(app);
    zinc::cli::register_bench(app);
    zinc::cli::register_run(app);
    zinc::cli::register_chat(app);
    zinc::cli::register_synth(app);
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        return app.exit(e);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "zinc: error: %s\n", e.what());
        return 1;
    }
    return 0;
}
