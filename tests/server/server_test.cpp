// `zinc serve` as a client sees it: a real server process on the Qwen3 fixture (its own chat template), started on a
// free port, and HTTP requests from a plain client (http_client.h): health, the model list, the server's properties
// (/props), chat completions streamed and not, stop strings, seed determinism, the API key, malformed requests
// answered with OpenAI's errors while the server keeps serving, a client that goes away in the middle of a stream,
// and the flags of a chat template file and of the sampling defaults.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "serve_process.h"

namespace {

using json = nlohmann::json;
using zinc::test::ServeProcess;

json chat_body(const std::string& text, int max_tokens) {
    return {{"messages", json::array({{{"role", "user"}, {"content", text}}})},
            {"max_tokens", max_tokens},
            {"temperature", 0}};
}

// The usage of a chat completion that must succeed (an empty object where it did not, with a failure).
json chat_usage(const ServeProcess& srv, const json& body) {
    auto r = srv.client().Post("/v1/chat/completions", body.dump(), "application/json");
    EXPECT_TRUE(r && r->status == 200) << (r ? r->body : srv.log());
    return r ? json::parse(r->body)["usage"] : json();
}

TEST(Serve, HealthModelsAndChatCompletions) {
    ServeProcess srv({});
    ASSERT_GT(srv.port(), 0) << srv.log();
    auto c = srv.client();
    auto health = c.Get("/health");
    ASSERT_TRUE(health) << srv.log();
    EXPECT_EQ(health->status, 200);
    auto models = c.Get("/v1/models");
    ASSERT_TRUE(models);
    EXPECT_EQ(json::parse(models->body)["data"][0]["id"], "qwen3-q8_0.gguf");

    auto r = c.Post("/v1/chat/completions", chat_body("Hello there", 5).dump(), "application/json");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    const json j = json::parse(r->body);
    EXPECT_EQ(j["object"], "chat.completion");
    EXPECT_EQ(j["choices"][0]["message"]["role"], "assistant");
    EXPECT_TRUE(j["choices"][0]["message"]["content"].is_string());
    EXPECT_EQ(j["usage"]["completion_tokens"], 5);
    EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
    // Greedy decoding gives the same reply again; so does sampling with the same seed.
    auto again = c.Post("/v1/chat/completions", chat_body("Hello there", 5).dump(), "application/json");
    ASSERT_TRUE(again);
    EXPECT_EQ(json::parse(again->body)["choices"][0]["message"], j["choices"][0]["message"]);
    json sampled = chat_body("Hello there", 8);
    sampled["temperature"] = 1.0;
    sampled["seed"] = 42;
    auto s1 = c.Post("/v1/chat/completions", sampled.dump(), "application/json");
    auto s2 = c.Post("/v1/chat/completions", sampled.dump(), "application/json");
    ASSERT_TRUE(s1 && s2);
    EXPECT_EQ(json::parse(s1->body)["choices"][0]["message"], json::parse(s2->body)["choices"][0]["message"]);
}

// The streamed reply: server-sent events, the role first, the text in pieces, the finish reason, the usage chunk
// when asked, and [DONE]; its text is the unstreamed reply's.
TEST(Serve, StreamedChatCompletion) {
    ServeProcess srv({});
    ASSERT_GT(srv.port(), 0) << srv.log();
    auto c = srv.client();
    json body = chat_body("Tell me something", 6);
    auto whole = c.Post("/v1/chat/completions", body.dump(), "application/json");
    ASSERT_TRUE(whole);
    body["stream"] = true;
    body["stream_options"] = {{"include_usage", true}};
    auto r = c.Post("/v1/chat/completions", body.dump(), "application/json");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    EXPECT_EQ(r->get_header_value("Content-Type"), "text/event-stream");
    std::vector<json> chunks;
    bool done = false;
    size_t at = 0;
    while ((at = r->body.find("data: ", at)) != std::string::npos) {
        const size_t end = r->body.find("\n\n", at);
        ASSERT_NE(end, std::string::npos) << r->body;
        const std::string data = r->body.substr(at + 6, end - at - 6);
        if (data == "[DONE]") {
            done = true;
        } else {
            chunks.push_back(json::parse(data));
        }
        at = end;
    }
    EXPECT_TRUE(done) << r->body;
    ASSERT_GE(chunks.size(), 3u) << r->body;
    EXPECT_EQ(chunks.front()["choices"][0]["delta"]["role"], "assistant");
    std::string text;
    std::string finish;
    for (const json& ch : chunks) {
        if (ch["choices"].empty()) continue;
        const json& d = ch["choices"][0]["delta"];
        if (d.contains("content")) text += d["content"].get<std::string>();
        if (d.contains("tool_calls") || d.contains("reasoning_content")) text += "?";  // not expected here
        if (!ch["choices"][0]["finish_reason"].is_null()) finish = ch["choices"][0]["finish_reason"];
    }
    EXPECT_EQ(finish, "length");
    EXPECT_EQ(chunks.back()["usage"]["completion_tokens"], 6);
    const json w = json::parse(whole->body)["choices"][0]["message"];
    EXPECT_EQ(text, w["content"].get<std::string>());
}

// Stop strings end the reply where they begin and are never in it.
TEST(Serve, StopStringsAreNotInTheReply) {
    ServeProcess srv({});
    ASSERT_GT(srv.port(), 0) << srv.log();
    auto c = srv.client();
    auto full = c.Post("/v1/chat/completions", chat_body("Count", 16).dump(), "application/json");
    ASSERT_TRUE(full);
    const std::string text = json::parse(full->body)["choices"][0]["message"]["content"];
    if (text.size() < 6) GTEST_SKIP() << "the fixture's reply is too short to cut: " << text;
    json body = chat_body("Count", 16);
    body["stop"] = json::array({text.substr(3, 3)});
    auto cut = c.Post("/v1/chat/completions", body.dump(), "application/json");
    ASSERT_TRUE(cut);
    const json j = json::parse(cut->body);
    EXPECT_EQ(j["choices"][0]["message"]["content"], text.substr(0, text.find(text.substr(3, 3))));
    EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
}

// ignore_eos (llama.cpp's): the end of turn is never chosen, so the greedy reply runs to max_tokens, the reply without
// it and then more; a value that is not a boolean is refused.
TEST(Serve, IgnoreEos) {
    ServeProcess srv({});
    ASSERT_GT(srv.port(), 0) << srv.log();
    auto c = srv.client();
    json body = chat_body("What is 2+2?", 64);
    auto ended = c.Post("/v1/chat/completions", body.dump(), "application/json");
    body["ignore_eos"] = true;
    auto longer = c.Post("/v1/chat/completions", body.dump(), "application/json");
    ASSERT_TRUE(ended && longer);
    const json e = json::parse(ended->body), l = json::parse(longer->body);
    ASSERT_EQ(e["choices"][0]["finish_reason"], "stop") << ended->body;  // the fixture's reply ends early
    EXPECT_LT(e["usage"]["completion_tokens"].get<int>(), 64);
    EXPECT_EQ(l["choices"][0]["finish_reason"], "length") << longer->body;
    EXPECT_EQ(l["usage"]["completion_tokens"], 64);
    const std::string short_text = e["choices"][0]["message"]["content"];
    EXPECT_EQ(l["choices"][0]["message"]["content"].get<std::string>().substr(0, short_text.size()), short_text);
    body["ignore_eos"] = "yes";
    auto bad = c.Post("/v1/chat/completions", body.dump(), "application/json");
    ASSERT_TRUE(bad);
    EXPECT_EQ(bad->status, 400);
    EXPECT_EQ(json::parse(bad->body)["error"]["param"], "ignore_eos");
}

// logit_bias: a token given +100 is the greedy reply's every token; given -100 it is never chosen, and the next
// favoured token takes its place.
TEST(Serve, LogitBias) {
    ServeProcess srv({});
    ASSERT_GT(srv.port(), 0) << srv.log();
    auto c = srv.client();
    const auto token = [&](const std::string& text) {
        auto r = c.Post("/tokenize", json{{"content", text}}.dump(), "application/json");
        EXPECT_TRUE(r && r->status == 200) << (r ? r->body : srv.log());
        return r ? json::parse(r->body)["tokens"][0].get<int>() : -1;
    };
    const auto piece = [&](int id) {
        auto r = c.Post("/detokenize", json{{"tokens", {id}}}.dump(), "application/json");
        EXPECT_TRUE(r && r->status == 200) << (r ? r->body : srv.log());
        return r ? json::parse(r->body)["content"].get<std::string>() : std::string();
    };
    const int x = token("the"), y = token("and");
    ASSERT_NE(x, y);
    const auto reply = [&](double bx, double by) {
        json body = {{"prompt", "Once upon a time"}, {"max_tokens", 5}, {"temperature", 0}};
        body["logit_bias"] = {{std::to_string(x), bx}, {std::to_string(y), by}};
        auto r = c.Post("/v1/completions", body.dump(), "application/json");
        EXPECT_TRUE(r && r->status == 200) << (r ? r->body : srv.log());
        return r ? json::parse(r->body)["choices"][0]["text"].get<std::string>() : std::string();
    };
    std::string xs, ys;
    for (int i = 0; i < 5; ++i) xs += piece(x), ys += piece(y);
    EXPECT_EQ(reply(100, 50), xs);
    EXPECT_EQ(reply(-100, 50), ys);
}

// Malformed and hostile requests get OpenAI's error bodies with a 4xx code; the server keeps serving.
TEST(Serve, BadRequestsAreAnsweredWithErrors) {
    ServeProcess srv({"--api-key", "sesame"});
    ASSERT_GT(srv.port(), 0) << srv.log();
    auto c = srv.client();
    const zinc::test::Headers auth = {{"Authorization", "Bearer sesame"}};
    auto no_key = c.Post("/v1/chat/completions", chat_body("hi", 2).dump(), "application/json");
    ASSERT_TRUE(no_key);
    EXPECT_EQ(no_key->status, 401);
    auto wrong_key = c.Post("/v1/chat/completions", {{"Authorization", "Bearer sesamx"}}, chat_body("hi", 2).dump(),
                            "application/json");
    ASSERT_TRUE(wrong_key);
    EXPECT_EQ(wrong_key->status, 401);
    auto health = c.Get("/health");  // needs no key
    ASSERT_TRUE(health);
    EXPECT_EQ(health->status, 200);

    json bad_temperature = chat_body("hi", 2);
    bad_temperature["temperature"] = "hot";
    json bad_max = chat_body("hi", 2);
    bad_max["max_tokens"] = -3;
    json bad_stop = chat_body("hi", 2);
    bad_stop["stop"] = 7;
    std::string words;
    for (int i = 0; i < 6000; ++i) words += "word ";
    json long_prompt = chat_body(words, 2);  // more tokens than the 4096-token context
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"{not json", ""},
        {"[1, 2]", ""},
        {R"({"messages": []})", "messages"},
        {R"({"messages": [{"role": "user"}]})", "messages"},
        {bad_temperature.dump(), "temperature"},
        {bad_max.dump(), "max_tokens"},
        {bad_stop.dump(), "stop"},
        {std::string("{\"messages\": [{\"role\": \"user\", \"content\": \"\xff\xfe\"}]}"), ""},
        {long_prompt.dump(), "messages"},
    };
    for (const auto& [body, param] : cases) {
        auto r = c.Post("/v1/chat/completions", auth, body, "application/json");
        ASSERT_TRUE(r) << body.substr(0, 80);
        EXPECT_EQ(r->status, 400) << body.substr(0, 80) << ": " << r->body;
        const json e = json::parse(r->body);
        EXPECT_TRUE(e["error"]["message"].is_string()) << r->body;
        if (!param.empty()) {
            EXPECT_EQ(e["error"]["param"], param) << r->body;
        }
    }
    auto ok = c.Post("/v1/chat/completions", auth, chat_body("hi", 2).dump(), "application/json");
    ASSERT_TRUE(ok);
    EXPECT_EQ(ok->status, 200) << ok->body;
}

// GET /props: llama.cpp's server's shape with the context a request has, the reply limit (-n), the sequences (-np,
// whose default depends on the backend) and the sampling defaults the flags set, the model's name, file and template;
// behind the API key as /slots is, not as /health.
TEST(Serve, Props) {
    ServeProcess srv({"--api-key", "sesame", "-c", "512", "-n", "200", "-np", "2", "--temp", "0.5", "--top-k", "20",
                      "--alias", "tiny"});
    ASSERT_GT(srv.port(), 0) << srv.log();
    auto c = srv.client();
    const zinc::test::Headers auth = {{"Authorization", "Bearer sesame"}};
    for (const char* path : {"/props", "/slots"}) {
        auto no_key = c.Get(path);
        ASSERT_TRUE(no_key);
        EXPECT_EQ(no_key->status, 401) << path;
        EXPECT_EQ(no_key->body.find("n_ctx"), std::string::npos) << no_key->body;
    }
    auto r = c.Get("/props", auth);
    ASSERT_TRUE(r) << srv.log();
    ASSERT_EQ(r->status, 200) << r->body;
    EXPECT_NE(r->get_header_value("Content-Type").find("application/json"), std::string::npos);
    const json p = json::parse(r->body);
    const json& g = p["default_generation_settings"];
    EXPECT_EQ(g["n_ctx"], 512) << p;
    EXPECT_EQ(g["params"]["n_predict"], 200) << p;
    EXPECT_EQ(g["params"]["temperature"], 0.5) << p;
    EXPECT_EQ(g["params"]["top_k"], 20) << p;
    EXPECT_EQ(g["params"]["top_p"], 0.95) << p;  // OpenAI's defaults where no flag names one
    EXPECT_EQ(g["params"]["min_p"], 0.05) << p;
    EXPECT_EQ(g["params"]["seed"], -1) << p;  // a random seed for each request
    EXPECT_EQ(p["limits"]["max_tokens"], 200) << p;
    EXPECT_EQ(p["total_slots"], 2) << p;
    EXPECT_EQ(p["model_alias"], "tiny") << p;
    EXPECT_NE(p["model_path"].get<std::string>().find("qwen3-q8_0.gguf"), std::string::npos) << p;
    EXPECT_NE(p["chat_template"].get<std::string>().find("im_start"), std::string::npos) << p;  // Qwen3's own
    EXPECT_EQ(p["eos_token"], "<|im_end|>") << p;
    EXPECT_EQ(p["modalities"]["vision"], false) << p;

    // A request that asks for more than the reply limit /props gave is refused.
    json too_many = chat_body("hi", 201);
    auto refused = c.Post("/v1/chat/completions", auth, too_many.dump(), "application/json");
    ASSERT_TRUE(refused);
    EXPECT_EQ(refused->status, 400) << refused->body;
    EXPECT_NE(refused->body.find("200"), std::string::npos) << refused->body;
}

// Without -n a reply may have the whole context; a model without a chat template (the built-in one) says so with an
// empty chat_template.
TEST(Serve, PropsOfTheBuiltInModel) {
    ServeProcess srv({}, ZINC_TEST_DATA_DIR "/../../data/brown/brown-qwen3-5m-bf16.gguf");  // data/brown
    ASSERT_GT(srv.port(), 0) << srv.log();
    auto r = srv.client().Get("/props");
    ASSERT_TRUE(r) << srv.log();
    ASSERT_EQ(r->status, 200) << r->body;
    const json p = json::parse(r->body);
    EXPECT_EQ(p["default_generation_settings"]["n_ctx"], 512) << p;
    EXPECT_EQ(p["default_generation_settings"]["params"]["n_predict"], 512) << p;
    EXPECT_EQ(p["default_generation_settings"]["params"]["temperature"], 0.8) << p;
    EXPECT_EQ(p["model_alias"], "brown-qwen3-5m-bf16.gguf") << p;
    EXPECT_EQ(p["chat_template"], "") << p;
}

// A client that goes away in the middle of a stream ends that generation; the next request is served.
TEST(Serve, ClientThatLeavesMidStream) {
    ServeProcess srv({});
    ASSERT_GT(srv.port(), 0) << srv.log();
    {
        auto c = srv.client();
        json body = chat_body("Write a long story", 2000);
        body["stream"] = true;
        int pieces = 0;
        c.Post("/v1/chat/completions", body.dump(), "application/json",
               [&](const std::string&) { return ++pieces < 3; });  // hangs up
        EXPECT_GE(pieces, 3);
    }
    auto c = srv.client();
    auto r = c.Post("/v1/chat/completions", chat_body("hi", 2).dump(), "application/json");
    ASSERT_TRUE(r) << srv.log();
    EXPECT_EQ(r->status, 200) << r->body;
}

std::string write_file(const std::string& name, const std::string& text) {
    const std::string path = ::testing::TempDir() + name;
    std::ofstream(path, std::ios::binary) << text;
    return path;
}

json user_message(const std::string& text) { return json::array({{{"role", "user"}, {"content", text}}}); }

// --chat-template-file renders every conversation, in place of the model's template; --temp and --seed are the
// sampling of requests that leave it out.
TEST(Serve, ChatTemplateFileAndSamplingDefaults) {
    const std::string tmpl = write_file("serve_template.jinja",
                                        "{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}"
                                        "{% if add_generation_prompt %}[assistant] {% endif %}");
    ServeProcess srv({"--chat-template-file", tmpl, "--temp", "0"});
    ASSERT_GT(srv.port(), 0) << srv.log();
    auto c = srv.client();
    auto r = c.Post("/apply-template", json{{"messages", user_message("Hello")}}.dump(), "application/json");
    ASSERT_TRUE(r) << srv.log();
    ASSERT_EQ(r->status, 200) << r->body;
    EXPECT_EQ(json::parse(r->body)["prompt"], "[user] Hello\n[assistant] ");
    // No temperature in the request: --temp 0's greedy reply, the same as a request that asks for greedy.
    const json asked = {{"messages", user_message("Tell me a story")}, {"max_tokens", 16}};
    json greedy = asked;
    greedy["temperature"] = 0;
    auto a = c.Post("/v1/chat/completions", asked.dump(), "application/json");
    auto g = c.Post("/v1/chat/completions", greedy.dump(), "application/json");
    ASSERT_TRUE(a && g);
    ASSERT_EQ(a->status, 200) << a->body;
    EXPECT_EQ(json::parse(a->body)["choices"][0]["message"], json::parse(g->body)["choices"][0]["message"]);

    // --seed: sampled replies of requests without a seed repeat; a request's own seed still counts.
    ServeProcess seeded({"--temp", "1", "--seed", "7"});
    ASSERT_GT(seeded.port(), 0) << seeded.log();
    auto sc = seeded.client();
    auto s1 = sc.Post("/v1/chat/completions", asked.dump(), "application/json");
    auto s2 = sc.Post("/v1/chat/completions", asked.dump(), "application/json");
    json own = asked;
    own["seed"] = 7;
    auto s3 = sc.Post("/v1/chat/completions", own.dump(), "application/json");
    ASSERT_TRUE(s1 && s2 && s3);
    const json m1 = json::parse(s1->body)["choices"][0]["message"];
    EXPECT_EQ(m1, json::parse(s2->body)["choices"][0]["message"]);
    EXPECT_EQ(m1, json::parse(s3->body)["choices"][0]["message"]);
}

// A template file that does not render is refused when the server starts, naming the flag.
TEST(Serve, BrokenChatTemplateFileIsRefused) {
    const std::string tmpl = write_file("serve_broken.jinja", "{% for m in messages %}{{ m.content ");
    ServeProcess srv({"--chat-template-file", tmpl});
    EXPECT_NE(srv.log().find("--chat-template-file"), std::string::npos) << srv.log();
    EXPECT_EQ(srv.log().find("zinc: ready"), std::string::npos) << srv.log();
}

// A line on standard error for each request: method, path, status, a generating request's tokens and its time, also
// for a streamed answer and one refused; none with --log-disable.
TEST(Serve, RequestLog) {
    ServeProcess srv({});
    ASSERT_GT(srv.port(), 0) << srv.log();
    auto c = srv.client();
    auto r = c.Post("/v1/chat/completions", chat_body("Hello there", 3).dump(), "application/json");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    const int prompt = json::parse(r->body)["usage"]["prompt_tokens"];
    EXPECT_TRUE(srv.wait_for_log("zinc: POST /v1/chat/completions 200, prompt " + std::to_string(prompt) +
                                 " tokens (0 cached), generated 3, "))
        << srv.log();
    json streamed = chat_body("Hello there", 4);
    streamed["stream"] = true;
    c.Post("/v1/chat/completions", streamed.dump(), "application/json", [](const std::string&) { return true; });
    // The same prompt again: all of it but its last token is still in the model's cache.
    EXPECT_TRUE(srv.wait_for_log("tokens (" + std::to_string(prompt - 1) + " cached), generated 4, ")) << srv.log();
    ASSERT_TRUE(c.Get("/health"));
    EXPECT_TRUE(srv.wait_for_log("zinc: GET /health 200, ")) << srv.log();
    json bad = chat_body("hi", 2);
    bad["temperature"] = 9;
    ASSERT_TRUE(c.Post("/v1/chat/completions", bad.dump(), "application/json"));
    EXPECT_TRUE(srv.wait_for_log("zinc: POST /v1/chat/completions 400, ")) << srv.log();

    ServeProcess quiet({"--log-disable"});
    ASSERT_GT(quiet.port(), 0) << quiet.log();
    auto q = quiet.client();
    ASSERT_TRUE(q.Get("/health"));
    ASSERT_TRUE(q.Post("/v1/chat/completions", chat_body("Hello there", 2).dump(), "application/json"));
    EXPECT_FALSE(quiet.wait_for_log("/health", 1)) << quiet.log();
    EXPECT_EQ(quiet.log().find("/v1/chat/completions"), std::string::npos) << quiet.log();
}

// usage.prompt_tokens_details.cached_tokens: the tokens of the prompt that the model did not evaluate again, a
// prefix it still held from a request before; 0 for the first request. One sequence alone (-np 1 --cache-seqs 0: the
// session), and the generator with its prefix cache for one request at a time and for two.
class ServeCached : public ::testing::TestWithParam<std::vector<std::string>> {};

TEST_P(ServeCached, CachedTokensOfACommonPrefix) {
    ServeProcess srv(GetParam());
    ASSERT_GT(srv.port(), 0) << srv.log();
    auto c = srv.client();
    const json first = chat_usage(srv, chat_body("Tell me about the jury", 3));
    EXPECT_EQ(first["prompt_tokens_details"]["cached_tokens"], 0) << first;
    const json again = chat_usage(srv, chat_body("Tell me about the jury", 3));
    EXPECT_EQ(again["prompt_tokens_details"]["cached_tokens"], again["prompt_tokens"].get<int>() - 1) << again;
    // Another question shares the template's opening only.
    const json other = chat_usage(srv, chat_body("What did the clerk file?", 3));
    const int cached = other["prompt_tokens_details"]["cached_tokens"];
    EXPECT_GT(cached, 0) << other;
    EXPECT_LT(cached, other["prompt_tokens"].get<int>() - 1) << other;
    auto m = c.Get("/metrics");
    ASSERT_TRUE(m);
    const int reused = again["prompt_tokens"].get<int>() - 1 + cached;
    EXPECT_NE(m->body.find("zinc_prompt_tokens_cached_total " + std::to_string(reused) + "\n"), std::string::npos)
        << m->body;
}

INSTANTIATE_TEST_SUITE_P(Sequences, ServeCached,
                         ::testing::Values(std::vector<std::string>{"-np", "1", "--cache-seqs", "0"},
                                           std::vector<std::string>{"-np", "1"}, std::vector<std::string>{"-np", "2"}));

// A conversation's next turn on the families whose state resumes only where it was kept (qwen35: recurrent state;
// gemma4 and gpt-oss: sliding windows), with several sequences (-np 2 and the prefix cache) and the real models'
// templates (tests/data/chat/templates): the template renders the first reply otherwise than it was generated (its
// reasoning dropped, and for Qwen3.5 and Gemma 4 the reply's opening too: a generation prompt that opens the
// reasoning), so the second prompt parts from the first state inside the first prompt's generation prompt. It
// resumes from the state kept at the end of the first turn's history: it evaluates its new messages and the
// re-rendered reply, not the first turn.
class ServeTurns : public ::testing::TestWithParam<std::string> {};

TEST_P(ServeTurns, NextTurnEvaluatesOnlyItsNewTokens) {
    const std::string family = GetParam();
    ServeProcess srv({"-np", "2", "--chat-template-file", std::string(ZINC_TEST_DATA_DIR) + "/chat/templates/" +
                                                              family + ".jinja"},
                     std::string(ZINC_FIXTURES_DIR) + "/" + family + "/" + family + "-q8_0.gguf");
    ASSERT_GT(srv.port(), 0) << srv.log();
    auto c = srv.client();
    json messages = json::array({{{"role", "system"}, {"content", "You answer questions about courts."}},
                                 {{"role", "user"}, {"content", "Tell me about the jury"}}});
    const json first = chat_usage(srv, {{"messages", messages}, {"max_tokens", 12}, {"temperature", 0}});
    EXPECT_EQ(first["prompt_tokens_details"]["cached_tokens"], 0) << first;
    messages.push_back({{"role", "assistant"},
                        {"content", "<think>\nThe user asks about juries.\n</think>\n\nA jury decides the facts."}});
    messages.push_back({{"role", "user"}, {"content", "And the clerk?"}});
    const json second = chat_usage(srv, {{"messages", messages}, {"max_tokens", 4}, {"temperature", 0}});
    const int prompt = second["prompt_tokens"], cached = second["prompt_tokens_details"]["cached_tokens"];
    const int grown = prompt - first["prompt_tokens"].get<int>();  // the new messages less the first reply's opening
    EXPECT_GT(cached, 0) << second;
    EXPECT_LE(prompt - cached, grown + 8) << "evaluated " << prompt - cached << " of " << prompt;
    auto m = c.Get("/metrics");
    ASSERT_TRUE(m);
    EXPECT_NE(m->body.find("zinc_prefix_cache_hits_total 1\n"), std::string::npos) << m->body;
    EXPECT_NE(m->body.find("zinc_kv_pages_used "), std::string::npos) << m->body;
}

// 16 clients at once on -np 4, on every fixture family (attention, recurrent, sliding windows, experts): each greedy
// completion, streamed or not, is the text the same request gets alone. Half of the prompts share an opening of a few
// words, so forks of running and kept states are among them.
class ServeFamilies : public ::testing::TestWithParam<std::string> {};

// The text of a completion: whole, or the pieces of its server-sent events joined.
std::string completion_text(const std::string& body, bool streamed) {
    if (!streamed) return json::parse(body)["choices"][0]["text"];
    std::string text;
    for (size_t at = 0; (at = body.find("data: ", at)) != std::string::npos;) {
        const size_t end = body.find("\n\n", at);
        const std::string data = body.substr(at + 6, end - at - 6);
        if (data != "[DONE]") {
            const json chunk = json::parse(data);
            for (const json& ch : chunk["choices"]) text += ch["text"].get<std::string>();
        }
        at = end;
    }
    return text;
}

TEST_P(ServeFamilies, ConcurrentStreamsAsAlone) {
    const std::string family = GetParam();
    ServeProcess srv({"-np", "4", "--max-queue", "16"},
                     std::string(ZINC_FIXTURES_DIR) + "/" + family + "/" + family + "-q8_0.gguf");
    ASSERT_GT(srv.port(), 0) << srv.log();
    const auto body = [](int i, bool stream) {
        const std::string p = i % 2 ? "The clerk filed the motion and then " + std::to_string(i)
                                    : "Question " + std::to_string(i) + ": what did the jury decide?";
        return json{{"prompt", p}, {"max_tokens", 6}, {"temperature", 0}, {"stream", stream}}.dump();
    };
    std::vector<std::string> alone(16), together(16);
    auto c = srv.client();
    for (int i = 0; i < 16; ++i) {
        auto r = c.Post("/v1/completions", body(i, false), "application/json");
        ASSERT_TRUE(r && r->status == 200) << (r ? r->body : srv.log());
        alone[size_t(i)] = completion_text(r->body, false);
    }
    std::vector<std::thread> clients;
    for (int i = 0; i < 16; ++i)
        clients.emplace_back([&, i] {
            auto own = srv.client();
            auto r = own.Post("/v1/completions", body(i, i % 3 == 0), "application/json");
            together[size_t(i)] = !r ? "(no answer)"
                                  : r->status != 200 ? r->body
                                                     : completion_text(r->body, i % 3 == 0);
        });
    for (std::thread& t : clients) t.join();
    for (int i = 0; i < 16; ++i) EXPECT_EQ(together[size_t(i)], alone[size_t(i)]) << "request " << i;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, ServeFamilies,
                         ::testing::Values("qwen3", "qwen35", "qwen35moe", "gemma4", "gemma4moe", "gpt-oss"),
                         [](const auto& info) {
                             std::string n = info.param;
                             std::replace(n.begin(), n.end(), '-', '_');
                             return n;
                         });

INSTANTIATE_TEST_SUITE_P(Families, ServeTurns, ::testing::Values("qwen35", "gemma4", "gpt-oss"),
                         [](const auto& info) {
                             std::string n = info.param;
                             std::replace(n.begin(), n.end(), '-', '_');
                             return n;
                         });

// -np N runs N requests at once whatever --max-queue is: each running request holds an HTTP worker as a waiting one
// does, so the workers are counted for both. Twelve clients stream at once on -np 12 --max-queue 1 and each waits,
// at its first piece, until all twelve have theirs; with fewer workers than requests the first ones would wait for
// the rest forever (here: until the time limit) and the rest would never begin.
TEST(ServeParallel, EveryParallelSequenceTakesARequest) {
    constexpr int kClients = 12;
    ServeProcess srv({"-np", std::to_string(kClients), "--max-queue", "1"});
    ASSERT_GT(srv.port(), 0) << srv.log();
    std::mutex mu;
    std::condition_variable cv;
    int begun = 0;
    std::vector<int> status(kClients, 0);
    std::vector<std::thread> clients;
    for (int i = 0; i < kClients; ++i)
        clients.emplace_back([&, i] {
            json body = chat_body("Story " + std::to_string(i) + ": once upon a time", 2000);
            body["stream"] = true;
            auto c = srv.client();
            auto r = c.Post("/v1/chat/completions", body.dump(), "application/json", [&](const std::string&) {
                std::unique_lock<std::mutex> lk(mu);
                ++begun;
                cv.notify_all();
                cv.wait_for(lk, std::chrono::seconds(120), [&] { return begun == kClients; });
                return false;  // hangs up
            });
            status[size_t(i)] = r ? r->status : -1;
        });
    for (std::thread& t : clients) t.join();
    EXPECT_EQ(begun, kClients) << srv.log();
    for (int i = 0; i < kClients; ++i) EXPECT_NE(status[size_t(i)], 503) << "client " << i;
}

// Continuous batching (-np): n choices of a request on fewer sequences than choices take them as they come free and
// are the choices one sequence gives (choice i with seed + i); a client that leaves in the middle of its stream ends
// only its own request, and the next requests are served.
TEST(ServeParallel, ChoicesAndAClientThatLeaves) {
    json body = chat_body("Tell me a story", 8);
    body["temperature"] = 1.0;
    body["seed"] = 5;
    body["n"] = 3;
    std::string one;
    {
        ServeProcess srv({});
        ASSERT_GT(srv.port(), 0) << srv.log();
        auto r = srv.client().Post("/v1/chat/completions", body.dump(), "application/json");
        ASSERT_TRUE(r && r->status == 200) << (r ? r->body : srv.log());
        one = json::parse(r->body)["choices"].dump();
    }
    ServeProcess srv({"-np", "2"});
    ASSERT_GT(srv.port(), 0) << srv.log();
    auto c = srv.client();
    auto r = c.Post("/v1/chat/completions", body.dump(), "application/json");
    ASSERT_TRUE(r && r->status == 200) << (r ? r->body : srv.log());
    EXPECT_EQ(json::parse(r->body)["choices"].dump(), one);

    json slots_while;  // GET /slots while the long story streams
    std::thread leaver([&] {
        auto l = srv.client();
        json long_body = chat_body("Write a long story", 2000);
        long_body["stream"] = true;
        int pieces = 0;
        l.Post("/v1/chat/completions", long_body.dump(), "application/json", [&](const std::string&) {
            if (++pieces == 3) {
                auto s = srv.client().Get("/slots");
                if (s && s->status == 200) slots_while = json::parse(s->body);
            }
            return pieces < 4;  // hangs up
        });
    });
    auto other = c.Post("/v1/chat/completions", chat_body("hi", 4).dump(), "application/json");
    leaver.join();
    ASSERT_TRUE(other) << srv.log();
    EXPECT_EQ(other->status, 200) << other->body;
    EXPECT_TRUE(srv.wait_for_log("(the client has gone)")) << srv.log();
    auto after = c.Post("/v1/chat/completions", chat_body("hi", 4).dump(), "application/json");
    ASSERT_TRUE(after) << srv.log();
    EXPECT_EQ(after->status, 200) << after->body;
    // The worker counts a request out after its final update, which the client may see first.
    std::string metrics;
    for (int tries = 0; tries < 100 && metrics.find("zinc_requests_in_flight 0\n") == std::string::npos; ++tries) {
        if (tries > 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
        auto m = c.Get("/metrics");
        ASSERT_TRUE(m);
        metrics = m->body;
    }
    EXPECT_NE(metrics.find("zinc_requests_in_flight 0\n"), std::string::npos) << metrics;

    // GET /slots: the sequences, two that run requests and by default eight more that keep states (--cache-seqs);
    // while the story streamed, one of them generated it; now all are idle, and those of the last requests keep
    // their states.
    ASSERT_EQ(slots_while["slots"].size(), 10u) << slots_while;
    int generating = 0;
    for (const json& sl : slots_while["slots"])
        if (sl["state"] == "generating") {
            ++generating;
            EXPECT_GT(sl["generated"].get<int>(), 0) << sl;
            EXPECT_EQ(sl["prompt_read"], sl["prompt_tokens"]) << sl;
        }
    EXPECT_GE(generating, 1) << slots_while;
    // The worker takes its snapshot after the step that ended the last request, which may be just after its answer.
    json now;
    for (int tries = 0; tries < 100; ++tries) {
        auto idle = c.Get("/slots");
        ASSERT_TRUE(idle && idle->status == 200);
        now = json::parse(idle->body);
        if (std::all_of(now["slots"].begin(), now["slots"].end(), [](const json& sl) { return sl["state"] == "idle"; }))
            break;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ASSERT_EQ(now["slots"].size(), 10u) << now;
    int keeping = 0;
    for (const json& sl : now["slots"]) {
        EXPECT_EQ(sl["state"], "idle") << now;
        keeping += sl["tokens_in_state"].get<int>() > 0;
    }
    EXPECT_GE(keeping, 2) << now;
}

}  // namespace
