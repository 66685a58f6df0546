// The `zinc` command line end to end, through the built binary: what it refuses and how it says so, where prompts
// come from, what -v and bench report, tokenize/detokenize/logits, and output that cannot be written.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/open_model.h"
#include "gguf/reader.h"
#include "gguf/split.h"
#include "gguf/writer.h"
#include "gguf_edit.h"
#include "gguf_test_util.h"
#include "model/weight_bytes.h"
#include "zinc_binary.h"

namespace {

using zinc::test::run_zinc;
using zinc::test::shell_word;
using zinc::test::TempDir;

const std::string kQwen3 = shell_word(ZINC_FIXTURES_DIR "/qwen3/qwen3-q8_0.gguf");    // 2 layers, no BOS
const std::string kGemma4 = shell_word(ZINC_FIXTURES_DIR "/gemma4/gemma4-q8_0.gguf");  // adds BOS (id 2)
// A recurrent state (cannot rewind) and routed experts.
const std::string kQwen35Moe = shell_word(ZINC_FIXTURES_DIR "/qwen35moe/qwen35moe-q8_0.gguf");

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// The first line of `text` that holds `part` (without its line break), or "".
std::string line_with(const std::string& text, const std::string& part) {
    const size_t at = text.find(part);
    if (at == std::string::npos) return "";
    const size_t begin = text.rfind('\n', at) == std::string::npos ? 0 : text.rfind('\n', at) + 1;
    return text.substr(begin, text.find('\n', at) - begin);
}

// The seed `zinc run -v` reports.
std::string reported_seed(const std::string& err) {
    const size_t at = err.find("seed ");
    return at == std::string::npos ? "" : err.substr(at + 5, err.find(',', at) - at - 5);
}

TEST(Cli, NoCommandPrintsTheHelp) {
    const auto r = run_zinc("");
    EXPECT_EQ(r.status, 0);
    for (const char* c :
         {"run", "chat", "bench", "logits", "perplexity", "tokenize", "detokenize", "synth", "inspect", "devices",
          "template"})
        EXPECT_TRUE(has(r.out, "  " + std::string(c) + " ")) << c << " missing in:\n" << r.out;
}

TEST(Cli, UnknownCommandListsTheCommands) {
    const auto r = run_zinc("frobnicate -m x.gguf");
    EXPECT_EQ(r.status, 2);
    EXPECT_TRUE(has(r.err, "zinc: error: unknown command 'frobnicate': the commands are devices, inspect, run, chat, "
                           "bench, logits, embed, perplexity, tokenize, detokenize, synth"))
        << r.err;
    EXPECT_EQ(r.out, "");
}

// zinc serve listens before it loads the model; a model that cannot be opened ends it with the reason.
TEST(Cli, ServeEndsWhenTheModelCannotBeOpened) {
    const auto r = run_zinc("serve -m x.gguf --port 0");
    EXPECT_EQ(r.status, 1);
    EXPECT_TRUE(has(r.err, "zinc: listening on http://127.0.0.1:")) << r.err;
    EXPECT_TRUE(has(r.err, "zinc: error: x.gguf: cannot open")) << r.err;
}

// Every numeric flag: a value out of range is refused before anything runs, naming the flag and what it accepts.
TEST(Cli, NumericFlagsAreRangeChecked) {
    const struct {
        std::string args, message;
    } cases[] = {
        {"run -n -2", "--max-tokens: expects an integer >= -1, not '-2'"},
        {"run --n-predict x", "--max-tokens"},
        {"run -c -1", "--ctx-size: expects an integer from 0 to 1073741824, not '-1'"},
        {"run -ub 0", "--ubatch-size: expects an integer from 1 to 1073741824, not '0'"},
        {"run -t 0", "--threads: expects an integer from 1 to "},
        {"run --device -1", "--device: expects an integer >= 0, not '-1'"},
        {"run --temp nan", "--temp: expects a finite number >= 0, not 'nan'"},
        {"run --temperature -0.5", "--temp: expects a finite number >= 0, not '-0.5'"},
        {"run --top-k -1", "--top-k: expects an integer >= 0, not '-1'"},
        {"run --top-p 1.5", "--top-p: expects a finite number from 0 to 1, not '1.5'"},
        {"run --min-p -0.1", "--min-p: expects a finite number from 0 to 1, not '-0.1'"},
        {"run --repeat-penalty 0", "--repeat-penalty: expects a finite number > 0, not '0'"},
        {"run --presence-penalty inf", "--presence-penalty: expects a finite number, not 'inf'"},
        {"run --frequency-penalty nan", "--frequency-penalty: expects a finite number, not 'nan'"},
        {"run --repeat-last-n -2", "--repeat-last-n: expects an integer >= -1, not '-2'"},
        {"run --seed -2", "--seed: expects an integer >= -1, not '-2'"},
        {"run -ngl -2", "--n-gpu-layers: expects all, -1 or a layer count >= 0, not '-2'"},
        {"chat -n -5", "--max-tokens: expects an integer >= -1, not '-5'"},
        {"chat --top-p nan", "--top-p: expects a finite number from 0 to 1"},
        {"bench -r 0", "--repetitions: expects an integer >= 1, not '0'"},
        {"bench -p 512,-1", "--n-prompt: expects an integer from 0 to 1073741824 or a range FIRST-LAST, "
                            "FIRST-LAST+STEP or FIRST-LAST*STEP, not '-1'"},
        {"bench -n -5", "--n-gen: expects an integer from 0 to 1073741824 or a range FIRST-LAST, FIRST-LAST+STEP or "
                         "FIRST-LAST*STEP, not '-5'"},
        {"bench -ub 0", "--ubatch-size: expects an integer from 1 to 1073741824"},
        {"bench -d -1", "--n-depth: expects an integer from 0 to 1073741824 or a range FIRST-LAST, FIRST-LAST+STEP or "
                         "FIRST-LAST*STEP, not '-1'"},
        {"bench -d 8,x", "--n-depth: expects an integer from 0 to 1073741824 or a range FIRST-LAST, FIRST-LAST+STEP or "
                         "FIRST-LAST*STEP, not 'x'"},
        {"bench -pg 5", "--pg: expects two lengths PP,TG (integers from 0 to 1073741824), not '5'"},
        {"bench -pg 512,-1", "--pg: expects two lengths PP,TG (integers from 0 to 1073741824), not '512,-1'"},
        {"bench -pg 1,2,3", "--pg: expects two lengths PP,TG"},
        {"bench -o xml", "--output: expects an output format (md, csv, json, jsonl), not 'xml'"},
        {"bench -o csv --json", "--output excludes --json"},
        {"bench -d 1073741824 -p 0 -n 1", "-d/-p/-n/-pg: a depth and a test of 1073741825 tokens together; the "
                                          "context holds at most 1073741824"},
        {"logits --ids 1 -o x.npy -b 0", "--batch: expects an integer >= 1, not '0'"},
        {"logits --ids 1 -o x.npy -c -3", "--ctx-size: expects an integer from 0 to 1073741824, not '-3'"},
    };
    for (const auto& c : cases) {
        const auto r = run_zinc(c.args + " -m " + kQwen3);
        EXPECT_EQ(r.status, 2) << c.args << "\n" << r.err;
        EXPECT_TRUE(has(r.err, "zinc: error: " + c.message)) << c.args << "\n" << r.err;
        EXPECT_EQ(r.out, "") << c.args;
    }
}

TEST(Cli, HugeContextIsRefusedBeforeLoading) {
    const auto r = run_zinc("run -m " + kQwen3 + " -p hi -c 2000000000");
    EXPECT_EQ(r.status, 2);
    EXPECT_TRUE(has(r.err, "zinc: error: --ctx-size: expects an integer from 0 to 1073741824, not '2000000000'"))
        << r.err;
    EXPECT_FALSE(has(r.err, "bad_alloc")) << r.err;
    // Integers are decimal: "010" is ten (not octal eight).
    const auto ten = run_zinc("run -m " + kQwen3 + " -p hi -n 1 -c 010 -v");
    ASSERT_EQ(ten.status, 0) << ten.err;
    EXPECT_TRUE(has(ten.err, "context 10 ")) << ten.err;
}

TEST(Cli, ThreadsBeyondTheCpus) {
    const int n = zinc::engine::logical_cpus() + 1;
    const auto r = run_zinc("run -m " + kQwen3 + " -p hi -n 1 -t " + std::to_string(n));
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_TRUE(has(r.err, "zinc: warning: " + std::to_string(n) + " threads are more than the " +
                               std::to_string(n - 1) + " logical CPUs"))
        << r.err;
    EXPECT_FALSE(has(run_zinc("run -m " + kQwen3 + " -p hi -n 1 -t 1").err, "warning")) << "no warning for 1 thread";
    // Far more than the CPUs would only take the machine's memory and time: refused.
    const int most = 4 * (n - 1);
    const auto many = run_zinc("run -m " + kQwen3 + " -p hi -n 1 -t 100000");
    EXPECT_EQ(many.status, 2) << many.err;
    EXPECT_TRUE(has(many.err, "--threads: expects an integer from 1 to " + std::to_string(most) + ", not '100000' (4 "
                              "for each of the " + std::to_string(n - 1) + " logical CPUs"))
        << many.err;
    EXPECT_EQ(run_zinc("run -m " + kQwen3 + " -p hi -n 1 -t " + std::to_string(most)).status, 0);
}

TEST(Cli, TokenIdsNameTheBadElement) {
    const struct {
        std::string ids, message;
    } cases[] = {
        {"a,b", "--ids: 'a' is not a token id"},
        {"1,2x,3", "--ids: '2x' is not a token id"},
        {"5,-3", "--ids: '-3' is not a token id"},
        {"1,99999999999", "--ids: '99999999999' is not a token id"},
        {",", "--ids: no token ids"},
        {"1,2112", "--ids: 2112 is past the vocabulary (ids 0 to 2111)"},
    };
    TempDir dir;
    for (const auto& c : cases) {
        const std::string out = dir.file("l.npy");
        const auto r = run_zinc("logits -m " + kQwen3 + " --ids " + shell_word(c.ids) + " -o " + shell_word(out));
        EXPECT_EQ(r.status, 2) << c.ids << "\n" << r.err;
        EXPECT_TRUE(has(r.err, "zinc: error: " + c.message)) << c.ids << "\n" << r.err;
        EXPECT_FALSE(std::filesystem::exists(out)) << c.ids;
        const auto d = run_zinc("detokenize -m " + kQwen3 + " --ids " + shell_word(c.ids));
        EXPECT_EQ(d.status, 2) << c.ids;
        EXPECT_TRUE(has(d.err, "zinc: error: " + c.message)) << c.ids << "\n" << d.err;
    }
}

// Output that cannot be written fails the command instead of vanishing.
TEST(Cli, WriteErrorsFailTheCommand) {
    if (!std::filesystem::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
    for (const std::string& args : {"run -m " + kQwen3 + " -p Hello -n 4", "inspect " + kQwen3,
                                   "tokenize -m " + kQwen3 + " -p Hello", "bench -m " + kQwen3 + " -p 4 -n 2 -r 1",
                                   std::string("run --help")}) {
        const auto r = run_zinc(args, "", "/dev/full");
        EXPECT_EQ(r.status, 1) << args << "\n" << r.err;
        EXPECT_TRUE(has(r.err, "zinc: error: cannot write to standard output"))
            << args << "\n" << r.err;
    }
    TempDir dir;
    const auto r = run_zinc("logits -m " + kQwen3 + " --ids 1,2 -o /dev/full");
    EXPECT_EQ(r.status, 1);
    EXPECT_TRUE(has(r.err, "zinc: error: error writing /dev/full")) << r.err;
    const auto missing = run_zinc("logits -m " + kQwen3 + " --ids 1,2 -o " + shell_word(dir.file("no/such/dir.npy")));
    EXPECT_EQ(missing.status, 1);
    EXPECT_TRUE(has(missing.err, "zinc: error: cannot write ")) << missing.err;
}

TEST(Cli, PromptLongerThanTheContextIsRefusedBeforeAnyOutput) {
    const auto r = run_zinc("run -m " + kQwen3 + " -c 4 -p " + shell_word("Hello world, this prompt is long"));
    EXPECT_EQ(r.status, 1);
    EXPECT_EQ(r.out, "");
    EXPECT_TRUE(has(r.err, "tokens but the context holds 4; give a larger --ctx-size (the model was trained on 4096) "
                           "or a shorter prompt"))
        << r.err;
}

TEST(Cli, ChatOnlyFlagsNeedChat) {
    for (const char* flag : {"--system hi", "--system-prompt hi", "-sys hi"}) {
        const auto r = run_zinc("run -m " + kQwen3 + " -p x " + std::string(flag));
        EXPECT_EQ(r.status, 2) << flag;
        EXPECT_TRUE(has(r.err, "zinc: error: --system requires --chat")) << flag << "\n" << r.err;
    }
    const auto r = run_zinc("run -m " + kQwen3 + " -p x --no-think");
    EXPECT_EQ(r.status, 2);
    EXPECT_TRUE(has(r.err, "zinc: error: --no-think requires --chat")) << r.err;
    const auto ok = run_zinc("run -m " + kQwen3 + " -p x -n 2 --chat -sys " + shell_word("Be brief.") + " --no-think");
    EXPECT_EQ(ok.status, 0) << ok.err;
}

TEST(Cli, SeedIsRandomUnlessGiven) {
    const std::string sample = "run -m " + kQwen3 + " -p Hello -n 12 --temp 1.5 --top-k 0 --top-p 1 --min-p 0 -v";
    const auto a = run_zinc(sample + " --seed 7"), b = run_zinc(sample + " --seed 7");
    ASSERT_EQ(a.status, 0) << a.err;
    EXPECT_EQ(a.out, b.out);
    EXPECT_EQ(reported_seed(a.err), "7") << a.err;
    std::set<std::string> seeds;
    for (const char* seed : {"", " --seed -1", ""}) {
        const auto r = run_zinc(sample + seed);
        ASSERT_EQ(r.status, 0) << r.err;
        seeds.insert(reported_seed(r.err));
    }
    EXPECT_EQ(seeds.size(), 3u) << "random seeds repeat";
    // A reported seed gives the same text again.
    const auto c = run_zinc(sample);
    EXPECT_EQ(run_zinc(sample + " --seed " + reported_seed(c.err)).out, c.out);
}

TEST(Cli, PromptFromStandardInputOrFile) {
    const std::string run = "run -m " + kQwen3 + " -n 4 --temp 0";
    const auto given = run_zinc(run + " -p Hello");
    ASSERT_EQ(given.status, 0) << given.err;
    ASSERT_TRUE(given.out.starts_with("Hello")) << given.out;
    // A pipe (its final newline dropped, as from a file), "-f -", and a file all give the same prompt.
    EXPECT_EQ(run_zinc(run, "Hello\n").out, given.out);
    EXPECT_EQ(run_zinc(run + " -f -", "Hello\n").out, given.out);
    TempDir dir;
    std::ofstream(dir.file("p.txt")) << "Hello\n";
    EXPECT_EQ(run_zinc(run + " --file " + shell_word(dir.file("p.txt"))).out, given.out);
    const auto both = run_zinc(run + " -p Hello -f " + shell_word(dir.file("p.txt")));
    EXPECT_EQ(both.status, 2);
    EXPECT_TRUE(has(both.err, "--prompt excludes --file")) << both.err;
    const auto missing = run_zinc(run + " -f " + shell_word(dir.file("none.txt")));
    EXPECT_EQ(missing.status, 1);
    EXPECT_TRUE(has(missing.err, "cannot read " + dir.file("none.txt"))) << missing.err;
}

// Files that never end, directories, JSON nested to crash a recursive reader, templates and vocabularies whose text
// would act on the terminal: each a one-line error naming what is wrong, the terminal left as it was.
TEST(Cli, HostileFilesAndTexts) {
    TempDir dir;
    const auto zero = run_zinc("run -m " + kQwen3 + " -f /dev/zero -n 1");
    EXPECT_EQ(zero.status, 1);
    EXPECT_TRUE(has(zero.err, "zinc: error: /dev/zero holds more than 256 MiB")) << zero.err;
    std::filesystem::create_directory(dir.file("folder"));
    const auto folder = run_zinc("run -m " + kQwen3 + " -f " + shell_word(dir.file("folder")) + " -n 1");
    EXPECT_EQ(folder.status, 1);
    EXPECT_TRUE(has(folder.err, dir.file("folder") + " is a directory, not a file")) << folder.err;

    std::ofstream(dir.file("deep.json")) << std::string(50000, '[') << std::string(50000, ']');
    const auto deep = run_zinc("template -m " + kQwen3 + " --messages " + shell_word(dir.file("deep.json")));
    EXPECT_EQ(deep.status, 1);
    EXPECT_TRUE(has(deep.err, "JSON nested deeper than 128 levels")) << deep.err;

    // A template's own message, and a vocabulary's name, with terminal escapes in them.
    std::ofstream(dir.file("m.json")) << R"([{"role": "user", "content": "hi"}])";
    std::ofstream(dir.file("t.jinja")) << "{{ raise_exception('\x1b]0;owned\x07\x1b[2J') }}";
    const auto raised = run_zinc("template --template-file " + shell_word(dir.file("t.jinja")) + " --messages " +
                                 shell_word(dir.file("m.json")));
    EXPECT_EQ(raised.status, 1);
    EXPECT_TRUE(has(raised.err, "raise_exception: \\x1b]0;owned\\x07\\x1b[2J")) << raised.err;
    EXPECT_EQ(raised.err.find('\x1b'), std::string::npos);
    const std::string vocab = dir.file("vocab.gguf");
    zinc::test::write_edited(ZINC_FIXTURES_DIR "/qwen3/qwen3-q8_0.gguf", vocab,
                             {{"tokenizer.ggml.model", zinc::gguf::Value::of("\x1b[31mevil\x1b[0m")}});
    const auto named = run_zinc("tokenize -m " + shell_word(vocab) + " -p hi");
    EXPECT_EQ(named.status, 1);
    EXPECT_TRUE(has(named.err, "tokenizer.ggml.model '\\x1b[31mevil\\x1b[0m' is not supported")) << named.err;
    EXPECT_EQ(named.err.find('\x1b'), std::string::npos);

    // A GGUF whose own chat template recurses forever: an error naming its line, from `template` and `run --chat`.
    const std::string hostile = dir.file("hostile.gguf");
    zinc::test::write_edited(
        ZINC_FIXTURES_DIR "/qwen3/qwen3-q8_0.gguf", hostile,
        {{"tokenizer.chat_template", zinc::gguf::Value::of("\n{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}")}});
    const auto rendered = run_zinc("template -m " + shell_word(hostile) + " --messages " + shell_word(dir.file("m.json")));
    EXPECT_EQ(rendered.status, 1);
    EXPECT_TRUE(has(rendered.err, "template line 2: the template nests deeper than")) << rendered.err;
    const auto chat = run_zinc("run --chat -m " + shell_word(hostile) + " -p hi -n 2");
    EXPECT_EQ(chat.status, 1);
    EXPECT_TRUE(has(chat.err, "template line 2: the template nests deeper than")) << chat.err;
}

TEST(Cli, LlamaCppSpellings) {
    TempDir dir;
    std::ofstream(dir.file("p.txt")) << "Hello";
    const auto r = run_zinc("run -m " + kQwen3 + " --n-predict 2 --ctx-size 64 --temperature 0 -ub 8 --file " +
                            shell_word(dir.file("p.txt")) + " -v");
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_TRUE(has(r.err, "context 64 (trained 4096), micro-batch 8")) << r.err;
    // -ngl: every layer (the GPU when there is one) or none (the CPU); zinc does not split a model.
    for (const char* ngl : {"-ngl 99", "-ngl 2", "-ngl all", "-ngl -1", "--n-gpu-layers 99", "-ngl 0"}) {
        const auto g = run_zinc("run -m " + kQwen3 + " -p hi -n 1 -v " + ngl);
        EXPECT_EQ(g.status, 0) << ngl << "\n" << g.err;
    }
    EXPECT_TRUE(has(run_zinc("run -m " + kQwen3 + " -p hi -n 1 -v -ngl 0").err, "backend cpu"));
    const auto split = run_zinc("run -m " + kQwen3 + " -p hi -n 1 -ngl 1");
    EXPECT_EQ(split.status, 1);
    EXPECT_TRUE(has(split.err, "--n-gpu-layers 1: zinc runs all 2 layers of this model on one backend; use "
                               "--backend cuda"))
        << split.err;
    // -c 0: the model's training context (4096 for the fixture; as much of it as fits where memory is short).
    const auto trained = run_zinc("run -m " + kQwen3 + " -p hi -n 1 -c 0 -v");
    ASSERT_EQ(trained.status, 0) << trained.err;
    EXPECT_TRUE(has(trained.err, "context 4096 (trained 4096)")) << trained.err;
    // -fa and --jinja as llama.cpp's command lines have them: zinc's attention is always fused, its templates Jinja.
    for (const char* fa : {"-fa on", "-fa 1", "-fa auto", "--flash-attn on", "--jinja"}) {
        const auto g = run_zinc("run -m " + kQwen3 + " -p hi -n 1 " + fa);
        EXPECT_EQ(g.status, 0) << fa << "\n" << g.err;
        EXPECT_FALSE(has(g.err, "note")) << fa << "\n" << g.err;
    }
    const auto off = run_zinc("run -m " + kQwen3 + " -p hi -n 1 -fa off");
    EXPECT_EQ(off.status, 0) << off.err;
    EXPECT_TRUE(has(off.err, "zinc: note: -fa off: zinc has no unfused attention; its fused attention runs")) << off.err;
    EXPECT_EQ(run_zinc("run -m " + kQwen3 + " -p hi -n 1 -fa maybe").status, 2);
    // Other multi-letter single-dash words are not read as a letter and a value: the nearest option is named.
    const auto typo = run_zinc("run -m " + kQwen3 + " -p hi -ctxsize 64");
    EXPECT_EQ(typo.status, 2);
    EXPECT_TRUE(has(typo.err, "zinc: error: -ctxsize: zinc run has no option -ctxsize; the nearest is --ctx-size"))
        << typo.err;
    const auto none = run_zinc("run -m " + kQwen3 + " -p hi -qqqqqqqq 1");
    EXPECT_EQ(none.status, 2);
    EXPECT_TRUE(has(none.err, "zinc run has no option -qqqqqqqq\n")) << none.err;
    // An option's value is never rewritten: this prompt is "-ub".
    const auto value = run_zinc("run -m " + kQwen3 + " -n 1 -p -ub");
    ASSERT_EQ(value.status, 0) << value.err;
    EXPECT_TRUE(value.out.starts_with("-ub")) << value.out;
}

// zinc quantize takes llama-quantize's IN OUT [TYPE] as -m, -o and --type: the same bytes; a file or type given both
// ways, too few or too many words, or an unknown type is refused.
TEST(Cli, QuantizeTakesLlamaQuantizesForm) {
    TempDir dir;
    const std::string in = shell_word(ZINC_FIXTURES_DIR "/qwen3/qwen3-f32.gguf");
    const auto bytes = [](const std::string& path) {
        std::ifstream f(path, std::ios::binary);
        return std::string(std::istreambuf_iterator<char>(f), {});
    };
    const auto flags = run_zinc("quantize -m " + in + " -o " + shell_word(dir.file("a.gguf")) + " --type Q8_0 -t 1");
    ASSERT_EQ(flags.status, 0) << flags.err;
    const auto words = run_zinc("quantize " + in + " " + shell_word(dir.file("b.gguf")) + " q8_0 -t 1");
    ASSERT_EQ(words.status, 0) << words.err;
    EXPECT_EQ(bytes(dir.file("a.gguf")), bytes(dir.file("b.gguf")));
    const auto mix = run_zinc("quantize " + in + " " + shell_word(dir.file("c.gguf")) + " -t 1");  // Q4_K_M
    ASSERT_EQ(mix.status, 0) << mix.err;
    EXPECT_TRUE(has(mix.err, "Q4_K_M")) << mix.err;
    const struct {
        std::string args, message;
    } refused[] = {
        {in, "takes IN OUT [TYPE] as llama-quantize does"},
        {in + " x.gguf Q8_0 extra", "not 4 words"},
        {"-m " + in + " " + in + " x.gguf", "the files are given both as IN OUT and as -m/-o"},
        {in + " x.gguf Q8_0 --type Q6_K", "the type is given both as TYPE and as --type"},
        {in + " x.gguf Q9_Z", "TYPE: expects a quant mix (F32, "},
    };
    for (const auto& c : refused) {
        const auto r = run_zinc("quantize " + c.args);
        EXPECT_EQ(r.status, 2) << c.args << "\n" << r.err;
        EXPECT_TRUE(has(r.err, c.message)) << c.args << "\n" << r.err;
    }
}

TEST(Cli, VerboseRunPrintsThePlan) {
    const auto r = run_zinc("run -m " + kQwen3 + " -p Hello -n 1 -c 256 -ub 32 -t 1 --backend cpu -v --seed 3");
    ASSERT_EQ(r.status, 0) << r.err;
    for (const char* part : {"backend cpu (1 thread)", "context 256 (trained 4096), micro-batch 32", "weights 1.4 MiB",
                             "KV cache 256.0 KiB (f16/f16)", "activations ", ", free ", "seed 3, prompt 3 tokens"})
        EXPECT_TRUE(has(r.err, part)) << part << " missing in:\n" << r.err;
    EXPECT_FALSE(has(r.err, "not checked")) << "the CPU reports its available memory:\n" << r.err;
}

TEST(Cli, BenchPrintsThePlan) {
    const auto t = run_zinc("bench -m " + kQwen3 + " -p 8 -n 4 -r 1 -ub 4 -t 1");
    ASSERT_EQ(t.status, 0) << t.err;
    EXPECT_TRUE(t.out.starts_with("backend cpu (1 thread), context 8 (trained 4096), micro-batch 4; memory: weights "))
        << t.out;
    // llama-bench's columns, with GB/s for generation only.
    EXPECT_TRUE(has(t.out, "| model ")) << t.out;
    EXPECT_TRUE(has(t.out, " | backend | test |")) << t.out;
    EXPECT_TRUE(has(t.out, " GB/s |\n")) << t.out;
    EXPECT_TRUE(has(t.out, " | cpu     |  pp8 | ")) << t.out;
    EXPECT_TRUE(line_with(t.out, "pp8").ends_with(" - |")) << t.out;
    EXPECT_TRUE(has(t.out, " | cpu     |  tg4 | ")) << t.out;
    EXPECT_FALSE(line_with(t.out, "tg4").ends_with(" - |")) << t.out;
    const auto j = run_zinc("bench -m " + kQwen3 + " -p 8 -n 0 -r 1 -ub 4 -t 1 --json");
    ASSERT_EQ(j.status, 0) << j.err;
    for (const char* field : {"\"weights_bytes\": 1416192", "\"kv_cache_bytes\": 8192", "\"activations_bytes\": ",
                              "\"free_bytes\": ", "\"n_ctx\": 8", "\"n_ubatch\": 4", "\"n_threads\": 1",
                              "\"test\": \"pp8\""})
        EXPECT_TRUE(has(j.out, field)) << field << " missing in:\n" << j.out;
    const auto none = run_zinc("bench -m " + kQwen3 + " -p 0 -n 0");
    EXPECT_EQ(none.status, 2);
    EXPECT_TRUE(has(none.err, "nothing to measure")) << none.err;
}

// --profile: every op of one decode step, timed, after the tests; the ops' labels name the weights' types.
TEST(Cli, BenchProfilesOneDecodeStep) {
    const auto t = run_zinc("bench -m " + kQwen3 + " -p 0 -n 2 -d 3 -r 1 -t 1 --profile");
    ASSERT_EQ(t.status, 0) << t.err;
    EXPECT_TRUE(has(t.out, "one decode step at position 3: ")) << t.out;
    EXPECT_TRUE(has(t.out, "| op | calls | µs | % of ops |")) << t.out;
    for (const char* op : {"| get_rows ", "| rms_norm | ", "| attention | ", "| argmax_rows | 1 | "})
        EXPECT_TRUE(has(t.out, op)) << op << " missing in:\n" << t.out;
    const auto j = run_zinc("bench -m " + kQwen3 + " -p 0 -n 2 -r 1 -t 1 --profile -o json");
    ASSERT_EQ(j.status, 0) << j.err;
    EXPECT_TRUE(has(j.out, "\"profile_op\": \"attention\"")) << j.out;
}

// With a prompt test, --profile also times the ops of the longest prompt, in its micro-batches.
TEST(Cli, BenchProfilesThePrompt) {
    const auto t = run_zinc("bench -m " + kQwen3 + " -p 16 -n 2 -ub 8 -r 1 -t 1 --profile");
    ASSERT_EQ(t.status, 0) << t.err;
    EXPECT_TRUE(has(t.out, "one decode step at position 0: ")) << t.out;
    EXPECT_TRUE(has(t.out, "one prompt of 16 tokens: ")) << t.out;
    const auto c = run_zinc("bench -m " + kQwen3 + " -p 16 -n 0 -ub 8 -r 1 -t 1 --profile -o csv");
    ASSERT_EQ(c.status, 0) << c.err;
    EXPECT_TRUE(has(c.out, "profile_op,calls,us,n_prompt,n_depth,n_seq\n")) << c.out;
    EXPECT_TRUE(has(c.out, ",16,0,1\n")) << c.out;  // a prompt op's record
    EXPECT_TRUE(has(c.out, ",0,0,1\n")) << c.out;   // a decode op's record
}

// The tests of a bench run as JSON records.
nlohmann::json bench_json(const std::string& args) {
    const auto r = run_zinc("bench -r 1 -t 1 -o json " + args);
    EXPECT_EQ(r.status, 0) << args << "\n" << r.err;
    EXPECT_EQ(r.err, "") << args;  // no progress line off a terminal
    return r.status == 0 ? nlohmann::json::parse(r.out) : nlohmann::json::array();
}

std::vector<std::string> test_names(const nlohmann::json& j) {
    std::vector<std::string> names;
    for (const auto& t : j) names.push_back(t.at("test").get<std::string>());
    return names;
}

// Every depth with every pp, tg and pg test, in llama-bench's order and with its names; the context holds the
// deepest test.
TEST(Cli, BenchDepthsAndCombinedTests) {
    const auto j = bench_json("-m " + kQwen3 + " -p 8 -n 4 -d 0,16 -pg 4,2 -ub 4");
    EXPECT_EQ(test_names(j), (std::vector<std::string>{"pp8", "tg4", "pp4+tg2", "pp8 @ d16", "tg4 @ d16",
                                                       "pp4+tg2 @ d16"}));
    ASSERT_EQ(j.size(), 6u);
    const auto& pg = j[5];
    EXPECT_EQ(pg.at("n_prompt"), 4);
    EXPECT_EQ(pg.at("n_gen"), 2);
    EXPECT_EQ(pg.at("n_depth"), 16);
    EXPECT_EQ(pg.at("n_tokens"), 6);
    EXPECT_EQ(pg.at("n_ctx"), 24);
    EXPECT_EQ(pg.at("reps"), 1);
    EXPECT_GT(pg.at("avg_ts").get<double>(), 0.0);
    // GB/s for generation only; this model's embedding is its head, so a token reads all of it.
    for (const auto& t : j) {
        EXPECT_EQ(t.at("gbps").is_number(), t.at("n_prompt") == 0) << t.dump();
        EXPECT_EQ(t.at("size_bytes"), 1416192) << t.dump();
        EXPECT_EQ(t.at("read_bytes_per_token"), 1416192) << t.dump();
    }
    // Repeated flags add values, as commas do.
    EXPECT_EQ(test_names(bench_json("-m " + kQwen3 + " -p 2 -p 3 -n 0 -d 0 -d 4 -pg 1,1 --pg 2,0")),
              (std::vector<std::string>{"pp2", "pp3", "pp1+tg1", "pp2", "pp2 @ d4", "pp3 @ d4", "pp1+tg1 @ d4",
                                        "pp2 @ d4"}));
    // A recurrent state, which restarts at position 0 only: every run fills its depth again. The bytes are
    // model::weight_bytes' (only the used experts per token).
    const auto moe = bench_json("-m " + kQwen35Moe + " -p 4 -n 2 -d 6 -pg 2,2 -ub 4");
    EXPECT_EQ(test_names(moe), (std::vector<std::string>{"pp4 @ d6", "tg2 @ d6", "pp2+tg2 @ d6"}));
    ASSERT_FALSE(moe.empty());
    const auto bytes = zinc::model::weight_bytes(zinc::gguf::Model(ZINC_FIXTURES_DIR "/qwen35moe/qwen35moe-q8_0.gguf"));
    EXPECT_LT(bytes.per_token, bytes.total);
    EXPECT_EQ(moe[0].at("size_bytes"), bytes.total);
    EXPECT_EQ(moe[0].at("read_bytes_per_token"), bytes.per_token);
}

// --npl: sequences decoding together, in llama-batched-bench's columns; a step holds at most -ub rows, so 3
// sequences' prompts of 4 tokens take 6 steps of 2 and each decode step of 3 rows takes two.
TEST(Cli, BenchManySequences) {
    const auto t = run_zinc("bench -m " + kQwen3 + " -p 4 -n 3 -npl 1,3 -ub 2 -r 1 -t 1");
    ASSERT_EQ(t.status, 0) << t.err;
    EXPECT_TRUE(t.out.starts_with("backend cpu (1 thread), context 7 (trained 4096) for each of 3 sequences, "
                                  "micro-batch 2; "))
        << t.out;
    EXPECT_TRUE(has(t.out, "| PP | TG |  B | N_KV | T_PP s | S_PP t/s | T_TG s | S_TG t/s | t/s per seq | GB/s | "))
        << t.out;
    EXPECT_TRUE(has(t.out, "|  4 |  3 |  1 |    7 | ")) << t.out;
    EXPECT_TRUE(has(t.out, "|  4 |  3 |  3 |   21 | ")) << t.out;

    const auto j = bench_json("-m " + kQwen3 + " -p 0,4 -n 2 --npl 2");
    ASSERT_EQ(j.size(), 2u);
    EXPECT_EQ(j[0].at("n_prompt"), 0);
    EXPECT_TRUE(j[0].at("speed_pp").is_null()) << j[0].dump();
    EXPECT_EQ(j[1].at("n_prompt"), 4);
    for (const auto& r : j) {
        EXPECT_EQ(r.at("n_seq"), 2);
        EXPECT_EQ(r.at("n_gen"), 2);
        EXPECT_GT(r.at("speed_tg").get<double>(), 0.0);
        EXPECT_DOUBLE_EQ(r.at("speed_tg_per_seq").get<double>(), r.at("speed_tg").get<double>() / 2);
        EXPECT_GT(r.at("gbps").get<double>(), 0.0);
    }
    EXPECT_GT(j[1].at("speed_pp").get<double>(), 0.0);
    // --profile: the last decode step of the most sequences; the cache write and attention once over all of them, in
    // each of the 2 layers; and the unprofiled step before it, with the host's time queueing its ops.
    const auto prof = run_zinc("bench -m " + kQwen3 + " -p 4 -n 2 -npl 1,3 -r 1 -t 1 --profile");
    ASSERT_EQ(prof.status, 0) << prof.err;
    EXPECT_TRUE(has(prof.out, "one decode step of 3 sequences at position 5: ")) << prof.out;
    EXPECT_TRUE(has(prof.out, "; unprofiled, the steps before it ")) << prof.out;
    EXPECT_TRUE(has(prof.out, " of them queueing their ops")) << prof.out;
    EXPECT_TRUE(has(prof.out, "| rope_kv_write | 2 | ")) << prof.out;
    EXPECT_TRUE(has(prof.out, "| attention | 2 | ")) << prof.out;

    // -pps: one prompt, evaluated once and forked: N_KV counts it once, as llama-batched-bench does, and S_PP too.
    const auto pps = bench_json("-m " + kQwen3 + " -p 8 -n 4 -npl 3 -pps");
    ASSERT_EQ(pps.size(), 1u);
    EXPECT_EQ(pps[0].at("n_kv"), 8 + 3 * 4);
    EXPECT_EQ(pps[0].at("is_pp_shared"), true);
    EXPECT_NEAR(pps[0].at("speed_pp").get<double>(), 8 / pps[0].at("t_pp").get<double>(), 1e-6);
    EXPECT_EQ(run_zinc("bench -m " + kQwen3 + " -p 8 -n 4 -pps").status, 2);  // without --npl

    // --kv-size: the sequences share a smaller cache, in pages; one too small for them is a clear error.
    const auto shared = run_zinc("bench -m " + kQwen3 + " -p 4 -n 3 -npl 4 -r 1 -t 1 --kv-size 28");
    ASSERT_EQ(shared.status, 0) << shared.err;
    EXPECT_TRUE(has(shared.out, "context 7 (trained 4096) for each of 4 sequences, micro-batch 28; ")) << shared.out;
    EXPECT_TRUE(has(shared.out, "|  4 |  3 |  4 |   28 | ")) << shared.out;
    const auto full = run_zinc("bench -m " + kQwen3 + " -p 40 -n 3 -npl 4 -r 1 -t 1 --kv-size 100");
    EXPECT_EQ(full.status, 1) << full.out;
    EXPECT_TRUE(has(full.out, "context 43 (trained 4096) for each of 4 sequences, KV cache of 129 positions, "))
        << full.out;
    EXPECT_TRUE(has(full.err, "the KV cache is full: sequence 3 needs ")) << full.err;
    EXPECT_TRUE(has(full.err, "0 of the cache's 129 positions are free (--kv-size sets its size)")) << full.err;

    for (const auto& [args, message] : std::vector<std::pair<std::string, std::string>>{
             {"-npl 0", "--npl: expects an integer from 1 to 8192, not '0'"},
             {"-npl 2 -d 4", "--n-depth excludes --npl"},
             {"-npl 2 -p 0 -n 0", "nothing to measure"}}) {
        const auto r = run_zinc("bench -m " + kQwen3 + " " + args);
        EXPECT_EQ(r.status, 2) << args;
        EXPECT_TRUE(has(r.err, message)) << args << ": " << r.err;
    }
}

const std::string kBrown = shell_word(ZINC_BROWN_DIR "/brown-qwen3-5m-bf16.gguf");

// Several -m, as llama-bench: each model measured in turn, with llama-bench's fields in every record, their values
// checked against the file and each other; -r samples each.
TEST(Cli, BenchSeveralModelsWithLlamaBenchFields) {
    const auto j = bench_json("-m " + kQwen3 + " -m " + kBrown + " -p 4 -n 2 -r 3");
    ASSERT_EQ(j.size(), 4u) << j.dump();
    const std::vector<std::string> files = {"qwen3-q8_0.gguf", "qwen3-q8_0.gguf", "brown-qwen3-5m-bf16.gguf",
                                            "brown-qwen3-5m-bf16.gguf"};
    const std::string commit = j[0].at("build_commit");
    EXPECT_TRUE(commit == "unknown" || (!commit.empty() && commit.find_first_not_of("0123456789abcdef") ==
                                                               std::string::npos))
        << commit;
    for (size_t i = 0; i < j.size(); ++i) {
        const auto& r = j[i];
        EXPECT_EQ(r.at("model_filename"), files[i]) << r.dump();
        EXPECT_EQ(r.at("model"), files[i]);
        EXPECT_EQ(r.at("test"), i % 2 == 0 ? "pp4" : "tg2");
        EXPECT_EQ(r.at("build_commit"), commit);
        EXPECT_GE(r.at("build_number").get<int>(), commit == "unknown" ? 0 : 1);
        EXPECT_TRUE(r.at("cpu_info").is_string());
        EXPECT_EQ(r.at("gpu_info"), "");  // no GPU in this build
        EXPECT_EQ(r.at("backends"), "CPU");
        EXPECT_TRUE(r.at("model_type").get<std::string>().starts_with("qwen3 ")) << r.at("model_type");
        EXPECT_EQ(r.at("model_size"), r.at("size_bytes"));
        EXPECT_EQ(r.at("n_batch"), r.at("n_ctx"));
        EXPECT_EQ(r.at("n_gpu_layers"), 0);
        EXPECT_EQ(r.at("flash_attn"), 1);
        EXPECT_EQ(r.at("n_threads"), 1);
        const std::string when = r.at("test_time");
        EXPECT_EQ(when.size(), 20u) << when;  // 2026-12-07T14:15:29Z
        EXPECT_TRUE(when.ends_with("Z") && when[10] == 'T') << when;
        // The samples: one per repetition, their tokens/s from their times, and the averages over them.
        const auto ns = r.at("samples_ns").get<std::vector<int64_t>>();
        const auto ts = r.at("samples_ts").get<std::vector<double>>();
        ASSERT_EQ(ns.size(), 3u);
        ASSERT_EQ(ts.size(), 3u);
        const double n_tokens = r.at("n_tokens").get<double>();
        double mean_ns = 0, mean_ts = 0;
        for (size_t k = 0; k < 3; ++k) {
            EXPECT_GT(ns[k], 0);
            EXPECT_NEAR(ts[k], 1e9 * n_tokens / double(ns[k]), 1e-9 * ts[k]);
            mean_ns += double(ns[k]) / 3;
            mean_ts += ts[k] / 3;
        }
        EXPECT_NEAR(r.at("avg_ns").get<double>(), mean_ns, 1.0);
        EXPECT_NEAR(r.at("avg_ts").get<double>(), mean_ts, 1e-9 * mean_ts);
        EXPECT_GE(r.at("stddev_ns").get<double>(), 0.0);
        EXPECT_GE(r.at("stddev_ts").get<double>(), 0.0);
    }
    // The parameters: the qwen3 fixture's 1,328,640 in Q8_0 (34 bytes a block of 32, norms in f32); the Brown
    // model's in BF16, two bytes each but for its f32 norms.
    EXPECT_EQ(j[0].at("model_n_params"), 1328640);
    EXPECT_EQ(j[0].at("model_size"), 1416192);
    const int64_t brown_params = j[2].at("model_n_params"), brown_size = j[2].at("model_size");
    EXPECT_GT(brown_size, 2 * brown_params);
    EXPECT_LT(brown_size, 2 * brown_params + 4 * brown_params / 100);
    EXPECT_EQ(j[2].at("model_type"), j[3].at("model_type"));
    EXPECT_NE(j[0].at("model_type"), j[2].at("model_type"));

    // md: a plan line per model, then one table with both.
    const auto md = run_zinc("bench -m " + kQwen3 + "," + kBrown + " -p 4 -n 0 -r 1 -t 1");
    ASSERT_EQ(md.status, 0) << md.err;
    EXPECT_TRUE(md.out.starts_with("qwen3-q8_0.gguf: backend cpu (1 thread), context 4 ")) << md.out;
    EXPECT_TRUE(has(md.out, "\nbrown-qwen3-5m-bf16.gguf: backend cpu (1 thread), context 4 ")) << md.out;
    EXPECT_TRUE(has(md.out, "| qwen3-q8_0.gguf          |")) << md.out;
    EXPECT_TRUE(has(md.out, "| brown-qwen3-5m-bf16.gguf |")) << md.out;
}

// Lists and llama-bench's ranges for -p, -n, -t, -ub and -ngl: every combination, in llama-bench's order (GPU layers,
// then micro-batch, then threads, then the tests).
TEST(Cli, BenchListsGiveEveryCombination) {
    // bench_json gives -t 1 first; a flag given again adds its values.
    const auto j = bench_json("-m " + kQwen3 + " -p 2-6+2 -n 2-4*2 -ub 2-4+2 -ngl 0 -t 2");
    ASSERT_EQ(j.size(), 2u * 2u * 5u) << j.dump();
    size_t i = 0;
    for (int ub : {2, 4})
        for (int t : {1, 2})
            for (const char* test : {"pp2", "pp4", "pp6", "tg2", "tg4"}) {
                const auto& r = j[i++];
                EXPECT_EQ(r.at("n_ubatch"), ub) << r.dump();
                EXPECT_EQ(r.at("n_threads"), t) << r.dump();
                EXPECT_EQ(r.at("test"), test) << r.dump();
                EXPECT_EQ(r.at("n_gpu_layers"), 0);
                EXPECT_EQ(r.at("n_ctx"), 6);
            }
    // md: a column for what varies.
    const auto md = run_zinc("bench -m " + kQwen3 + " -p 4 -n 0 -r 1 -t 1 -ub 2,4");
    ASSERT_EQ(md.status, 0) << md.err;
    EXPECT_TRUE(has(md.out, "| model           |     size | backend | n_ubatch | test |")) << md.out;
    EXPECT_TRUE(has(md.out, " | cpu     |        2 |  pp4 | ")) << md.out;
    EXPECT_TRUE(has(md.out, " | cpu     |        4 |  pp4 | ")) << md.out;

    for (const auto& [args, message] : std::vector<std::pair<std::string, std::string>>{
             {"-t 1,x", "--threads: expects an integer from 1 to "},
             {"-p 8-4", "--n-prompt: the range '8-4' ends before it starts"},
             {"-ub 1-8*1", "--ubatch-size: the range '1-8*1' does not grow: *STEP needs FIRST >= 1 and STEP >= 2"},
             {"-n 1-2+0", "--n-gen: expects an integer from 0 to 1073741824 or a range"},
             {"-p 1-100000", "--n-prompt: more than 1024 values in '1-100000'"},
             {"-ngl -2", "--n-gpu-layers: expects an integer from -1 to 2147483647 or a range"},
             {"-ngl all,x", "--n-gpu-layers: expects an integer from -1 to 2147483647 or a range FIRST-LAST, "
                            "FIRST-LAST+STEP or FIRST-LAST*STEP, not 'x'"},
             {"-p 4,", "--n-prompt: expects an integer from 0 to 1073741824 or a range FIRST-LAST, FIRST-LAST+STEP or "
                       "FIRST-LAST*STEP, not ''"},
             {"-t 1,2 -npl 2", "--npl: measures one model with one -t, -ub and -ngl; 2 combinations were given"}}) {
        const auto r = run_zinc("bench -m " + kQwen3 + " -r 1 " + args);
        EXPECT_EQ(r.status, 2) << args << "\n" << r.err;
        EXPECT_TRUE(has(r.err, "zinc: error: " + message)) << args << ": " << r.err;
        EXPECT_EQ(r.out, "") << args;
    }
}

TEST(Cli, BenchOutputFormats) {
    const std::string args = "bench -m " + kQwen3 + " -p 4 -n 2 -d 0,4 -r 1 -t 1";
    // csv: a header, then one row per test; strings quoted; no GB/s for pp.
    const auto csv = run_zinc(args + " -o csv -ngl 99");  // llama-bench's -ngl: the GPU when there is one
    ASSERT_EQ(csv.status, 0) << csv.err;
    std::vector<std::string> lines;
    for (size_t at = 0, end; (end = csv.out.find('\n', at)) != std::string::npos; at = end + 1)
        lines.push_back(csv.out.substr(at, end - at));
    ASSERT_EQ(lines.size(), 5u) << csv.out;
    // zinc's fields, then llama-bench's, without its sample arrays (as its CSV).
    EXPECT_EQ(lines[0], "model,size_bytes,backend,device,n_threads,n_ctx,n_ubatch,type_k,type_v,weights_bytes,kv_cache_bytes,"
                        "activations_bytes,free_bytes,test,n_prompt,n_gen,n_depth,n_tokens,reps,avg_ts,stddev_ts,"
                        "read_bytes_per_token,gbps,build_commit,build_number,cpu_info,gpu_info,backends,model_filename,"
                        "model_type,model_size,model_n_params,n_batch,n_gpu_layers,flash_attn,test_time,avg_ns,"
                        "stddev_ns");
    EXPECT_TRUE(lines[1].starts_with("\"qwen3-q8_0.gguf\",")) << lines[1];
    EXPECT_TRUE(has(lines[1], ",\"pp4\",4,0,0,4,1,")) << lines[1];
    EXPECT_TRUE(has(lines[1], ",1416192,,\"")) << "no GB/s for pp: " << lines[1];
    EXPECT_TRUE(has(lines[4], ",\"tg2 @ d4\",0,2,4,2,1,")) << lines[4];
    EXPECT_FALSE(has(lines[4], ",1416192,,\"")) << lines[4];
    EXPECT_TRUE(has(lines[4], ",\"qwen3-q8_0.gguf\",\"qwen3 ")) << lines[4];
    // json: the same records.
    const auto j = run_zinc(args + " -o json");
    ASSERT_EQ(j.status, 0) << j.err;
    EXPECT_EQ(nlohmann::json::parse(j.out).size(), 4u);
    EXPECT_EQ(run_zinc(args + " --json").out.substr(0, 40), j.out.substr(0, 40));
    // jsonl: one record a line, with the sample arrays.
    const auto jl = run_zinc(args + " -o jsonl");
    ASSERT_EQ(jl.status, 0) << jl.err;
    size_t n_lines = 0;
    for (size_t at = 0, end; (end = jl.out.find('\n', at)) != std::string::npos; at = end + 1, ++n_lines) {
        const auto rec = nlohmann::json::parse(jl.out.substr(at, end - at));
        EXPECT_EQ(rec.at("samples_ns").size(), 1u) << rec.dump();
    }
    EXPECT_EQ(n_lines, 4u) << jl.out;
    // md: the plan, then the table (as without -o).
    const auto md = run_zinc(args + " -o md -ngl 0");
    ASSERT_EQ(md.status, 0) << md.err;
    EXPECT_TRUE(md.out.starts_with("backend cpu (1 thread), context 8 ")) << md.out;
    EXPECT_TRUE(has(md.out, "| tg2 @ d4 |")) << md.out;
}

TEST(Cli, LogitsFromTextEqualLogitsFromItsIds) {
    TempDir dir;
    const std::string text = shell_word("Hello world");
    const auto ids = run_zinc("tokenize -m " + kQwen3 + " --ids-only -p " + text);
    ASSERT_EQ(ids.status, 0) << ids.err;
    EXPECT_EQ(ids.out, "39,301,385,1879\n");
    const auto a = run_zinc("logits -m " + kQwen3 + " -p " + text + " -o " + shell_word(dir.file("a.npy")) +
                            " --ids-out " + shell_word(dir.file("ids.npy")));
    ASSERT_EQ(a.status, 0) << a.err;
    const auto b = run_zinc("logits -m " + kQwen3 + " --ids 39,301,385,1879 -o " + shell_word(dir.file("b.npy")));
    ASSERT_EQ(b.status, 0) << b.err;
    EXPECT_TRUE(has(a.err, "wrote logits of 4 positions x 2112")) << a.err;
    const auto la = zinc::test::read_bytes(dir.file("a.npy")), lb = zinc::test::read_bytes(dir.file("b.npy"));
    EXPECT_EQ(la.size(), 128 + 4 * 2112 * 4u);
    EXPECT_EQ(la, lb);
    EXPECT_EQ(zinc::test::read_bytes(dir.file("ids.npy")).size(), 128 + 4 * 4u);
    // Three tokens per forward call: the same shape.
    const auto c = run_zinc("logits -m " + kQwen3 + " --ids 39,301,385,1879 -b 3 -o " + shell_word(dir.file("c.npy")));
    ASSERT_EQ(c.status, 0) << c.err;
    EXPECT_EQ(zinc::test::read_bytes(dir.file("c.npy")).size(), la.size());
    // A context that does not hold the prompt is refused before loading.
    const auto short_ctx = run_zinc("logits -m " + kQwen3 + " --ids 1,2,3 -c 2 -o " + shell_word(dir.file("c.npy")));
    EXPECT_EQ(short_ctx.status, 2);
    EXPECT_TRUE(has(short_ctx.err, "--ctx-size: the prompt has 3 tokens; a context of 2 does not hold them"))
        << short_ctx.err;
}

TEST(Cli, TokenizeAndDetokenize) {
    const auto r = run_zinc("tokenize -m " + kQwen3 + " -p " + shell_word("Hello world<|im_start|>\n"));
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.out, "39\t\"H\"\n301\t\"el\"\n385\t\"lo\"\n1879\t\" world\"\n2049\t\"<|im_start|>\"\n198\t\"\\n\"\n");
    // Special-token text as plain text: more than one token.
    const auto plain = run_zinc("tokenize -m " + kQwen3 + " --ids-only --no-parse-special -p '<|im_start|>'");
    ASSERT_EQ(plain.status, 0) << plain.err;
    EXPECT_FALSE(has(plain.out, "2049")) << plain.out;
    // A vocabulary that adds BOS, with and without it.
    EXPECT_TRUE(run_zinc("tokenize -m " + kGemma4 + " --ids-only -p Hello").out.starts_with("2,"));
    EXPECT_FALSE(run_zinc("tokenize -m " + kGemma4 + " --ids-only --no-bos -p Hello").out.starts_with("2,"));
    // Back to text, from --ids or from standard input (as tokenize --ids-only writes them).
    const auto text = run_zinc("detokenize -m " + kQwen3 + " --ids 39,301,385,1879,2049");
    ASSERT_EQ(text.status, 0) << text.err;
    EXPECT_EQ(text.out, "Hello world<|im_start|>\n");
    EXPECT_EQ(run_zinc("detokenize -m " + kQwen3 + " --no-special", "39,301,385,1879,2049\n").out, "Hello world\n");
}

// tokenize and detokenize need the vocabulary only: a file without a single tensor does.
TEST(Cli, TokenizeReadsOnlyTheVocabulary) {
    TempDir dir;
    const zinc::gguf::File src(ZINC_FIXTURES_DIR "/qwen3/qwen3-q8_0.gguf");
    zinc::gguf::Writer w;
    for (const auto& kv : src.metadata())
        if (kv.key.starts_with("tokenizer.") || kv.key == "general.architecture") w.add(kv.key, kv.value);
    const std::string path = dir.file("vocab.gguf");
    w.write(path);
    const auto t = run_zinc("tokenize -m " + shell_word(path) + " --ids-only -p " + shell_word("Hello world"));
    EXPECT_EQ(t.status, 0) << t.err;
    EXPECT_EQ(t.out, "39,301,385,1879\n");
    EXPECT_EQ(run_zinc("detokenize -m " + shell_word(path) + " --ids 39,301,385,1879").out, "Hello world\n");
    EXPECT_EQ(run_zinc("run -m " + shell_word(path) + " -p hi").status, 1);
}

}  // namespace

// zinc chat with the built-in model, which has no chat template: each message continues the text and each reply
// ends with its paragraph.
TEST(Cli, ChatWritesWithABaseModel) {
    const std::string brown = shell_word(ZINC_BROWN_DIR "/brown-qwen3-5m-bf16.gguf");
    const auto r = run_zinc("chat -m " + brown + " --seed 3 --temp 0.8 --top-k 40 -n 200 -t 1", "The old house\nIt\n");
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_TRUE(has(r.err, "no chat template: each message continues the text")) << r.err;
    // Two prompts, two replies, each on one line (a reply stops at its paragraph's end or after -n tokens).
    EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '>'), 3) << r.out;
    EXPECT_GT(r.out.size(), 20u) << r.out;
}

// zinc template: the GGUF's own template rendered for a conversation file, without loading weights; the same text
// from the template as a file; refusals that say what is missing.
TEST(Cli, TemplateRendersTheModelsChatTemplate) {
    const std::string dir = ::testing::TempDir() + "zinc_template_" + std::to_string(::getpid());
    std::filesystem::create_directories(dir);
    const std::string conv = dir + "/conv.json";
    std::ofstream(conv) << R"([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}])";
    const std::string qwen3 = shell_word(ZINC_FIXTURES_DIR "/qwen3/qwen3-f32.gguf");
    const auto r = run_zinc("template -m " + qwen3 + " --messages " + shell_word(conv) + " --var enable_thinking=false");
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.out,
              "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
              "<think>\n\n</think>\n\n");
    const auto f = run_zinc("template --template-file " + shell_word(ZINC_TEST_DATA_DIR "/chat/templates/qwen3.jinja") +
                            " --messages " + shell_word(conv) + " --var enable_thinking=false");
    ASSERT_EQ(f.status, 0) << f.err;
    EXPECT_EQ(f.out, r.out);
    const auto no_gen = run_zinc("template -m " + qwen3 + " --messages " + shell_word(conv) + " --no-generation-prompt");
    EXPECT_TRUE(no_gen.out.ends_with("Hi<|im_end|>\n")) << no_gen.out;
    EXPECT_TRUE(has(run_zinc("template --messages " + shell_word(conv)).err, "-m or --template-file is required"));
    const auto bad = run_zinc("template -m " + qwen3 + " --messages " + shell_word(conv) + " --var x=notjson");
    EXPECT_EQ(bad.status, 2);
    EXPECT_TRUE(has(bad.err, "the value of x is not JSON")) << bad.err;
    const std::string brown = shell_word(ZINC_BROWN_DIR "/brown-qwen3-5m-bf16.gguf");
    EXPECT_TRUE(has(run_zinc("template -m " + brown + " --messages " + shell_word(conv)).err, "has no chat template"));
    std::filesystem::remove_all(dir);
}

// run --chat renders the model's own template (or --chat-template-file), and -v shows the exact prompt.
TEST(Cli, ChatPromptComesFromTheTemplate) {
    const std::string qwen3 = shell_word(ZINC_FIXTURES_DIR "/qwen3/qwen3-q8_0.gguf");
    const auto r = run_zinc("run --chat -m " + qwen3 + " -p 'hi there' -sys 'Be brief.' --no-think -n 2 -v -t 1");
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_TRUE(has(r.err, "zinc: prompt from the model's chat template:\n<|im_start|>system\nBe brief.<|im_end|>\n"
                           "<|im_start|>user\nhi there<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"))
        << r.err;
    const std::string dir = ::testing::TempDir() + "zinc_tmpl_" + std::to_string(::getpid());
    std::filesystem::create_directories(dir);
    std::ofstream(dir + "/t.jinja") << "{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}[assistant]";
    const auto f = run_zinc("run --chat -m " + qwen3 + " -p hello -n 2 -v -t 1 --chat-template-file " +
                            shell_word(dir + "/t.jinja"));
    ASSERT_EQ(f.status, 0) << f.err;
    EXPECT_TRUE(has(f.err, "zinc: prompt from the given chat template:\n[user] hello\n[assistant]\n")) << f.err;
    std::ofstream(dir + "/bad.jinja") << "line one\n{% if x %}never closed";
    const auto bad = run_zinc("run --chat -m " + qwen3 + " -p hello -n 2 --chat-template-file " +
                              shell_word(dir + "/bad.jinja"));
    EXPECT_EQ(bad.status, 1);
    EXPECT_TRUE(has(bad.err, "line 2")) << bad.err;
    std::filesystem::remove_all(dir);
}

// The chat prompt's commands, a pasted block as one message, /save and /load, and a conversation that outgrows
// the context losing its oldest turns (the system prompt kept) instead of ending.
TEST(Cli, ChatCommandsAndAFullContext) {
    const std::string qwen3 = shell_word(ZINC_FIXTURES_DIR "/qwen3/qwen3-q8_0.gguf");
    const std::string dir = ::testing::TempDir() + "zinc_chat_" + std::to_string(::getpid());
    std::filesystem::create_directories(dir);
    const std::string saved = dir + "/c.json";
    const auto r = run_zinc("chat -m " + qwen3 + " -n 2 --temp 0 -t 1",
                            "/help\n/frobnicate\n/system Be brief.\n\"\"\"\nline one\nline two\n\"\"\"\n/save " + saved +
                                "\n/clear\n/load " + saved + "\n/load " + dir + "/missing.json\n/bye\nnever sent\n");
    ASSERT_EQ(r.status, 0) << r.err;
    for (const char* part : {"/system TEXT", "(unknown command /frobnicate; /help lists the commands)",
                             "(system prompt set)", "(saved 3 messages to ", "(conversation cleared)",
                             "(loaded 3 messages from ", "missing.json: No such file or directory)"})
        EXPECT_TRUE(has(r.out, part)) << part << " missing in:\n" << r.out;
    std::ifstream in(saved);
    const auto j = nlohmann::json::parse(in);
    ASSERT_EQ(j["messages"].size(), 3u) << j.dump();
    EXPECT_EQ(j["messages"][0]["content"], "Be brief.");
    EXPECT_EQ(j["messages"][1]["content"], "line one\nline two");  // the block is one message
    EXPECT_EQ(j["messages"][2]["role"], "assistant");

    const std::string words = "one two three four five six seven\n";
    const auto full = run_zinc("chat -m " + qwen3 + " -n 3 --temp 0 -t 1 -c 48 -sys Sys.", words + words + words);
    ASSERT_EQ(full.status, 0) << full.err;
    EXPECT_TRUE(has(full.out, "oldest messages dropped to fit the 48-token context")) << full.out;
    const auto huge = run_zinc("chat -m " + qwen3 + " -n 3 -t 1 -c 16", words + words);
    ASSERT_EQ(huge.status, 0) << huge.err;
    EXPECT_TRUE(has(huge.out, "does not fit in the 16-token context")) << huge.out;
    std::filesystem::remove_all(dir);
}

// --tools offers tools through the model's chat template (run --chat and chat); in chat, /tool gives a call's result
// back as a tool message and the model replies to it, and /save keeps both.
TEST(Cli, ToolsReachTheTemplateAndResultsTheConversation) {
    const std::string qwen3 = shell_word(ZINC_FIXTURES_DIR "/qwen3/qwen3-q8_0.gguf");
    const std::string dir = ::testing::TempDir() + "zinc_tools_" + std::to_string(::getpid());
    std::filesystem::create_directories(dir);
    const std::string tools = dir + "/tools.json";
    std::ofstream(tools) << R"([{"type": "function", "function": {"name": "get_weather", "description": "Weather now",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}])";
    const auto r = run_zinc("run --chat -m " + qwen3 + " -p 'Weather in Paris?' -n 2 -v -t 1 --tools " +
                            shell_word(tools));
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_TRUE(has(r.err, "<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"get_weather\"")) << r.err;

    const auto plain = run_zinc("run -m " + qwen3 + " -p x --tools " + shell_word(tools));
    EXPECT_EQ(plain.status, 2);
    EXPECT_TRUE(has(plain.err, "--tools requires --chat")) << plain.err;
    std::ofstream(dir + "/bad.json") << "[{";
    std::ofstream(dir + "/object.json") << R"({"name": "f"})";
    for (const auto& [file, why] : {std::pair{"bad.json", "not JSON"}, std::pair{"object.json", "a list of tools"}}) {
        const auto bad = run_zinc("run --chat -m " + qwen3 + " -p x -n 1 --tools " + shell_word(dir + "/" + file));
        EXPECT_EQ(bad.status, 1) << file;
        EXPECT_TRUE(has(bad.err, why)) << file << ": " << bad.err;
    }

    const std::string saved = dir + "/c.json";
    const auto c = run_zinc("chat -m " + qwen3 + " -n 2 --temp 0 -t 1 --tools " + shell_word(tools),
                            "Weather in Paris?\n/tool\n/tool {\"temperature\": 21}\n/save " + saved + "\n");
    ASSERT_EQ(c.status, 0) << c.err;
    EXPECT_TRUE(has(c.out, "(/tool needs the result to give back)")) << c.out;
    std::ifstream in(saved);
    const auto j = nlohmann::json::parse(in);
    ASSERT_EQ(j["messages"].size(), 4u) << j.dump();
    EXPECT_EQ(j["messages"][1]["role"], "assistant");
    EXPECT_EQ(j["messages"][2]["role"], "tool");
    EXPECT_EQ(j["messages"][2]["content"], "{\"temperature\": 21}");
    EXPECT_EQ(j["messages"][3]["role"], "assistant");
    std::filesystem::remove_all(dir);
}

// --reasoning-budget N: after N tokens of reasoning the format's end of reasoning goes into the context and the model
// answers; 0 renders the prompt with thinking off. A template whose prompt opens the reasoning block makes every
// generated token reasoning: hidden, nothing shows unless the budget ends the reasoning.
TEST(Cli, ReasoningBudgetEndsTheReasoning) {
    const std::string qwen3 = shell_word(ZINC_FIXTURES_DIR "/qwen3/qwen3-q8_0.gguf");
    const std::string dir = ::testing::TempDir() + "zinc_budget_" + std::to_string(::getpid());
    std::filesystem::create_directories(dir);
    const std::string tmpl = dir + "/think.jinja";
    std::ofstream(tmpl) << "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
                           "<|im_start|>assistant\n<think>\n";
    const std::string args = "run --chat -m " + qwen3 + " -p hi --temp 0 -n 12 -t 1 --reasoning hide " +
                             "--chat-template-file " + shell_word(tmpl);
    const auto all = run_zinc(args);
    ASSERT_EQ(all.status, 0) << all.err;
    EXPECT_EQ(all.out.find_first_not_of(" \n"), std::string::npos) << all.out;
    const auto capped = run_zinc(args + " --reasoning-budget 4");
    ASSERT_EQ(capped.status, 0) << capped.err;
    EXPECT_NE(capped.out.find_first_not_of(" \n"), std::string::npos) << capped.out;

    const auto zero = run_zinc("run --chat -m " + qwen3 + " -p hi -n 2 -v -t 1 --reasoning-budget 0");
    ASSERT_EQ(zero.status, 0) << zero.err;
    EXPECT_TRUE(has(zero.err, "<|im_start|>assistant\n<think>\n\n</think>\n\n")) << zero.err;
    const auto plain = run_zinc("run -m " + qwen3 + " -p x --reasoning-budget 3");
    EXPECT_EQ(plain.status, 2);
    EXPECT_TRUE(has(plain.err, "--reasoning-budget requires --chat")) << plain.err;
    const auto negative = run_zinc("run --chat -m " + qwen3 + " -p x --reasoning-budget -2");
    EXPECT_EQ(negative.status, 2);
    std::filesystem::remove_all(dir);
}

// --stop: the reply ends where a stop string begins, without it, even when the string spans several tokens.
TEST(Cli, RunStopsAtAStopString) {
    const std::string brown = shell_word(ZINC_BROWN_DIR "/brown-qwen3-5m-bf16.gguf");
    const std::string args = "run -m " + brown + " -p 'The jury said' --temp 0 -n 40 -t 1";
    const auto full = run_zinc(args);
    ASSERT_EQ(full.status, 0) << full.err;
    ASSERT_TRUE(full.out.starts_with("The jury said")) << full.out;
    // A stop string from the middle of the generated text: its first occurrence ends the reply.
    const std::string generated = full.out.substr(std::string("The jury said").size());
    ASSERT_GT(generated.size(), 30u) << generated;
    const std::string stop = generated.substr(generated.size() / 2, 7);
    const auto cut = run_zinc(args + " --stop " + shell_word(stop) + " -r 'never written, surely'");
    ASSERT_EQ(cut.status, 0) << cut.err;
    EXPECT_EQ(cut.out, "The jury said" + generated.substr(0, generated.find(stop)) + "\n") << "stop: " << stop;
    EXPECT_TRUE(has(cut.err, "stop: stop string")) << cut.err;
    EXPECT_EQ(run_zinc(args + " --stop ''").status, 2);
}

// An output that is the model being read is refused before anything is written: the file stays mapped while the
// command runs (and is the model).
TEST(Cli, OutputsNeverOverwriteTheModel) {
    const std::string dir = ::testing::TempDir() + "zinc_overwrite_" + std::to_string(::getpid());
    std::filesystem::create_directories(dir);
    const std::string copy = dir + "/m.gguf";
    std::filesystem::copy_file(ZINC_FIXTURES_DIR "/qwen3/qwen3-q8_0.gguf", copy,
                               std::filesystem::copy_options::overwrite_existing);
    const auto size = std::filesystem::file_size(copy);
    const std::string text = shell_word(ZINC_TEST_DATA_DIR "/perplexity/text.txt");
    for (const std::string& args : {"perplexity -m " + shell_word(copy) + " -f " + text + " -c 64 --kl-divergence-base " +
                                        shell_word(copy),
                                    "logits -m " + shell_word(copy) + " --ids 1,2 -o " + shell_word(copy)}) {
        const auto r = run_zinc(args);
        EXPECT_EQ(r.status, 1) << args;
        EXPECT_TRUE(has(r.err, "would overwrite the input")) << r.err;
        EXPECT_EQ(std::filesystem::file_size(copy), size) << args;
    }
    std::filesystem::remove_all(dir);
}

TEST(Cli, DeviceNeedsAGpuBackend) {
    const auto r = run_zinc("run -m " + kQwen3 + " -p hi -n 1 --backend cpu --device 0");
    EXPECT_EQ(r.status, 1);
    EXPECT_TRUE(has(r.err, "--device chooses a GPU; it does not go with --backend cpu")) << r.err;
}
