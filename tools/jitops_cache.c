/*
 * jitops-cache — inspect, clear, verify, export, import and prewarm the libjitops kernel cache.
 *
 * It uses only the public API (include/jitops/jitops.h) and needs no GPU: prewarm compiles
 * through compile-only runtimes (device -1, an explicit arch).
 *
 * Decisions written down here:
 *   - Exit status: 0 success; 1 an operation failed, `verify` dropped rows, `import` rejected
 *     entries, or `prewarm` failed to compile an entry; 2 a usage error (unknown subcommand
 *     or option, missing or malformed argument), reported on one line of stderr.
 *   - `--dir` and `--json` may come before or after the subcommand. `--json` is accepted by
 *     `stats` and `list` only.
 *   - `prewarm` targets sm_90 unless told otherwise with `--arch` (repeatable, or a
 *     comma-separated list). It always writes the cache (JITOPS_CACHE=off or readonly in the
 *     environment does not apply to it) and fails when the disk tier is unusable, since a
 *     prewarm that keeps nothing is of no use. It ignores $JITOPS_CACHE_SHIPPED, so that every
 *     kernel lands in the cache it fills.
 *   - Read-only subcommands (stats, list, export) open the database read-only and leave no
 *     -wal or -shm file behind; a cache that does not exist reads as an empty one.
 *   - verify and clear need an existing cache: a mistyped --dir is an error, never a new,
 *     empty cache. import and prewarm create the cache they fill.
 *   - Every subcommand sets a damaged database aside, as the library does, and says so.
 *   - push and pull talk to the remote tier named by --remote, else $JITOPS_CACHE_REMOTE, and
 *     sign or check with $JITOPS_CACHE_REMOTE_KEY. push opens the cache read-only and sends
 *     every sound kernel (replacing the server's copy); pull creates the cache it fills and,
 *     like import, fails (1) when it rejected a record. stats reads the remote tier's settings
 *     only: it never contacts the server.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "jitops/jitops.h"

#define PROG         "jitops-cache"
#define EXIT_FAILED  1
#define EXIT_USAGE   2
#define MAX_ARCHS    32
#define MAX_JOBS     1024
#define DEFAULT_ARCH "sm_90"

/* ------------------------------------------------------------------------------------------
 * Options
 * ---------------------------------------------------------------------------------------- */

enum {
  OPT_JSON = 1u << 0,
  OPT_OP = 1u << 1,
  OPT_TARGET = 1u << 2,
  OPT_OLDER = 1u << 3,
  OPT_ARCH = 1u << 4,
  OPT_JOBS = 1u << 5,
  OPT_VERBOSE = 1u << 6,
  OPT_DRY_RUN = 1u << 7,
  OPT_REMOTE = 1u << 8,
};

typedef struct options {
  const char *dir;
  int json;
  const char *op;
  const char *target;
  double older_than_days; /* < 0: not given */
  char *archs[MAX_ARCHS]; /* owned */
  int num_archs;
  int jobs; /* 0: not given */
  int verbose;
  int dry_run;
  const char *file;
  const char *remote; /* NULL: $JITOPS_CACHE_REMOTE */
} options;

typedef struct subcommand {
  const char *name;
  int (*run)(const options *opts);
  unsigned allowed; /* OPT_* beyond --dir and --help */
  int wants_file;   /* takes one FILE operand */
  const char *help;
} subcommand;

/* Prints a usage error on one line and returns EXIT_USAGE. */
__attribute__((format(printf, 1, 2))) static int usage_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs(PROG ": ", stderr);
  vfprintf(stderr, fmt, ap);
  fputs(" (see " PROG " --help)\n", stderr);
  va_end(ap);
  return EXIT_USAGE;
}

/* Reports a failed library call ("PROG: <what> failed: STATUS: detail") and returns
 * EXIT_FAILED. `fmt` describes what was attempted. */
__attribute__((format(printf, 2, 3))) static int lib_error(jitops_status status, const char *fmt,
                                                           ...) {
  const char *detail = jitops_last_error();
  va_list ap;
  va_start(ap, fmt);
  fputs(PROG ": ", stderr);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, " failed: %s%s%s\n", jitops_status_string(status), detail[0] != '\0' ? ": " : "",
          detail);
  return EXIT_FAILED;
}

/* ------------------------------------------------------------------------------------------
 * Help
 * ---------------------------------------------------------------------------------------- */

static const char global_help[] =
    "Usage: " PROG " [--dir DIR] SUBCOMMAND [OPTIONS]\n"
    "\n"
    "Inspect and manage the libjitops kernel cache. No GPU is needed.\n"
    "\n"
    "Subcommands:\n"
    "  stats [--json]                       entries, bytes, hits and misses by op and target\n"
    "  list [--op OP] [--target T] [--json] one row per cached kernel\n"
    "  clear [--op OP] [--older-than DAYS]  remove entries (all of them by default)\n"
    "  verify                               check every row and drop bad ones\n"
    "  export FILE                          write a compact copy of the cache to FILE\n"
    "  import FILE                          add the valid entries of an exported FILE\n"
    "  push [--remote URL]                  copy every kernel to the remote tier (Redis)\n"
    "  pull [--remote URL]                  add the remote tier's kernels to the cache\n"
    "  prewarm [--arch sm_XY]... [--jobs N] [--op OP] [--verbose] [--dry-run]\n"
    "                                       compile the catalogue of common kernels\n"
    "  help [SUBCOMMAND]                    this text, or a subcommand's\n"
    "\n"
    "Global options (also accepted after the subcommand):\n"
    "  --dir DIR    cache directory (default: $JITOPS_CACHE_DIR, else $XDG_CACHE_HOME/jitops,\n"
    "               else ~/.cache/jitops); the database is DIR/kernels.db\n"
    "  --json       machine-readable output (stats and list)\n"
    "  -h, --help   show help; `" PROG " SUBCOMMAND --help` shows a subcommand's\n"
    "  --version    print the library's version and licence\n"
    "\n"
    "Exit status:\n"
    "  0  success\n"
    "  1  an operation failed, verify dropped rows, import rejected entries, or prewarm\n"
    "     failed to compile an entry\n"
    "  2  usage error: unknown subcommand or option, missing or malformed argument\n";

static const char stats_help[] =
    "Usage: " PROG " [--dir DIR] stats [--json]\n"
    "\n"
    "Shows, for each (op, target) group: entries, bytes, and the hits and misses that\n"
    "runtimes recorded when they were destroyed (memory hits, disk hits, misses, compiles,\n"
    "and the remote tier's hits, misses and errors: R_HITS, R_MISSES, R_ERRORS), then the\n"
    "totals, the database path, and the remote tier that $JITOPS_CACHE_REMOTE names (it is\n"
    "not contacted).\n"
    "\n"
    "  --json   one JSON object: {\"database\", \"groups\": [...], \"totals\", \"disk_tier\",\n"
    "           \"remote_tier\"}\n"
    "\n"
    "Exit status: 0 success, 1 the cache could not be read, 2 usage error.\n";

static const char list_help[] =
    "Usage: " PROG " [--dir DIR] list [--op OP] [--target sm_XY] [--json]\n"
    "\n"
    "Lists cached kernels, most recently used first: key, op, target, bytes, compile time,\n"
    "last use, use count and name expression.\n"
    "\n"
    "  --op OP        only kernels of this op (the source name they came from)\n"
    "  --target T     only kernels for this target (sm_90, or compute_90 for PTX)\n"
    "  --json         one JSON object: {\"database\", \"count\", \"entries\": [...]}\n"
    "\n"
    "Exit status: 0 success, 1 the cache could not be read, 2 usage error.\n";

static const char clear_help[] =
    "Usage: " PROG " [--dir DIR] clear [--op OP] [--older-than DAYS]\n"
    "\n"
    "Removes entries and prints how many. With neither option, removes everything,\n"
    "including the damaged databases set aside beside the cache.\n"
    "\n"
    "  --op OP            only entries of this op\n"
    "  --older-than DAYS  only entries last used more than DAYS days ago (DAYS >= 0,\n"
    "                     fractions allowed)\n"
    "\n"
    "Exit status: 0 success, 1 the cache could not be changed, 2 usage error.\n";

static const char verify_help[] =
    "Usage: " PROG " [--dir DIR] verify\n"
    "\n"
    "Checks every row (its hash covers the blob, key, kind, target and lowered name, and\n"
    "its other columns must be sane), deletes the rows that fail, and prints how many were\n"
    "checked and dropped. A damaged database is set aside (as every subcommand does) and a\n"
    "new, empty one replaces it.\n"
    "\n"
    "Exit status: 0 nothing dropped, 1 rows were dropped, the database was damaged, or the\n"
    "check failed, 2 usage error.\n";

static const char export_help[] =
    "Usage: " PROG " [--dir DIR] export FILE\n"
    "\n"
    "Writes a compact copy of the cache to FILE (mode 0600), which must not exist. It can be\n"
    "imported elsewhere, or shipped as a read-only tier ($JITOPS_CACHE_SHIPPED).\n"
    "\n"
    "Exit status: 0 success, 1 the export failed, 2 usage error.\n";

static const char import_help[] =
    "Usage: " PROG " [--dir DIR] import FILE\n"
    "\n"
    "Adds the entries of an exported FILE that are not present yet, and prints how many were\n"
    "imported and rejected. A row is rejected unless it passes verify's checks. The import\n"
    "commits in batches, so runtimes using the cache meanwhile are never held up for long.\n"
    "\n"
    "Exit status: 0 success, 1 the import failed or rejected entries, 2 usage error.\n";

static const char push_help[] =
    "Usage: " PROG " [--dir DIR] push [--remote URL]\n"
    "\n"
    "Copies every kernel of the cache that passes verify's checks to the remote tier,\n"
    "replacing the server's copy of each, signed when $JITOPS_CACHE_REMOTE_KEY is set, and\n"
    "prints how many. Timed choices (the fastest cuBLASLt algorithm of a GPU) stay local.\n"
    "\n"
    "  --remote URL   redis://[user:password@]host[:port][/db] (default: $JITOPS_CACHE_REMOTE)\n"
    "\n"
    "Exit status: 0 success, 1 the server or the cache failed, 2 usage error.\n";

static const char pull_help[] =
    "Usage: " PROG " [--dir DIR] pull [--remote URL]\n"
    "\n"
    "Adds the remote tier's kernels that the cache does not hold, for every target, and\n"
    "prints how many were pulled and rejected. Each record is checked as a runtime checks a\n"
    "remote hit: its hash, and its signature when $JITOPS_CACHE_REMOTE_KEY is set.\n"
    "\n"
    "  --remote URL   redis://[user:password@]host[:port][/db] (default: $JITOPS_CACHE_REMOTE)\n"
    "\n"
    "Exit status: 0 success, 1 the server or the cache failed or records were rejected,\n"
    "2 usage error.\n";

static const char prewarm_help[] =
    "Usage: " PROG " [--dir DIR] prewarm [--arch sm_XY]... [--jobs N] [--op OP] [--verbose]\n"
    "                    [--dry-run]\n"
    "\n"
    "Compiles the catalogue of common specializations of the built-in ops into the cache,\n"
    "for each target, without a GPU. Entries already cached count as hits.\n"
    "\n"
    "  --arch sm_XY   target architecture; repeat it or give a comma-separated list\n"
    "                 (default: " DEFAULT_ARCH ")\n"
    "  --jobs N       parallel compiles (default: the number of online CPUs)\n"
    "  --op OP        only the catalogue entries of this op\n"
    "  -v, --verbose  one line per entry (without it: a progress line on a terminal, and a\n"
    "                 line at each tenth of the entries otherwise)\n"
    "  --dry-run      print the selected catalogue entries (\"OP: DESCRIPTION\"), compile none\n"
    "\n"
    "Catalogue ops name op families (\"example\"); the op column of list and stats is the\n"
    "source a kernel came from, so the two may differ.\n"
    "\n"
    "Exit status: 0 every entry compiled or was cached, 1 an entry failed or the cache is\n"
    "not writable, 2 usage error (including an --op with no catalogue entry).\n";

/* ------------------------------------------------------------------------------------------
 * Small utilities
 * ---------------------------------------------------------------------------------------- */

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static char *xstrdup(const char *s) {
  char *copy = strdup(s != NULL ? s : "");
  if (copy == NULL) {
    fputs(PROG ": out of memory\n", stderr);
    exit(EXIT_FAILED);
  }
  return copy;
}

static void *xrealloc(void *ptr, size_t bytes) {
  void *p = realloc(ptr, bytes);
  if (p == NULL) {
    fputs(PROG ": out of memory\n", stderr);
    exit(EXIT_FAILED);
  }
  return p;
}

/* Parses a whole decimal integer in [lo, hi]. */
static int parse_int(const char *text, int lo, int hi, int *out) {
  char *end;
  errno = 0;
  long v = strtol(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || v < lo || v > hi)
    return -1;
  *out = (int)v;
  return 0;
}

/* Parses a whole finite non-negative number. */
static int parse_days(const char *text, double *out) {
  char *end;
  errno = 0;
  double v = strtod(text, &end);
  if (errno != 0 || end == text || *end != '\0' || !isfinite(v) || v < 0)
    return -1;
  *out = v;
  return 0;
}

/* "sm_" followed by two or three digits. */
static int valid_arch(const char *arch) {
  if (strncmp(arch, "sm_", 3) != 0)
    return 0;
  size_t digits = strspn(arch + 3, "0123456789");
  return (digits == 2 || digits == 3) && arch[3 + digits] == '\0';
}

static void format_time(int64_t unix_seconds, char *out, size_t size) {
  time_t t = (time_t)unix_seconds;
  struct tm tm;
  if (unix_seconds <= 0 || localtime_r(&t, &tm) == NULL ||
      strftime(out, size, "%Y-%m-%d %H:%M:%S", &tm) == 0)
    snprintf(out, size, "-");
}

static void format_key(const uint8_t key[16], char out[33]) {
  static const char hex[] = "0123456789abcdef";
  for (int i = 0; i < 16; ++i) {
    out[2 * i] = hex[key[i] >> 4];
    out[2 * i + 1] = hex[key[i] & 15];
  }
  out[32] = '\0';
}

/* ------------------------------------------------------------------------------------------
 * JSON output
 * ---------------------------------------------------------------------------------------- */

/* The length of the valid UTF-8 sequence at `s`, or 0 when it is not one. */
static size_t utf8_sequence(const unsigned char *s) {
  size_t len;
  unsigned min;
  unsigned cp;
  if (s[0] >= 0xf0 && s[0] <= 0xf4) {
    len = 4, min = 0x10000, cp = s[0] & 0x07u;
  } else if (s[0] >= 0xe0 && s[0] <= 0xef) {
    len = 3, min = 0x800, cp = s[0] & 0x0fu;
  } else if (s[0] >= 0xc2 && s[0] < 0xe0) {
    len = 2, min = 0x80, cp = s[0] & 0x1fu;
  } else {
    return 0;
  }
  for (size_t i = 1; i < len; ++i) {
    if ((s[i] & 0xc0) != 0x80)
      return 0;
    cp = (cp << 6) | (s[i] & 0x3fu);
  }
  if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
    return 0;
  return len;
}

/* Writes the JSON form of the character at `p`; returns how many bytes it took. */
static size_t json_char(FILE *f, const unsigned char *p) {
  unsigned char c = *p;
  if (c == '"' || c == '\\') {
    fputc('\\', f);
    fputc(c, f);
  } else if (c == '\n') {
    fputs("\\n", f);
  } else if (c == '\t') {
    fputs("\\t", f);
  } else if (c < 0x20 || c == 0x7f) {
    fprintf(f, "\\u%04x", c);
  } else if (c < 0x80) {
    fputc(c, f);
  } else {
    size_t n = utf8_sequence(p);
    if (n == 0) {
      fputs("\\ufffd", f);
      return 1;
    }
    fwrite(p, 1, n, f);
    return n;
  }
  return 1;
}

/* Writes `s` as a JSON string; invalid UTF-8 becomes U+FFFD. NULL becomes null. */
static void json_string(FILE *f, const char *s) {
  if (s == NULL) {
    fputs("null", f);
    return;
  }
  fputc('"', f);
  for (const unsigned char *p = (const unsigned char *)s; *p != '\0';)
    p += json_char(f, p);
  fputc('"', f);
}

/* Writes `"name": ` with a leading separator when `first` is 0. */
static void json_key(FILE *f, const char *name, int first) {
  if (!first)
    fputs(", ", f);
  json_string(f, name);
  fputs(": ", f);
}

static void json_int(FILE *f, const char *name, int64_t value, int first) {
  json_key(f, name, first);
  fprintf(f, "%lld", (long long)value);
}

static void json_str_field(FILE *f, const char *name, const char *value, int first) {
  json_key(f, name, first);
  json_string(f, value);
}

static void json_double(FILE *f, const char *name, double value, int first) {
  json_key(f, name, first);
  if (isfinite(value))
    fprintf(f, "%.3f", value);
  else
    fputs("null", f);
}

/* ------------------------------------------------------------------------------------------
 * Opening the cache
 * ---------------------------------------------------------------------------------------- */

static int open_cache(const options *opts, jitops_cache_open_mode mode, jitops_cache_t **out) {
  jitops_status st = jitops_cache_open(opts->dir, (int)mode, out);
  if (st != JITOPS_SUCCESS)
    return lib_error(st, "opening the cache");
  const char *aside = jitops_cache_recovered_from(*out);
  if (aside[0] != '\0')
    fprintf(stderr,
            PROG ": the cache database was damaged: set aside as %s; a new one replaces it\n",
            aside);
  return 0;
}

/* For reports: a cache that does not exist yet reads as an empty one (*out NULL). */
static int open_cache_for_reading(const options *opts, jitops_cache_t **out) {
  jitops_status st = jitops_cache_open(opts->dir, JITOPS_CACHE_OPEN_READONLY, out);
  if (st == JITOPS_ERR_NOT_FOUND) {
    *out = NULL;
    return 0;
  }
  if (st != JITOPS_SUCCESS)
    return lib_error(st, "opening the cache");
  return 0;
}

static const char *report_path(const jitops_cache_t *cache) {
  return cache != NULL ? jitops_cache_path(cache) : "(no cache yet)";
}

/* ------------------------------------------------------------------------------------------
 * stats
 * ---------------------------------------------------------------------------------------- */

enum { STAT_COLUMNS = 9, STAT_BYTES = 1 };

typedef struct group_row {
  char *op;
  char *target;
  /* entries, bytes, memory hits, disk hits, misses, compiles, and the remote tier's hits,
   * misses and errors */
  int64_t v[STAT_COLUMNS];
} group_row;

static const char *const stat_names[STAT_COLUMNS] = {
    "entries",  "bytes",       "memory_hits",   "disk_hits",    "misses",
    "compiles", "remote_hits", "remote_misses", "remote_errors"};
static const char *const stat_titles[STAT_COLUMNS] = {"ENTRIES",   "SIZE",     "MEM_HITS",
                                                      "DISK_HITS", "MISSES",   "COMPILES",
                                                      "R_HITS",    "R_MISSES", "R_ERRORS"};

typedef struct group_table {
  group_row *rows;
  size_t count;
  size_t capacity;
} group_table;

static int collect_group(const jitops_cache_group_stats *g, void *user) {
  group_table *t = user;
  if (t->count == t->capacity) {
    t->capacity = t->capacity != 0 ? 2 * t->capacity : 16;
    t->rows = xrealloc(t->rows, t->capacity * sizeof(*t->rows));
  }
  group_row *r = &t->rows[t->count++];
  r->op = xstrdup(g->op);
  r->target = xstrdup(g->target);
  int64_t values[STAT_COLUMNS] = {g->entries,     g->bytes,         g->memory_hits,
                                  g->disk_hits,   g->misses,        g->compiles,
                                  g->remote_hits, g->remote_misses, g->remote_errors};
  memcpy(r->v, values, sizeof(values));
  return 0;
}

static void free_groups(group_table *t) {
  for (size_t i = 0; i < t->count; ++i) {
    free(t->rows[i].op);
    free(t->rows[i].target);
  }
  free(t->rows);
}

static void group_totals(const group_table *t, int64_t totals[STAT_COLUMNS]) {
  memset(totals, 0, STAT_COLUMNS * sizeof(int64_t));
  for (size_t i = 0; i < t->count; ++i)
    for (int c = 0; c < STAT_COLUMNS; ++c)
      totals[c] += t->rows[i].v[c];
}

static void json_stat_values(FILE *f, const int64_t v[STAT_COLUMNS], int first) {
  for (int c = 0; c < STAT_COLUMNS; ++c)
    json_int(f, stat_names[c], v[c], first && c == 0);
}

/* What runtimes would make of the cache: state, reason, bound (jitops_cache_settings_get). */
static const char *state_name(jitops_cache_state state) {
  return state == JITOPS_CACHE_STATE_READWRITE  ? "read-write"
         : state == JITOPS_CACHE_STATE_READONLY ? "read-only"
                                                : "off";
}

static const char *remote_state_name(jitops_remote_state state) {
  return state == JITOPS_REMOTE_STATE_ON            ? "on"
         : state == JITOPS_REMOTE_STATE_UNAVAILABLE ? "unavailable"
         : state == JITOPS_REMOTE_STATE_SUSPENDED   ? "suspended"
                                                    : "off";
}

static void print_remote_json(const jitops_cache_settings *settings) {
  fputs(", \"remote_tier\": {", stdout);
  json_str_field(stdout, "state", remote_state_name(settings->remote_state), 1);
  json_str_field(stdout, "address", settings->remote_address, 0);
  json_key(stdout, "signed", 0);
  fputs(settings->remote_signed ? "true" : "false", stdout);
  json_str_field(stdout, "reason", settings->remote_reason, 0);
  fputs("}", stdout);
}

static void print_stats_json(const char *path, const group_table *t,
                             const jitops_cache_settings *settings) {
  int64_t totals[STAT_COLUMNS];
  group_totals(t, totals);
  fputs("{", stdout);
  json_str_field(stdout, "database", path, 1);
  fputs(", \"groups\": [", stdout);
  for (size_t i = 0; i < t->count; ++i) {
    fputs(i != 0 ? ", {" : "{", stdout);
    json_str_field(stdout, "op", t->rows[i].op, 1);
    json_str_field(stdout, "target", t->rows[i].target, 0);
    json_stat_values(stdout, t->rows[i].v, 0);
    fputs("}", stdout);
  }
  fputs("], \"totals\": {", stdout);
  json_stat_values(stdout, totals, 1);
  fputs("}", stdout);
  json_int(stdout, "max_bytes", settings->max_bytes, 0);
  fputs(", \"disk_tier\": {", stdout);
  json_str_field(stdout, "state", state_name(settings->state), 1);
  json_key(stdout, "degraded", 0);
  fputs(settings->degraded ? "true" : "false", stdout);
  json_str_field(stdout, "reason", settings->reason, 0);
  fputs("}", stdout);
  print_remote_json(settings);
  fputs("}\n", stdout);
}

/* "512 B", "12.3 KiB", "1.0 GiB": binary multiples, as JITOPS_CACHE_MAX_BYTES takes them. */
static void format_size(int64_t bytes, char *out, size_t size) {
  static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double value = (double)bytes;
  int unit = 0;
  while (value >= 1024 && unit < 5)
    value /= 1024, ++unit;
  if (unit == 0)
    snprintf(out, size, "%lld B", (long long)bytes);
  else
    snprintf(out, size, "%.1f %s", value, units[unit]);
}

/* Column widths: op, target, then one per statistic. */
typedef struct stats_widths {
  int op;
  int target;
  int v[STAT_COLUMNS];
} stats_widths;

static int max_int(int a, int b) {
  return a > b ? a : b;
}

/* A statistic as the text table shows it: sizes in binary units, counts as numbers. */
static void format_stat(int column, int64_t v, char *out, size_t size) {
  if (column == STAT_BYTES)
    format_size(v, out, size);
  else
    snprintf(out, size, "%lld", (long long)v);
}

static void widen(stats_widths *w, const char *op, const char *target,
                  const int64_t v[STAT_COLUMNS]) {
  char text[32];
  w->op = max_int(w->op, (int)strlen(op));
  w->target = max_int(w->target, (int)strlen(target));
  for (int c = 0; c < STAT_COLUMNS; ++c) {
    format_stat(c, v[c], text, sizeof(text));
    w->v[c] = max_int(w->v[c], (int)strlen(text));
  }
}

static void print_stats_row(const stats_widths *w, const char *op, const char *target,
                            const int64_t v[STAT_COLUMNS]) {
  char text[32];
  printf("%-*s  %-*s", w->op, op, w->target, target);
  for (int c = 0; c < STAT_COLUMNS; ++c) {
    format_stat(c, v[c], text, sizeof(text));
    printf("  %*s", w->v[c], text);
  }
  putchar('\n');
}

/* "disk tier: read-write" or "disk tier: off (why)", then "size: 1.2 MiB of 1.0 GiB". */
static void print_tier_lines(int64_t bytes, const jitops_cache_settings *settings) {
  char used[32], limit[32];
  printf("disk tier: %s%s%s%s\n", state_name(settings->state), settings->reason[0] ? " (" : "",
         settings->reason, settings->reason[0] ? ")" : "");
  format_size(bytes, used, sizeof(used));
  if (settings->max_bytes < 0) {
    printf("size: %s (no limit)\n", used);
    return;
  }
  format_size(settings->max_bytes, limit, sizeof(limit));
  printf("size: %s of %s (%.0f%%)\n", used, limit,
         settings->max_bytes > 0 ? 100.0 * (double)bytes / (double)settings->max_bytes : 0.0);
}

/* "remote tier: off", "remote tier: redis://host:6379/0 (signed)", or "remote tier:
 * unavailable (why)". */
static void print_remote_line(const jitops_cache_settings *settings) {
  if (settings->remote_state == JITOPS_REMOTE_STATE_OFF)
    printf("remote tier: off\n");
  else if (settings->remote_state == JITOPS_REMOTE_STATE_UNAVAILABLE)
    printf("remote tier: unavailable (%s)\n", settings->remote_reason);
  else
    printf("remote tier: %s (%s)\n", settings->remote_address,
           settings->remote_signed ? "signed" : "unsigned: the server is trusted");
}

static void print_stats_text(const char *path, const group_table *t,
                             const jitops_cache_settings *settings) {
  int64_t totals[STAT_COLUMNS];
  group_totals(t, totals);
  stats_widths w = {.op = 2, .target = 6};
  for (int c = 0; c < STAT_COLUMNS; ++c)
    w.v[c] = (int)strlen(stat_titles[c]);
  for (size_t i = 0; i < t->count; ++i)
    widen(&w, t->rows[i].op, t->rows[i].target, t->rows[i].v);
  widen(&w, "total", "", totals);
  printf("database: %s\n", path);
  print_tier_lines(totals[STAT_BYTES], settings);
  print_remote_line(settings);
  printf("%-*s  %-*s", w.op, "OP", w.target, "TARGET");
  for (int c = 0; c < STAT_COLUMNS; ++c)
    printf("  %*s", w.v[c], stat_titles[c]);
  putchar('\n');
  for (size_t i = 0; i < t->count; ++i)
    print_stats_row(&w, t->rows[i].op, t->rows[i].target, t->rows[i].v);
  print_stats_row(&w, "total", "", totals);
}

static int cmd_stats(const options *opts) {
  jitops_cache_t *cache;
  if (open_cache_for_reading(opts, &cache) != 0)
    return EXIT_FAILED;
  group_table t = {0};
  jitops_cache_settings settings;
  jitops_status st = jitops_cache_settings_get(opts->dir, &settings);
  if (st == JITOPS_SUCCESS && cache != NULL)
    st = jitops_cache_stats(cache, collect_group, &t);
  int rc = 0;
  if (st != JITOPS_SUCCESS)
    rc = lib_error(st, "reading the statistics");
  else if (opts->json)
    print_stats_json(report_path(cache), &t, &settings);
  else
    print_stats_text(report_path(cache), &t, &settings);
  free_groups(&t);
  jitops_cache_close(cache);
  return rc;
}

/* ------------------------------------------------------------------------------------------
 * list
 * ---------------------------------------------------------------------------------------- */

typedef struct entry_row {
  char key[33];
  char *op;
  char *target;
  char *name;
  char *lowered;
  char *options;
  int nvrtc_version;
  int64_t bytes;
  double compile_ms;
  int64_t created;
  int64_t last_used;
  int64_t use_count;
} entry_row;

typedef struct entry_table {
  entry_row *rows;
  size_t count;
  size_t capacity;
} entry_table;

static int collect_entry(const jitops_cache_entry *e, void *user) {
  entry_table *t = user;
  if (t->count == t->capacity) {
    t->capacity = t->capacity != 0 ? 2 * t->capacity : 64;
    t->rows = xrealloc(t->rows, t->capacity * sizeof(*t->rows));
  }
  entry_row *r = &t->rows[t->count++];
  format_key(e->key, r->key);
  r->op = xstrdup(e->op);
  r->target = xstrdup(e->target);
  r->name = xstrdup(e->name_expression);
  r->lowered = xstrdup(e->lowered_name);
  r->options = xstrdup(e->options);
  r->nvrtc_version = e->nvrtc_version;
  r->bytes = e->bytes;
  r->compile_ms = e->compile_ms;
  r->created = e->created;
  r->last_used = e->last_used;
  r->use_count = e->use_count;
  return 0;
}

static void free_entries(entry_table *t) {
  for (size_t i = 0; i < t->count; ++i) {
    entry_row *r = &t->rows[i];
    free(r->op), free(r->target), free(r->name), free(r->lowered), free(r->options);
  }
  free(t->rows);
}

static void print_entry_json(const entry_row *r) {
  fputs("{", stdout);
  json_str_field(stdout, "key", r->key, 1);
  json_str_field(stdout, "op", r->op, 0);
  json_str_field(stdout, "target", r->target, 0);
  json_str_field(stdout, "name_expression", r->name, 0);
  json_str_field(stdout, "lowered_name", r->lowered, 0);
  json_str_field(stdout, "options", r->options, 0);
  json_int(stdout, "nvrtc_version", r->nvrtc_version, 0);
  json_int(stdout, "bytes", r->bytes, 0);
  json_double(stdout, "compile_ms", r->compile_ms, 0);
  json_int(stdout, "created", r->created, 0);
  json_int(stdout, "last_used", r->last_used, 0);
  json_int(stdout, "use_count", r->use_count, 0);
  fputs("}", stdout);
}

static void print_entries_json(const char *path, const entry_table *t) {
  fputs("{", stdout);
  json_str_field(stdout, "database", path, 1);
  json_int(stdout, "count", (int64_t)t->count, 0);
  fputs(", \"entries\": [", stdout);
  for (size_t i = 0; i < t->count; ++i) {
    if (i != 0)
      fputs(",\n  ", stdout);
    print_entry_json(&t->rows[i]);
  }
  fputs("]}\n", stdout);
}

static void print_entries_text(const entry_table *t) {
  int opw = 2, tw = 6;
  for (size_t i = 0; i < t->count; ++i) {
    int n = (int)strlen(t->rows[i].op);
    int m = (int)strlen(t->rows[i].target);
    opw = n > opw ? n : opw;
    tw = m > tw ? m : tw;
  }
  printf("%-32s  %-*s  %-*s  %9s  %10s  %-19s  %6s  %s\n", "KEY", opw, "OP", tw, "TARGET", "BYTES",
         "COMPILE_MS", "LAST_USED", "USES", "NAME");
  for (size_t i = 0; i < t->count; ++i) {
    const entry_row *r = &t->rows[i];
    char when[32];
    format_time(r->last_used, when, sizeof(when));
    printf("%s  %-*s  %-*s  %9lld  %10.1f  %-19s  %6lld  %s\n", r->key, opw, r->op, tw, r->target,
           (long long)r->bytes, r->compile_ms, when, (long long)r->use_count, r->name);
  }
  printf("%zu %s\n", t->count, t->count == 1 ? "entry" : "entries");
}

static int cmd_list(const options *opts) {
  jitops_cache_t *cache;
  if (open_cache_for_reading(opts, &cache) != 0)
    return EXIT_FAILED;
  entry_table t = {0};
  jitops_status st =
      cache ? jitops_cache_list(cache, opts->op, opts->target, collect_entry, &t) : JITOPS_SUCCESS;
  int rc = 0;
  if (st != JITOPS_SUCCESS)
    rc = lib_error(st, "listing the cache");
  else if (opts->json)
    print_entries_json(report_path(cache), &t);
  else
    print_entries_text(&t);
  free_entries(&t);
  jitops_cache_close(cache);
  return rc;
}

/* ------------------------------------------------------------------------------------------
 * clear, verify, export, import, push, pull
 * ---------------------------------------------------------------------------------------- */

static int cmd_clear(const options *opts) {
  jitops_cache_t *cache;
  if (open_cache(opts, JITOPS_CACHE_OPEN_EXISTING, &cache) != 0)
    return EXIT_FAILED;
  int64_t removed = 0;
  jitops_status st = jitops_cache_clear(cache, opts->op, opts->older_than_days, &removed);
  int rc = 0;
  if (st != JITOPS_SUCCESS)
    rc = lib_error(st, "clearing the cache");
  else
    printf("removed %lld %s\n", (long long)removed, removed == 1 ? "entry" : "entries");
  jitops_cache_close(cache);
  return rc;
}

static int cmd_verify(const options *opts) {
  jitops_cache_t *cache;
  if (open_cache(opts, JITOPS_CACHE_OPEN_EXISTING, &cache) != 0)
    return EXIT_FAILED;
  int64_t checked = 0, dropped = 0;
  jitops_status st = jitops_cache_verify(cache, &checked, &dropped);
  int rc = 0;
  if (st != JITOPS_SUCCESS) {
    rc = lib_error(st, "verifying the cache");
  } else {
    printf("checked %lld, dropped %lld\n", (long long)checked, (long long)dropped);
    rc = dropped != 0 || jitops_cache_recovered_from(cache)[0] != '\0' ? EXIT_FAILED : 0;
  }
  jitops_cache_close(cache);
  return rc;
}

static int count_entry(const jitops_cache_entry *e, void *user) {
  (void)e;
  ++*(int64_t *)user;
  return 0;
}

static int cmd_export(const options *opts) {
  if (access(opts->file, F_OK) == 0) {
    fprintf(stderr, PROG ": %s already exists; export writes a new file\n", opts->file);
    return EXIT_FAILED;
  }
  jitops_cache_t *cache;
  if (open_cache(opts, JITOPS_CACHE_OPEN_READONLY, &cache) != 0)
    return EXIT_FAILED;
  int64_t count = 0;
  jitops_status st = jitops_cache_list(cache, NULL, NULL, count_entry, &count);
  if (st == JITOPS_SUCCESS)
    st = jitops_cache_export(cache, opts->file);
  int rc = 0;
  if (st != JITOPS_SUCCESS)
    rc = lib_error(st, "exporting the cache");
  else
    printf("exported %lld %s to %s\n", (long long)count, count == 1 ? "entry" : "entries",
           opts->file);
  jitops_cache_close(cache);
  return rc;
}

static int cmd_import(const options *opts) {
  if (access(opts->file, R_OK) != 0) {
    fprintf(stderr, PROG ": cannot read %s: %s\n", opts->file, strerror(errno));
    return EXIT_FAILED;
  }
  jitops_cache_t *cache;
  if (open_cache(opts, JITOPS_CACHE_OPEN_CREATE, &cache) != 0)
    return EXIT_FAILED;
  int64_t imported = 0, rejected = 0;
  jitops_status st = jitops_cache_import(cache, opts->file, &imported, &rejected);
  int rc = 0;
  if (st != JITOPS_SUCCESS) {
    rc = lib_error(st, "importing");
  } else {
    printf("imported %lld, rejected %lld\n", (long long)imported, (long long)rejected);
    rc = rejected != 0 ? EXIT_FAILED : 0;
  }
  jitops_cache_close(cache);
  return rc;
}

/* push and pull: the call, its report, and the exit status. */
static int push_to(jitops_cache_t *cache, const options *opts) {
  int64_t pushed = 0;
  jitops_status st = jitops_cache_push(cache, opts->remote, NULL, &pushed);
  if (st != JITOPS_SUCCESS)
    return lib_error(st, "pushing (%lld sent before the failure)", (long long)pushed);
  printf("pushed %lld %s\n", (long long)pushed, pushed == 1 ? "kernel" : "kernels");
  return 0;
}

static int pull_from(jitops_cache_t *cache, const options *opts) {
  int64_t pulled = 0, rejected = 0;
  jitops_status st = jitops_cache_pull(cache, opts->remote, NULL, &pulled, &rejected);
  if (st != JITOPS_SUCCESS)
    return lib_error(st, "pulling (%lld added before the failure)", (long long)pulled);
  printf("pulled %lld, rejected %lld\n", (long long)pulled, (long long)rejected);
  return rejected != 0 ? EXIT_FAILED : 0;
}

/* Opens the cache as `mode`, runs `work` on it and closes it. */
static int with_cache(const options *opts, jitops_cache_open_mode mode,
                      int (*work)(jitops_cache_t *, const options *)) {
  jitops_cache_t *cache;
  if (open_cache(opts, mode, &cache) != 0)
    return EXIT_FAILED;
  int rc = work(cache, opts);
  jitops_cache_close(cache);
  return rc;
}

static int cmd_push(const options *opts) {
  return with_cache(opts, JITOPS_CACHE_OPEN_READONLY, push_to);
}

static int cmd_pull(const options *opts) {
  return with_cache(opts, JITOPS_CACHE_OPEN_CREATE, pull_from);
}

/* ------------------------------------------------------------------------------------------
 * prewarm
 * ---------------------------------------------------------------------------------------- */

typedef struct prewarm_result {
  jitops_status status;
  char *error; /* jitops_last_error() of the failing thread, or NULL */
  double ms;
} prewarm_result;

typedef struct prewarm_job {
  jitops_runtime_t *runtime;
  const char *arch;
  const size_t *indices; /* catalogue indices to compile */
  size_t count;
  prewarm_result *results;
  atomic_size_t next; /* the next position in `indices` to take */
  size_t done;        /* guarded by `lock` */
  size_t failed;      /* guarded by `lock` */
  size_t tenths;      /* tenths of the entries reported so far (off a terminal) */
  double start;
  int progress; /* 1: a \r progress line on stderr */
  int verbose;  /* 1: one line per entry on stderr */
  pthread_mutex_t lock;
} prewarm_job;

static const char *describe_entry(size_t index, const char **op) {
  const char *description = NULL;
  *op = NULL;
  if (jitops_catalogue_describe(index, op, &description) != JITOPS_SUCCESS) {
    *op = NULL;
    description = NULL;
  }
  if (*op == NULL)
    *op = "?";
  return description != NULL ? description : "?";
}

static void report_progress(prewarm_job *job, size_t position) {
  const char *op;
  const char *description = describe_entry(job->indices[position], &op);
  const prewarm_result *r = &job->results[position];
  pthread_mutex_lock(&job->lock);
  size_t done = ++job->done;
  job->failed += r->status != JITOPS_SUCCESS;
  if (job->progress) {
    fprintf(stderr, "\r\033[K[%zu/%zu] %s %s: %s", done, job->count, job->arch, op, description);
  } else if (job->verbose) {
    fprintf(stderr, "[%zu/%zu] %s %s: %s: %s (%.1f ms)\n", done, job->count, job->arch, op,
            description, r->status == JITOPS_SUCCESS ? "ok" : "FAILED", r->ms);
  } else if (done * 10 / job->count > job->tenths || done < 10) {
    /* Off a terminal (a batch job's log), a line at each tenth of the entries: a long
     * prewarm shows it is alive without a line per entry. */
    job->tenths = done * 10 / job->count;
    fprintf(stderr, "prewarm %s: %zu/%zu entries, %zu failed (%.1f s)\n", job->arch, done,
            job->count, job->failed, now_seconds() - job->start);
  }
  fflush(stderr);
  pthread_mutex_unlock(&job->lock);
}

static void *prewarm_worker(void *arg) {
  prewarm_job *job = arg;
  for (;;) {
    size_t position = atomic_fetch_add(&job->next, 1);
    if (position >= job->count)
      break;
    prewarm_result *r = &job->results[position];
    double start = now_seconds();
    r->status = jitops_catalogue_compile(job->runtime, job->indices[position]);
    r->ms = (now_seconds() - start) * 1e3;
    r->error = r->status != JITOPS_SUCCESS ? xstrdup(jitops_last_error()) : NULL;
    report_progress(job, position);
  }
  return NULL;
}

/* Runs `jobs` workers over the job; works alone when no thread can start. */
static void run_workers(prewarm_job *job, int jobs) {
  pthread_t *threads = xrealloc(NULL, (size_t)jobs * sizeof(*threads));
  int started = 0;
  for (; started < jobs; ++started)
    if (pthread_create(&threads[started], NULL, prewarm_worker, job) != 0)
      break;
  if (started == 0)
    prewarm_worker(job); /* no thread: do the work here */
  for (int i = 0; i < started; ++i)
    pthread_join(threads[i], NULL);
  free(threads);
}

static jitops_status create_compile_runtime(const options *opts, const char *arch,
                                            jitops_runtime_t **out) {
  jitops_runtime_config config;
  jitops_runtime_config_init(&config);
  config.device = -1;
  config.arch = arch;
  config.cache_dir = opts->dir;
  config.cache_mode = JITOPS_CACHE_MODE_READWRITE;
  /* No shipped tier: a kernel found there would count as a hit and never reach --dir. */
  config.shipped_cache = "";
  return jitops_runtime_create(&config, out);
}

/* Fails when the runtime will not keep what it compiles on disk. */
static int check_cache_writable(jitops_runtime_t *runtime, const char *arch) {
  jitops_runtime_info info;
  jitops_status st = jitops_runtime_get_info(runtime, &info);
  if (st != JITOPS_SUCCESS)
    return lib_error(st, "%s: querying the runtime", arch);
  if (info.cache_path[0] == '\0' || !info.cache_writable) {
    fprintf(stderr,
            PROG ": %s: the runtime has no writable disk cache (JITOPS_LOG=warn says why); "
                 "nothing would be kept\n",
            arch);
    return EXIT_FAILED;
  }
  return 0;
}

/* Opens the cache for writing once, so that an unusable directory is reported with its
 * reason before any compile. */
static int check_cache_usable(const options *opts) {
  jitops_cache_t *cache;
  if (open_cache(opts, JITOPS_CACHE_OPEN_CREATE, &cache) != 0)
    return EXIT_FAILED;
  jitops_cache_close(cache);
  return 0;
}

static size_t report_failures(const prewarm_job *job) {
  size_t failed = 0;
  for (size_t i = 0; i < job->count; ++i) {
    const prewarm_result *r = &job->results[i];
    if (r->status == JITOPS_SUCCESS)
      continue;
    const char *op;
    const char *description = describe_entry(job->indices[i], &op);
    fprintf(stderr, PROG ": %s %s: %s failed: %s: %s\n", job->arch, op, description,
            jitops_status_string(r->status), r->error != NULL ? r->error : "");
    ++failed;
  }
  return failed;
}

/* Prints one arch's summary line; returns the number of failed entries. */
static size_t summarize_arch(prewarm_job *job, double seconds) {
  if (job->progress)
    fputs("\r\033[K", stderr);
  size_t failed = report_failures(job);
  jitops_stats stats;
  memset(&stats, 0, sizeof(stats));
  if (jitops_runtime_get_stats(job->runtime, &stats) != JITOPS_SUCCESS)
    fprintf(stderr, PROG ": %s: no statistics: %s\n", job->arch, jitops_last_error());
  printf("%s: %zu entries, %llu compiled, %llu cached, %zu failed (%.2f s)\n", job->arch,
         job->count, (unsigned long long)stats.compiles, (unsigned long long)stats.disk_hits,
         failed, seconds);
  fflush(stdout);
  return failed;
}

/* Compiles the selected entries for one arch; returns the failures, or -1 on setup error. */
static long prewarm_arch(const options *opts, const char *arch, const size_t *indices, size_t count,
                         int jobs) {
  jitops_runtime_t *runtime;
  jitops_status st = create_compile_runtime(opts, arch, &runtime);
  if (st != JITOPS_SUCCESS) {
    lib_error(st, "%s: creating a compile-only runtime", arch);
    return -1;
  }
  if (check_cache_writable(runtime, arch) != 0) {
    jitops_runtime_destroy(runtime);
    return -1;
  }
  prewarm_job job = {.runtime = runtime, .arch = arch, .indices = indices, .count = count};
  job.results = calloc(count != 0 ? count : 1, sizeof(*job.results));
  if (job.results == NULL)
    exit(EXIT_FAILED);
  atomic_init(&job.next, 0);
  job.progress = isatty(STDERR_FILENO);
  job.verbose = opts->verbose;
  pthread_mutex_init(&job.lock, NULL);
  double start = now_seconds();
  job.start = start;
  run_workers(&job, jobs);
  size_t failed = summarize_arch(&job, now_seconds() - start);
  pthread_mutex_destroy(&job.lock);
  for (size_t i = 0; i < count; ++i)
    free(job.results[i].error);
  free(job.results);
  jitops_runtime_destroy(runtime);
  return (long)failed;
}

/* Fills `indices` with the catalogue entries of `op` (NULL: all); returns how many. */
static size_t select_entries(const char *op, size_t *indices, size_t size) {
  size_t count = 0;
  for (size_t i = 0; i < size; ++i) {
    const char *entry_op;
    describe_entry(i, &entry_op);
    if (op == NULL || strcmp(op, entry_op) == 0)
      indices[count++] = i;
  }
  return count;
}

/* Whether an entry before `index` has op `op`. */
static int op_seen_before(size_t index, const char *op) {
  for (size_t i = 0; i < index; ++i) {
    const char *other;
    describe_entry(i, &other);
    if (strcmp(other, op) == 0)
      return 1;
  }
  return 0;
}

/* The catalogue's distinct ops, as "a, b, c" (truncated to fit). */
static void catalogue_ops(char *out, size_t size) {
  size_t used = 0;
  out[0] = '\0';
  for (size_t i = 0; i < jitops_catalogue_size() && used < size; ++i) {
    const char *op;
    describe_entry(i, &op);
    if (!op_seen_before(i, op))
      used += (size_t)snprintf(out + used, size - used, "%s%s", used != 0 ? ", " : "", op);
  }
}

static int default_jobs(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n < 1 ? 1 : n > MAX_JOBS ? MAX_JOBS : (int)n;
}

/* Prints the selected entries, one "OP: DESCRIPTION" line each. */
static void print_selection(const size_t *indices, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    const char *op;
    const char *description = describe_entry(indices[i], &op);
    printf("%s: %s\n", op, description);
  }
}

/* Compiles the selection for every target; returns the exit status. */
static int prewarm_all(const options *opts, const size_t *indices, size_t count) {
  int jobs = opts->jobs > 0 ? opts->jobs : default_jobs();
  if ((size_t)jobs > count)
    jobs = count > 0 ? (int)count : 1;
  double start = now_seconds();
  long failed = 0;
  int skipped = 0; /* targets whose runtime could not be set up */
  for (int a = 0; a < opts->num_archs; ++a) {
    long f = prewarm_arch(opts, opts->archs[a], indices, count, jobs);
    if (f < 0)
      ++skipped;
    else
      failed += f;
  }
  printf("total: %d %s, %ld failed, %d skipped (%.2f s)\n", opts->num_archs,
         opts->num_archs == 1 ? "target" : "targets", failed, skipped, now_seconds() - start);
  return failed != 0 || skipped != 0 ? EXIT_FAILED : 0;
}

static int cmd_prewarm(const options *opts) {
  size_t size = jitops_catalogue_size();
  size_t *indices = xrealloc(NULL, (size != 0 ? size : 1) * sizeof(*indices));
  size_t count = select_entries(opts->op, indices, size);
  int rc = 0;
  if (opts->op != NULL && count == 0) {
    char ops[512];
    catalogue_ops(ops, sizeof(ops));
    rc = usage_error("prewarm: no catalogue entry has op '%s' (the catalogue has: %s)", opts->op,
                     ops);
  } else if (opts->dry_run) {
    print_selection(indices, count);
  } else if (check_cache_usable(opts) != 0) {
    rc = EXIT_FAILED;
  } else {
    rc = prewarm_all(opts, indices, count);
  }
  free(indices);
  return rc;
}

/* ------------------------------------------------------------------------------------------
 * Command line
 * ---------------------------------------------------------------------------------------- */

static const subcommand subcommands[] = {
    {"stats", cmd_stats, OPT_JSON, 0, stats_help},
    {"list", cmd_list, OPT_JSON | OPT_OP | OPT_TARGET, 0, list_help},
    {"clear", cmd_clear, OPT_OP | OPT_OLDER, 0, clear_help},
    {"verify", cmd_verify, 0, 0, verify_help},
    {"export", cmd_export, 0, 1, export_help},
    {"import", cmd_import, 0, 1, import_help},
    {"push", cmd_push, OPT_REMOTE, 0, push_help},
    {"pull", cmd_pull, OPT_REMOTE, 0, pull_help},
    {"prewarm", cmd_prewarm, OPT_ARCH | OPT_JOBS | OPT_OP | OPT_VERBOSE | OPT_DRY_RUN, 0,
     prewarm_help},
};

enum { SUBCOMMAND_COUNT = sizeof(subcommands) / sizeof(subcommands[0]) };

static const subcommand *find_subcommand(const char *name) {
  for (size_t i = 0; i < SUBCOMMAND_COUNT; ++i)
    if (strcmp(subcommands[i].name, name) == 0)
      return &subcommands[i];
  return NULL;
}

/* Splits "--name=value" or takes the next argument; NULL when it is missing. */
static const char *option_value(int argc, char **argv, int *i, const char *name) {
  const char *arg = argv[*i];
  size_t n = strlen(name);
  if (arg[n] == '=')
    return arg + n + 1;
  if (*i + 1 >= argc)
    return NULL;
  return argv[++*i];
}

/* Whether argv[i] is option `name`, alone or as "name=value". */
static int is_option(const char *arg, const char *name) {
  size_t n = strlen(name);
  return strncmp(arg, name, n) == 0 && (arg[n] == '\0' || arg[n] == '=');
}

static int has_arch(const options *opts, const char *arch) {
  for (int a = 0; a < opts->num_archs; ++a)
    if (strcmp(opts->archs[a], arch) == 0)
      return 1;
  return 0;
}

/* Adds copies of the targets of "sm_80,sm_90" (repeats are kept once). */
static int add_archs(options *opts, const char *list) {
  char *copy = xstrdup(list);
  char *save = NULL;
  int rc = 0;
  int named = 0;
  for (char *a = strtok_r(copy, ",", &save); a != NULL && rc == 0; a = strtok_r(NULL, ",", &save)) {
    ++named;
    if (!valid_arch(a))
      rc = usage_error("--arch: '%s' is not a target such as sm_90", a);
    else if (has_arch(opts, a))
      continue;
    else if (opts->num_archs == MAX_ARCHS)
      rc = usage_error("--arch: at most %d targets", MAX_ARCHS);
    else
      opts->archs[opts->num_archs++] = xstrdup(a);
  }
  free(copy);
  if (named == 0 && rc == 0)
    rc = usage_error("--arch: '%s' names no target", list);
  return rc;
}

/* Handles an option that takes a value; returns 0, EXIT_USAGE, or -1 if `arg` is not one. */
static int value_option(options *opts, const char *name, const char *value) {
  if (strcmp(name, "--dir") == 0) {
    opts->dir = value;
  } else if (strcmp(name, "--op") == 0) {
    opts->op = value;
  } else if (strcmp(name, "--target") == 0) {
    opts->target = value;
  } else if (strcmp(name, "--older-than") == 0) {
    if (parse_days(value, &opts->older_than_days) != 0)
      return usage_error("--older-than: '%s' is not a number of days >= 0", value);
  } else if (strcmp(name, "--jobs") == 0) {
    if (parse_int(value, 1, MAX_JOBS, &opts->jobs) != 0)
      return usage_error("--jobs: '%s' is not a whole number from 1 to %d", value, MAX_JOBS);
  } else if (strcmp(name, "--arch") == 0) {
    return add_archs(opts, value);
  } else if (strcmp(name, "--remote") == 0) {
    opts->remote = value;
  } else {
    return -1;
  }
  return 0;
}

typedef struct option_spec {
  const char *name;
  unsigned flag; /* 0: always allowed */
  int takes_value;
} option_spec;

static const option_spec option_specs[] = {
    {"--dir", 0, 1},
    {"--json", OPT_JSON, 0},
    {"--op", OPT_OP, 1},
    {"--target", OPT_TARGET, 1},
    {"--older-than", OPT_OLDER, 1},
    {"--arch", OPT_ARCH, 1},
    {"--jobs", OPT_JOBS, 1},
    {"--verbose", OPT_VERBOSE, 0},
    {"-v", OPT_VERBOSE, 0},
    {"--dry-run", OPT_DRY_RUN, 0},
    {"--remote", OPT_REMOTE, 1},
};

static void set_flag(options *opts, unsigned flag) {
  if (flag == OPT_JSON)
    opts->json = 1;
  else if (flag == OPT_VERBOSE)
    opts->verbose = 1;
  else if (flag == OPT_DRY_RUN)
    opts->dry_run = 1;
}

static const option_spec *find_option(const char *arg) {
  for (size_t i = 0; i < sizeof(option_specs) / sizeof(option_specs[0]); ++i)
    if (is_option(arg, option_specs[i].name) &&
        (option_specs[i].takes_value || arg[strlen(option_specs[i].name)] == '\0'))
      return &option_specs[i];
  return NULL;
}

/* Parses the option at argv[*i] for `sub` (NULL: before the subcommand, where --json is
 * checked later). Returns 0 or EXIT_USAGE. */
static int parse_option(int argc, char **argv, int *i, const subcommand *sub, options *opts) {
  const char *arg = argv[*i];
  const option_spec *spec = find_option(arg);
  /* Messages name the subcommand; before one, usage_error's program name is enough. */
  const char *where = sub != NULL ? sub->name : "", *colon = sub != NULL ? ": " : "";
  if (spec == NULL)
    return usage_error("%s%sunknown option '%s'", where, colon, arg);
  if (sub != NULL && spec->flag != 0 && (sub->allowed & spec->flag) == 0)
    return usage_error("%s%soption '%s' does not apply here", where, colon, spec->name);
  if (!spec->takes_value) {
    set_flag(opts, spec->flag);
    return 0;
  }
  const char *value = option_value(argc, argv, i, spec->name);
  if (value == NULL)
    return usage_error("%s%soption '%s' needs a value", where, colon, spec->name);
  if (value[0] == '\0')
    return usage_error("%s%soption '%s' needs a non-empty value", where, colon, spec->name);
  int rc = value_option(opts, spec->name, value);
  return rc < 0 ? 0 : rc;
}

static int is_help(const char *arg) {
  return strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0;
}

static int cmd_help(int argc, char **argv, int i) {
  if (i >= argc) {
    fputs(global_help, stdout);
    return 0;
  }
  const subcommand *sub = find_subcommand(argv[i]);
  if (sub == NULL)
    return usage_error("help: unknown subcommand '%s'", argv[i]);
  fputs(sub->help, stdout);
  return 0;
}

/* Parses the subcommand's own arguments from argv[i]. Returns 0, EXIT_USAGE, or -1 when
 * help was asked for. */
static int parse_subcommand_args(int argc, char **argv, int i, const subcommand *sub,
                                 options *opts) {
  int operands = 0;
  int only_operands = 0;
  for (; i < argc; ++i) {
    const char *arg = argv[i];
    if (!only_operands && is_help(arg))
      return -1;
    if (!only_operands && strcmp(arg, "--") == 0) {
      only_operands = 1;
    } else if (!only_operands && arg[0] == '-' && arg[1] != '\0') {
      int rc = parse_option(argc, argv, &i, sub, opts);
      if (rc != 0)
        return rc;
    } else if (operands < sub->wants_file) {
      opts->file = arg, ++operands;
    } else {
      return usage_error("%s: unexpected argument '%s'", sub->name, arg);
    }
  }
  if (operands < sub->wants_file)
    return usage_error("%s: missing FILE", sub->name);
  if (opts->json && (sub->allowed & OPT_JSON) == 0)
    return usage_error("%s: --json applies to stats and list only", sub->name);
  return 0;
}

/* Parses global options; returns the index of the subcommand, or -(exit code + 1). */
static int parse_global(int argc, char **argv, options *opts) {
  int i = 1;
  for (; i < argc && argv[i][0] == '-' && argv[i][1] != '\0'; ++i) {
    if (is_help(argv[i])) {
      fputs(global_help, stdout);
      return -1;
    }
    if (strcmp(argv[i], "--version") == 0) {
      printf(PROG " (libjitops %s)\nLicense: MIT\n", jitops_version_string());
      return -1;
    }
    if (!is_option(argv[i], "--dir") && strcmp(argv[i], "--json") != 0)
      return -1 - usage_error("unknown option '%s' before the subcommand", argv[i]);
    int rc = parse_option(argc, argv, &i, NULL, opts);
    if (rc != 0)
      return -1 - rc;
  }
  if (i >= argc)
    return -1 - usage_error("missing subcommand");
  return i;
}

static int run_command_line(int argc, char **argv, options *opts) {
  int i = parse_global(argc, argv, opts);
  if (i < 0)
    return -1 - i;
  if (strcmp(argv[i], "help") == 0)
    return cmd_help(argc, argv, i + 1);
  const subcommand *sub = find_subcommand(argv[i]);
  if (sub == NULL)
    return usage_error("unknown subcommand '%s'", argv[i]);
  int rc = parse_subcommand_args(argc, argv, i + 1, sub, opts);
  if (rc < 0) {
    fputs(sub->help, stdout);
    return 0;
  }
  if (rc != 0)
    return rc;
  if (sub->run == cmd_prewarm && opts->num_archs == 0)
    opts->archs[opts->num_archs++] = xstrdup(DEFAULT_ARCH);
  return sub->run(opts);
}

int main(int argc, char **argv) {
  options opts = {.older_than_days = -1.0};
  int rc = run_command_line(argc, argv, &opts);
  for (int a = 0; a < opts.num_archs; ++a)
    free(opts.archs[a]);
  return rc;
}
