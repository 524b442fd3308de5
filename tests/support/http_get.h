// A plain HTTP/1.0 GET on loopback, for scraping /metrics in tests.
#ifndef RINGMASTER_TESTS_SUPPORT_HTTP_GET_H_
#define RINGMASTER_TESTS_SUPPORT_HTTP_GET_H_

#include <string>

namespace ringmaster::test {

// GET http://127.0.0.1:PORT/PATH; the body, or empty when the request failed.
std::string HttpGet(int port, const std::string& path);

}  // namespace ringmaster::test

#endif  // RINGMASTER_TESTS_SUPPORT_HTTP_GET_H_
