// The hashes a download is checked against: the LFS sha256 of the file, or the git blob sha1 of a file outside LFS
// (OpenSSL's libcrypto, which zinc has whenever it can download).
#pragma once

#include <string>

namespace zinc::hub {

// Lowercase hex of the file's sha256; throws std::runtime_error when it cannot be read.
std::string file_sha256(const std::string& path);
// Lowercase hex of git's object id for the file as a blob: sha1 of "blob <size>\0" and the bytes.
std::string file_git_sha1(const std::string& path);

}  // namespace zinc::hub
