/* The remote tier's address: "redis://[user:password@]host[:port][/db]", as
 * JITOPS_CACHE_REMOTE and jitops_runtime_config.remote_cache give it.
 *
 * Decisions:
 *   - The port defaults to 6379 and the database to 0. An IPv6 address is written in
 *     brackets ("redis://[::1]:6379").
 *   - "user:password@" authenticates as an ACL user (AUTH user password, Redis 6 and later);
 *     ":password@" as the default user (AUTH password, requirepass). "user@" without a
 *     password is refused: it would send no AUTH at all, which is not what its writer meant.
 *     The user and password may be percent-encoded ("%40" for '@').
 *   - Anything else (another scheme such as rediss:// for TLS, a query string, a path that
 *     is not a database number) is refused with the reason, never half-understood. */
#ifndef JITOPS_CACHE_REMOTE_URL_H
#define JITOPS_CACHE_REMOTE_URL_H

#include <stddef.h>

#include "jitops/jitops.h"

typedef struct jitops__remote_address {
  char host[256]; /* a name or an address, IPv6 without its brackets */
  int port;
  int db;
  int has_password;
  char user[128];     /* "" : the default user */
  char password[256]; /* secret: never logged, never shown */
} jitops__remote_address;

/* Parses `url`. JITOPS_ERR_INVALID_ARGUMENT, with the reason, when it is not one this
 * library understands. */
jitops_status jitops__remote_url_parse(const char *url, jitops__remote_address *out);

/* "redis://user@host:port/db": the address as it may be shown, without the password. */
void jitops__remote_url_describe(const jitops__remote_address *address, char *out, size_t size);

#endif
