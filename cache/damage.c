#include "cache/damage.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"

int jitops__db_rc_is_damage(int rc) {
  int primary = rc & 0xff;
  return primary == SQLITE_CORRUPT || primary == SQLITE_NOTADB || primary == SQLITE_FORMAT;
}

/* ---- the header ------------------------------------------------------------------------ */

enum { HEADER_BYTES = 100, MIN_USABLE_PAGE_BYTES = 480 };

static uint32_t be32(const unsigned char *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static int page_size_is_valid(unsigned value) {
  return value == 1 || (value >= 512 && value <= 32768 && (value & (value - 1)) == 0);
}

/* The first fault of a header, as a reason, or NULL when it is sound. The rules are those of
 * SQLite's file format (https://sqlite.org/fileformat.html, "The Database Header"); a file
 * that breaks one is either refused by SQLite or opened read-only, and never heals. */
static const char *header_fault(const unsigned char *h) {
  unsigned page_size = (unsigned)h[16] << 8 | h[17];
  if (memcmp(h, "SQLite format 3", 16) != 0)
    return "not an SQLite database";
  if (!page_size_is_valid(page_size))
    return "an invalid page size";
  if (h[18] < 1 || h[18] > 2)
    return "an unknown write version (SQLite would open it read-only)";
  if (h[19] < 1 || h[19] > 2)
    return "an unknown read version";
  if ((page_size == 1 ? 65536u : page_size) - h[20] < MIN_USABLE_PAGE_BYTES)
    return "too many reserved bytes a page";
  if (h[21] != 64 || h[22] != 32 || h[23] != 32)
    return "invalid payload fractions";
  if (be32(h + 44) > 4)
    return "an unsupported schema format";
  if (be32(h + 56) > 3)
    return "an unknown text encoding";
  return NULL;
}

int jitops__db_header_is_damaged(sqlite3 *handle, char *reason, size_t size) {
  sqlite3_file *file = NULL;
  if (sqlite3_file_control(handle, "main", SQLITE_FCNTL_FILE_POINTER, &file) != SQLITE_OK ||
      file == NULL || file->pMethods == NULL)
    return 0;
  sqlite3_int64 bytes = 0;
  if (file->pMethods->xFileSize(file, &bytes) != SQLITE_OK || bytes == 0)
    return 0;
  unsigned char header[HEADER_BYTES];
  const char *fault = "shorter than a database header";
  if (bytes >= HEADER_BYTES) {
    if (file->pMethods->xRead(file, header, HEADER_BYTES, 0) != SQLITE_OK)
      return 0; /* unreadable now: SQLite's own result will tell */
    fault = header_fault(header);
  }
  if (fault != NULL)
    snprintf(reason, size, "its header is damaged: %s", fault);
  return fault != NULL;
}

/* ---- setting aside --------------------------------------------------------------------- */

/* Set-aside copies are kept for a post-mortem, but a cache that keeps getting damaged (a
 * failing disk, a process writing over it) must not fill the disk with them. */
enum { SET_ASIDE_KEPT = 2 };

typedef struct aside_file {
  char name[256];
  time_t mtime;
} aside_file;

static int newest_first(const void *a, const void *b) {
  const aside_file *x = a, *y = b;
  if (x->mtime != y->mtime)
    return x->mtime < y->mtime ? 1 : -1;
  return -strcmp(x->name, y->name);
}

/* The directory part and the file name of `path`. */
static void split_path(const char *path, char *dir, size_t dir_size, const char **base) {
  const char *slash = strrchr(path, '/');
  if (slash == NULL) {
    snprintf(dir, dir_size, ".");
    *base = path;
  } else if (slash == path) {
    snprintf(dir, dir_size, "/");
    *base = path + 1;
  } else {
    snprintf(dir, dir_size, "%.*s", (int)(slash - path), path);
    *base = slash + 1;
  }
}

/* The set-aside copies of <dir>/<base>, newest first, in a malloc'ed array (NULL if none). */
static aside_file *list_set_aside(const char *dir, const char *base, size_t *count) {
  char prefix[300], full[4400];
  snprintf(prefix, sizeof prefix, "%s.corrupt-", base);
  *count = 0;
  DIR *d = opendir(dir);
  if (d == NULL)
    return NULL;
  aside_file *files = NULL;
  size_t capacity = 0;
  struct dirent *e;
  struct stat st;
  while ((e = readdir(d)) != NULL) {
    if (strncmp(e->d_name, prefix, strlen(prefix)) != 0 || strlen(e->d_name) >= 256)
      continue;
    snprintf(full, sizeof full, "%s/%s", dir, e->d_name);
    if (lstat(full, &st) != 0 || !S_ISREG(st.st_mode))
      continue;
    if (*count == capacity) {
      capacity = capacity ? capacity * 2 : 8;
      aside_file *grown = realloc(files, capacity * sizeof *files);
      if (grown == NULL)
        break;
      files = grown;
    }
    snprintf(files[*count].name, sizeof files[*count].name, "%s", e->d_name);
    files[(*count)++].mtime = st.st_mtime;
  }
  closedir(d);
  if (*count > 1)
    qsort(files, *count, sizeof *files, newest_first);
  return files;
}

int64_t jitops__db_prune_set_aside(const char *path, size_t keep) {
  char dir[4096], full[4400];
  const char *base;
  split_path(path, dir, sizeof dir, &base);
  size_t count = 0;
  aside_file *files = list_set_aside(dir, base, &count);
  int64_t removed = 0;
  for (size_t i = keep; i < count; ++i) {
    snprintf(full, sizeof full, "%s/%s", dir, files[i].name);
    removed += unlink(full) == 0;
  }
  free(files);
  return removed;
}

void jitops__db_set_aside(jitops__db *db, const char *reason, char *aside, size_t size) {
  static unsigned sequence; /* tells apart copies set aside by one process within a second */
  jitops__db_close(db);
  aside[0] = 0;
  struct stat st;
  if (stat(db->path, &st) != 0 || (db->inode != 0 && st.st_ino != db->inode))
    return;
  char companion[4200];
  snprintf(aside, size, "%s.corrupt-%ld-%d-%u", db->path, (long)time(NULL), (int)getpid(),
           __atomic_fetch_add(&sequence, 1, __ATOMIC_RELAXED));
  if (rename(db->path, aside) != 0) {
    snprintf(aside, size, "nothing: it could not be renamed (%s), so it was deleted",
             strerror(errno));
    unlink(db->path);
  }
  snprintf(companion, sizeof companion, "%s-wal", db->path);
  unlink(companion);
  snprintf(companion, sizeof companion, "%s-shm", db->path);
  unlink(companion);
  jitops__db_prune_set_aside(db->path, SET_ASIDE_KEPT);
  jitops__log(JITOPS__LOG_WARN, "cache %s is damaged (%s): set aside as %s", db->path, reason,
              aside);
}
