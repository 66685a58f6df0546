#include "hub/digest.h"

#ifdef ZINC_HAVE_CURL

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <vector>

namespace zinc::hub {
namespace {

struct MdDeleter {
    void operator()(EVP_MD_CTX* c) const { EVP_MD_CTX_free(c); }
};

std::string digest(const std::string& path, const EVP_MD* md, bool git_blob) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw std::runtime_error("cannot read " + path + ": " + std::strerror(errno));
    std::unique_ptr<int, void (*)(int*)> closer(new int(fd), [](int* f) {
        ::close(*f);
        delete f;
    });
    std::unique_ptr<EVP_MD_CTX, MdDeleter> ctx(EVP_MD_CTX_new());
    if (!ctx || EVP_DigestInit_ex(ctx.get(), md, nullptr) != 1) throw std::runtime_error("cannot start a hash");
    if (git_blob) {
        struct stat st{};
        if (::fstat(fd, &st) != 0) throw std::runtime_error("cannot stat " + path + ": " + std::strerror(errno));
        const std::string head = "blob " + std::to_string(st.st_size);
        EVP_DigestUpdate(ctx.get(), head.c_str(), head.size() + 1);  // the '\0' too
    }
    std::vector<unsigned char> buf(1 << 20);
    for (;;) {
        const ssize_t n = ::read(fd, buf.data(), buf.size());
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) throw std::runtime_error("cannot read " + path + ": " + std::strerror(errno));
        if (n == 0) break;
        EVP_DigestUpdate(ctx.get(), buf.data(), static_cast<size_t>(n));
    }
    unsigned char out[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    EVP_DigestFinal_ex(ctx.get(), out, &len);
    static const char* hex = "0123456789abcdef";
    std::string s;
    for (unsigned int i = 0; i < len; ++i) {
        s += hex[out[i] >> 4];
        s += hex[out[i] & 15];
    }
    return s;
}

}  // namespace

std::string file_sha256(const std::string& path) { return digest(path, EVP_sha256(), false); }
std::string file_git_sha1(const std::string& path) { return digest(path, EVP_sha1(), true); }

}  // namespace zinc::hub

#else

#include <stdexcept>

namespace zinc::hub {

std::string file_sha256(const std::string&) { throw std::runtime_error("built without OpenSSL: no sha256"); }
std::string file_git_sha1(const std::string&) { throw std::runtime_error("built without OpenSSL: no sha1"); }

}  // namespace zinc::hub

#endif
