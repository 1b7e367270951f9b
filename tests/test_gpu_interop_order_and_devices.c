/* On a GPU: what a binding does before launching on another framework's arrays.
 *   - jitops_stream_wait orders a consumer stream after a producer stream: a reader launched
 *     on the consumer right after a slow writer on the producer reads the writer's value,
 *     every round (without the wait it reads the old one: the writer spins for ~50 ms);
 *   - the same stream, and NULL against CU_STREAM_LEGACY, are nothing to do;
 *   - under capture, streams are ordered only within one graph (a forked producer is joined;
 *     nothing crosses a capture's edge), and every capture ends as a valid graph;
 *   - jitops_pointer_check passes the runtime's device memory, managed memory, page-locked
 *     host memory and memory the driver does not know (another device's memory is refused,
 *     in test_gpu_multi_device).
 * Exits 77 without a GPU. */
#include <cuda_runtime_api.h>

#include "cuda_check.h"
#include "testutil.h"

enum { ROUNDS = 6 };

static const char *const source =
    "// Spins for `cycles` clocks, then stores `value`: work a racing reader would overtake.\n"
    "extern \"C\" __global__ void late_store(int *flag, int value, long long cycles) {\n"
    "  long long start = clock64();\n"
    "  while (clock64() - start < cycles) {}\n"
    "  *(volatile int *)flag = value;\n"
    "}\n"
    "extern \"C\" __global__ void read_flag(const int *flag, int *out, int round) {\n"
    "  out[round] = *(const volatile int *)flag;\n"
    "}\n";

static void consumer_waits_for_producer(jitops_runtime_t *rt) {
  CHECK_OK(jitops_source_register(rt, "test/interop.cu", source));
  jitops_kernel_t *store = NULL, *read = NULL;
  CHECK_OK(jitops_kernel_get(rt, "test/interop.cu", "late_store", NULL, 0, &store));
  CHECK_OK(jitops_kernel_get(rt, "test/interop.cu", "read_flag", NULL, 0, &read));
  if (store == NULL || read == NULL)
    return;
  int *flag = NULL, *seen = NULL;
  cudaStream_t producer = NULL, consumer = NULL;
  CUDA_OK(cudaMalloc((void **)&flag, sizeof(int)));
  CUDA_OK(cudaMalloc((void **)&seen, ROUNDS * sizeof(int)));
  CUDA_OK(cudaMemset(flag, 0, sizeof(int)));
  CUDA_OK(cudaStreamCreateWithFlags(&producer, cudaStreamNonBlocking));
  CUDA_OK(cudaStreamCreateWithFlags(&consumer, cudaStreamNonBlocking));
  CUDA_OK(cudaDeviceSynchronize());
  long long cycles = 100000000; /* ~50 ms at the H100's and H200's clocks */
  jitops_launch_params one = {{1, 1, 1}, {1, 1, 1}, 0, producer};
  /* The control, reported and not asserted (a serializing tool such as compute-sanitizer
   * runs the reader after the writer anyway): without the wait the reader overtakes. */
  int late = -1, control = 0;
  void *late_args[] = {&flag, &late, &cycles}, *control_args[] = {&flag, &seen, &control};
  one.stream = producer;
  CHECK_OK(jitops_kernel_launch(store, &one, late_args));
  one.stream = consumer;
  CHECK_OK(jitops_kernel_launch(read, &one, control_args));
  int host[ROUNDS];
  CUDA_OK(cudaDeviceSynchronize());
  CUDA_OK(cudaMemcpy(host, seen, sizeof(int), cudaMemcpyDeviceToHost));
  printf("control: without the wait the reader read %d (%s)\n", host[0],
         host[0] == -1 ? "after the writer" : "before the writer");
  CUDA_OK(cudaMemset(seen, 0, ROUNDS * sizeof(int)));
  CUDA_OK(cudaDeviceSynchronize());
  for (int round = 0; round < ROUNDS; ++round) {
    int value = 1000 + round;
    void *store_args[] = {&flag, &value, &cycles};
    one.stream = producer;
    CHECK_OK(jitops_kernel_launch(store, &one, store_args));
    CHECK_OK(jitops_stream_wait(rt, consumer, producer));
    void *read_args[] = {&flag, &seen, &round};
    one.stream = consumer;
    CHECK_OK(jitops_kernel_launch(read, &one, read_args));
  }
  CUDA_OK(cudaStreamSynchronize(consumer));
  CUDA_OK(cudaMemcpy(host, seen, sizeof host, cudaMemcpyDeviceToHost));
  for (int round = 0; round < ROUNDS; ++round) {
    if (host[round] != 1000 + round)
      fprintf(stderr, "round %d read %d, not %d\n", round, host[round], 1000 + round);
    CHECK(host[round] == 1000 + round);
  }
  CHECK_OK(jitops_stream_wait(rt, consumer, consumer));
  CHECK_OK(jitops_stream_wait(rt, NULL, (void *)1));
  CHECK_OK(jitops_stream_wait(rt, (void *)2, consumer)); /* per-thread default stream */
  CUDA_OK(cudaDeviceSynchronize());
  cudaFree(flag), cudaFree(seen);
  cudaStreamDestroy(producer), cudaStreamDestroy(consumer);
}

/* Under capture, streams are ordered only within one graph: a producer outside the graph is
 * not waited for (the driver would invalidate the capture), nor a capturing producer by a
 * stream outside it (the wait would pull that stream into the capture), nor one capture by
 * another; a producer forked into the same capture is joined. Every capture ends as a valid
 * graph. */
enum { OUTSIDE_PRODUCER, FORKED_PRODUCER, CAPTURING_PRODUCER, TWO_CAPTURES };

static void wait_in_capture_case(jitops_runtime_t *rt, int which) {
  cudaStream_t capturing = NULL, other = NULL;
  cudaEvent_t fork = NULL;
  cudaGraph_t graph = NULL, other_graph = NULL;
  CUDA_OK(cudaStreamCreateWithFlags(&capturing, cudaStreamNonBlocking));
  CUDA_OK(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking));
  CUDA_OK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
  CUDA_OK(cudaStreamBeginCapture(capturing, cudaStreamCaptureModeRelaxed));
  if (which == FORKED_PRODUCER) {
    CUDA_OK(cudaEventRecord(fork, capturing));
    CUDA_OK(cudaStreamWaitEvent(other, fork, 0));
  }
  if (which == TWO_CAPTURES)
    CUDA_OK(cudaStreamBeginCapture(other, cudaStreamCaptureModeRelaxed));
  if (which == CAPTURING_PRODUCER)
    CHECK_OK(jitops_stream_wait(rt, other, capturing));
  else
    CHECK_OK(jitops_stream_wait(rt, capturing, other));
  if (which == TWO_CAPTURES) {
    CUDA_OK(cudaStreamEndCapture(other, &other_graph));
    CHECK(other_graph != NULL);
  }
  CUDA_OK(cudaStreamEndCapture(capturing, &graph));
  CHECK(graph != NULL);
  if (graph == NULL)
    fprintf(stderr, "capture case %d did not end as a graph\n", which);
  if (graph != NULL)
    cudaGraphDestroy(graph);
  if (other_graph != NULL)
    cudaGraphDestroy(other_graph);
  cudaEventDestroy(fork);
  cudaStreamDestroy(capturing), cudaStreamDestroy(other);
}

static void waits_under_capture(jitops_runtime_t *rt) {
  for (int which = OUTSIDE_PRODUCER; which <= TWO_CAPTURES; ++which)
    wait_in_capture_case(rt, which);
}

static void pointers_of_this_device_pass(jitops_runtime_t *rt) {
  void *device = NULL, *managed = NULL, *pinned = NULL;
  CUDA_OK(cudaMalloc(&device, 256));
  CUDA_OK(cudaMallocManaged(&managed, 256, cudaMemAttachGlobal));
  CUDA_OK(cudaMallocHost(&pinned, 256));
  int *pageable = malloc(64);
  CHECK_OK(jitops_pointer_check(rt, device));
  CHECK_OK(jitops_pointer_check(rt, (char *)device + 100));
  CHECK_OK(jitops_pointer_check(rt, managed));
  CHECK_OK(jitops_pointer_check(rt, pinned));
  CHECK_OK(jitops_pointer_check(rt, pageable));
  CHECK_OK(jitops_pointer_check(rt, NULL));
  free(pageable);
  cudaFree(device), cudaFree(managed), cudaFreeHost(pinned);
}

int main(void) {
  jitops_runtime_t *rt = test_gpu_runtime_or_skip("test_gpu_interop_order_and_devices");
  CUDA_OK(cudaSetDevice(0));
  consumer_waits_for_producer(rt);
  waits_under_capture(rt);
  pointers_of_this_device_pass(rt);
  jitops_runtime_destroy(rt);
  return test_finish("test_gpu_interop_order_and_devices");
}
