#include "npy.h"

#include <cstring>
#include <fstream>
#include <iterator>
#include <stdexcept>

namespace zinc::test {

namespace {

[[noreturn]] void fail(const std::string& name, const std::string& why) {
    throw std::runtime_error("npy " + name + ": " + why);
}

// Value of `key` in the header dict, e.g. "'<f4'" or "(2, 3)" or "False".
std::string dict_value(const std::string& h, const std::string& key, const std::string& name) {
    const std::string k = "'" + key + "'";
    size_t p = h.find(k);
    if (p == std::string::npos) fail(name, "header lacks " + key);
    p = h.find(':', p + k.size());
    if (p == std::string::npos) fail(name, "bad header");
    ++p;
    while (p < h.size() && h[p] == ' ') ++p;
    size_t e = p;
    if (p < h.size() && h[p] == '(') {
        e = h.find(')', p);
        if (e == std::string::npos) fail(name, "bad shape");
        return h.substr(p, e - p + 1);
    }
    if (p < h.size() && (h[p] == '\'' || h[p] == '"')) {
        e = h.find(h[p], p + 1);
        if (e == std::string::npos) fail(name, "bad string");
        return h.substr(p + 1, e - p - 1);
    }
    while (e < h.size() && h[e] != ',' && h[e] != '}') ++e;
    return h.substr(p, e - p);
}

template <typename T>
void convert(const uint8_t* src, size_t n, std::vector<float>& out) {
    out.resize(n);
    for (size_t i = 0; i < n; ++i) {
        T v;
        std::memcpy(&v, src + i * sizeof(T), sizeof(T));
        out[i] = static_cast<float>(v);
    }
}

}  // namespace

size_t NpyArray::size() const {
    size_t n = 1;
    for (size_t d : shape) n *= d;
    return n;
}

size_t NpyArray::cols() const {
    size_t n = 1;
    for (size_t i = 1; i < shape.size(); ++i) n *= shape[i];
    return n;
}

NpyArray parse_npy(const std::vector<uint8_t>& b, const std::string& name) {
    if (b.size() < 10 || std::memcmp(b.data(), "\x93NUMPY", 6) != 0) fail(name, "not a .npy file");
    const int major = b[6];
    size_t hlen = 0, off = 0;
    if (major == 1) {
        hlen = b[8] | (size_t(b[9]) << 8);
        off = 10;
    } else if (major == 2 || major == 3) {
        if (b.size() < 12) fail(name, "truncated header");
        hlen = b[8] | (size_t(b[9]) << 8) | (size_t(b[10]) << 16) | (size_t(b[11]) << 24);
        off = 12;
    } else {
        fail(name, "unsupported version " + std::to_string(major));
    }
    if (off + hlen > b.size()) fail(name, "truncated header");
    const std::string h(reinterpret_cast<const char*>(b.data() + off), hlen);
    NpyArray a;
    a.descr = dict_value(h, "descr", name);
    if (dict_value(h, "fortran_order", name).find("True") != std::string::npos) fail(name, "fortran order");
    const std::string shp = dict_value(h, "shape", name);
    size_t i = 1;
    while (i < shp.size()) {
        while (i < shp.size() && (shp[i] == ' ' || shp[i] == ',')) ++i;
        if (i >= shp.size() || shp[i] == ')') break;
        size_t e = i;
        while (e < shp.size() && shp[e] >= '0' && shp[e] <= '9') ++e;
        if (e == i) fail(name, "bad shape " + shp);
        a.shape.push_back(std::stoull(shp.substr(i, e - i)));
        i = e;
    }
    const size_t n = a.size();
    const uint8_t* data = b.data() + off + hlen;
    const size_t avail = b.size() - off - hlen;
    auto need = [&](size_t esz) {
        if (avail < n * esz) fail(name, "data truncated");
    };
    if (a.descr == "<f4" || a.descr == "=f4" || a.descr == "|f4") {
        need(4);
        convert<float>(data, n, a.data);
    } else if (a.descr == "<f8") {
        need(8);
        convert<double>(data, n, a.data);
    } else if (a.descr == "<i4") {
        need(4);
        convert<int32_t>(data, n, a.data);
    } else if (a.descr == "<i8") {
        need(8);
        convert<int64_t>(data, n, a.data);
    } else {
        fail(name, "unsupported dtype " + a.descr);
    }
    return a;
}

NpyArray load_npy(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) fail(path, "cannot open");
    std::vector<uint8_t> b((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    return parse_npy(b, path);
}

}  // namespace zinc::test
