/* Where the CTC gradient kernel keeps its tables (ops/ctc/plan.c, jitops/ctc_abi.h): the links,
 * each class's first position and the 8 warps' posterior rows go to shared memory exactly when
 * together they fit the default 48 KiB (the TABLES kernel); otherwise the links alone when they
 * fit; otherwise nothing. The launch's shared bytes are the ABI's layout, checked here against
 * numbers worked out by hand. Needs no GPU. */
#include "ops/ctc/plan.h"
#include "testutil.h"

static jitops__ctc_grad_launch launch_for(int64_t s_max, int64_t C, jitops__dtype acc) {
  jitops__ctc_call call;
  memset(&call, 0, sizeof call);
  call.fn = "test_ctc_gradient_tables";
  call.T = 100;
  call.N = 3;
  call.C = C;
  call.acc = acc;
  call.s_max = s_max;
  jitops__ctc_workspace ws;
  memset(&ws, 0, sizeof ws);
  ws.link_st = JITOPS__CTC_LINK_INTS * s_max;
  jitops__ctc_grad_launch g;
  memset(&g, 0xff, sizeof g);
  CHECK_OK(jitops__ctc_grad_plan(&call, &ws, &g));
  CHECK(g.chunks == 4 && g.blocks == 12); /* 100 rows in blocks of 32, for 3 samples */
  return g;
}

static void expect(const char *what, jitops__ctc_grad_launch g, bool tables, bool link_smem,
                   uint32_t shared_bytes) {
  if (g.tables != tables || g.link_smem != link_smem || g.shared_bytes != shared_bytes) {
    fprintf(stderr, "%s: tables %d link_smem %d shared %u, want %d %d %u\n", what, g.tables,
            g.link_smem, g.shared_bytes, tables, link_smem, shared_bytes);
    ++test_failures;
  }
}

int main(void) {
  /* S 100, C 64, f32: links 800 bytes, heads 256, rows 8 x 100 x 4 = 3200. */
  expect("S 100 f32", launch_for(100, 64, JITOPS__DTYPE_F32), true, false, 800 + 256 + 3200);
  /* S 1224, C 40, f32: 9792 + 160 + 39168 = 49120, the largest S that fits; at 1225 the links
   * round up to 9808 and the total, 49168, does not: the links alone (9800 bytes). */
  expect("S 1224 f32", launch_for(1224, 40, JITOPS__DTYPE_F32), true, false, 49120);
  expect("S 1225 f32", launch_for(1225, 40, JITOPS__DTYPE_F32), false, true, 9800);
  /* f64 rows are twice as wide: S 680 fits (5440 + 160 + 43520 = 49120), 681 does not. */
  expect("S 680 f64", launch_for(680, 40, JITOPS__DTYPE_F64), true, false, 49120);
  expect("S 681 f64", launch_for(681, 40, JITOPS__DTYPE_F64), false, true, 5448);
  /* A large vocabulary: the heads alone (80000 bytes) do not fit, the links do. */
  expect("S 10 C 20000", launch_for(10, 20000, JITOPS__DTYPE_F32), false, true, 80);
  /* S 7000: 56000 bytes of links, beyond 48 KiB: everything stays in global memory. */
  expect("S 7000 f32", launch_for(7000, 40, JITOPS__DTYPE_F32), false, false, 0);
  return test_finish("test_ctc_gradient_tables");
}
