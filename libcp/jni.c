// jni.c — the native half of the Java binding (bindings/java), compiled into
// the same libcloudprofiler.so as the Go code: one library, one Go runtime.
//
// The hot path (logTS0) is a plain call of LogTS through its hidden alias:
// no Go, no JNI callback, no allocation, no exception. The other calls pass
// strings as NUL-terminated UTF-8 byte arrays and return codes; a failure's
// CP_LastError message is copied into a byte array the caller gives, so no
// JNI object is ever created here and nothing here throws.
//
// The prototypes come from headers javac -h generated from the Java classes
// (io_cloudprofiler_*.h, regenerated and compared by `make test-java`): a
// native method whose Java signature drifts fails this build. The constants
// javac wrote into them are checked against capi/cloudprofiler.h below.
//
// Without a JDK's jni.h on the include path (the Makefile adds it) this file
// compiles to nothing, so `go build` and `go test` work without a JDK; the
// Java side then says the library has no JNI glue.
#if __has_include(<jni.h>)
#include <string.h>
#include <stdlib.h>
#include <jvmti.h>
#include "engine.h"
#include "io_cloudprofiler_CloudProfiler.h"
#include "io_cloudprofiler_Baselines.h"

#define CP_JNI_ABI 4  /* 2: markBlocked0, serviceRate0; 3: logLineage0; 4: markStats0 */

extern int32_t cp_logts(int64_t ch, int64_t tuple_id) __attribute__((visibility("hidden")));
extern int64_t cp_logtsmany(int64_t ch, const int64_t *ids, int64_t n, int32_t *err)
    __attribute__((visibility("hidden")));
extern int32_t cp_markblocked(int64_t ch, int32_t which) __attribute__((visibility("hidden")));
extern int32_t cp_loglineage(int64_t ch, int64_t out_id, int64_t in_id) __attribute__((visibility("hidden")));

#define SAME(java, c) _Static_assert(io_cloudprofiler_CloudProfiler_##java == (c), #java " differs from " #c)
SAME(F_ASCII, CP_ASCII);
SAME(F_ASCII_TSC, CP_ASCII_TSC);
SAME(F_BINARY, CP_BINARY);
SAME(F_BINARY_TSC, CP_BINARY_TSC);
SAME(F_ZSTD, CP_ZSTD);
SAME(F_ZSTD_TSC, CP_ZSTD_TSC);
SAME(F_S2, CP_S2);
SAME(F_S2_TSC, CP_S2_TSC);
SAME(H_IDENTITY, CP_IDENTITY);
SAME(H_BUFFER_IDENTITY, CP_BUFFER_IDENTITY);
SAME(H_BUFFER_IDENTITY_COMP, CP_BUFFER_IDENTITY_COMP);
SAME(H_MEDIAN, CP_MEDIAN);
SAME(H_DOWNSAMPLE, CP_DOWNSAMPLE);
SAME(H_XOY, CP_XOY);
SAME(H_FIRSTLAST, CP_FIRSTLAST);
SAME(H_PERIODICCOUNTER, CP_PERIODICCOUNTER);
SAME(H_FASTPERIODICCOUNTER, CP_FASTPERIODICCOUNTER);
SAME(H_NULLH, CP_NULLH);
SAME(H_NET_CONF, CP_NET_CONF);
SAME(H_FOX_START, CP_FOX_START);
SAME(H_FOX_END, CP_FOX_END);
SAME(H_GPIORTT, CP_GPIORTT);
SAME(H_SERVICERATE, CP_SERVICERATE);
SAME(H_LINEAGE, CP_LINEAGE);
SAME(ARG0, CP_ARG0);
SAME(ARG1, CP_ARG1);
SAME(ARG_DROP_WHEN_FULL, CP_ARG_DROP_WHEN_FULL);
SAME(ARG_SR_MIN_PERIOD_NS, CP_ARG_SR_MIN_PERIOD_NS);
SAME(ARG_SR_MAX_PERIOD_NS, CP_ARG_SR_MAX_PERIOD_NS);
SAME(ARG_SR_WINDOW, CP_ARG_SR_WINDOW);
SAME(ARG_SR_WIDEN_AFTER, CP_ARG_SR_WIDEN_AFTER);
SAME(ARG_SR_STABLE_PPM, CP_ARG_SR_STABLE_PPM);
SAME(ARG_SR_TOLERANCE_PPM, CP_ARG_SR_TOLERANCE_PPM);
SAME(BLOCKED_INPUT, CP_BLOCKED_INPUT);
SAME(BLOCKED_OUTPUT, CP_BLOCKED_OUTPUT);
SAME(OK, CP_OK);
SAME(ERR_BAD_HANDLE, CP_ERR_BAD_HANDLE);
SAME(ERR_CLOSED, CP_ERR_CLOSED);
SAME(ERR_BAD_NAME, CP_ERR_BAD_NAME);
SAME(ERR_BAD_FORMAT, CP_ERR_BAD_FORMAT);
SAME(ERR_BAD_HANDLER, CP_ERR_BAD_HANDLER);
SAME(ERR_NOT_SUPPORTED, CP_ERR_NOT_SUPPORTED);
SAME(ERR_UNSUPPORTED_PLATFORM, CP_ERR_UNSUPPORTED_PLATFORM);
SAME(ERR_FORMAT_HANDLER, CP_ERR_FORMAT_HANDLER);
SAME(ERR_BAD_ARG_NUM, CP_ERR_BAD_ARG_NUM);
SAME(ERR_BAD_ARG_VALUE, CP_ERR_BAD_ARG_VALUE);
SAME(ERR_TOO_MANY_CHANNELS, CP_ERR_TOO_MANY_CHANNELS);
SAME(ERR_IO, CP_ERR_IO);
SAME(ERR_DROPPED, CP_ERR_DROPPED);
SAME(ERR_NO_MEMORY, CP_ERR_NO_MEMORY);
SAME(ERR_INTERNAL, CP_ERR_INTERNAL);
SAME(ERR_CONFIG, CP_ERR_CONFIG);
SAME(JNI_ABI, CP_JNI_ABI);

// The calling thread's CP_LastError message into err (a Java byte[], or
// NULL for none), NUL-terminated and cut to fit.
static void copy_last_error(JNIEnv *env, jbyteArray err) {
  if (err == NULL) return;
  char msg[4096];
  jsize cap = (*env)->GetArrayLength(env, err);
  if (cap <= 0) return;
  if (cap > (jsize)sizeof msg) cap = (jsize)sizeof msg;
  int32_t n = CP_LastError(msg, cap);
  if (n > cap - 1) n = cap - 1;
  (*env)->SetByteArrayRegion(env, err, 0, n + 1, (const jbyte *)msg);
}

JNIEXPORT jint JNICALL Java_io_cloudprofiler_CloudProfiler_logTS0(JNIEnv *env, jclass cls, jlong ch, jlong id) {
  (void)env;
  (void)cls;
  return cp_logts(ch, id);
}

// ids[off..off+n-1] (bounds checked by the Java side), copied out in chunks
// into the stack and logged with LogTSMany. A copy costs a fraction of a
// nanosecond a record; pinning the array instead (GetPrimitiveArrayCritical)
// would hold off the JVM's garbage collector while LogTSMany waits for ring
// space. Result: accepted, or (err << 32) | accepted when err != 0.
JNIEXPORT jlong JNICALL Java_io_cloudprofiler_CloudProfiler_logMany0(JNIEnv *env, jclass cls, jlong ch,
                                                                    jlongArray ids, jint off, jint n) {
  (void)cls;
  enum { CHUNK = 1024 };
  int64_t buf[CHUNK];
  int64_t accepted = 0;
  int32_t err = 0, dropped = 0;
  for (jint pos = 0; pos < n;) {
    jint k = n - pos < CHUNK ? n - pos : CHUNK;
    (*env)->GetLongArrayRegion(env, ids, off + pos, k, (jlong *)buf);
    if ((*env)->ExceptionCheck(env)) {  // cannot happen after the Java checks; never throw
      (*env)->ExceptionClear(env);
      err = CP_ERR_BAD_ARG_VALUE;
      break;
    }
    int32_t e = 0;
    accepted += cp_logtsmany(ch, buf, k, &e);
    pos += k;
    if (e == CP_ERR_DROPPED) {
      dropped = 1;
    } else if (e != 0) {
      err = e;
      break;
    }
  }
  if (err == 0 && dropped) err = CP_ERR_DROPPED;
  return err == 0 ? accepted : (jlong)(((uint64_t)(int64_t)err << 32) | (uint64_t)accepted);
}

// SERVICERATE: a plain call of CP_MarkBlocked (C, never enters Go), as logTS0.
JNIEXPORT jint JNICALL Java_io_cloudprofiler_CloudProfiler_markBlocked0(JNIEnv *env, jclass cls, jlong ch, jint which) {
  (void)env;
  (void)cls;
  return cp_markblocked(ch, which);
}

// LINEAGE: a plain call of CP_LogLineage (C, never enters Go), as logTS0.
JNIEXPORT jint JNICALL Java_io_cloudprofiler_CloudProfiler_logLineage0(JNIEnv *env, jclass cls, jlong ch, jlong out_id,
                                                                      jlong in_id) {
  (void)env;
  (void)cls;
  return cp_loglineage(ch, out_id, in_id);
}

// CP_ServiceRate into d (rate, running, period_s, mean) and l (samples,
// periods, convergences, converged), arrays of 4 the Java side allocated.
JNIEXPORT jint JNICALL Java_io_cloudprofiler_CloudProfiler_serviceRate0(JNIEnv *env, jclass cls, jlong ch,
                                                                       jdoubleArray d, jlongArray l) {
  (void)cls;
  cp_service_rate_t sr;
  int32_t rc = CP_ServiceRate(ch, &sr);
  if (rc < 0) return rc;
  jdouble dv[4] = {sr.rate, sr.running, sr.period_s, sr.mean};
  jlong lv[4] = {sr.samples, sr.periods, sr.convergences, sr.converged};
  (*env)->SetDoubleArrayRegion(env, d, 0, 4, dv);
  (*env)->SetLongArrayRegion(env, l, 0, 4, lv);
  return rc;
}

JNIEXPORT jlong JNICALL Java_io_cloudprofiler_CloudProfiler_open0(JNIEnv *env, jclass cls, jbyteArray name,
                                                                 jint format, jint handler, jbyteArray err) {
  (void)cls;
  char small[4352];
  jsize len = (*env)->GetArrayLength(env, name);
  if (len <= 0) return CP_ERR_BAD_NAME;
  char *p = len <= (jsize)sizeof small ? small : malloc((size_t)len);
  if (p == NULL) return CP_ERR_NO_MEMORY;
  (*env)->GetByteArrayRegion(env, name, 0, len, (jbyte *)p);
  p[len - 1] = 0;  // the Java side appends the NUL; never read past the array
  cp_set_last_error("", 0);
  int64_t h = OpenChannel(p, format, handler);
  if (h < 0) copy_last_error(env, err);
  if (p != small) free(p);
  return h;
}

JNIEXPORT jint JNICALL Java_io_cloudprofiler_CloudProfiler_parameterize0(JNIEnv *env, jclass cls, jlong ch,
                                                                        jint arg, jlong value, jbyteArray err) {
  (void)cls;
  cp_set_last_error("", 0);
  int32_t rc = ParameterizeChannel(ch, arg, value);
  if (rc < 0) copy_last_error(env, err);
  return rc;
}

JNIEXPORT jint JNICALL Java_io_cloudprofiler_CloudProfiler_close0(JNIEnv *env, jclass cls, jlong ch, jbyteArray err) {
  (void)cls;
  cp_set_last_error("", 0);
  int32_t rc = CloseChannel(ch);
  if (rc < 0) copy_last_error(env, err);
  return rc;
}

JNIEXPORT jint JNICALL Java_io_cloudprofiler_CloudProfiler_closeAll0(JNIEnv *env, jclass cls, jbyteArray err) {
  (void)cls;
  cp_set_last_error("", 0);
  int32_t rc = CloseAllChannels();
  if (rc < 0) copy_last_error(env, err);
  return rc;
}

JNIEXPORT jint JNICALL Java_io_cloudprofiler_CloudProfiler_errorString0(JNIEnv *env, jclass cls, jint code,
                                                                       jbyteArray buf) {
  (void)cls;
  const char *s = CP_ErrorString(code);
  jsize n = (jsize)strlen(s), cap = (*env)->GetArrayLength(env, buf);
  (*env)->SetByteArrayRegion(env, buf, 0, n < cap ? n : cap, (const jbyte *)s);
  return n;
}

JNIEXPORT jint JNICALL Java_io_cloudprofiler_CloudProfiler_markStats0(JNIEnv *env, jclass cls, jlong ch,
                                                                     jdoubleArray d, jlongArray l) {
  (void)cls;
  cp_mark_stats_t st;
  int32_t rc = CP_MarkStats(ch, &st);
  if (rc < 0) return rc;
  jdouble dv[1] = {st.busy_s};
  jlong lv[1] = {st.visits};
  (*env)->SetDoubleArrayRegion(env, d, 0, 1, dv);
  (*env)->SetLongArrayRegion(env, l, 0, 1, lv);
  return rc;
}

// The JVM's collections, for the marks' notes (marks.c): JVMTI's
// GarbageCollectionStart and Finish, which HotSpot sends from its VM thread
// inside the pause (nothing there but an atomic). Asked once, when the
// library is first loaded into a JVM; a JVM that refuses leaves the notes
// without them (a collection between two tuples is then a wait).
static void JNICALL cp_jvmti_gc_start(jvmtiEnv *e) { (void)e; cp_gc_begin(); }
static void JNICALL cp_jvmti_gc_finish(jvmtiEnv *e) { (void)e; cp_gc_end(); }

JNIEXPORT jint JNICALL JNI_OnLoad(JavaVM *vm, void *reserved) {
  (void)reserved;
  static _Atomic int asked;
  jvmtiEnv *jv = NULL;
  if (!atomic_exchange(&asked, 1) && (*vm)->GetEnv(vm, (void **)&jv, JVMTI_VERSION_1_2) == JNI_OK && jv) {
    jvmtiCapabilities caps;
    memset(&caps, 0, sizeof caps);
    caps.can_generate_garbage_collection_events = 1;
    jvmtiEventCallbacks cb;
    memset(&cb, 0, sizeof cb);
    cb.GarbageCollectionStart = cp_jvmti_gc_start;
    cb.GarbageCollectionFinish = cp_jvmti_gc_finish;
    if ((*jv)->AddCapabilities(jv, &caps) == JVMTI_ERROR_NONE && (*jv)->SetEventCallbacks(jv, &cb, sizeof cb) == JVMTI_ERROR_NONE) {
      (*jv)->SetEventNotificationMode(jv, JVMTI_ENABLE, JVMTI_EVENT_GARBAGE_COLLECTION_START, NULL);
      (*jv)->SetEventNotificationMode(jv, JVMTI_ENABLE, JVMTI_EVENT_GARBAGE_COLLECTION_FINISH, NULL);
    }
  }
  return JNI_VERSION_1_8;
}

JNIEXPORT jint JNICALL Java_io_cloudprofiler_CloudProfiler_abi0(JNIEnv *env, jclass cls) {
  (void)env;
  (void)cls;
  return CP_JNI_ABI;
}

// ---- floors for the JMH benchmarks (io.cloudprofiler.Baselines).

JNIEXPORT jint JNICALL Java_io_cloudprofiler_Baselines_emptyCall(JNIEnv *env, jclass cls, jlong ch, jlong id) {
  (void)env;
  (void)cls;
  (void)ch;
  (void)id;
  return 0;
}

// rdtscp and a 16-byte store into a ring, as the floor of one record: what
// LogTS's owned path does besides checking the handle and publishing.
static uint64_t floor_ring[1 << 17];
static uint32_t floor_pos;

JNIEXPORT jint JNICALL Java_io_cloudprofiler_Baselines_tscStore(JNIEnv *env, jclass cls, jlong ch, jlong id) {
  (void)env;
  (void)cls;
  (void)ch;
  uint32_t lo, hi, aux;
  __asm__ volatile("rdtscp" : "=a"(lo), "=d"(hi), "=c"(aux)::"memory");
  uint32_t p = floor_pos;
  floor_pos = (p + 2) & ((1u << 17) - 1);
  floor_ring[p] = (uint64_t)id;
  floor_ring[p + 1] = ((uint64_t)hi << 32) | lo;
  return 0;
}
#endif
