// The prompt of a conversation: the model's own template through the Jinja2 engine, BOS added only when the text
// does not print it, and the built-in styles as the fallback for a model's template the engine fails on.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <string>

#include "chat/prompt.h"
#include "gguf/reader.h"
#include "gguf/writer.h"
#include "template/error.h"
#include "tokenizer/tokenizer.h"

namespace {

// The qwen3 fixture's vocabulary with `chat_template` as its template.
zinc::tokenizer::Tokenizer vocabulary_with(const std::string& chat_template, const std::string& name) {
    const zinc::gguf::File src(ZINC_FIXTURES_DIR "/qwen3/qwen3-q8_0.gguf");
    zinc::gguf::Writer w;
    for (const auto& kv : src.metadata())
        if ((kv.key.starts_with("tokenizer.") && kv.key != "tokenizer.chat_template") ||
            kv.key == "general.architecture")
            w.add(kv.key, kv.value);
    w.set("tokenizer.chat_template", chat_template);
    const std::string path = ::testing::TempDir() + name + "_" + std::to_string(::getpid()) + ".gguf";
    w.write(path);
    auto tok = zinc::tokenizer::Tokenizer::from_gguf(zinc::gguf::File(path));
    std::remove(path.c_str());
    return tok;
}

const std::vector<zinc::tokenizer::ChatMessage> kHello = {{"user", "Hello"}};

TEST(ChatPrompt, RendersTheModelsTemplate) {
    const auto tok = vocabulary_with("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n"
                                     "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}",
                                     "chatml");
    const zinc::chat::Prompt p = zinc::chat::render_prompt(tok, kHello, {});
    EXPECT_EQ(p.text, "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n");
    EXPECT_EQ(p.how, "the model's chat template");
    EXPECT_EQ(p.add_bos, tok.add_bos());
}

TEST(ChatPrompt, FallsBackToABuiltInStyleWhenTheModelsTemplateFails) {
    // ChatML markers, and a construct the engine refuses: a call of an undefined name.
    const auto tok = vocabulary_with("<|im_start|>{{ undefined_function(messages) }}", "broken");
    const zinc::chat::Prompt p = zinc::chat::render_prompt(tok, kHello, {});
    EXPECT_EQ(p.text, "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n");
    EXPECT_TRUE(p.how.starts_with("a built-in style (the model's chat template failed: ")) << p.how;
    // A template given by the user is never replaced: its error is the answer.
    zinc::chat::PromptOptions given;
    given.template_source = "{{ undefined_function(messages) }}";
    EXPECT_THROW(zinc::chat::render_prompt(tok, kHello, given), zinc::tmpl::TemplateError);
}

}  // namespace
