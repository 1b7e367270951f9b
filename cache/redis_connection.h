/* One connection to a Redis server, every request bounded in time: the only file that knows
 * hiredis. hiredis connects (with its timeout) and speaks RESP (formats commands, parses
 * replies); this file moves the bytes itself, so that:
 *   - a request has one deadline, whatever the server does: hiredis's own blocking calls
 *     bound each read, so a server that trickles a byte at a time would hold them forever;
 *   - a server that closed the connection never raises SIGPIPE (send with MSG_NOSIGNAL):
 *     the library never kills its process;
 *   - a reply is bounded in size (max_reply_bytes) and arrays in length, so a server that
 *     answers garbage cannot make the process allocate without limit.
 * A request that fails (timeout, I/O error, a reply that is not RESP) leaves the connection
 * out of step with the server: the caller closes it.
 *
 * Built without hiredis (JITOPS_HAVE_HIREDIS 0), jitops__redis_available is 0 and every
 * connect fails with the reason, so that the remote tier reports itself unavailable. */
#ifndef JITOPS_CACHE_REDIS_CONNECTION_H
#define JITOPS_CACHE_REDIS_CONNECTION_H

#include <stddef.h>

#include "cache/remote_url.h"

typedef struct jitops__redis jitops__redis;

typedef enum jitops__redis_type {
  JITOPS__REDIS_NIL = 0,
  JITOPS__REDIS_STRING = 1, /* a bulk string: binary, `size` bytes (and a NUL after them) */
  JITOPS__REDIS_STATUS = 2, /* "+OK" */
  JITOPS__REDIS_ERROR = 3,  /* "-OOM command not allowed ...": the server refused */
  JITOPS__REDIS_INTEGER = 4,
  JITOPS__REDIS_ARRAY = 5
} jitops__redis_type;

typedef struct jitops__redis_reply {
  jitops__redis_type type;
  char *text; /* STRING, STATUS, ERROR */
  size_t size;
  long long integer;
  struct jitops__redis_reply *elements; /* ARRAY */
  size_t count;
} jitops__redis_reply;

typedef struct jitops__redis_limits {
  int connect_ms; /* to connect, then each of AUTH and SELECT: the command bound */
  /* A request must be answered within command_ms, plus 1 ms for each 16 KiB it moves (a floor
   * of 16 MB/s), so that a large blob on a slow link is not cut off while a server that
   * stopped answering is given up on quickly. */
  int command_ms;
  size_t max_reply_bytes;
} jitops__redis_limits;

/* 1 when this build has hiredis. */
int jitops__redis_available(void);

/* Resolves `host` (a name or an address) to a numeric address, with the system's resolver,
 * which no timeout of ours bounds: callers do it once. 0 and the reason on failure. */
int jitops__redis_resolve(const char *host, char *numeric, size_t size, char *why, size_t why_size);

/* Connects to `numeric_host` (see jitops__redis_resolve) at address->port, authenticates and
 * selects the database as `address` says. NULL, with the reason in `why`, on failure. */
jitops__redis *jitops__redis_connect(const jitops__remote_address *address,
                                     const char *numeric_host, const jitops__redis_limits *limits,
                                     char *why, size_t why_size);
void jitops__redis_close(jitops__redis *connection);

/* Sends one command (argv[i] of lengths[i] bytes, binary-safe) and reads its reply. 1 and the
 * reply in *out (which may be an ERROR reply: the connection is still good); 0 and the reason
 * in `why` when the request failed, after which the connection must be closed. */
int jitops__redis_command(jitops__redis *connection, int argc, const char *const *argv,
                          const size_t *lengths, jitops__redis_reply *out, char *why,
                          size_t why_size);

void jitops__redis_reply_free(jitops__redis_reply *reply);

#endif
