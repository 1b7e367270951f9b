/* A process, identified beyond its pid, so that a claim's holder can be judged alive or gone.
 * A pid alone misleads: it is reused after the process exits, a zombie keeps it while dead,
 * and in another PID namespace (another container on the same host) it names some other
 * process here. So a holder also records its start time (clock ticks after boot, field 22
 * of /proc/<pid>/stat), the boot it ran in (/proc/sys/kernel/random/boot_id, shared by every
 * container of one kernel) and its PID namespace (/proc/self/ns/pid). */
#ifndef JITOPS_CACHE_PROCESS_H
#define JITOPS_CACHE_PROCESS_H

#include <stdint.h>

typedef struct jitops__process {
  int64_t pid;
  int64_t start_ticks;    /* 0 when unknown */
  char boot_id[40];       /* "" when unknown (no /proc) */
  char pid_namespace[40]; /* "pid:[4026531836]"; "" when unknown */
  char host[256];
} jitops__process;

/* This process, now (a forked child is another process). */
void jitops__process_self(jitops__process *out);

/* 1 when `a` and `b` are the same process. */
int jitops__process_same(const jitops__process *a, const jitops__process *b);

typedef enum jitops__liveness {
  JITOPS__PROCESS_ALIVE = 0,  /* it runs: this process, or a live one in our namespace */
  JITOPS__PROCESS_GONE = 1,   /* it exited (a zombie counts), or its pid is another's now,
                                 or its machine rebooted since */
  JITOPS__PROCESS_UNKNOWN = 2 /* another host or PID namespace: it cannot be looked up here */
} jitops__liveness;

/* What this process can tell about `holder`. */
jitops__liveness jitops__process_liveness(const jitops__process *holder);

#endif
