/* Where the cache lives and whether it is safe to use. The cache holds code that will run on
 * the GPU, so the directory must be the caller's own and writable by nobody else, and the
 * database must be a regular file of the caller's (never a symlink): a shared or hijacked
 * cache is how other tools let one user run another's code. */
#ifndef JITOPS_CACHE_LOCATION_H
#define JITOPS_CACHE_LOCATION_H

#include <stddef.h>

#include "jitops/jitops.h"

#define JITOPS__CACHE_DB_NAME "kernels.db"

/* The directory: `explicit_dir`, else $JITOPS_CACHE_DIR, else $XDG_CACHE_HOME/jitops, else
 * $HOME/.cache/jitops. JITOPS_ERR_IO when none can be formed. */
jitops_status jitops__cache_dir_resolve(const char *explicit_dir, char *out, size_t out_size);

/* Creates the directory (0700, parents too) when `create`, resolves it to its real path
 * (written to `real`), then checks the real directory: owned by the effective user, not
 * writable by group or others. Sets *writable to whether its owner bits allow writing
 * (honoured even for root, so a 0500 directory is read-only). JITOPS_ERR_CACHE with the
 * reason when it is unsafe or missing.
 *
 * Symlinks on the way to the directory (a symlinked $HOME, or a cache directory that is a
 * link) are followed here, once, and nowhere later: every file of the cache is opened under
 * the real path with SQLite's NOFOLLOW, so a symlink inside the directory stays refused. */
jitops_status jitops__cache_dir_check(const char *dir, int create, char *real, size_t real_size,
                                      int *writable);

/* The path of the file `path` names, with its directory resolved to its real path and the
 * file name kept as it is (a file that is itself a symlink stays one, to be refused).
 * JITOPS_ERR_IO when the directory does not exist or the result does not fit. */
jitops_status jitops__real_parent_path(const char *path, char *out, size_t out_size);

/* Checks the database path and its -wal, -shm and -claims companions: each absent, or a regular
 * file (not a symlink) owned by the effective user and not writable by others. When
 * `create` and the database is absent, creates it empty with mode 0600. */
jitops_status jitops__cache_file_check(const char *db_path, int create);

#endif
