#include "cache/redis_connection.h"

#include <errno.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

/* Writes a reason into `why`. */
static int fail_with(char *why, size_t size, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, size, fmt, ap);
  va_end(ap);
  return 0;
}

int jitops__redis_resolve(const char *host, char *numeric, size_t size, char *why,
                          size_t why_size) {
  struct addrinfo hints, *found = NULL;
  memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  int rc = getaddrinfo(host, NULL, &hints, &found);
  if (rc != 0)
    return fail_with(why, why_size, "cannot resolve %s: %s", host, gai_strerror(rc));
  rc = getnameinfo(found->ai_addr, found->ai_addrlen, numeric, (socklen_t)size, NULL, 0,
                   NI_NUMERICHOST);
  freeaddrinfo(found);
  if (rc != 0)
    return fail_with(why, why_size, "cannot resolve %s: %s", host, gai_strerror(rc));
  return 1;
}

void jitops__redis_reply_free(jitops__redis_reply *reply) {
  if (reply == NULL)
    return;
  for (size_t i = 0; i < reply->count; ++i)
    jitops__redis_reply_free(&reply->elements[i]);
  free(reply->elements);
  free(reply->text);
  memset(reply, 0, sizeof *reply);
}

#if JITOPS_HAVE_HIREDIS

#include <hiredis/hiredis.h>

#include "common/clock.h"
#include <poll.h>
#include <unistd.h>

/* What a reply may hold: the tier's replies are a bulk string, a status, an integer, or
 * SCAN's [cursor, [keys]] (whose COUNT asks for far fewer keys than this). */
enum { MAX_ARRAY_ELEMENTS = 65536, BYTES_PER_EXTRA_MS = 16 * 1024 };

struct jitops__redis {
  redisContext *context;
  jitops__redis_limits limits;
  pid_t pid; /* the connecting process: a forked child must not share its stream */
};

/* ---- replies: hiredis parses, these build jitops__redis_reply directly -------------------- */

/* Where the reply of `task` goes: a new root, or its slot in the parent array. */
static jitops__redis_reply *slot_of(const redisReadTask *task) {
  if (task->parent == NULL)
    return calloc(1, sizeof(jitops__redis_reply));
  jitops__redis_reply *parent = task->parent->obj;
  return &parent->elements[task->idx];
}

/* A failed creation: a root is freed here; a slot belongs to its parent, which hiredis frees
 * (through free_object) with the root. NULL makes hiredis fail the request. */
static void *abandon(const redisReadTask *task, jitops__redis_reply *reply) {
  if (task->parent == NULL)
    free(reply);
  return NULL;
}

static void *create_string(const redisReadTask *task, char *text, size_t size) {
  jitops__redis_reply *reply = slot_of(task);
  if (reply == NULL)
    return NULL;
  reply->type = task->type == REDIS_REPLY_ERROR    ? JITOPS__REDIS_ERROR
                : task->type == REDIS_REPLY_STATUS ? JITOPS__REDIS_STATUS
                                                   : JITOPS__REDIS_STRING;
  reply->text = malloc(size + 1);
  if (reply->text == NULL)
    return abandon(task, reply);
  memcpy(reply->text, text, size);
  reply->text[size] = 0;
  reply->size = size;
  return reply;
}

#if HIREDIS_MAJOR >= 1
typedef size_t element_count;
#else
typedef int element_count;
#endif

/* Refuses arrays longer than any reply of ours, before hiredis reads their elements. */
static void *create_array(const redisReadTask *task, element_count count) {
  if ((long long)count < 0 || (long long)count > MAX_ARRAY_ELEMENTS)
    return NULL;
  jitops__redis_reply *reply = slot_of(task);
  if (reply == NULL)
    return NULL;
  reply->type = JITOPS__REDIS_ARRAY;
  reply->elements = count > 0 ? calloc((size_t)count, sizeof(jitops__redis_reply)) : NULL;
  if (count > 0 && reply->elements == NULL)
    return abandon(task, reply);
  reply->count = (size_t)count;
  return reply;
}

static void *create_integer(const redisReadTask *task, long long value) {
  jitops__redis_reply *reply = slot_of(task);
  if (reply != NULL) {
    reply->type = JITOPS__REDIS_INTEGER;
    reply->integer = value;
  }
  return reply;
}

static void *create_nil(const redisReadTask *task) {
  jitops__redis_reply *reply = slot_of(task);
  if (reply != NULL)
    reply->type = JITOPS__REDIS_NIL;
  return reply;
}

static void free_object(void *object) {
  jitops__redis_reply_free(object);
  free(object);
}

#if HIREDIS_MAJOR >= 1
/* RESP3 types, which a server asked for RESP2 never sends: refused. */
static void *refuse_double(const redisReadTask *task, double value, char *text, size_t size) {
  return NULL;
}

static void *refuse_bool(const redisReadTask *task, int value) {
  return NULL;
}
#endif

static redisReplyObjectFunctions reply_functions = {.createString = create_string,
                                                    .createArray = create_array,
                                                    .createInteger = create_integer,
                                                    .createNil = create_nil,
#if HIREDIS_MAJOR >= 1
                                                    .createDouble = refuse_double,
                                                    .createBool = refuse_bool,
#endif
                                                    .freeObject = free_object};

/* ---- moving bytes within a deadline ------------------------------------------------------ */

typedef struct request {
  int64_t start_ms;
  int base_ms;
  size_t moved; /* bytes sent and received: each 16 KiB earns 1 ms more */
} request;

static int remaining_ms(const request *r) {
  int64_t end = r->start_ms + r->base_ms + (int64_t)(r->moved / BYTES_PER_EXTRA_MS);
  int64_t left = end - jitops__monotonic_ms();
  return left > 0 ? (int)left : 0;
}

/* 1 when `fd` is ready for `events` before the request's deadline; 0 with the reason. */
static int wait_ready(int fd, short events, const request *r, char *why, size_t size) {
  for (;;) {
    int left = remaining_ms(r);
    if (left == 0)
      return fail_with(why, size, "no answer within %d ms", r->base_ms);
    struct pollfd p = {fd, events, 0};
    int n = poll(&p, 1, left);
    if (n > 0)
      return 1;
    if (n < 0 && errno != EINTR)
      return fail_with(why, size, "poll: %s", strerror(errno));
  }
}

static int send_all(jitops__redis *c, const char *data, size_t size, request *r, char *why,
                    size_t why_size) {
  for (size_t sent = 0; sent < size;) {
    if (!wait_ready(c->context->fd, POLLOUT, r, why, why_size))
      return 0;
    ssize_t n = send(c->context->fd, data + sent, size - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
      return fail_with(why, why_size, "send: %s", strerror(errno));
    if (n > 0) {
      sent += (size_t)n;
      r->moved += (size_t)n;
    }
  }
  return 1;
}

static int receive_reply(jitops__redis *c, request *r, jitops__redis_reply **out, char *why,
                         size_t why_size) {
  redisContext *context = c->context;
  for (;;) {
    void *reply = NULL;
    if (redisGetReplyFromReader(context, &reply) != REDIS_OK)
      return fail_with(why, why_size, "not a Redis reply (%s)", context->errstr);
    if (reply != NULL) {
      *out = reply;
      return 1;
    }
    if (context->reader->len > c->limits.max_reply_bytes)
      return fail_with(why, why_size, "a reply larger than %zu bytes", c->limits.max_reply_bytes);
    if (!wait_ready(context->fd, POLLIN, r, why, why_size))
      return 0;
    size_t before = context->reader->len;
    if (redisBufferRead(context) != REDIS_OK)
      return fail_with(why, why_size, "%s", context->errstr);
    if (context->reader->len > before)
      r->moved += context->reader->len - before;
  }
}

int jitops__redis_available(void) {
  return 1;
}

int jitops__redis_command(jitops__redis *c, int argc, const char *const *argv,
                          const size_t *lengths, jitops__redis_reply *out, char *why,
                          size_t why_size) {
  memset(out, 0, sizeof *out);
  if (c->pid != getpid())
    return fail_with(why, why_size, "the connection belongs to the process that forked this one");
  char *command = NULL;
  int size = redisFormatCommandArgv(&command, argc, (const char **)argv, lengths);
  if (size < 0)
    return fail_with(why, why_size, "out of memory formatting a command");
  request r = {jitops__monotonic_ms(), c->limits.command_ms, 0};
  jitops__redis_reply *reply = NULL;
  int ok = send_all(c, command, (size_t)size, &r, why, why_size) &&
           receive_reply(c, &r, &reply, why, why_size);
  redisFreeCommand(command);
  if (ok) {
    *out = *reply;
    free(reply);
  }
  return ok;
}

/* Sends a command whose reply must be +OK (AUTH, SELECT). */
static int expect_ok(jitops__redis *c, int argc, const char *const *argv, const char *what,
                     char *why, size_t why_size) {
  size_t lengths[3];
  for (int i = 0; i < argc; ++i)
    lengths[i] = strlen(argv[i]);
  jitops__redis_reply reply;
  if (!jitops__redis_command(c, argc, argv, lengths, &reply, why, why_size))
    return 0;
  int ok = reply.type == JITOPS__REDIS_STATUS;
  if (!ok)
    fail_with(why, why_size, "%s refused: %.200s", what,
              reply.type == JITOPS__REDIS_ERROR ? reply.text : "an unexpected reply");
  jitops__redis_reply_free(&reply);
  return ok;
}

static struct timeval timeval_of(int ms) {
  struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
  return tv;
}

static int authenticate_and_select(jitops__redis *c, const jitops__remote_address *a, char *why,
                                   size_t why_size) {
  if (a->has_password) {
    const char *auth_user[] = {"AUTH", a->user, a->password}, *auth[] = {"AUTH", a->password};
    int ok = a->user[0] ? expect_ok(c, 3, auth_user, "AUTH", why, why_size)
                        : expect_ok(c, 2, auth, "AUTH", why, why_size);
    if (!ok)
      return 0;
  }
  if (a->db == 0)
    return 1;
  char db[16];
  snprintf(db, sizeof db, "%d", a->db);
  const char *select[] = {"SELECT", db};
  return expect_ok(c, 2, select, "SELECT", why, why_size);
}

jitops__redis *jitops__redis_connect(const jitops__remote_address *address,
                                     const char *numeric_host, const jitops__redis_limits *limits,
                                     char *why, size_t why_size) {
  redisContext *context =
      redisConnectWithTimeout(numeric_host, address->port, timeval_of(limits->connect_ms));
  if (context == NULL || context->err) {
    fail_with(why, why_size, "cannot connect: %s", context ? context->errstr : "out of memory");
    redisFree(context);
    return NULL;
  }
  /* A bound on each system call too, should poll ever report a socket ready that is not. */
  redisSetTimeout(context, timeval_of(limits->command_ms));
  context->reader->fn = &reply_functions;
  jitops__redis *c = calloc(1, sizeof *c);
  if (c == NULL) {
    redisFree(context);
    fail_with(why, why_size, "out of memory");
    return NULL;
  }
  c->context = context;
  c->limits = *limits;
  c->pid = getpid();
  if (authenticate_and_select(c, address, why, why_size))
    return c;
  jitops__redis_close(c);
  return NULL;
}

void jitops__redis_close(jitops__redis *c) {
  if (c != NULL)
    redisFree(c->context);
  free(c);
}

#else /* built without hiredis: the remote tier is unavailable */

int jitops__redis_available(void) {
  return 0;
}

jitops__redis *jitops__redis_connect(const jitops__remote_address *address,
                                     const char *numeric_host, const jitops__redis_limits *limits,
                                     char *why, size_t why_size) {
  fail_with(why, why_size, "this libjitops was built without hiredis");
  return NULL;
}

void jitops__redis_close(jitops__redis *connection) {}

int jitops__redis_command(jitops__redis *connection, int argc, const char *const *argv,
                          const size_t *lengths, jitops__redis_reply *out, char *why,
                          size_t why_size) {
  memset(out, 0, sizeof *out);
  return fail_with(why, why_size, "this libjitops was built without hiredis");
}

#endif
