#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "gguf/value.h"

using namespace zinc::gguf;

namespace {

std::string error_of(auto&& fn) {
    try {
        fn();
    } catch (const Error& e) {
        return e.what();
    }
    return "(no error)";
}

}  // namespace

TEST(GgufValue, ScalarTypesAndGetters) {
    EXPECT_EQ(Value::of(uint8_t{200}).type(), ValueType::UINT8);
    EXPECT_EQ(Value::of(int8_t{-3}).get_i8(), -3);
    EXPECT_EQ(Value::of(uint16_t{60000}).get_u16(), 60000);
    EXPECT_EQ(Value::of(int16_t{-30000}).get_i16(), -30000);
    EXPECT_EQ(Value::of(uint32_t{4000000000u}).get_u32(), 4000000000u);
    EXPECT_EQ(Value::of(int32_t{-5}).get_i32(), -5);
    EXPECT_EQ(Value::of(uint64_t{1} << 60).get_u64(), uint64_t{1} << 60);
    EXPECT_EQ(Value::of(int64_t{-1} << 60).get_i64(), int64_t{-1} << 60);
    EXPECT_EQ(Value::of(0.5f).get_f32(), 0.5f);
    EXPECT_EQ(Value::of(0.25).get_f64(), 0.25);
    EXPECT_TRUE(Value::of(true).get_bool());
    EXPECT_EQ(Value::of("hi").get_string(), "hi");
    EXPECT_EQ(Value::of(std::string("x")).type(), ValueType::STRING);
}

TEST(GgufValue, WrongTypeNamesKeyAndTypes) {
    Value v = Value::of(uint32_t{7});
    v.set_key("llama.block_count");
    const std::string msg = error_of([&] { (void)v.get_string(); });
    EXPECT_NE(msg.find("llama.block_count"), std::string::npos) << msg;
    EXPECT_NE(msg.find("expected STRING"), std::string::npos) << msg;
    EXPECT_NE(msg.find("got UINT32"), std::string::npos) << msg;
    EXPECT_NE(error_of([&] { (void)v.get_u64(); }).find("expected UINT64, got UINT32"), std::string::npos);
    EXPECT_NE(error_of([&] { (void)v.get_f32(); }).find("FLOAT32"), std::string::npos);
}

TEST(GgufValue, IntegerGettersAcceptAnyFittingType) {
    EXPECT_EQ(Value::of(uint8_t{5}).get_int<uint32_t>(), 5u);
    EXPECT_EQ(Value::of(int64_t{5}).get_int<uint16_t>(), 5);
    EXPECT_EQ(Value::of(uint64_t{70000}).get_int<int32_t>(), 70000);
    EXPECT_EQ(Value::of(int8_t{-1}).get_int<int64_t>(), -1);
    Value neg = Value::of(int32_t{-1});
    neg.set_key("k.neg");
    const std::string msg = error_of([&] { (void)neg.get_int<uint32_t>(); });
    EXPECT_NE(msg.find("k.neg"), std::string::npos) << msg;
    EXPECT_NE(msg.find("-1"), std::string::npos) << msg;
    EXPECT_THROW((void)Value::of(uint64_t{1} << 40).get_int<uint32_t>(), Error);
    EXPECT_THROW((void)Value::of(uint32_t{70000}).get_int<uint16_t>(), Error);
    EXPECT_THROW((void)Value::of(1.0f).get_int<int>(), Error);
    EXPECT_THROW((void)Value::of("1").get_int<int>(), Error);
    EXPECT_DOUBLE_EQ(Value::of(uint16_t{3}).get_number(), 3.0);
    EXPECT_DOUBLE_EQ(Value::of(1.5f).get_number(), 1.5);
}

TEST(GgufValue, Arrays) {
    const Value a = Value::array(std::vector<int32_t>{1, -2, 3});
    EXPECT_EQ(a.type(), ValueType::ARRAY);
    EXPECT_EQ(a.element_type(), ValueType::INT32);
    EXPECT_EQ(a.size(), 3u);
    EXPECT_EQ(a.at(1).get_i32(), -2);
    EXPECT_EQ(a.get_int_array<int64_t>(), (std::vector<int64_t>{1, -2, 3}));
    EXPECT_THROW((void)a.get_int_array<uint32_t>(), Error);  // -2 does not fit
    EXPECT_THROW((void)a.at(3), Error);
    EXPECT_THROW((void)a.get_f32_array(), Error);
    EXPECT_THROW((void)a.get_string_array(), Error);

    const Value s = Value::array(std::vector<std::string>{"a", "", "bc"});
    EXPECT_EQ(s.get_string_array(), (std::vector<std::string>{"a", "", "bc"}));
    EXPECT_EQ(s.at(2).get_string(), "bc");

    const Value f = Value::array(std::vector<float>{0.5f, 2.0f});
    EXPECT_EQ(f.get_f32_array(), (std::vector<float>{0.5f, 2.0f}));
    const Value b = Value::array(std::vector<bool>{true, false});
    EXPECT_EQ(b.get_bool_array(), (std::vector<bool>{true, false}));

    const Value e = Value::array(std::vector<uint32_t>{});
    EXPECT_EQ(e.size(), 0u);
    EXPECT_TRUE(e.get_int_array<int>().empty());

    const Value n = Value::array_of_arrays({Value::array(std::vector<uint8_t>{1, 2}), s});
    EXPECT_EQ(n.element_type(), ValueType::ARRAY);
    EXPECT_EQ(n.get_array_array().size(), 2u);
    EXPECT_EQ(n.at(1).at(0).get_string(), "a");
    EXPECT_THROW(Value::array_of_arrays({Value::of(1.0f)}), Error);
    EXPECT_THROW((void)Value::of(1u).size(), Error);
}

TEST(GgufValue, ToStringAbbreviates) {
    std::vector<int32_t> v(100);
    for (int i = 0; i < 100; ++i) v[i] = i;
    EXPECT_EQ(Value::array(v).to_string(3), "[0, 1, 2, ...]");
    EXPECT_EQ(Value::of("a\"b").to_string(), "\"a\\\"b\"");
    EXPECT_EQ(Value::of(true).to_string(), "true");
}

// Strings are cut and made printable; nested arrays share one element budget, so a rendering stays short
// however the arrays nest.
TEST(GgufValue, ToStringIsShortAndPrintable) {
    EXPECT_EQ(Value::of("\x1b[2J\xc2\x9b\xff").to_string(), "\"\\x1b[2J\\u{009b}\\xff\"");
    EXPECT_EQ(Value::of(std::string(100, 'x')).to_string(), "\"" + std::string(64, 'x') + "...\"");
    EXPECT_EQ(Value::array(std::vector<std::string>{"a\n", "\"q\""}).to_string(), "[\"a\\n\", \"\\\"q\\\"\"]");
    const Value inner = Value::array(std::vector<uint8_t>{1, 2, 3});
    EXPECT_EQ(Value::array_of_arrays({inner, inner}).to_string(8), "[[1, 2, 3], [1, 2, 3]]");
    EXPECT_EQ(Value::array_of_arrays({inner, inner, inner}).to_string(6), "[[1, 2, 3], [1, ...], ...]");
    EXPECT_EQ(Value::array_of_arrays({Value::array(std::vector<float>{})}).to_string(1), "[[]]");
    // Eight levels of two arrays above four elements: 2^8 * 4 elements, rendered with at most 9.
    Value deep = Value::array(std::vector<int16_t>{1, 2, 3, 4});
    for (int i = 0; i < 8; ++i) deep = Value::array_of_arrays({deep, deep});
    EXPECT_EQ(deep.to_string(9), "[[[[[[[[[1, ...], ...], ...], ...], ...], ...], ...], ...], ...]");
}

TEST(GgufValue, EncodeMatchesSpec) {
    std::string out;
    Value::array(std::vector<std::string>{"a", "bc"}).encode(out);
    const std::string want("\x08\0\0\0\x02\0\0\0\0\0\0\0\x01\0\0\0\0\0\0\0a\x02\0\0\0\0\0\0\0bc", 31);
    EXPECT_EQ(out, want);
    EXPECT_EQ(value_type_name(ValueType::FLOAT64), "FLOAT64");
    EXPECT_EQ(value_type_name(static_cast<ValueType>(13)), "INVALID(13)");
}
