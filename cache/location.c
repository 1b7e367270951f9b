#include "cache/location.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/error.h"

static int nonempty(const char *s) {
  return s != NULL && s[0] != 0;
}

jitops_status jitops__cache_dir_resolve(const char *explicit_dir, char *out, size_t out_size) {
  int n;
  if (nonempty(explicit_dir))
    n = snprintf(out, out_size, "%s", explicit_dir);
  else if (nonempty(getenv("JITOPS_CACHE_DIR")))
    n = snprintf(out, out_size, "%s", getenv("JITOPS_CACHE_DIR"));
  else if (nonempty(getenv("XDG_CACHE_HOME")))
    n = snprintf(out, out_size, "%s/jitops", getenv("XDG_CACHE_HOME"));
  else if (nonempty(getenv("HOME")))
    n = snprintf(out, out_size, "%s/.cache/jitops", getenv("HOME"));
  else
    return jitops__fail(JITOPS_ERR_IO, "no cache directory: set JITOPS_CACHE_DIR or HOME");
  if (n < 0 || (size_t)n >= out_size)
    return jitops__fail(JITOPS_ERR_IO, "the cache directory's path is too long");
  return JITOPS_SUCCESS;
}

/* mkdir -p with mode 0700 for every directory it creates. */
static void make_parents(const char *dir) {
  char path[4096];
  if (snprintf(path, sizeof path, "%s", dir) >= (int)sizeof path)
    return;
  for (char *p = path + 1; *p; ++p) {
    if (*p != '/')
      continue;
    *p = 0;
    mkdir(path, 0700);
    *p = '/';
  }
  mkdir(path, 0700);
}

/* realpath(3) into a caller's buffer: 0, or the errno value of the failure. */
static int real_path(const char *path, char *out, size_t out_size) {
  char *real = realpath(path, NULL);
  if (real == NULL)
    return errno;
  size_t length = strlen(real);
  if (length < out_size)
    memcpy(out, real, length + 1);
  free(real);
  return length < out_size ? 0 : ENAMETOOLONG;
}

jitops_status jitops__cache_dir_check(const char *dir, int create, char *real, size_t real_size,
                                      int *writable) {
  if (create)
    make_parents(dir);
  int error = real_path(dir, real, real_size);
  if (error != 0)
    return jitops__fail(JITOPS_ERR_CACHE, "cache directory %s: %s", dir, strerror(error));
  struct stat st;
  if (stat(real, &st) != 0)
    return jitops__fail(JITOPS_ERR_CACHE, "cache directory %s: %s", real, strerror(errno));
  if (!S_ISDIR(st.st_mode))
    return jitops__fail(JITOPS_ERR_CACHE, "cache directory %s is not a directory", real);
  if (st.st_uid != geteuid())
    return jitops__fail(JITOPS_ERR_CACHE,
                        "cache directory %s belongs to another user (uid %u); refusing to run "
                        "kernels from it",
                        real, (unsigned)st.st_uid);
  if (st.st_mode & (S_IWGRP | S_IWOTH))
    return jitops__fail(JITOPS_ERR_CACHE,
                        "cache directory %s is writable by others (mode %03o); refusing to run "
                        "kernels from it",
                        real, (unsigned)(st.st_mode & 0777));
  *writable = (st.st_mode & S_IWUSR) && access(real, W_OK) == 0;
  return JITOPS_SUCCESS;
}

jitops_status jitops__real_parent_path(const char *path, char *out, size_t out_size) {
  const char *slash = strrchr(path, '/');
  const char *name = slash != NULL ? slash + 1 : path;
  char dir[4096];
  if (slash == path)
    snprintf(dir, sizeof dir, "/");
  else if (snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - path) : 1, slash ? path : ".") >=
           (int)sizeof dir)
    return jitops__fail(JITOPS_ERR_IO, "%s: the path is too long", path);
  int error = real_path(dir, out, out_size);
  if (error != 0)
    return jitops__fail(JITOPS_ERR_IO, "%s: %s", dir, strerror(error));
  size_t used = strlen(out);
  int n = snprintf(out + used, out_size - used, "%s%s", used > 1 ? "/" : "", name);
  if (n < 0 || (size_t)n >= out_size - used)
    return jitops__fail(JITOPS_ERR_IO, "%s: the path is too long", path);
  return JITOPS_SUCCESS;
}

static jitops_status check_one(const char *path) {
  struct stat st;
  if (lstat(path, &st) != 0)
    return errno == ENOENT ? JITOPS_SUCCESS
                           : jitops__fail(JITOPS_ERR_CACHE, "%s: %s", path, strerror(errno));
  if (S_ISLNK(st.st_mode))
    return jitops__fail(JITOPS_ERR_CACHE, "%s is a symbolic link; refusing to follow it", path);
  if (!S_ISREG(st.st_mode))
    return jitops__fail(JITOPS_ERR_CACHE, "%s is not a regular file", path);
  if (st.st_uid != geteuid())
    return jitops__fail(JITOPS_ERR_CACHE, "%s belongs to another user (uid %u)", path,
                        (unsigned)st.st_uid);
  if (st.st_mode & (S_IWGRP | S_IWOTH))
    return jitops__fail(JITOPS_ERR_CACHE, "%s is writable by others (mode %03o)", path,
                        (unsigned)(st.st_mode & 0777));
  return JITOPS_SUCCESS;
}

jitops_status jitops__cache_file_check(const char *db_path, int create) {
  static const char *const suffixes[] = {"", "-wal", "-shm", "-claims"};
  char path[4200];
  for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0]; ++i) {
    snprintf(path, sizeof path, "%s%s", db_path, suffixes[i]);
    JITOPS__TRY(check_one(path));
  }
  if (create) {
    int fd = open(db_path, O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd >= 0)
      close(fd);
    else if (errno != EEXIST)
      return jitops__fail(JITOPS_ERR_CACHE, "%s: %s", db_path, strerror(errno));
  }
  return JITOPS_SUCCESS;
}
