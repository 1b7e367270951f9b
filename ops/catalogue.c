/* The prewarm catalogue: the table of families (ops/catalogue_family.h). Each family lists its
 * own entries in its catalogue.c; this table only strings the families together. */
#include "ops/catalogue_family.h"

extern const jitops__catalogue_family jitops__catalogue_example;
extern const jitops__catalogue_family jitops__catalogue_flce;
extern const jitops__catalogue_family jitops__catalogue_segment;
extern const jitops__catalogue_family jitops__catalogue_ctc;
extern const jitops__catalogue_family jitops__catalogue_scan;
extern const jitops__catalogue_family jitops__catalogue_repeat;
/* Op families add themselves here, one line each. */

static const jitops__catalogue_family *const families[] = {
    &jitops__catalogue_example, &jitops__catalogue_flce, &jitops__catalogue_segment,
    &jitops__catalogue_ctc,     &jitops__catalogue_scan, &jitops__catalogue_repeat,
};

enum { FAMILY_COUNT = sizeof(families) / sizeof(families[0]) };

size_t jitops_catalogue_size(void) {
  size_t total = 0;
  for (size_t f = 0; f < FAMILY_COUNT; ++f)
    total += families[f]->count();
  return total;
}

/* Maps a global index to (family, index within it); `fn` names the entry point in the
 * failure past the last entry. */
static jitops_status locate(const char *fn, size_t index, const jitops__catalogue_family **family,
                            size_t *local) {
  const size_t global = index;
  for (size_t f = 0; f < FAMILY_COUNT; ++f) {
    size_t n = families[f]->count();
    if (index < n) {
      *family = families[f];
      *local = index;
      return JITOPS_SUCCESS;
    }
    index -= n;
  }
  return jitops__fail(JITOPS_ERR_NOT_FOUND, "%s: index %zu is past the catalogue's %zu entries", fn,
                      global, jitops_catalogue_size());
}

jitops_status jitops_catalogue_describe(size_t index, const char **op, const char **description) {
  size_t local = 0;
  const jitops__catalogue_family *family = NULL;
  JITOPS__TRY(locate("jitops_catalogue_describe", index, &family, &local));
  if (op != NULL)
    *op = family->op;
  if (description != NULL && family->name != NULL) {
    static _Thread_local char text[256]; /* valid until this thread's next description */
    family->name(local, text, sizeof text);
    *description = text;
  } else if (description != NULL) {
    *description = family->describe(local);
  }
  return JITOPS_SUCCESS;
}

jitops_status jitops_catalogue_compile(jitops_runtime_t *runtime, size_t index) {
  JITOPS__REQUIRE_NONNULL("jitops_catalogue_compile", runtime);
  size_t local = 0;
  const jitops__catalogue_family *family = NULL;
  JITOPS__TRY(locate("jitops_catalogue_compile", index, &family, &local));
  if (family->name == NULL)
    return family->compile(runtime, local);
  char name[256];
  family->name(local, name, sizeof name);
  jitops_kernel_t *kernel;
  return jitops_kernel_get(runtime, family->source, name, NULL, 0, &kernel);
}
