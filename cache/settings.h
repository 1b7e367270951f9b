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

/* The config's values, with DEFAULT and 0 resolved as above. */
jitops_cache_mode jitops__cache_mode_resolve(jitops_cache_mode configured);
int64_t jitops__cache_max_bytes_resolve(int64_t configured);

#endif
