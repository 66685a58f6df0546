// `zinc tokenize` and `zinc detokenize`: text to token ids and back with a model's vocabulary. Both read only the
// file's metadata, never its weights.
#include <cstdio>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/options.h"
#include "gguf/reader.h"
#include "tokenizer/tokenizer.h"

namespace zinc::cli {
namespace {

struct TokenizeOptions {
    std::string model;
    PromptFlags prompt;
    bool ids_only = false, no_bos = false, no_parse_special = false;
};

struct DetokenizeOptions {
    std::string model, ids;
    CLI::Option* ids_option = nullptr;
    bool no_special = false;
};

// The vocabulary of the model's first (or only) file.
tokenizer::Tokenizer read_tokenizer(const std::string& path) {
    return tokenizer::Tokenizer::from_gguf(gguf::File(path));
}

void tokenize(const TokenizeOptions& o) {
    const std::string text = read_prompt(o.prompt);
    const tokenizer::Tokenizer tok = read_tokenizer(o.model);
    const std::vector<int32_t> ids = tok.encode(text, !o.no_bos, !o.no_parse_special);
    std::string out;
    if (o.ids_only) {
        for (size_t i = 0; i < ids.size(); ++i) out += (i ? "," : "") + std::to_string(ids[i]);
        out += "\n";
    } else {
        // Pieces as JSON strings: quotes, backslashes and control characters escaped; the bytes of a piece that is
        // only part of a character show as U+FFFD.
        for (int32_t id : ids)
            out += std::to_string(id) + "\t" +
                   nlohmann::json(tok.token_text(id)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) +
                   "\n";
    }
    write_out(out);
}

void detokenize(const DetokenizeOptions& o) {
    std::string list = o.ids;
    if (o.ids_option->count() == 0) {
        if (stdin_is_terminal())
            throw CLI::ValidationError("no token ids", "give them with --ids 1,2,3 or on standard input");
        list.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
    }
    const std::vector<int32_t> ids = parse_ids("--ids", list);
    const tokenizer::Tokenizer tok = read_tokenizer(o.model);
    check_ids("--ids", ids, tok.n_vocab());
    write_out(tok.decode(ids, !o.no_special) + "\n");
}

}  // namespace

void register_tokenize(CLI::App& app) {
    auto o = std::make_shared<TokenizeOptions>();
    auto* cmd = app.add_subcommand("tokenize", "Print the token ids (and pieces) of a text");
    cmd->add_option("-m,--model", o->model, "GGUF model file (only its vocabulary is read)")->required();
    add_prompt_options(cmd, o->prompt);
    cmd->add_flag("--ids-only", o->ids_only, "print only the ids, comma-separated on one line (as --ids takes them)");
    cmd->add_flag("--no-bos", o->no_bos, "do not add the BOS (and EOS) tokens the vocabulary asks for");
    cmd->add_flag("--no-parse-special", o->no_parse_special,
                  "read special-token texts such as <|im_start|> as plain text");
    cmd->footer("Without --ids-only each line holds a token id, a tab and its piece as a JSON string.");
    cmd->callback([o] { tokenize(*o); });
}

void register_detokenize(CLI::App& app) {
    auto o = std::make_shared<DetokenizeOptions>();
    auto* cmd = app.add_subcommand("detokenize", "Print the text of token ids");
    cmd->add_option("-m,--model", o->model, "GGUF model file (only its vocabulary is read)")->required();
    o->ids_option = cmd->add_option("--ids", o->ids,
                                    "token ids, separated by commas or spaces (default: read from standard input)");
    cmd->add_flag("--no-special", o->no_special, "leave out the text of control tokens such as <|im_end|>");
    cmd->callback([o] { detokenize(*o); });
}

}  // namespace zinc::cli
