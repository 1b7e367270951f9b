/* What the disk tier is asked to be: its mode and its size bound, from the runtime's config
 * or, where the config leaves them to it, from the environment. */
#ifndef JITOPS_CACHE_SETTINGS_H
#define JITOPS_CACHE_SETTINGS_H

#include <stdint.h>

#include "jitops/jitops.h"

/* Where the config says JITOPS_CACHE_MODE_DEFAULT: $JITOPS_CACHE (off or 0, readonly,
 * readwrite, on or 1); unset, empty or not understood (warned about): read-write. */
jitops_cache_mode jitops__cache_mode_from_env(void);

/* Where the config says 0: $JITOPS_CACHE_MAX_BYTES, a size with an optional binary suffix
 * ("512M", "1G"), negative for no limit (-1); unset, empty or not understood: 1 GiB. */
int64_t jitops__cache_max_bytes_from_env(void);

/* The remote tier's address: `configured` when not NULL, else $JITOPS_CACHE_REMOTE. NULL when
 * there is none (unset, or ""). */
const char *jitops__remote_url_setting(const char *configured);

/* The fleet's signing key: `configured` when not NULL, else $JITOPS_CACHE_REMOTE_KEY. NULL
 * when there is none (unset, or ""): records are then neither signed nor checked. */
const char *jitops__remote_key_setting(const char *configured);

/* $JITOPS_CACHE_REMOTE_TIMEOUT_MS: the bound of a connect and of a request to the remote tier
 * (default JITOPS__REMOTE_TIMEOUT_MS, see cache/remote.h), 1 to 60000. */
int jitops__remote_timeout_ms_from_env(void);

/* What the main database can be here, decided before it is opened: by a store, which then
 * opens it (and may still find it damaged or missing), and by jitops_cache_settings_get,
 * which only reports. */
typedef struct jitops__cache_plan {
  jitops_cache_mode mode;   /* asked for: the config's, else the environment's; never DEFAULT */
  jitops_cache_state state; /* what the main database can be */
  int degraded;             /* state falls short of `mode` for a reason nobody asked for */
  int dir_writable;
  int64_t max_bytes; /* -1: unbounded */
  char reason[512];  /* why state is not read-write; "" when it is */
  char path[4200];   /* the database, under the real directory; "" when there is none */
} jitops__cache_plan;

/* Resolves the mode and the bound (config, else environment), and the directory (created,
 * 0700, when `create` and the mode is read-write), and checks the directory and the
 * database's path. A problem is the plan's state and reason, never a failure. */
void jitops__cache_plan_make(const char *dir, jitops_cache_mode configured_mode,
                             int64_t configured_max_bytes, int create, jitops__cache_plan *out);

#endif
