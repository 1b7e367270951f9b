/* Lengths, and targets, that live in host memory: read and checked value by value before any
 * device work, and packed into one buffer (jitops__ctc_staging) that run.c uploads into the
 * scratch with one copy, so that the kernels read them as they read device lengths. */
#ifndef JITOPS_OPS_CTC_HOST_DATA_H
#define JITOPS_OPS_CTC_HOST_DATA_H

#include "ops/ctc/call.h"
#include "runtime/op_support.h"

/* Checks every length (and, for host targets, every used label), sets call->s_max to the
 * longest target, and fills call->stage; host targets then read as a compact tensor at
 * stage.targets_at (call->tgt_st is set to its strides). Needs a call whose tensors passed
 * args.c's checks. */
jitops_status jitops__ctc_stage_host_data(jitops__ctc_call *call, const DLTensor *input_lengths,
                                          const DLTensor *target_lengths);

#endif
