#include "cache/remote_url.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "common/error.h"

static const char scheme[] = "redis://";

static jitops_status refuse(const char *why) {
  return jitops__fail(JITOPS_ERR_INVALID_ARGUMENT,
                      "remote cache address %s (expected redis://[user:password@]host[:port][/db])",
                      why);
}

static int hex_value(char c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  c = (char)tolower((unsigned char)c);
  return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Copies `length` bytes of `text` into `out`, decoding %XX escapes. 0 when an escape is
 * malformed, decodes to NUL, or the result does not fit. */
static int percent_decode(const char *text, size_t length, char *out, size_t size) {
  size_t used = 0;
  for (size_t i = 0; i < length; ++i) {
    int c = (unsigned char)text[i];
    if (c == '%') {
      int high = i + 2 < length ? hex_value(text[i + 1]) : -1;
      int low = high >= 0 ? hex_value(text[i + 2]) : -1;
      if (low < 0 || (high == 0 && low == 0))
        return 0;
      c = high * 16 + low;
      i += 2;
    }
    if (used + 1 >= size)
      return 0;
    out[used++] = (char)c;
  }
  out[used] = 0;
  return 1;
}

/* "user:password" or ":password". */
static jitops_status parse_userinfo(const char *text, size_t length, jitops__remote_address *out) {
  const char *colon = memchr(text, ':', length);
  if (colon == NULL)
    return refuse("names a user without a password (write user:password@, or :password@ for "
                  "the default user)");
  size_t user_length = (size_t)(colon - text);
  if (!percent_decode(text, user_length, out->user, sizeof out->user) ||
      !percent_decode(colon + 1, length - user_length - 1, out->password, sizeof out->password))
    return refuse("has a user or password that is too long or badly percent-encoded");
  out->has_password = 1;
  return JITOPS_SUCCESS;
}

/* A whole decimal number in [min, max]; -1 otherwise. */
static long parse_number(const char *text, size_t length, long min, long max) {
  if (length == 0 || length > 9)
    return -1;
  long value = 0;
  for (size_t i = 0; i < length; ++i) {
    if (!isdigit((unsigned char)text[i]))
      return -1;
    value = value * 10 + (text[i] - '0');
  }
  return value >= min && value <= max ? value : -1;
}

/* "host", "host:port", "[v6]" or "[v6]:port". */
static jitops_status parse_host_port(const char *text, size_t length, jitops__remote_address *out) {
  const char *host = text, *port = NULL;
  size_t host_length = length;
  if (length > 0 && text[0] == '[') {
    const char *close = memchr(text, ']', length);
    if (close == NULL || (close + 1 < text + length && close[1] != ':'))
      return refuse("has a malformed [IPv6] host");
    host = text + 1;
    host_length = (size_t)(close - host);
    port = close + 1 < text + length ? close + 2 : NULL;
  } else {
    const char *colon = memchr(text, ':', length);
    if (colon != NULL) {
      host_length = (size_t)(colon - text);
      port = colon + 1;
    }
  }
  if (host_length == 0 || host_length >= sizeof out->host)
    return refuse("has no host, or one that is too long");
  memcpy(out->host, host, host_length);
  out->host[host_length] = 0;
  if (strcspn(out->host, "@/?#% ") != host_length)
    return refuse("has a host with characters a host name cannot hold");
  out->port = 6379;
  if (port != NULL &&
      (out->port = (int)parse_number(port, (size_t)(text + length - port), 1, 65535)) < 0)
    return refuse("has a port that is not a number from 1 to 65535");
  return JITOPS_SUCCESS;
}

jitops_status jitops__remote_url_parse(const char *url, jitops__remote_address *out) {
  memset(out, 0, sizeof *out);
  if (strncmp(url, scheme, sizeof scheme - 1) != 0)
    return refuse(strncmp(url, "rediss://", 9) == 0 ? "asks for TLS (rediss://), which this "
                                                      "library does not speak"
                                                    : "does not start with redis://");
  const char *rest = url + sizeof scheme - 1;
  if (strpbrk(rest, "?#") != NULL)
    return refuse("has a query or fragment, which this library does not read");
  const char *slash = strchr(rest, '/');
  size_t authority = slash ? (size_t)(slash - rest) : strlen(rest);
  const char *at = NULL;
  for (const char *p = rest; p < rest + authority; ++p)
    at = *p == '@' ? p : at; /* the last '@': a password may hold one, percent-encoded or not */
  if (at != NULL)
    JITOPS__TRY(parse_userinfo(rest, (size_t)(at - rest), out));
  const char *host = at ? at + 1 : rest;
  JITOPS__TRY(parse_host_port(host, (size_t)(rest + authority - host), out));
  if (slash != NULL && slash[1] != 0 &&
      (out->db = (int)parse_number(slash + 1, strlen(slash + 1), 0, 999999)) < 0)
    return refuse("has a path that is not a database number");
  return JITOPS_SUCCESS;
}

void jitops__remote_url_describe(const jitops__remote_address *a, char *out, size_t size) {
  int v6 = strchr(a->host, ':') != NULL;
  snprintf(out, size, "redis://%s%s%s%s%s:%d/%d", a->user, a->user[0] ? "@" : "", v6 ? "[" : "",
           a->host, v6 ? "]" : "", a->port, a->db);
}
