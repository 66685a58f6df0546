// `zinc inspect FILE.gguf [--json]`: what a GGUF file (or split set) contains. The report itself is
// gguf::describe_text / describe_json.
#include <cstdio>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "gguf/describe.h"

namespace zinc::cli {

void register_inspect(CLI::App& app) {
    struct Opts {
        std::string path;
        bool json = false;
    };
    auto opts = std::make_shared<Opts>();
    CLI::App* cmd = app.add_subcommand("inspect", "Show the metadata and tensors of a GGUF file");
    cmd->add_option("file", opts->path, "GGUF file (for a split model, the -00001-of-N file)")->required();
    cmd->add_flag("--json", opts->json, "Print one JSON document instead of tables");
    cmd->callback([opts] {
        const gguf::Model m(opts->path);
        const std::string out = opts->json ? gguf::describe_json(m, opts->path) : gguf::describe_text(m, opts->path);
        std::fwrite(out.data(), 1, out.size(), stdout);
    });
}

}  // namespace zinc::cli
