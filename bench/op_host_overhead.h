/* The C baseline of bench_host_overhead.py: times calls of six small op problems from C
 * (op_host_overhead.c says how). Every function returns 0 on success; on failure nonzero
 * (77: no GPU), and ohc_error() names the step and the reason. Not thread-safe. */
#ifndef OP_HOST_OVERHEAD_H
#define OP_HOST_OVERHEAD_H

/* Makes the runtime, tensors and workspaces on device 0 (closing what an earlier call made). */
int ohc_open(void);
/* Frees what ohc_open made; harmless when nothing is open. */
void ohc_close(void);
/* Why the last failing call failed. */
const char *ohc_error(void);
/* The ops, by index: "cumsum", "segment_sum", "repeat", "ctc_loss",
 * "fused_linear_cross_entropy", "fused_linear_cross_entropy_grads" (NULL out of range). */
int ohc_op_count(void);
const char *ohc_op_name(int op);
/* The open runtime's device name ("" when none is open). */
const char *ohc_device(void);
/* One call of `op`, not timed (a caller times it with its own clock). */
int ohc_call(int op);
/* Runs `warmup` untimed calls of `op`, then `calls` calls timed one by one into ns[0..calls),
 * synchronizing the device (not timed) before the first and after every `batch` calls. */
int ohc_time(int op, int warmup, int calls, int batch, double *ns);

#endif
