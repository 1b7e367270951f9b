/* The runtime's remote tier: its plan, its connection and breaker, and the protocol of a
 * fetch (record, else claim, else wait), a publish and an unclaim. Records are encoded and
 * verified in remote_record.c, bytes moved in redis_connection.c. */
#include "cache/remote.h"

#include <netdb.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cache/redis_connection.h"
#include "cache/remote_breaker.h"
#include "cache/remote_record.h"
#include "cache/settings.h"
#include "common/clock.h"
#include "common/hash.h"
#include "common/log.h"

/* ---- the plan -------------------------------------------------------------------------- */

void jitops__remote_plan_make(const char *configured_url, const char *configured_key,
                              jitops__remote_plan *out) {
  memset(out, 0, sizeof *out);
  const char *url = jitops__remote_url_setting(configured_url);
  if (url == NULL)
    return;
  out->is_signed = jitops__remote_key_setting(configured_key) != NULL;
  out->state = JITOPS_REMOTE_STATE_UNAVAILABLE;
  if (jitops__remote_url_parse(url, &out->address) != JITOPS_SUCCESS) {
    snprintf(out->reason, sizeof out->reason, "%s", jitops_last_error());
    snprintf(out->shown, sizeof out->shown, "(not understood)");
    return;
  }
  jitops__remote_url_describe(&out->address, out->shown, sizeof out->shown);
  if (!jitops__redis_available()) {
    snprintf(out->reason, sizeof out->reason,
             "this libjitops was built without hiredis (libhiredis-dev)");
    return;
  }
  out->state = JITOPS_REMOTE_STATE_ON;
}

void jitops__remote_plan_warn(const jitops__remote_plan *plan) {
  static int warned;
  if (plan->state == JITOPS_REMOTE_STATE_UNAVAILABLE)
    jitops__warn_once(&warned, "remote cache %s unavailable: %s; compiling locally", plan->shown,
                      plan->reason);
}

/* ---- the tier -------------------------------------------------------------------------- */

struct jitops__remote {
  pthread_mutex_t lock; /* the connection and the breaker: one request at a time */
  jitops__remote_plan plan;
  jitops__signing_key key; /* owns its bytes */
  jitops__redis_limits limits;
  char numeric_host[NI_MAXHOST]; /* "" until resolved */
  jitops__redis *connection;     /* NULL until connected, and after a failure */
  jitops__breaker breaker;
  char last_failure[256];
  char claim_token[160]; /* names this tier's claims: only its own are released */
  uint64_t errors;       /* atomic */
};

/* host/pid/a hash of the moment and the object: unique across the fleet's live tiers. */
static void make_claim_token(jitops__remote *remote) {
  struct {
    struct timespec now;
    const void *self;
    pid_t pid;
  } seed;
  memset(&seed, 0, sizeof seed);
  clock_gettime(CLOCK_REALTIME, &seed.now);
  seed.self = remote;
  seed.pid = getpid();
  char host[64] = "?", hex[33];
  gethostname(host, sizeof host - 1);
  jitops__key_to_hex(jitops__content_hash(&seed, sizeof seed), hex);
  snprintf(remote->claim_token, sizeof remote->claim_token, "%s/%d/%s", host, (int)seed.pid, hex);
}

static int copy_signing_key(jitops__remote *remote, const char *configured_key) {
  const char *key = jitops__remote_key_setting(configured_key);
  if (key == NULL)
    return 1;
  char *copy = strdup(key);
  remote->key.bytes = copy;
  remote->key.size = copy != NULL ? strlen(copy) : 0;
  return copy != NULL;
}

jitops__remote *jitops__remote_open(const char *configured_url, const char *configured_key) {
  jitops__remote_plan plan;
  jitops__remote_plan_make(configured_url, configured_key, &plan);
  if (plan.state == JITOPS_REMOTE_STATE_OFF)
    return NULL;
  jitops__remote_plan_warn(&plan);
  jitops__remote *remote = calloc(1, sizeof *remote);
  if (remote == NULL)
    return NULL;
  if (!copy_signing_key(remote, configured_key)) {
    free(remote);
    return NULL;
  }
  pthread_mutex_init(&remote->lock, NULL);
  remote->plan = plan;
  int timeout_ms = jitops__remote_timeout_ms_from_env();
  remote->limits =
      (jitops__redis_limits){timeout_ms, timeout_ms, JITOPS__REMOTE_MAX_RECORD_BYTES + (1 << 20)};
  make_claim_token(remote);
  return remote;
}

void jitops__remote_close(jitops__remote *remote) {
  if (remote == NULL)
    return;
  jitops__redis_close(remote->connection);
  if (remote->key.bytes != NULL)
    memset((void *)remote->key.bytes, 0, remote->key.size);
  free((void *)remote->key.bytes);
  pthread_mutex_destroy(&remote->lock);
  free(remote);
}

void jitops__remote_describe(jitops__remote *remote, jitops_runtime_info *info) {
  if (remote == NULL)
    return;
  pthread_mutex_lock(&remote->lock);
  info->remote_state = remote->plan.state;
  info->remote_signed = remote->plan.is_signed;
  snprintf(info->remote_address, sizeof info->remote_address, "%s", remote->plan.shown);
  snprintf(info->remote_reason, sizeof info->remote_reason, "%s", remote->plan.reason);
  if (remote->plan.state == JITOPS_REMOTE_STATE_ON &&
      !jitops__breaker_allows(&remote->breaker, jitops__monotonic_ms())) {
    info->remote_state = JITOPS_REMOTE_STATE_SUSPENDED;
    snprintf(info->remote_reason, sizeof info->remote_reason,
             "%d requests failed in a row, the last: %s", remote->breaker.consecutive_failures,
             remote->last_failure);
  }
  pthread_mutex_unlock(&remote->lock);
}

uint64_t jitops__remote_errors(const jitops__remote *remote) {
  return remote ? __atomic_load_n(&remote->errors, __ATOMIC_RELAXED) : 0;
}

void jitops__remote_found_free(jitops__remote_found *found) {
  free(found->data);
  memset(found, 0, sizeof *found);
}

/* ---- requests -------------------------------------------------------------------------- */

/* The tier's problems (a failed request, a refused record) are warned about once per process,
 * whichever comes first; the rest go to the log at debug. */
static int warned_problem;

/* Counts a failure, feeds the breaker, and drops the connection when `broken`. The caller
 * holds the lock. */
static void failed(jitops__remote *remote, jitops__remote_outcome *outcome, int broken,
                   const char *why) {
  __atomic_fetch_add(&remote->errors, 1, __ATOMIC_RELAXED);
  ++outcome->errors;
  snprintf(remote->last_failure, sizeof remote->last_failure, "%s", why);
  if (broken) {
    jitops__redis_close(remote->connection);
    remote->connection = NULL;
  }
  int opened = jitops__breaker_failure(&remote->breaker, jitops__monotonic_ms());
  jitops__warn_once(&warned_problem,
                    "remote cache %s: %s; compiling locally while it fails (after %d failures "
                    "in a row it is left alone for %d s or more)",
                    remote->plan.shown, why, JITOPS__BREAKER_FAILURES,
                    JITOPS__BREAKER_COOLDOWN_MS / 1000);
  jitops__log(JITOPS__LOG_DEBUG, "remote cache %s: %s%s", remote->plan.shown, why,
              opened ? " (breaker open)" : "");
}

static int connected(jitops__remote *remote, char *why, size_t size) {
  if (remote->connection != NULL)
    return 1;
  if (remote->numeric_host[0] == 0 &&
      !jitops__redis_resolve(remote->plan.address.host, remote->numeric_host,
                             sizeof remote->numeric_host, why, size))
    return 0;
  remote->connection = jitops__redis_connect(&remote->plan.address, remote->numeric_host,
                                             &remote->limits, why, size);
  return remote->connection != NULL;
}

typedef enum request_result {
  REQUEST_SKIPPED, /* the breaker is open */
  REQUEST_FAILED,  /* counted */
  REQUEST_ANSWERED /* `reply` holds a reply that is not an error */
} request_result;

/* One command under the lock and the breaker. An error reply counts as a failure, but keeps
 * the connection. */
static request_result request(jitops__remote *remote, int argc, const char *const *argv,
                              const size_t *lengths, jitops__redis_reply *reply,
                              jitops__remote_outcome *outcome) {
  char why[256];
  memset(reply, 0, sizeof *reply);
  pthread_mutex_lock(&remote->lock);
  request_result result = REQUEST_SKIPPED;
  if (jitops__breaker_allows(&remote->breaker, jitops__monotonic_ms())) {
    result = REQUEST_FAILED;
    if (!connected(remote, why, sizeof why) ||
        !jitops__redis_command(remote->connection, argc, argv, lengths, reply, why, sizeof why))
      failed(remote, outcome, 1, why);
    else if (reply->type == JITOPS__REDIS_ERROR)
      failed(remote, outcome, 0, reply->text);
    else
      result = REQUEST_ANSWERED;
    if (result == REQUEST_ANSWERED)
      jitops__breaker_success(&remote->breaker);
    else
      jitops__redis_reply_free(reply);
  }
  pthread_mutex_unlock(&remote->lock);
  return result;
}

/* A reply of a type the command never answers: the server is not Redis, or not in step. */
static void unexpected(jitops__remote *remote, jitops__redis_reply *reply, const char *command,
                       jitops__remote_outcome *outcome) {
  char why[128];
  snprintf(why, sizeof why, "an answer to %s that Redis never gives", command);
  jitops__redis_reply_free(reply);
  pthread_mutex_lock(&remote->lock);
  failed(remote, outcome, 1, why);
  pthread_mutex_unlock(&remote->lock);
}

/* ---- the protocol ---------------------------------------------------------------------- */

typedef enum lookup_result {
  LOOKUP_FOUND,
  LOOKUP_ABSENT,
  LOOKUP_REFUSED,
  LOOKUP_FAILED
} lookup_result;

/* Why a sound record is still not the one asked for, or NULL. */
static const char *mismatch(const jitops__store_row *row, const uint8_t key[16],
                            const jitops__remote_expect *expect) {
  if (memcmp(row->key, key, 16) != 0)
    return "a record filed under another key";
  if (strcmp(row->target, expect->target) != 0)
    return "a record for another target";
  if (row->nvrtc_version != expect->nvrtc_version)
    return "a record from another NVRTC version";
  return row->kind != expect->kind ? "a record of another kind (CUBIN or PTX)" : NULL;
}

static lookup_result refuse(jitops__remote *remote, jitops__remote_found *found,
                            jitops__remote_outcome *outcome, const char *fault) {
  jitops__remote_found_free(found);
  __atomic_fetch_add(&remote->errors, 1, __ATOMIC_RELAXED);
  ++outcome->errors;
  jitops__warn_once(&warned_problem, "remote cache %s: refused %s; compiling the kernel locally",
                    remote->plan.shown, fault);
  jitops__log(JITOPS__LOG_DEBUG, "remote cache %s: refused %s", remote->plan.shown, fault);
  return LOOKUP_REFUSED;
}

static lookup_result lookup(jitops__remote *remote, const uint8_t key[16],
                            const jitops__remote_expect *expect, jitops__remote_found *found,
                            jitops__remote_outcome *outcome) {
  char name[JITOPS__REMOTE_KEY_BYTES];
  jitops__remote_record_name(key, name);
  const char *argv[] = {"GET", name};
  const size_t lengths[] = {3, strlen(name)};
  jitops__redis_reply reply;
  if (request(remote, 2, argv, lengths, &reply, outcome) != REQUEST_ANSWERED)
    return LOOKUP_FAILED;
  if (reply.type == JITOPS__REDIS_NIL)
    return LOOKUP_ABSENT;
  if (reply.type != JITOPS__REDIS_STRING) {
    unexpected(remote, &reply, "GET", outcome);
    return LOOKUP_FAILED;
  }
  found->data = reply.text; /* the record's bytes: `row` points into them */
  reply.text = NULL;
  const char *fault =
      jitops__remote_record_decode(found->data, reply.size, &remote->key, &found->row);
  if (fault == NULL)
    fault = mismatch(&found->row, key, expect);
  return fault == NULL ? LOOKUP_FOUND : refuse(remote, found, outcome, fault);
}

typedef enum claim_result { CLAIM_TAKEN, CLAIM_HELD, CLAIM_FAILED } claim_result;

/* SET claim token NX PX ttl: one node of the fleet gets the claim. */
static claim_result take_claim(jitops__remote *remote, const uint8_t key[16],
                               jitops__remote_outcome *outcome) {
  char name[JITOPS__REMOTE_KEY_BYTES], ttl[16];
  jitops__remote_claim_name(key, name);
  snprintf(ttl, sizeof ttl, "%d", JITOPS__REMOTE_CLAIM_TTL_MS);
  const char *argv[] = {"SET", name, remote->claim_token, "NX", "PX", ttl};
  size_t lengths[6];
  for (int i = 0; i < 6; ++i)
    lengths[i] = strlen(argv[i]);
  jitops__redis_reply reply;
  if (request(remote, 6, argv, lengths, &reply, outcome) != REQUEST_ANSWERED)
    return CLAIM_FAILED;
  claim_result result = reply.type == JITOPS__REDIS_STATUS ? CLAIM_TAKEN
                        : reply.type == JITOPS__REDIS_NIL  ? CLAIM_HELD
                                                           : CLAIM_FAILED;
  if (result == CLAIM_FAILED) {
    unexpected(remote, &reply, "SET NX", outcome);
    return CLAIM_FAILED;
  }
  jitops__redis_reply_free(&reply);
  outcome->claimed = result == CLAIM_TAKEN;
  return result;
}

static void release_claim(jitops__remote *remote, const uint8_t key[16],
                          jitops__remote_outcome *outcome);

/* After a claim is taken: the node that held it before may have published its record and
 * released the claim between this node's lookup and its claim, so look once more. A record
 * found now is a hit (and the claim goes back); otherwise this node compiles. Without this,
 * eight nodes on two loaded cores compiled one key twice now and then. */
static jitops__remote_result after_claim(jitops__remote *remote, const uint8_t key[16],
                                         const jitops__remote_expect *expect,
                                         jitops__remote_found *found,
                                         jitops__remote_outcome *outcome) {
  if (lookup(remote, key, expect, found, outcome) != LOOKUP_FOUND)
    return JITOPS__REMOTE_MISS;
  release_claim(remote, key, outcome);
  outcome->claimed = 0;
  return JITOPS__REMOTE_HIT;
}

/* Tries the claim: 1 with *result settled, or 0 while another node holds it. Taken, it is a
 * miss (this node compiles), unless `recheck` (the record was absent, not refused) and
 * after_claim finds the record; when Redis fails, a miss. */
static int claim(jitops__remote *remote, const uint8_t key[16], const jitops__remote_expect *expect,
                 jitops__remote_found *found, jitops__remote_outcome *outcome, int recheck,
                 jitops__remote_result *result) {
  switch (take_claim(remote, key, outcome)) {
  case CLAIM_TAKEN:
    *result = recheck ? after_claim(remote, key, expect, found, outcome) : JITOPS__REMOTE_MISS;
    return 1;
  case CLAIM_HELD:
    return 0;
  case CLAIM_FAILED:
    break;
  }
  *result = JITOPS__REMOTE_MISS;
  return 1;
}

/* Polls for the claim holder's record, taking the claim over if it goes without one. */
static jitops__remote_result wait_for_holder(jitops__remote *remote, const uint8_t key[16],
                                             const jitops__remote_expect *expect,
                                             jitops__remote_found *found,
                                             jitops__remote_outcome *outcome) {
  int64_t give_up = jitops__monotonic_ms() + JITOPS__REMOTE_WAIT_MS;
  for (int pause = 5; jitops__monotonic_ms() < give_up; pause = pause < 50 ? pause * 2 : 100) {
    jitops__sleep_ms(pause);
    outcome->waited = 1;
    lookup_result found_now = lookup(remote, key, expect, found, outcome);
    if (found_now != LOOKUP_ABSENT)
      return found_now == LOOKUP_FOUND ? JITOPS__REMOTE_HIT : JITOPS__REMOTE_MISS;
    jitops__remote_result settled;
    if (claim(remote, key, expect, found, outcome, 1, &settled))
      return settled;
  }
  jitops__log(JITOPS__LOG_DEBUG,
              "remote cache %s: waited %d s for another node's compile; "
              "compiling locally",
              remote->plan.shown, JITOPS__REMOTE_WAIT_MS / 1000);
  return JITOPS__REMOTE_MISS;
}

static int usable(jitops__remote *remote) {
  if (remote == NULL || remote->plan.state != JITOPS_REMOTE_STATE_ON)
    return 0;
  pthread_mutex_lock(&remote->lock);
  int allowed = jitops__breaker_allows(&remote->breaker, jitops__monotonic_ms());
  pthread_mutex_unlock(&remote->lock);
  return allowed;
}

jitops__remote_result jitops__remote_fetch(jitops__remote *remote, const uint8_t key[16],
                                           const jitops__remote_expect *expect,
                                           jitops__remote_found *found,
                                           jitops__remote_outcome *outcome) {
  memset(found, 0, sizeof *found);
  memset(outcome, 0, sizeof *outcome);
  if (!usable(remote))
    return JITOPS__REMOTE_SKIPPED;
  lookup_result first = lookup(remote, key, expect, found, outcome);
  switch (first) {
  case LOOKUP_FOUND:
    return JITOPS__REMOTE_HIT;
  case LOOKUP_FAILED:
    return JITOPS__REMOTE_MISS;
  case LOOKUP_ABSENT:
  case LOOKUP_REFUSED: /* compile and publish over it */
    break;
  }
  jitops__remote_result settled;
  if (claim(remote, key, expect, found, outcome, first == LOOKUP_ABSENT, &settled))
    return settled;
  return wait_for_holder(remote, key, expect, found, outcome);
}

/* GET the claim, and DEL it if it is still ours (it may have expired and gone to another
 * node). Two requests, not atomic: at worst another's claim goes, and one kernel is compiled
 * twice. */
static void release_claim(jitops__remote *remote, const uint8_t key[16],
                          jitops__remote_outcome *outcome) {
  char name[JITOPS__REMOTE_KEY_BYTES];
  jitops__remote_claim_name(key, name);
  const char *get[] = {"GET", name}, *del[] = {"DEL", name};
  const size_t lengths[] = {3, strlen(name)};
  jitops__redis_reply reply;
  if (request(remote, 2, get, lengths, &reply, outcome) != REQUEST_ANSWERED)
    return;
  int ours = reply.type == JITOPS__REDIS_STRING && strcmp(reply.text, remote->claim_token) == 0;
  jitops__redis_reply_free(&reply);
  if (ours && request(remote, 2, del, lengths, &reply, outcome) == REQUEST_ANSWERED)
    jitops__redis_reply_free(&reply);
  outcome->claimed = 0;
}

void jitops__remote_publish(jitops__remote *remote, const jitops__store_row *row,
                            jitops__remote_outcome *outcome) {
  if (!usable(remote))
    return;
  char *record = NULL, name[JITOPS__REMOTE_KEY_BYTES];
  size_t size = 0;
  if (jitops__remote_record_encode(row, &remote->key, &record, &size) &&
      size <= JITOPS__REMOTE_MAX_RECORD_BYTES) {
    jitops__remote_record_name(row->key, name);
    const char *argv[] = {"SET", name, record};
    const size_t lengths[] = {3, strlen(name), size};
    jitops__redis_reply reply;
    if (request(remote, 3, argv, lengths, &reply, outcome) == REQUEST_ANSWERED)
      jitops__redis_reply_free(&reply);
  }
  free(record);
  if (outcome->claimed)
    release_claim(remote, row->key, outcome);
}

void jitops__remote_unclaim(jitops__remote *remote, const uint8_t key[16],
                            jitops__remote_outcome *outcome) {
  if (usable(remote) && outcome->claimed)
    release_claim(remote, key, outcome);
}
