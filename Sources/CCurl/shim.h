#ifndef TESSERA_CCURL_SHIM_H
#define TESSERA_CCURL_SHIM_H

// Typed wrappers for libcurl's variadic calls, which Swift cannot call directly, and for the
// few macros Swift does not import. Every symbol of ours carries the `tessera_curl_` prefix.

#define CURL_DISABLE_DEPRECATION 1
#include <curl/curl.h>
#include <stdint.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

typedef size_t (*tessera_curl_data_callback)(char *ptr, size_t size, size_t nmemb, void *userdata);

// MARK: - Easy options

static inline CURLcode tessera_curl_easy_setopt_long(CURL *handle, CURLoption option, long value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode tessera_curl_easy_setopt_off_t(CURL *handle, CURLoption option, curl_off_t value) {
    return curl_easy_setopt(handle, option, value);
}

/// libcurl copies string options (since 7.17.0), so the pointer need only live for the call.
static inline CURLcode tessera_curl_easy_setopt_string(CURL *handle, CURLoption option, const char *value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode tessera_curl_easy_setopt_pointer(CURL *handle, CURLoption option, void *value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode tessera_curl_easy_setopt_slist(CURL *handle, CURLoption option, struct curl_slist *value) {
    return curl_easy_setopt(handle, option, value);
}

/// For CURLOPT_WRITEFUNCTION and CURLOPT_HEADERFUNCTION.
static inline CURLcode tessera_curl_easy_setopt_data_callback(CURL *handle, CURLoption option,
                                                              tessera_curl_data_callback callback) {
    return curl_easy_setopt(handle, option, callback);
}

/// Transfers and redirects limited to http and https.
static inline CURLcode tessera_curl_easy_restrict_protocols(CURL *handle) {
#if LIBCURL_VERSION_NUM >= 0x075500
    CURLcode code = curl_easy_setopt(handle, CURLOPT_PROTOCOLS_STR, "http,https");
    if (code != CURLE_OK) return code;
    return curl_easy_setopt(handle, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
#else
    CURLcode code = curl_easy_setopt(handle, CURLOPT_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
    if (code != CURLE_OK) return code;
    return curl_easy_setopt(handle, CURLOPT_REDIR_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
}

/// CURLOPT_SOCKOPTFUNCTION: gives every new connection's socket a fixed receive buffer (its
/// size in bytes is the callback's data). A fixed SO_RCVBUF turns the kernel's autotuning off,
/// which keeps the bytes in flight small when a rate limit holds the reader back.
static int tessera_curl_sockopt_receive_buffer(void *data, curl_socket_t socket, curlsocktype purpose) {
    int size = (int)(intptr_t)data;
    if (purpose == CURLSOCKTYPE_IPCXN && size > 0) {
        (void)setsockopt(socket, SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
    }
    return CURL_SOCKOPT_OK;
}

/// The round trip time the kernel measured on the handle's connection, in microseconds; 0 when
/// it is not known (no connection, not TCP, not Linux).
static inline long tessera_curl_connection_rtt(CURL *handle) {
#if defined(__linux__) && defined(TCP_INFO)
    curl_socket_t socket = CURL_SOCKET_BAD;
    if (curl_easy_getinfo(handle, CURLINFO_ACTIVESOCKET, &socket) != CURLE_OK || socket == CURL_SOCKET_BAD) return 0;
    struct tcp_info info;
    socklen_t length = sizeof info;
    if (getsockopt(socket, IPPROTO_TCP, TCP_INFO, &info, &length) != 0) return 0;
    return (long)info.tcpi_rtt;
#else
    (void)handle;
    return 0;
#endif
}

/// New connections of the handle get a receive buffer of `size` bytes (0: the kernel's default).
static inline CURLcode tessera_curl_easy_set_receive_buffer(CURL *handle, long size) {
    if (size <= 0) return CURLE_OK;
    CURLcode code = curl_easy_setopt(handle, CURLOPT_SOCKOPTFUNCTION, tessera_curl_sockopt_receive_buffer);
    if (code != CURLE_OK) return code;
    return curl_easy_setopt(handle, CURLOPT_SOCKOPTDATA, (void *)(intptr_t)size);
}

// MARK: - Easy information

static inline CURLcode tessera_curl_easy_getinfo_long(CURL *handle, CURLINFO info, long *value) {
    return curl_easy_getinfo(handle, info, value);
}

static inline CURLcode tessera_curl_easy_getinfo_off_t(CURL *handle, CURLINFO info, curl_off_t *value) {
    return curl_easy_getinfo(handle, info, value);
}

static inline CURLcode tessera_curl_easy_getinfo_string(CURL *handle, CURLINFO info, char **value) {
    return curl_easy_getinfo(handle, info, value);
}

static inline CURLcode tessera_curl_easy_getinfo_pointer(CURL *handle, CURLINFO info, void **value) {
    return curl_easy_getinfo(handle, info, value);
}

// MARK: - Multi options

static inline CURLMcode tessera_curl_multi_setopt_long(CURLM *multi, CURLMoption option, long value) {
    return curl_multi_setopt(multi, option, value);
}

// MARK: - Macros and globals

static inline CURLcode tessera_curl_global_init(void) {
    return curl_global_init(CURL_GLOBAL_ALL);
}

static inline size_t tessera_curl_writefunc_pause(void) { return CURL_WRITEFUNC_PAUSE; }

static inline size_t tessera_curl_writefunc_error(void) {
#ifdef CURL_WRITEFUNC_ERROR
    return CURL_WRITEFUNC_ERROR;
#else
    return 0;
#endif
}

static inline int tessera_curl_pause_continue(void) { return CURLPAUSE_CONT; }

static inline CURL *tessera_curl_msg_easy_handle(CURLMsg *message) { return message->easy_handle; }
static inline CURLcode tessera_curl_msg_result(CURLMsg *message) { return message->data.result; }
static inline int tessera_curl_msg_is_done(CURLMsg *message) { return message->msg == CURLMSG_DONE; }

/// The version of the libcurl loaded at run time, as 0xXXYYZZ.
static inline unsigned int tessera_curl_version_number(void) {
    return curl_version_info(CURLVERSION_NOW)->version_num;
}

static inline const char *tessera_curl_version_string(void) {
    return curl_version_info(CURLVERSION_NOW)->version;
}

/// Whether the loaded libcurl can speak HTTP/2.
static inline int tessera_curl_supports_http2(void) {
    return (curl_version_info(CURLVERSION_NOW)->features & CURL_VERSION_HTTP2) != 0;
}

#endif
