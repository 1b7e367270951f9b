#include "cache/process.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

/* Reads the first line of a small file into `out` (without its newline); "" on failure. */
static void read_line(const char *path, char *out, size_t size) {
  out[0] = 0;
  FILE *f = fopen(path, "re");
  if (f == NULL)
    return;
  if (fgets(out, (int)size, f) == NULL)
    out[0] = 0;
  fclose(f);
  out[strcspn(out, "\n")] = 0;
}

/* A process's state letter and start time from /proc/<pid>/stat. 0 when there is no such
 * process; -1 when /proc cannot tell (not Linux, or not mounted). */
static int read_stat(int64_t pid, char *state, int64_t *start_ticks) {
  char path[64], line[1024];
  snprintf(path, sizeof path, "/proc/%lld/stat", (long long)pid);
  FILE *f = fopen(path, "re");
  if (f == NULL)
    return errno == ENOENT && access("/proc/self/stat", R_OK) == 0 ? 0 : -1;
  size_t n = fread(line, 1, sizeof line - 1, f);
  fclose(f);
  line[n] = 0;
  /* "pid (comm) state f4 ... f22": comm may hold spaces and parentheses, so fields are
   * counted from the last ')'; each step below lands on the space before the next one. */
  const char *p = strrchr(line, ')');
  if (p == NULL || p[1] != ' ')
    return -1;
  *state = p[2];
  for (int field = 3; field <= 22 && p != NULL; ++field)
    p = strchr(p + 1, ' ');
  *start_ticks = p != NULL ? strtoll(p + 1, NULL, 10) : 0;
  return 1;
}

void jitops__process_self(jitops__process *out) {
  memset(out, 0, sizeof *out);
  out->pid = getpid();
  char state;
  if (read_stat(out->pid, &state, &out->start_ticks) != 1)
    out->start_ticks = 0;
  read_line("/proc/sys/kernel/random/boot_id", out->boot_id, sizeof out->boot_id);
  ssize_t n = readlink("/proc/self/ns/pid", out->pid_namespace, sizeof out->pid_namespace - 1);
  out->pid_namespace[n > 0 ? n : 0] = 0;
  if (gethostname(out->host, sizeof out->host - 1) != 0)
    snprintf(out->host, sizeof out->host, "?");
}

int jitops__process_same(const jitops__process *a, const jitops__process *b) {
  return a->pid == b->pid && a->start_ticks == b->start_ticks &&
         strcmp(a->boot_id, b->boot_id) == 0 && strcmp(a->pid_namespace, b->pid_namespace) == 0 &&
         strcmp(a->host, b->host) == 0;
}

static int known_and_different(const char *a, const char *b) {
  return a[0] != 0 && b[0] != 0 && strcmp(a, b) != 0;
}

/* Whether a process of this machine, boot and PID namespace still runs. */
static jitops__liveness probe(const jitops__process *holder) {
  char state = 0;
  int64_t start = 0;
  switch (read_stat(holder->pid, &state, &start)) {
  case 0:
    return JITOPS__PROCESS_GONE;
  case 1:
    if (state == 'Z' || state == 'X' || (holder->start_ticks != 0 && start != holder->start_ticks))
      return JITOPS__PROCESS_GONE;
    return JITOPS__PROCESS_ALIVE;
  default: /* no /proc: the pid is all there is */
    return kill((pid_t)holder->pid, 0) != 0 && errno == ESRCH ? JITOPS__PROCESS_GONE
                                                              : JITOPS__PROCESS_ALIVE;
  }
}

jitops__liveness jitops__process_liveness(const jitops__process *holder) {
  jitops__process self;
  jitops__process_self(&self);
  if (jitops__process_same(holder, &self))
    return JITOPS__PROCESS_ALIVE;
  int same_host = strcmp(holder->host, self.host) == 0;
  if (known_and_different(holder->boot_id, self.boot_id))
    return same_host ? JITOPS__PROCESS_GONE : JITOPS__PROCESS_UNKNOWN; /* rebooted, or elsewhere */
  if (!same_host && (holder->boot_id[0] == 0 || self.boot_id[0] == 0))
    return JITOPS__PROCESS_UNKNOWN;
  if (known_and_different(holder->pid_namespace, self.pid_namespace))
    return JITOPS__PROCESS_UNKNOWN;
  return probe(holder);
}
