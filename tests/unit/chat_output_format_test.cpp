// Picking the output parser from a model's chat template and architecture, and where its output
// starts (inside the reasoning or in the answer) from the rendered prompt.
#include <gtest/gtest.h>

#include "chat/output_parser.h"
#include "tokenizer/chat_format.h"
#include "tokenizer_test_util.h"

using namespace zinc::chat;

TEST(ChatOutputFormat, RealMistralNemoTemplateIsMistral) {
    const std::string cfg = zinc::tokenizer::test::read_xz(std::string(ZINC_TOKENIZERS_DIR) +
                                                           "/tekken/tokenizer_config.json.xz");
    const auto tmpl = nlohmann::json::parse(cfg).at("chat_template").get<std::string>();
    EXPECT_EQ(detect_output_format(tmpl, "llama"), OutputFormat::mistral);
}

TEST(ChatOutputFormat, RealQwen3TemplateIsQwen) {
    const auto& cfg = zinc::tokenizer::test::qwen3_tokenizer_config();
    EXPECT_EQ(detect_output_format(cfg.at("chat_template").get<std::string>(), "qwen3"), OutputFormat::qwen);
}

TEST(ChatOutputFormat, TemplateFragmentsOfEachFamily) {
    // Fragments as the released templates write them.
    EXPECT_EQ(detect_output_format("{{- '<|start|>assistant<|channel|>final<|message|>' }}"), OutputFormat::harmony);
    EXPECT_EQ(detect_output_format("{{- '<|start|>' + role + '<|message|>' }}"), OutputFormat::harmony);
    EXPECT_EQ(detect_output_format("{{- '<|turn>model\\n' -}}{{- '<|channel>thought\\n<channel|>' -}}"),
              OutputFormat::gemma4);
    EXPECT_EQ(detect_output_format("{{- '<|im_start|>assistant\\n<think>\\n' }}"), OutputFormat::qwen);
    EXPECT_EQ(detect_output_format("{{ '<｜Assistant｜><think>\\n' }}"), OutputFormat::qwen);  // DeepSeek R1
    EXPECT_EQ(detect_output_format("{{- '<tool_call>\\n{\"name\": \"' }}"), OutputFormat::qwen);  // Hermes
    EXPECT_EQ(detect_output_format("{{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' }}"),
              OutputFormat::llama3_json);
    EXPECT_EQ(detect_output_format("{{- '<|python_tag|>' + tool_call.name }}"), OutputFormat::llama3_json);
    EXPECT_EQ(detect_output_format("{{- '[TOOL_CALLS][' }}"), OutputFormat::mistral);  // Mistral Nemo
    EXPECT_EQ(detect_output_format("{{- '[THINK]' + thinking + '[/THINK]' }}"), OutputFormat::mistral);  // Magistral
    EXPECT_EQ(detect_output_format("{{ '<start_of_turn>model\\n' }}"), OutputFormat::plain);  // Gemma 3
    EXPECT_EQ(detect_output_format(""), OutputFormat::plain);
}

TEST(ChatOutputFormat, ArchitectureWhenTheTemplateSaysNothing) {
    EXPECT_EQ(detect_output_format("", "gpt-oss"), OutputFormat::harmony);
    EXPECT_EQ(detect_output_format("", "gemma4"), OutputFormat::gemma4);
    EXPECT_EQ(detect_output_format("", "qwen35moe"), OutputFormat::qwen);
    EXPECT_EQ(detect_output_format("", "llama"), OutputFormat::plain);
    EXPECT_EQ(detect_output_format("", "mistral3"), OutputFormat::mistral);
}

TEST(ChatOutputFormat, WhereTheOutputStarts) {
    // Qwen3.5's prompt with thinking on opens the block; thinking off closes an empty one.
    EXPECT_TRUE(prompt_opens_reasoning(OutputFormat::qwen, "<|im_start|>assistant\n<think>\n"));
    EXPECT_FALSE(prompt_opens_reasoning(OutputFormat::qwen, "<|im_start|>assistant\n<think>\n\n</think>\n\n"));
    EXPECT_FALSE(prompt_opens_reasoning(OutputFormat::qwen, "<|im_start|>assistant\n"));
    EXPECT_FALSE(prompt_opens_reasoning(OutputFormat::gemma4, "<|turn>model\n<|channel>thought\n<channel|>"));
    EXPECT_FALSE(prompt_opens_reasoning(OutputFormat::harmony, "<|start|>assistant"));
    EXPECT_TRUE(prompt_opens_reasoning(OutputFormat::mistral, "[INST]Hi[/INST][THINK]"));
    EXPECT_FALSE(prompt_opens_reasoning(OutputFormat::mistral, "[INST]Hi[/INST]"));
}

TEST(ChatOutputFormat, ZincsOwnQwen3PromptsSayWhereTheOutputStarts) {
    using namespace zinc::tokenizer;
    const std::vector<ChatMessage> msgs{{"user", "Hi"}};
    ChatOptions on;
    ChatOptions off;
    off.enable_thinking = false;
    // Qwen3's generation prompt leaves the block to the model; with thinking off it is closed.
    EXPECT_FALSE(prompt_opens_reasoning(OutputFormat::qwen, render_chat(ChatStyle::ChatMLThink, msgs, on)));
    EXPECT_FALSE(prompt_opens_reasoning(OutputFormat::qwen, render_chat(ChatStyle::ChatMLThink, msgs, off)));
    EXPECT_FALSE(prompt_opens_reasoning(OutputFormat::gemma4, render_chat(ChatStyle::Gemma4, msgs, off)));
}
