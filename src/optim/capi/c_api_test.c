/* c_api_test.c: both public headers used from a program compiled as C. One
 * CLM step, one TD-CLM step through the seed API and one rejected call are
 * checked against the spec's formulas evaluated here in double. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "luminav/luminav.h"
#include "luminav_triton_standalone.h"

static int failures = 0;

#define CHECK(cond, ...)                                  \
  do {                                                    \
    if (!(cond)) {                                        \
      fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
      fprintf(stderr, __VA_ARGS__);                       \
      fprintf(stderr, "\n");                              \
      ++failures;                                         \
    }                                                     \
  } while (0)

#define N 9

/* Spec, CLM or TD-CLM without options, in double; returns the tolerance
 * scale s_i(x) of the spec's accuracy contract for element i. */
static double reference_x(double x, double g, double m_old, double v_old, double lr, double b1,
                          double b2, double eps, double wd, unsigned long long t, double* m_new,
                          double* v_new, double* scale) {
  double m = b1 * m_old + (1.0 - b1) * g;
  double v = b2 * v_old + (1.0 - b2) * g * g;
  double bc1 = 1.0 - pow(b1, (double)t), bc2 = 1.0 - pow(b2, (double)t);
  double den = sqrt(v / bc2) + eps;
  double u = (m / bc1) / den;
  *m_new = m;
  *v_new = v;
  *scale = fabs(x) * (1.0 - lr * wd) + lr * ((b1 * fabs(m_old) + (1.0 - b1) * fabs(g)) / bc1) / den;
  return x * (1.0 - lr * wd) - lr * u;
}

static luminav_tensor f32_tensor(float* param, const float* grad, float* m, float* v, size_t n) {
  luminav_tensor t;
  memset(&t, 0, sizeof t);
  t.param = param;
  t.grad = grad;
  t.exp_avg = m;
  t.exp_avg_sq = v;
  t.num_elements = n;
  t.param_dtype = LUMINAV_DTYPE_F32;
  t.grad_dtype = LUMINAV_DTYPE_F32;
  return t;
}

static void check_clm_step(void) {
  float param[N], grad[N], m[N], v[N], param0[N], m0[N], v0[N];
  int i;
  for (i = 0; i < N; ++i) {
    param0[i] = param[i] = 0.5f - 0.11f * (float)i;
    grad[i] = 0.03f * (float)(i % 4) - 0.05f;
    m0[i] = m[i] = 0.01f * (float)(i - 4);
    v0[i] = v[i] = 0.0004f * (float)(i + 1);
  }
  luminav_hyperparams hp;
  luminav_hyperparams_init(&hp);
  hp.lr = 0.01;
  hp.step = 3;
  luminav_tensor t = f32_tensor(param, grad, m, v, N);
  int status = luminav_step(&hp, &t, NULL);
  CHECK(status == LUMINAV_STATUS_OK, "luminav_step: %s", luminav_last_error_message());
  CHECK(strlen(luminav_last_backend()) > 0, "luminav_last_backend is empty");
  for (i = 0; i < N; ++i) {
    double m_ref, v_ref, scale;
    double x_ref = reference_x(param0[i], grad[i], m0[i], v0[i], hp.lr, hp.beta1, hp.beta2, hp.eps,
                               hp.weight_decay, hp.step, &m_ref, &v_ref, &scale);
    CHECK(fabs(param[i] - x_ref) <= 1e-6 * scale, "x[%d] = %.9g, want %.9g", i, param[i], x_ref);
    CHECK(fabs(m[i] - m_ref) <= 1e-6 * (0.9 * fabs(m0[i]) + 0.1 * fabs(grad[i])), "m[%d]", i);
    CHECK(fabs(v[i] - v_ref) <= 1e-6 * (0.999 * v0[i] + 0.001 * grad[i] * grad[i]), "v[%d]", i);
  }
}

static void check_rejected_call_writes_nothing(void) {
  float param[N] = {1, 2, 3, 4, 5, 6, 7, 8, 9}, grad[N] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
  float m[N] = {0}, v[N] = {0};
  luminav_hyperparams hp;
  luminav_hyperparams_init(&hp);
  hp.lr = -0.1;
  luminav_tensor t = f32_tensor(param, grad, m, v, N);
  int status = luminav_step(&hp, &t, NULL);
  CHECK(status == LUMINAV_STATUS_INVALID_ARGUMENT, "lr < 0 gave %s", luminav_status_name(status));
  CHECK(strstr(luminav_last_error_message(), "lr") != NULL, "message: %s",
        luminav_last_error_message());
  CHECK(strstr(luminav_last_error_message(), "-0.1") != NULL, "message: %s",
        luminav_last_error_message());
  CHECK(param[0] == 1 && param[8] == 9 && m[0] == 0 && v[0] == 0, "buffers changed");
}

static void check_standalone_tdclm(void) {
  LuminaVTritonEngine* engine = luminav_triton_engine_create();
  CHECK(engine != NULL, "engine_create: %s", luminav_last_error_message());
  if (!engine) return;
  CHECK(strcmp(luminav_triton_get_platform(engine), "cpu") == 0, "platform %s",
        luminav_triton_get_platform(engine));
  CHECK(strlen(luminav_triton_get_arch(engine)) > 0, "empty arch");
  float param[N], grad[N], m[N], s = 0.002f, param0[N], m0[N];
  double sum_sq = 0;
  int i;
  for (i = 0; i < N; ++i) {
    param0[i] = param[i] = 1.0f - 0.2f * (float)i;
    grad[i] = 0.1f - 0.025f * (float)i;
    m0[i] = m[i] = 0.001f * (float)i;
    sum_sq += (double)grad[i] * grad[i];
  }
  const float lr = 0.05f, b1 = 0.9f, b2 = 0.99f, eps = 1e-8f, wd = 0.1f;
  const unsigned long long t = 5;
  int status = luminav_triton_step_f32(engine, param, grad, m, &s, NULL, NULL, N, lr, b1, b2, eps,
                                       wd, 0.0f, 0.0f, LUMINAV_MODE_TDCLM, 0, 0, 0.0f, t, 7u);
  CHECK(status == 0, "step_f32: %s", luminav_last_error_message());
  /* The seed API's float betas are widened exactly; the reference uses them. */
  double s_ref = (double)b2 * 0.002f + (1.0 - (double)b2) * (sum_sq / N);
  CHECK(fabs(s - s_ref) <= 1e-6 * s_ref, "s = %.9g, want %.9g", s, s_ref);
  double bc1 = 1.0 - pow((double)b1, (double)t), bc2 = 1.0 - pow((double)b2, (double)t);
  for (i = 0; i < N; ++i) {
    double mm = (double)b1 * m0[i] + (1.0 - (double)b1) * grad[i];
    double den = sqrt(s_ref / bc2) + eps;
    double x = param0[i] * (1.0 - (double)lr * wd) - (double)lr * (mm / bc1) / den;
    double scale = fabs(param0[i]) * (1.0 - (double)lr * wd) +
                   (double)lr * ((double)b1 * fabs(m0[i]) + (1.0 - (double)b1) * fabs(grad[i])) / bc1 / den;
    CHECK(fabs(param[i] - x) <= 1e-6 * scale, "x[%d] = %.9g, want %.9g", i, param[i], x);
    CHECK(fabs(m[i] - mm) <= 1e-6 * ((double)b1 * fabs(m0[i]) + 0.1 * fabs(grad[i])), "m[%d]", i);
  }
  /* A non-finite gradient is refused and writes nothing. */
  float saved = param[0];
  grad[3] = NAN;
  status = luminav_triton_step_f32(engine, param, grad, m, &s, NULL, NULL, N, lr, b1, b2, eps, wd,
                                   0.0f, 0.0f, LUMINAV_MODE_TDCLM, 0, 0, 0.0f, t + 1, 7u);
  CHECK(status == LUMINAV_STATUS_NONFINITE_GRAD, "NaN gave %s", luminav_status_name(status));
  CHECK(param[0] == saved, "param written despite NaN");
  luminav_triton_engine_destroy(engine);
}

/* bf16 parameters and gradients with an fp32 master: the master follows the
 * formulas; the bf16 parameter is the master rounded (within one bf16 ulp,
 * 2^-7 relative). f16 without a master: within one f16 ulp (2^-10). */
static float bf16_value(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static float f16_value(uint16_t h) {
  int e = (h >> 10) & 0x1f, mant = h & 0x3ff;
  float v = e ? ldexpf((float)(1024 + mant), e - 25) : ldexpf((float)mant, -24);
  return (h & 0x8000) ? -v : v;
}

static void check_sixteen_bit_entry_points(void) {
  uint16_t param[N], grad[N];
  float m[N], v[N], master[N], master0[N];
  int i;
  for (i = 0; i < N; ++i) {
    param[i] = (uint16_t)(0x3F80 + 3 * i); /* bf16 around 1.0 .. 1.2 */
    grad[i] = (uint16_t)(0xBDCC + i);      /* bf16 around -0.1 */
    master0[i] = master[i] = bf16_value(param[i]);
    m[i] = 0.0f;
    v[i] = 0.0f;
  }
  luminav_hyperparams hp;
  luminav_hyperparams_init(&hp);
  hp.lr = 0.01;
  int status = luminav_step_bf16(&hp, param, grad, m, v, master, N, 1234, NULL);
  CHECK(status == 0, "step_bf16: %s", luminav_last_error_message());
  for (i = 0; i < N; ++i) {
    double m_ref, v_ref, scale;
    double x = reference_x(master0[i], bf16_value(grad[i]), 0, 0, hp.lr, hp.beta1, hp.beta2, hp.eps,
                           hp.weight_decay, 1, &m_ref, &v_ref, &scale);
    CHECK(fabs(master[i] - x) <= 1e-6 * scale, "master[%d] = %.9g, want %.9g", i, master[i], x);
    CHECK(fabs(bf16_value(param[i]) - master[i]) <= fabs(master[i]) * 0x1p-7, "bf16 param[%d]", i);
  }
  for (i = 0; i < N; ++i) {
    param[i] = (uint16_t)(0x3C00 + 17 * i); /* f16 around 1.0 */
    grad[i] = (uint16_t)(0x2E66 + i);        /* f16 around 0.1 */
    master0[i] = f16_value(param[i]);
    m[i] = 0.0f;
    v[i] = 0.0f;
  }
  status = luminav_step_f16(&hp, param, grad, m, v, NULL, N, 1234, NULL);
  CHECK(status == 0, "step_f16: %s", luminav_last_error_message());
  for (i = 0; i < N; ++i) {
    double m_ref, v_ref, scale;
    double x = reference_x(master0[i], f16_value(grad[i]), 0, 0, hp.lr, hp.beta1, hp.beta2, hp.eps,
                           hp.weight_decay, 1, &m_ref, &v_ref, &scale);
    CHECK(fabs(f16_value(param[i]) - x) <= fabs(x) * 0x1p-10 + 1e-6 * scale, "f16 param[%d] = %.9g, want %.9g",
          i, f16_value(param[i]), x);
    CHECK(fabs(m[i] - m_ref) <= 1e-6 * fabs(m_ref), "f16 m[%d]", i);
  }
}

int main(void) {
  CHECK(strlen(luminav_version()) > 0, "empty version");
  CHECK(strcmp(luminav_status_name(LUMINAV_STATUS_NONFINITE_GRAD), "NONFINITE_GRAD") == 0, "name");
  CHECK(luminav_scratch_bytes(0) == 64 && luminav_scratch_bytes(65536) == 64 &&
            luminav_scratch_bytes(65537) == 128,
        "scratch sizes");
  CHECK(luminav_backend_count() >= 1 && strcmp(luminav_backend_name(0), "scalar") == 0, "backends");
  check_clm_step();
  check_rejected_call_writes_nothing();
  check_standalone_tdclm();
  check_sixteen_bit_entry_points();
  if (failures) {
    fprintf(stderr, "%d failure(s)\n", failures);
    return 1;
  }
  printf("c_api_test: all checks passed (cpu features: %s)\n", luminav_cpu_features());
  return 0;
}
