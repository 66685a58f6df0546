// `zinc run`: one prompt in, generated text streamed out, speeds at the end.
#include <algorithm>
#include <climits>
#include <memory>
#include <optional>
#include <cstdio>
#include <stdexcept>

#include "cli/commands.h"
#include "cli/options.h"
#include "cli/reply.h"
#include "chat/turn.h"
#include "gguf/printable.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"

namespace zinc::cli {
namespace {

struct RunArgs {
    ModelFlags model;
    PromptFlags prompt;
    std::string system;
    bool chat = false, no_think = false;
    int max_tokens = 256;
    SamplingFlags sampling;
    ReplyFlags reply;
    std::string grammar, grammar_file, json_schema, json_schema_file;
};

// The grammar of --grammar, --grammar-file, --json-schema or --json-schema-file, checked before the model is read;
// null without any.
std::shared_ptr<const grammar::Grammar> read_grammar(const RunArgs& o) {
    if (!o.json_schema.empty() || !o.json_schema_file.empty()) {
        const std::string& file = o.json_schema_file;
        try {
            const std::string gbnf = grammar::json_schema_to_gbnf(file.empty() ? o.json_schema : read_file(file));
            auto g = std::make_shared<const grammar::Grammar>(grammar::parse_gbnf(gbnf));
            grammar::Matcher check(g);
            return g;
        } catch (const std::runtime_error& e) {  // SchemaError, GrammarError
            throw std::invalid_argument((file.empty() ? std::string("--json-schema: ") : file + ": ") + e.what());
        }
    }
    if (o.grammar.empty() && o.grammar_file.empty()) return nullptr;
    const std::string text = o.grammar_file.empty() ? o.grammar : read_file(o.grammar_file);
    try {
        auto g = std::make_shared<const grammar::Grammar>(grammar::parse_gbnf(text));
        grammar::Matcher check(g);  // the start's expansion is bounded too: a grammar too ambiguous fails here
        return g;
    } catch (const grammar::GrammarError& e) {
        throw std::invalid_argument((o.grammar_file.empty() ? std::string("--grammar: ") : o.grammar_file + ": ") +
                                    e.what());
    }
}

void run_text(const RunArgs& o) {
    std::string text = read_prompt(o.prompt);  // a missing prompt is refused before the model is read
    const std::shared_ptr<const grammar::Grammar> gram = read_grammar(o);  // so is a malformed grammar
    engine::OpenedModel om = open_model(o.model);
    engine::Session& s = *om.session;
    const std::string arch = om.model->get("general.architecture").get_string();
    chat::Turn turn;  // a plain prompt's: its text continued, as it is
    if (o.chat) {
        std::vector<tokenizer::ChatMessage> msgs;
        if (!o.system.empty()) msgs.push_back({"system", o.system});
        msgs.push_back({"user", text});
        turn = chat::prepare_turn(s.tokenizer(), arch, msgs, turn_options(o.reply, o.no_think));
        text = turn.prompt.text;
    } else {
        turn.tokens = s.tokenizer().encode(text, true, true);  // the user's own text, control tokens and all
    }
    const std::vector<int32_t>& ids = turn.tokens;
    const engine::SamplerParams sp = sampler_params(o.sampling, s.n_ctx());
    if (o.model.verbose) {
        std::fprintf(stderr, "zinc: %s\n", describe_plan(om.plan).c_str());
        std::fprintf(stderr, "zinc: seed %llu, prompt %zu tokens\n", static_cast<unsigned long long>(sp.seed),
                     ids.size());
        // As llama.cpp's --verbose-prompt: the exact text the model is given.
        if (o.chat) std::fprintf(stderr, "zinc: prompt from %s:\n%s\n", gguf::terminal_text(turn.prompt.how).c_str(),
                                gguf::terminal_text(text).c_str());
    }
    if (ids.empty()) throw std::invalid_argument("the prompt has no tokens");
    if (static_cast<int64_t>(ids.size()) > s.n_ctx())
        throw std::length_error("the prompt has " + std::to_string(ids.size()) + " tokens but the context holds " +
                                std::to_string(s.n_ctx()) + "; give a larger --ctx-size (the model was trained on " +
                                std::to_string(om.plan.n_ctx_train) + ") or a shorter prompt");
    if (!o.chat) write_out(text);  // the continuation reads on from the prompt, as in llama.cpp
    engine::Sampler sampler(sp);
    engine::GenerateOptions go;
    go.max_tokens = o.max_tokens;
    go.render_special = turn.render_special;  // the chat output parser reads the format's markers
    ReplyWriter reply = reply_writer(o.reply, turn);
    go.force = [&] { return reply.forced_tokens(s.tokenizer()); };
    std::optional<grammar::Matcher> matcher;
    if (gram) go.grammar = &matcher.emplace(gram);
    bool stopped = false;
    const auto r = s.generate(ids, go, sampler, [&](int32_t, const std::string& piece) {
        stopped = !reply.feed(piece);
        return !stopped;
    });
    reply.finish();
    write_out("\n");
    if (r.stop == engine::GenerateResult::Stop::Grammar)
        std::fprintf(stderr, "zinc: stopped where the grammar allows no further token\n");
    std::fprintf(stderr, "prompt: %d tokens, %.1f tok/s | generation: %d tokens, %.1f tok/s | stop: %s\n",
                 r.prompt_tokens, r.prompt_tokens / std::max(r.prompt_seconds, 1e-9), r.generated,
                 r.generated / std::max(r.generate_seconds, 1e-9),
                 stopped ? "stop string" : engine::stop_reason(r.stop));
}

}  // namespace

void register_run(CLI::App& app) {
    auto o = std::make_shared<RunArgs>();
    auto* cmd = app.add_subcommand("run", "Generate text from a prompt, streamed to standard output");
    add_model_options(cmd, o->model);
    add_prompt_options(cmd, o->prompt);
    auto* chat = cmd->add_flag("--chat", o->chat, "wrap the prompt as a user message in the model's chat template");
    cmd->add_option("--system,--system-prompt", o->system, "(also -sys) system message, with --chat")->needs(chat);
    cmd->add_flag("--no-think", o->no_think, "with --chat: ask a thinking model to answer without thinking")
        ->needs(chat);
    cmd->add_option("-n,--max-tokens,--n-predict", o->max_tokens, "tokens to generate at most; -1 = until the end")
        ->capture_default_str()
        ->transform(integer_in(-1, INT_MAX));
    add_sampling_options(cmd, o->sampling);
    auto* gtext = cmd->add_option("--grammar", o->grammar,
                                  "a GBNF grammar the generated text must match (its rule 'root'), as llama.cpp's");
    auto* gfile = cmd->add_option("--grammar-file", o->grammar_file, "the GBNF grammar of --grammar, from a file")
                      ->excludes(gtext);
    auto* jtext = cmd->add_option("-j,--json-schema", o->json_schema,
                                  "a JSON Schema the generated JSON must satisfy (converted to a grammar)")
                      ->excludes(gtext)
                      ->excludes(gfile);
    cmd->add_option("--json-schema-file", o->json_schema_file, "the JSON Schema of --json-schema, from a file")
        ->excludes(gtext)
        ->excludes(gfile)
        ->excludes(jtext);
    add_reply_options(cmd, o->reply, chat);
    cmd->callback([o] { run_text(*o); });
}

}  // namespace zinc::cli
