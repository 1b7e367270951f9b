/* A claim whose holder is gone is taken over at once, however it went: a holder that exited
 * and was reaped, one that exited and stays a zombie (its parent never reaps it), one whose
 * pid now belongs to another live process (pid reuse, or a holder in another PID namespace
 * whose pid means another process here), and one that ran in another PID namespace. A live
 * holder elsewhere is waited for, and its row taken when it stores it.
 *
 * Each holder takes its claim through the store, in a child process, and exits without
 * releasing it. A stalled wait would last the 5-minute claim expiry: a watchdog fails the
 * test long before that. */
#include <sched.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cache/store.h"
#include "testutil.h"

enum { WATCHDOG_S = 60, PROMPT_MS = 5000 };

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void on_watchdog(int signal) {
  (void)signal;
  static const char message[] = "test_cache_claim_holders: a claim was waited for until the "
                                "watchdog fired (a gone holder looked alive)\n";
  if (write(2, message, sizeof message - 1) < 0)
    _exit(2);
  _exit(1);
}

static jitops__store *open_store(const char *dir) {
  jitops__store_options options = {dir, JITOPS_CACHE_MODE_READWRITE, -1, ""};
  return jitops__store_open(&options);
}

static void make_key(uint8_t key[16], int seed) {
  for (int i = 0; i < 16; ++i)
    key[i] = (uint8_t)(seed * 31 + i * 7);
}

/* Takes the claim of `key` in `dir` and exits without releasing it. */
static void hold_and_exit(const char *dir, const uint8_t key[16], int go_fd) {
  jitops__store *store = open_store(dir);
  jitops__blob found;
  int waited = 0;
  int claimed =
      store != NULL && jitops__store_claim(store, key, &found, &waited) == JITOPS__CLAIM_COMPILE;
  char ack = claimed ? 'c' : 'x';
  if (write(go_fd, &ack, 1) != 1)
    _exit(3);
  _exit(claimed ? 0 : 1); /* no unclaim, no close: as if killed mid-compile */
}

/* Starts a holder; returns its pid once its claim is in the database. */
static pid_t start_holder(const char *dir, const uint8_t key[16], int new_pid_namespace) {
  int fds[2];
  CHECK(pipe(fds) == 0);
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    if (new_pid_namespace) {
      /* The holder is the first child in a new PID namespace: pid 1 there. */
      if (unshare(CLONE_NEWPID) != 0)
        _exit(77);
      pid_t inner = fork();
      if (inner == 0)
        hold_and_exit(dir, key, fds[1]);
      int status = 0;
      waitpid(inner, &status, 0);
      _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 4);
    }
    hold_and_exit(dir, key, fds[1]);
  }
  close(fds[1]);
  char ack = 0;
  ssize_t n = read(fds[0], &ack, 1);
  close(fds[0]);
  CHECK(n == 1 && ack == 'c');
  return pid;
}

/* Claims `key` here: it must be ours at once, without waiting. */
static void expect_taken_over(const char *dir, const uint8_t key[16], const char *what) {
  jitops__store *store = open_store(dir);
  CHECK(store != NULL);
  if (store == NULL)
    return;
  jitops__blob found;
  int waited = 1;
  double start = now_ms();
  jitops__claim claim = jitops__store_claim(store, key, &found, &waited);
  double ms = now_ms() - start;
  if (claim != JITOPS__CLAIM_COMPILE || waited || ms > PROMPT_MS)
    fprintf(stderr, "%s: claim %d, waited %d, %.0f ms\n", what, (int)claim, waited, ms);
  CHECK(claim == JITOPS__CLAIM_COMPILE && !waited);
  CHECK(ms < PROMPT_MS); /* a generous bound: a stall lasts minutes */
  jitops__store_unclaim(store, key);
  jitops__store_close(store);
}

static void reaped_holder(const char *dir) {
  uint8_t key[16];
  make_key(key, 1);
  pid_t pid = start_holder(dir, key, 0);
  waitpid(pid, NULL, 0);
  expect_taken_over(dir, key, "a reaped holder");
}

static void zombie_holder(const char *dir) {
  uint8_t key[16];
  make_key(key, 2);
  pid_t pid = start_holder(dir, key, 0);
  /* Wait until it has exited, without reaping it: it stays a zombie meanwhile. */
  siginfo_t info;
  CHECK(waitid(P_PID, (id_t)pid, &info, WEXITED | WNOWAIT) == 0);
  CHECK(kill(pid, 0) == 0); /* the pid still answers */
  expect_taken_over(dir, key, "a zombie holder");
  waitpid(pid, NULL, 0);
}

/* The holder's row names a pid that a live process has now: pid 1. */
static void pid_of_another_process(const char *dir) {
  uint8_t key[16];
  make_key(key, 3);
  pid_t pid = start_holder(dir, key, 0);
  waitpid(pid, NULL, 0);
  char path[1200];
  snprintf(path, sizeof path, "%s/kernels.db", dir);
  sqlite3 *db = NULL;
  CHECK(sqlite3_open(path, &db) == SQLITE_OK);
  CHECK(sqlite3_exec(db, "UPDATE claims SET pid = 1", NULL, NULL, NULL) == SQLITE_OK);
  sqlite3_close(db);
  expect_taken_over(dir, key, "a holder whose pid is another process's");
}

static void holder_in_another_pid_namespace(const char *dir) {
  uint8_t key[16];
  make_key(key, 4);
  pid_t probe = fork();
  if (probe == 0)
    _exit(unshare(CLONE_NEWPID) == 0 ? 0 : 77);
  int status = 0;
  waitpid(probe, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    printf("note: no permission to create a PID namespace; that case is skipped\n");
    return;
  }
  pid_t pid = start_holder(dir, key, 1);
  waitpid(pid, NULL, 0);
  expect_taken_over(dir, key, "a holder in another PID namespace");
}

/* A live holder is waited for; when it stores the row, the waiter gets it. */
static void live_holder_is_waited_for(const char *dir) {
  uint8_t key[16];
  make_key(key, 5);
  jitops__store *holder = open_store(dir), *waiter = open_store(dir);
  CHECK(holder != NULL && waiter != NULL);
  if (holder == NULL || waiter == NULL)
    return;
  jitops__blob found;
  int waited = 0;
  CHECK(jitops__store_claim(holder, key, &found, &waited) == JITOPS__CLAIM_COMPILE);
  pid_t child = fork();
  if (child == 0) {
    struct timespec pause = {0, 300 * 1000 * 1000};
    nanosleep(&pause, NULL);
    static const char image[] = "not a kernel, only bytes";
    jitops__store_row row = {{0},   "test",       "k", "k", "sm_90", 1300, "", JITOPS__BLOB_CUBIN,
                             image, sizeof image, 1.0};
    memcpy(row.key, key, 16);
    jitops__store *writer = open_store(dir);
    jitops__store_put(writer, &row);
    jitops__store_close(writer);
    _exit(0);
  }
  /* The holder is this process's other store: alive, so the waiter waits for the row. */
  CHECK(jitops__store_claim(waiter, key, &found, &waited) == JITOPS__CLAIM_FOUND && waited);
  jitops__blob_free(&found);
  waitpid(child, NULL, 0);
  jitops__store_close(holder);
  jitops__store_close(waiter);
}

static const struct {
  const char *name;
  void (*run)(const char *dir);
} cases[] = {{"reaped", reaped_holder},
             {"zombie", zombie_holder},
             {"pid-reused", pid_of_another_process},
             {"pid-namespace", holder_in_another_pid_namespace},
             {"live", live_holder_is_waited_for}};

/* With an argument, runs that case only. */
int main(int argc, char **argv) {
  char dir[1024];
  test_fresh_dir("claims", dir, sizeof dir);
  signal(SIGALRM, on_watchdog);
  alarm(WATCHDOG_S);
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i)
    if (argc < 2 || strcmp(argv[1], cases[i].name) == 0)
      cases[i].run(dir);
  return test_finish("test_cache_claim_holders");
}
