#ifndef TESSERA_COPENSSL_SHIM_H
#define TESSERA_COPENSSL_SHIM_H

// OpenSSL's libcrypto (3.x; 1.1.1 works too) for checksums and AES-128-CBC. The EVP calls
// Tessera needs (EVP_MD_CTX_new/free, EVP_DigestInit_ex/Update/Final_ex, EVP_md5() …,
// EVP_CIPHER_CTX_new/free, EVP_DecryptInit_ex/Update/Final_ex, EVP_aes_128_cbc()) are plain
// functions and import directly. This file wraps what Swift cannot call: the function-like
// macros, and the error queue's string formatting. Every symbol of ours carries the
// `tessera_ossl_` prefix.

#include <stddef.h>
#include <openssl/opensslv.h>
#include <openssl/evp.h>
#include <openssl/err.h>

/// The digest size of `md` in bytes. `EVP_MD_size` is a macro for `EVP_MD_get_size` in 3.x and a
/// function in 1.1.1; this works with both.
static inline int tessera_ossl_md_size(const EVP_MD *md) {
    return EVP_MD_size(md);
}

/// The block size of the cipher in `ctx` in bytes (a macro in 3.x, a function in 1.1.1).
static inline int tessera_ossl_cipher_ctx_block_size(const EVP_CIPHER_CTX *ctx) {
    return EVP_CIPHER_CTX_block_size(ctx);
}

/// Empties this thread's OpenSSL error queue, so a failure of ours does not linger into
/// libcurl's TLS code on the same thread. Copies the text of the earliest queued error into
/// `buffer` (NUL-terminated, empty when the queue was empty) and returns its code, 0 for none.
static inline unsigned long tessera_ossl_drain_errors(char *buffer, size_t length) {
    unsigned long first = ERR_get_error();
    if (buffer != NULL && length > 0) {
        buffer[0] = '\0';
        if (first != 0) ERR_error_string_n(first, buffer, length);
    }
    ERR_clear_error();
    return first;
}

/// The version of the libcrypto loaded at run time, e.g. "OpenSSL 3.0.19 27 Jan 2026".
static inline const char *tessera_ossl_version_string(void) {
#if OPENSSL_VERSION_NUMBER >= 0x10100000L
    return OpenSSL_version(OPENSSL_VERSION);
#else
    return SSLeay_version(SSLEAY_VERSION);
#endif
}

#endif
