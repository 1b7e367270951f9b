/* Cache administration (what jitops-cache does), for jitops.cache. Every call may take a
 * while on a large database, so each runs without the GIL; the list and stats visitors take
 * it back to build their rows. */
#include "binding.h"

static int open_cache_arg(PyObject *obj, jitops_cache_t **out) {
  return jp_arg_pointer(obj, "cache", (void **)out);
}

/* open(dir, writable) -> int */
static PyObject *cache_open(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
  const char *dir;
  int writable;
  if (jp_arg_count("cache_open", nargs, 2) < 0 || jp_arg_string(args[0], "dir", &dir) < 0 ||
      jp_arg_int(args[1], "writable", &writable) < 0)
    return NULL;
  jitops_cache_t *cache = NULL;
  PyThreadState *save = PyEval_SaveThread();
  jitops_status status = jitops_cache_open(dir, writable, &cache);
  PyEval_RestoreThread(save);
  if (status != JITOPS_SUCCESS)
    return jp_raise(status);
  return PyLong_FromVoidPtr(cache);
}

static PyObject *cache_close(PyObject *self, PyObject *arg) {
  jitops_cache_t *cache;
  if (open_cache_arg(arg, &cache) < 0)
    return NULL;
  jitops_cache_close(cache);
  Py_RETURN_NONE;
}

static PyObject *cache_path(PyObject *self, PyObject *arg) {
  jitops_cache_t *cache;
  if (open_cache_arg(arg, &cache) < 0)
    return NULL;
  return PyUnicode_FromString(jitops_cache_path(cache));
}

/* The visitors run inside the C call, with the GIL re-taken for each row. */
typedef struct rows {
  PyObject *list;
  PyThreadState *save;
} rows;

static int append_row(rows *r, PyObject *row) {
  int status = row != NULL ? PyList_Append(r->list, row) : -1;
  Py_XDECREF(row);
  return status;
}

static int visit_entry(const jitops_cache_entry *e, void *user) {
  rows *r = user;
  PyEval_RestoreThread(r->save);
  PyObject *row = Py_BuildValue(
      "(y#sssssiLdLLL)", (const char *)e->key, (Py_ssize_t)sizeof e->key, e->op, e->name_expression,
      e->lowered_name, e->target, e->options, e->nvrtc_version, (long long)e->bytes, e->compile_ms,
      (long long)e->created, (long long)e->last_used, (long long)e->use_count);
  int stop = append_row(r, row) < 0;
  r->save = PyEval_SaveThread();
  return stop;
}

static int visit_group(const jitops_cache_group_stats *g, void *user) {
  rows *r = user;
  PyEval_RestoreThread(r->save);
  PyObject *row =
      Py_BuildValue("(ssLLLLLLLLL)", g->op, g->target, (long long)g->entries, (long long)g->bytes,
                    (long long)g->memory_hits, (long long)g->disk_hits, (long long)g->misses,
                    (long long)g->compiles, (long long)g->remote_hits, (long long)g->remote_misses,
                    (long long)g->remote_errors);
  int stop = append_row(r, row) < 0;
  r->save = PyEval_SaveThread();
  return stop;
}

/* Finishes a walk: the walk's status, or the Python error a visitor hit. */
static PyObject *finish_rows(rows *r, jitops_status status) {
  PyEval_RestoreThread(r->save);
  if (PyErr_Occurred() || status != JITOPS_SUCCESS) {
    Py_DECREF(r->list);
    return PyErr_Occurred() ? NULL : jp_raise(status);
  }
  return r->list;
}

/* list(cache, op, target) -> [(key, op, name_expression, lowered_name, target, options,
 *                              nvrtc_version, bytes, compile_ms, created, last_used, uses)] */
static PyObject *cache_list(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
  jitops_cache_t *cache;
  const char *op, *target;
  if (jp_arg_count("cache_list", nargs, 3) < 0 || open_cache_arg(args[0], &cache) < 0 ||
      jp_arg_string(args[1], "op", &op) < 0 || jp_arg_string(args[2], "target", &target) < 0)
    return NULL;
  rows r = {PyList_New(0), NULL};
  if (r.list == NULL)
    return NULL;
  r.save = PyEval_SaveThread();
  return finish_rows(&r, jitops_cache_list(cache, op, target, visit_entry, &r));
}

/* stats(cache) -> [(op, target, entries, bytes, memory_hits, disk_hits, misses, compiles,
 *                   remote_hits, remote_misses, remote_errors)] */
static PyObject *cache_stats(PyObject *self, PyObject *arg) {
  jitops_cache_t *cache;
  if (open_cache_arg(arg, &cache) < 0)
    return NULL;
  rows r = {PyList_New(0), NULL};
  if (r.list == NULL)
    return NULL;
  r.save = PyEval_SaveThread();
  return finish_rows(&r, jitops_cache_stats(cache, visit_group, &r));
}

/* clear(cache, op, older_than_days) -> removed */
static PyObject *cache_clear(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
  jitops_cache_t *cache;
  const char *op;
  double days;
  if (jp_arg_count("cache_clear", nargs, 3) < 0 || open_cache_arg(args[0], &cache) < 0 ||
      jp_arg_string(args[1], "op", &op) < 0 || jp_arg_double(args[2], "older_than_days", &days))
    return NULL;
  int64_t removed = 0;
  PyThreadState *save = PyEval_SaveThread();
  jitops_status status = jitops_cache_clear(cache, op, days, &removed);
  PyEval_RestoreThread(save);
  if (status != JITOPS_SUCCESS)
    return jp_raise(status);
  return PyLong_FromLongLong(removed);
}

/* verify(cache) -> (checked, dropped) */
static PyObject *cache_verify(PyObject *self, PyObject *arg) {
  jitops_cache_t *cache;
  if (open_cache_arg(arg, &cache) < 0)
    return NULL;
  int64_t checked = 0, dropped = 0;
  PyThreadState *save = PyEval_SaveThread();
  jitops_status status = jitops_cache_verify(cache, &checked, &dropped);
  PyEval_RestoreThread(save);
  if (status != JITOPS_SUCCESS)
    return jp_raise(status);
  return Py_BuildValue("(LL)", (long long)checked, (long long)dropped);
}

/* export(cache, file) */
static PyObject *cache_export(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
  jitops_cache_t *cache;
  const char *file;
  if (jp_arg_count("cache_export", nargs, 2) < 0 || open_cache_arg(args[0], &cache) < 0 ||
      jp_arg_string(args[1], "file", &file) < 0)
    return NULL;
  PyThreadState *save = PyEval_SaveThread();
  jitops_status status = jitops_cache_export(cache, file);
  PyEval_RestoreThread(save);
  if (status != JITOPS_SUCCESS)
    return jp_raise(status);
  Py_RETURN_NONE;
}

/* import(cache, file) -> (imported, rejected) */
static PyObject *cache_import(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
  jitops_cache_t *cache;
  const char *file;
  if (jp_arg_count("cache_import", nargs, 2) < 0 || open_cache_arg(args[0], &cache) < 0 ||
      jp_arg_string(args[1], "file", &file) < 0)
    return NULL;
  int64_t imported = 0, rejected = 0;
  PyThreadState *save = PyEval_SaveThread();
  jitops_status status = jitops_cache_import(cache, file, &imported, &rejected);
  PyEval_RestoreThread(save);
  if (status != JITOPS_SUCCESS)
    return jp_raise(status);
  return Py_BuildValue("(LL)", (long long)imported, (long long)rejected);
}

/* push(cache, remote, key) -> pushed: remote and key None take the environment's. */
static PyObject *cache_push(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
  jitops_cache_t *cache;
  const char *remote, *key;
  if (jp_arg_count("cache_push", nargs, 3) < 0 || open_cache_arg(args[0], &cache) < 0 ||
      jp_arg_string(args[1], "remote", &remote) < 0 || jp_arg_string(args[2], "key", &key) < 0)
    return NULL;
  int64_t pushed = 0;
  PyThreadState *save = PyEval_SaveThread();
  jitops_status status = jitops_cache_push(cache, remote, key, &pushed);
  PyEval_RestoreThread(save);
  if (status != JITOPS_SUCCESS)
    return jp_raise(status);
  return PyLong_FromLongLong(pushed);
}

/* pull(cache, remote, key) -> (pulled, rejected) */
static PyObject *cache_pull(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
  jitops_cache_t *cache;
  const char *remote, *key;
  if (jp_arg_count("cache_pull", nargs, 3) < 0 || open_cache_arg(args[0], &cache) < 0 ||
      jp_arg_string(args[1], "remote", &remote) < 0 || jp_arg_string(args[2], "key", &key) < 0)
    return NULL;
  int64_t pulled = 0, rejected = 0;
  PyThreadState *save = PyEval_SaveThread();
  jitops_status status = jitops_cache_pull(cache, remote, key, &pulled, &rejected);
  PyEval_RestoreThread(save);
  if (status != JITOPS_SUCCESS)
    return jp_raise(status);
  return Py_BuildValue("(LL)", (long long)pulled, (long long)rejected);
}

PyMethodDef jp_cache_methods[] = {{"cache_push", JP_FASTCALL(cache_push), METH_FASTCALL, NULL},
                                  {"cache_pull", JP_FASTCALL(cache_pull), METH_FASTCALL, NULL},
                                  {"cache_open", JP_FASTCALL(cache_open), METH_FASTCALL, NULL},
                                  {"cache_close", cache_close, METH_O, NULL},
                                  {"cache_path", cache_path, METH_O, NULL},
                                  {"cache_list", JP_FASTCALL(cache_list), METH_FASTCALL, NULL},
                                  {"cache_stats", cache_stats, METH_O, NULL},
                                  {"cache_clear", JP_FASTCALL(cache_clear), METH_FASTCALL, NULL},
                                  {"cache_verify", cache_verify, METH_O, NULL},
                                  {"cache_export", JP_FASTCALL(cache_export), METH_FASTCALL, NULL},
                                  {"cache_import", JP_FASTCALL(cache_import), METH_FASTCALL, NULL},
                                  {NULL, NULL, 0, NULL}};
