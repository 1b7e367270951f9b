#include "redis_testutil.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---- servers --------------------------------------------------------------------------- */

static int on_path(const char *program) {
  const char *path = getenv("PATH");
  char candidate[4096];
  while (path != NULL && *path) {
    size_t length = strcspn(path, ":");
    snprintf(candidate, sizeof candidate, "%.*s/%s", (int)length, path, program);
    if (access(candidate, X_OK) == 0)
      return 1;
    path += length + (path[length] == ':');
  }
  return 0;
}

void test_redis_require(const char *test_name) {
  if (on_path("redis-server"))
    return;
  printf("%s: skipped: redis-server is not installed (apt-get install redis-server)\n", test_name);
  exit(TEST_SKIP);
}

/* A socket listening on 127.0.0.1 at a port the kernel chose. */
static int listen_on_free_port(int *port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in address;
  memset(&address, 0, sizeof address);
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  if (fd < 0 || bind(fd, (struct sockaddr *)&address, sizeof address) != 0 || listen(fd, 64) != 0 ||
      getsockname(fd, (struct sockaddr *)&address, &length) != 0) {
    fprintf(stderr, "cannot listen on loopback: %s\n", strerror(errno));
    exit(1);
  }
  *port = ntohs(address.sin_port);
  return fd;
}

/* In a child about to become a server: it dies with the test, whatever ends the test. */
static void die_with_parent(pid_t parent) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent)
    _exit(1);
}

static void set_url(test_server *server) {
  snprintf(server->url, sizeof server->url, "redis://127.0.0.1:%d", server->port);
}

static jitops__redis *connect_quietly(const test_server *server, int timeout_ms) {
  jitops__remote_address address;
  memset(&address, 0, sizeof address);
  snprintf(address.host, sizeof address.host, "127.0.0.1");
  address.port = server->port;
  jitops__redis_limits limits = {timeout_ms, timeout_ms, 256u << 20};
  char why[256];
  return jitops__redis_connect(&address, "127.0.0.1", &limits, why, sizeof why);
}

static int answers_ping(const test_server *server) {
  jitops__redis *connection = connect_quietly(server, 500);
  if (connection == NULL)
    return 0;
  const char *ping[] = {"PING"};
  jitops__redis_reply reply = test_redis_run(connection, 1, ping);
  int ok = reply.type == JITOPS__REDIS_STATUS;
  jitops__redis_reply_free(&reply);
  jitops__redis_close(connection);
  return ok;
}

static pid_t spawn_redis(test_server *server, const char *const *extra) {
  char port[16], log[1100];
  snprintf(port, sizeof port, "%d", server->port);
  snprintf(log, sizeof log, "%s/redis.log", server->dir);
  const char *argv[64] = {"redis-server",
                          "--port",
                          port,
                          "--bind",
                          "127.0.0.1",
                          "--save",
                          "",
                          "--appendonly",
                          "no",
                          "--dir",
                          server->dir,
                          "--logfile",
                          log,
                          "--daemonize",
                          "no"};
  int argc = 15;
  for (int i = 0; extra != NULL && extra[i] != NULL && argc < 63; ++i)
    argv[argc++] = extra[i];
  argv[argc] = NULL;
  pid_t parent = getpid(), pid = fork();
  if (pid == 0) {
    die_with_parent(parent);
    execvp("redis-server", (char *const *)argv);
    _exit(127);
  }
  return pid;
}

void test_redis_start(test_server *server, const char *tag, const char *const *extra) {
  memset(server, 0, sizeof *server);
  test_fresh_dir(tag, server->dir, sizeof server->dir);
  for (int attempt = 0; attempt < 3; ++attempt) {
    close(listen_on_free_port(&server->port)); /* free now: redis-server takes it */
    set_url(server);
    server->pid = spawn_redis(server, extra);
    for (int waited = 0; waited < 100; ++waited) {
      if (answers_ping(server))
        return;
      if (waitpid(server->pid, NULL, WNOHANG) == server->pid)
        break; /* it exited: the port was taken meanwhile, or it refused an argument */
      usleep(50 * 1000);
    }
    test_server_stop(server);
  }
  fprintf(stderr, "redis-server did not start (see %s/redis.log)\n", server->dir);
  exit(1);
}

/* What the garbage server answers, in turn; NULL closes the connection. */
static const char *const nonsense[] = {
    "+OK\r\n",                          /* a status where GET gives a string or nil */
    ":12\r\n",                          /* an integer */
    "*99999999\r\n",                    /* an array longer than any reply */
    "HTTP/1.1 400 Bad Request\r\n\r\n", /* not RESP at all */
    "$5\r\nhello\r\n",                  /* a string that is not a record */
    "-ERR nonsense\r\n",                /* an error reply */
    "\x01\x02\xff\xfe garbage\r\n",     /* binary noise */
    "$99999999999\r\n",                 /* a bulk string far larger than the bound, never sent */
    NULL};

static void serve_one(int client, size_t *turn) {
  char buffer[65536];
  for (;;) {
    struct pollfd p = {client, POLLIN, 0};
    if (poll(&p, 1, 2000) <= 0 || read(client, buffer, sizeof buffer) <= 0)
      break;
    const char *answer = nonsense[(*turn)++ % (sizeof nonsense / sizeof nonsense[0])];
    if (answer == NULL || send(client, answer, strlen(answer), MSG_NOSIGNAL) < 0)
      break;
  }
  close(client);
}

void test_garbage_start(test_server *server) {
  memset(server, 0, sizeof *server);
  int listener = listen_on_free_port(&server->port);
  set_url(server);
  pid_t parent = getpid();
  server->pid = fork();
  if (server->pid == 0) {
    die_with_parent(parent);
    size_t turn = 0;
    for (;;) {
      int client = accept(listener, NULL, NULL);
      if (client >= 0)
        serve_one(client, &turn);
    }
  }
  close(listener);
}

void test_server_stop(test_server *server) {
  if (server->pid <= 0)
    return;
  kill(server->pid, SIGKILL);
  waitpid(server->pid, NULL, 0);
  server->pid = 0;
}

jitops__redis *test_redis_connect(const test_server *server) {
  jitops__redis *connection = connect_quietly(server, 2000);
  if (connection == NULL) {
    fprintf(stderr, "cannot connect to the test's redis-server on port %d\n", server->port);
    exit(1);
  }
  return connection;
}

jitops__redis_reply test_redis_run(jitops__redis *connection, int argc, const char *const *argv) {
  size_t lengths[16];
  for (int i = 0; i < argc && i < 16; ++i)
    lengths[i] = strlen(argv[i]);
  jitops__redis_reply reply;
  char why[256];
  if (!jitops__redis_command(connection, argc, argv, lengths, &reply, why, sizeof why)) {
    fprintf(stderr, "%s: %s\n", argv[0], why);
    memset(&reply, 0, sizeof reply);
  }
  return reply;
}

/* ---- nodes ----------------------------------------------------------------------------- */

void test_example_expr(int k, char *out, size_t size) {
  static const char *const types[] = {"float", "double", "jitops::half", "jitops::bfloat16"};
  snprintf(out, size, "jitops::example_axpy<%s, %d>", types[k % 4], 1 + k / 4);
}

const char *const *test_example_exprs(int count) {
  static char storage[64][96];
  static const char *list[64];
  for (int k = 0; k < count && k < 64; ++k) {
    test_example_expr(k, storage[k], sizeof storage[k]);
    list[k] = storage[k];
  }
  return list;
}

static void count_warning(void *user, int level, const char *message) {
  if (level == JITOPS_LOG_WARN)
    ++*(int *)user;
  fprintf(stderr, "[node %d, level %d] %s\n", (int)getpid(), level, message);
}

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void run_node(const test_node *node, test_node_report *report) {
  memset(report, 0, sizeof *report);
  jitops_set_log_callback(count_warning, &report->warnings);
  jitops_runtime_config config = test_offline_config("sm_90", node->cache_dir);
  config.remote_cache = node->remote;
  config.remote_cache_key = node->key;
  jitops_runtime_t *runtime = NULL;
  if (jitops_runtime_create(&config, &runtime) != JITOPS_SUCCESS) {
    fprintf(stderr, "node %d: %s\n", (int)getpid(), jitops_last_error());
    report->failures = 1;
    return;
  }
  double start = now_seconds();
  for (size_t i = 0; i < node->count; ++i) {
    jitops_kernel_t *kernel = NULL;
    if (jitops_kernel_get(runtime, "jitops/example.cuh",
                          node->exprs[(node->first + i) % node->count], NULL, 0,
                          &kernel) != JITOPS_SUCCESS) {
      fprintf(stderr, "node %d: %s\n", (int)getpid(), jitops_last_error());
      ++report->failures;
    }
  }
  report->seconds = now_seconds() - start;
  jitops_runtime_get_stats(runtime, &report->stats);
  jitops_runtime_get_info(runtime, &report->info);
  jitops_runtime_destroy(runtime);
  jitops_set_log_callback(NULL, NULL);
}

pid_t test_node_start(const test_node *node, int *report_fd) {
  int fds[2];
  if (pipe(fds) != 0)
    return -1;
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    char go;
    if (node->go_fd >= 0 && read(node->go_fd, &go, 1) != 1)
      _exit(2);
    test_node_report report;
    run_node(node, &report);
    _exit(write(fds[1], &report, sizeof report) == (ssize_t)sizeof report ? 0 : 3);
  }
  close(fds[1]);
  *report_fd = fds[0];
  return pid;
}

test_node_report test_node_finish(pid_t pid, int report_fd) {
  test_node_report report;
  memset(&report, 0, sizeof report);
  ssize_t got = 0, n;
  while (got < (ssize_t)sizeof report &&
         (n = read(report_fd, (char *)&report + got, sizeof report - (size_t)got)) > 0)
    got += n;
  close(report_fd);
  int status = 0;
  waitpid(pid, &status, 0);
  if (got != (ssize_t)sizeof report || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    fprintf(stderr, "node %d did not finish cleanly (status %d)\n", (int)pid, status);
    report.failures += 1;
  }
  return report;
}

test_node_report test_node_run(const test_node *node) {
  int fd = -1;
  pid_t pid = test_node_start(node, &fd);
  return test_node_finish(pid, fd);
}

void test_remote_unavailable_exits(const char *test_name) {
  if (jitops__redis_available())
    return;
  char dir[1024], expr[96];
  test_fresh_dir("without-hiredis", dir, sizeof dir);
  test_example_expr(0, expr, sizeof expr);
  const char *exprs[] = {expr};
  test_node node = {dir, "redis://127.0.0.1:6379", "", exprs, 1, 0, -1};
  test_node_report r = test_node_run(&node);
  printf("%s: built without hiredis: the tier reports itself unavailable (%s)\n", test_name,
         r.info.remote_reason);
  CHECK(r.failures == 0 && r.stats.compiles == 1 && r.warnings == 1);
  CHECK(r.info.remote_state == JITOPS_REMOTE_STATE_UNAVAILABLE);
  CHECK(strstr(r.info.remote_reason, "hiredis") != NULL);
  exit(test_finish(test_name));
}
