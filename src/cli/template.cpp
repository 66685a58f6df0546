// `zinc template`: renders a chat template for a conversation without loading weights, and prints the exact prompt
// text a model would be given.
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/json_text.h"
#include "chat/prompt.h"
#include "cli/commands.h"
#include "cli/options.h"
#include "gguf/split.h"
#include "template/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace zinc::cli {
namespace {

struct TemplateArgs {
    std::string model, template_file, messages, tools;
    bool no_generation_prompt = false;
    std::vector<std::string> vars;  // name=json
};

void render(const TemplateArgs& o) {
    tmpl::ChatRequest req;
    // A conversation file holds the messages, or an object with "messages" (and "tools"), as an OpenAI request.
    const nlohmann::ordered_json conv = read_json(o.messages, "--messages");
    req.messages = conv.is_object() && conv.contains("messages") ? conv["messages"] : conv;
    if (!req.messages.is_array()) throw std::runtime_error("--messages " + o.messages + ": expects a list of messages");
    if (conv.is_object() && conv.contains("tools")) req.tools = conv["tools"];
    if (!o.tools.empty()) req.tools = read_json(o.tools, "--tools");
    req.add_generation_prompt = !o.no_generation_prompt;

    std::string source;
    if (!o.template_file.empty()) {
        source = read_file(o.template_file);
    } else {
        // The template and the special tokens' texts, from the file's metadata (no weights are read).
        const tokenizer::Tokenizer tok = tokenizer::Tokenizer::from_gguf(gguf::File(o.model));
        source = tok.chat_template();
        if (source.empty())
            throw std::runtime_error(o.model + " has no chat template (tokenizer.chat_template); give --template-file");
        req.variables = chat::special_token_variables(tok);
    }
    for (const std::string& v : o.vars) {
        const size_t eq = v.find('=');
        if (eq == 0 || eq == std::string::npos) throw CLI::ValidationError("--var", "expects name=json, not '" + v + "'");
        try {
            req.variables[v.substr(0, eq)] = chat::parse_json(v.substr(eq + 1));
        } catch (const std::runtime_error&) {
            throw CLI::ValidationError("--var", "the value of " + v.substr(0, eq) + " is not JSON: '" +
                                                    v.substr(eq + 1) + "' (a string needs quotes: name='\"text\"')");
        }
    }
    write_out(tmpl::render_chat(source, req));
}

}  // namespace

void register_template(CLI::App& app) {
    auto o = std::make_shared<TemplateArgs>();
    auto* cmd = app.add_subcommand(
        "template", "Render a model's chat template for a conversation (no weights are loaded) and print the prompt");
    auto* m = cmd->add_option("-m,--model", o->model, "GGUF file whose tokenizer.chat_template is rendered");
    auto* t = cmd->add_option("--template-file", o->template_file, "a Jinja2 template file to render instead");
    m->excludes(t);
    t->excludes(m);
    cmd->add_option("--messages", o->messages,
                    "JSON file (or - for standard input): a list of messages, or an object with \"messages\" and "
                    "\"tools\"")
        ->required();
    cmd->add_option("--tools", o->tools, "JSON file with the tools offered to the model");
    cmd->add_flag("--no-generation-prompt", o->no_generation_prompt, "do not open the assistant's turn at the end");
    cmd->add_option("--var", o->vars, "another template variable, as name=json (e.g. enable_thinking=false)");
    cmd->callback([o, m, t] {
        if (m->count() + t->count() == 0) throw CLI::RequiredError("-m or --template-file");
        render(*o);
    });
}

}  // namespace zinc::cli
